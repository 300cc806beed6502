//! API types of the Memcached operator, group `cache.example.com`.
//!
//! This crate owns the wire shape of every served version of the `Memcached` resource, the merged
//! multi-version CustomResourceDefinition built from them, and the semantic checks the operator
//! applies before acting on a spec. It deliberately depends on no Kubernetes client or runtime so
//! that `bundle-tool` and other consumers can derive the CRD from it cheaply.
//!
//! Versions:
//! - [`v1alpha1`]: the operator-sdk tutorial shape (`spec.size`, `status.nodes`); served, deprecated.
//! - [`v1beta1`]: replicas, image and memory limit; served.
//! - [`v1`]: the storage version and conversion hub; served.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod conversion;
pub mod crd;
pub mod image_ref;
pub mod v1;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

/// API group of every version of the resource.
pub const GROUP: &str = "cache.example.com";
/// Kind of the resource.
pub const KIND: &str = "Memcached";
/// Plural resource name, as used in URLs and the CRD name.
pub const PLURAL: &str = "memcacheds";
/// The CRD's `metadata.name`.
pub const CRD_NAME: &str = "memcacheds.cache.example.com";
/// Version stored in etcd and used as the conversion hub.
pub const STORAGE_VERSION: &str = "v1";
/// All served versions, oldest first.
pub const SERVED_VERSIONS: [&str; 3] = ["v1alpha1", "v1beta1", "v1"];

/// Image used when a spec does not name one.
pub const DEFAULT_IMAGE: &str = "docker.io/library/memcached:1.6.39-alpine";
/// Port memcached listens on when a spec does not name one.
pub const DEFAULT_PORT: i32 = 11211;
/// Item memory (memcached `-m`) in MiB when a spec does not name one.
pub const DEFAULT_MEMORY_LIMIT_MIB: i32 = 64;
/// Smallest item memory memcached can usefully run with (its slab allocator preallocates
/// one 1 MiB page per slab class, about 40 classes with the default growth factor).
pub const MIN_MEMORY_LIMIT_MIB: i32 = 48;
/// Largest item memory the operator accepts (1 TiB).
pub const MAX_MEMORY_LIMIT_MIB: i32 = 1_048_576;
/// Default memcached `-c`.
pub const DEFAULT_MAX_CONNECTIONS: i32 = 1024;
/// Default memcached `-t`.
pub const DEFAULT_THREADS: i32 = 4;
/// Upper bound on replicas accepted by the schema.
pub const MAX_REPLICAS: i32 = 1000;

/// Finalizer the operator puts on every Memcached it manages.
pub const FINALIZER: &str = "cache.example.com/finalizer";
/// Annotation in which conversion keeps fields the target version cannot express.
/// Owned by the operator; removed again when converting back to a version that has the fields.
pub const CONVERSION_ANNOTATION: &str = "cache.example.com/conversion-data";

pub use crd::{ConversionWiring, crd, crd_with_conversion};
