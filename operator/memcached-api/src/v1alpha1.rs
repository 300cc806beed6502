//! `cache.example.com/v1alpha1` Memcached: the operator-sdk tutorial shape, kept for old clients.
//!
//! Served but deprecated: the API server returns a deprecation warning to every client using it.
//! It has a status subresource but no scale subresource, because its status has no replica count.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Desired state, as in the operator-sdk Memcached tutorial.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    plural = "memcacheds",
    singular = "memcached",
    shortname = "mc",
    category = "cache",
    namespaced,
    status = "MemcachedStatus",
    deprecated = "cache.example.com/v1alpha1 Memcached is deprecated; use cache.example.com/v1 Memcached",
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".spec.size",
        description = "Desired memcached pods"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    crates(
        kube_core = "::kube::core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached pods.
    #[schemars(range(min = 0, max = 1000))]
    pub size: i32,
}

/// Observed state, as in the operator-sdk Memcached tutorial.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Names of the memcached pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}
