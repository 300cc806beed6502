//! The index file format (`proto/index.proto`), generated. A leaf module.
#![allow(missing_docs, clippy::all, clippy::pedantic, clippy::unwrap_used)]

tonic::include_proto!("olmkit.index.v1");
