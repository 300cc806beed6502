//! Daemonless, reproducible OCI images: builder, OCI layout, registry push, inspect
