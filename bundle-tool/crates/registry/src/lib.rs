//! Catalog server speaking operator-registry's api.Registry gRPC API
