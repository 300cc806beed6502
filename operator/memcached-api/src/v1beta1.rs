//! `cache.example.com/v1beta1` Memcached: replicas, image and memory limit.
//!
//! Served, not stored. Defaults match the v1 defaults so conversion through v1 is lossless.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Desired state of a memcached cluster.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1beta1",
    kind = "Memcached",
    plural = "memcacheds",
    singular = "memcached",
    shortname = "mc",
    category = "cache",
    namespaced,
    status = "MemcachedStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.readyReplicas"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired memcached pods"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready memcached pods"
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
    #[serde(default = "crate::v1::default_replicas")]
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: i32,
    /// Container image running memcached.
    #[serde(default = "crate::v1::default_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// Memory for items in MiB (memcached `-m`).
    #[serde(
        default = "crate::v1::default_memory_limit_mib",
        rename = "memoryLimitMiB"
    )]
    #[schemars(range(min = 48, max = 1048576))]
    pub memory_limit_mib: i32,
}

/// Observed state of a memcached cluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Names of the memcached pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Pods that pass their readiness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Available, Progressing and Degraded conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
