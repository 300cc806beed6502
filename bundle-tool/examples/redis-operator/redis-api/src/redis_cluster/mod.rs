//! The RedisCluster kind, `redisclusters.cache.example.com`: its versions and its CRD.
//!
//! Written by `bundle-tool create api`, and rewritten when it adds a version of RedisCluster: put
//! your code in the version modules, not here.

pub mod v1;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The storage version's types: what the controller reads and writes.
pub use v1::{RedisCluster, RedisClusterSpec, RedisClusterStatus};

/// The API group.
pub const GROUP: &str = "cache.example.com";
/// The kind.
pub const KIND: &str = "RedisCluster";
/// The plural resource name.
pub const PLURAL: &str = "redisclusters";
/// The version stored in etcd.
pub const STORAGE_VERSION: &str = "v1";
/// Every served version, oldest first.
pub const VERSIONS: &[&str] = &["v1"];
/// The finalizer of RedisClusters: a deploy-image controller puts it on every one; a plain
/// controller that must clean up outside the cluster adds it with kube-runtime's `finalizer`
/// helper (and the `patch` and `finalizers` rows in `src/rbac.rs`).
pub const FINALIZER: &str = "cache.example.com/finalizer";

/// The CustomResourceDefinition.
pub fn crd() -> CustomResourceDefinition {
    v1::RedisCluster::crd()
}
