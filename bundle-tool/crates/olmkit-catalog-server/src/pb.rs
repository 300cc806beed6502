//! The `api` package: messages and the `Registry`/`ExperimentalRegistry` services, generated
//! from `proto/registry.proto` (the project's own wire-compatible copy of operator-registry's
//! API). A leaf module: the handlers import it, it imports none of them.
#![allow(missing_docs, clippy::all, clippy::pedantic, clippy::unwrap_used)]

tonic::include_proto!("api");

/// Encoded descriptor set of `registry.proto` and its imports, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/registry_descriptor.bin"));
