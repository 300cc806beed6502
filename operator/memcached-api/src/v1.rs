//! `cache.example.com/v1` Memcached: the storage version and conversion hub.
//!
//! Every other version converts to and from this one. The spec is the richest of the three and
//! every field that has a schema default also has the same serde default here, so a value read
//! from the API server (where defaulting already ran) and a value built in Rust agree.

use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of a memcached cluster.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1",
    kind = "Memcached",
    plural = "memcacheds",
    singular = "memcached",
    shortname = "mc",
    category = "cache",
    namespaced,
    status = "MemcachedStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
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
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.image",
        priority = 1
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
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: i32,

    /// Container image running memcached.
    #[serde(default = "default_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// memcached process settings.
    #[serde(default)]
    pub memcached: MemcachedSettings,

    /// Compute resources of the memcached container. When `limits.memory` is unset it is derived
    /// from `memcached.memoryLimitMiB` plus connection overhead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// TCP port memcached listens on, in the pod and on the Service.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,

    /// Scheduling overrides for the memcached pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplateOverrides>,
}

/// memcached process settings, passed as command-line flags.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.extraArgs) || self.extraArgs.all(a, !(a in ['-p', '-m', '-c', '-t', '-U', '-l', '--port', '--memory-limit', '--conn-limit', '--threads', '--listen', '--udp-port']) && !a.matches('^(-[pmctUl].+|--(port|memory-limit|conn-limit|threads|listen|udp-port)=.*)$'))").message("extraArgs must not set flags the operator manages (-p, -m, -c, -t, -U, -l)"))]
pub struct MemcachedSettings {
    /// Memory for items in MiB (memcached `-m`). The container memory limit is derived from it.
    #[serde(default = "default_memory_limit_mib", rename = "memoryLimitMiB")]
    #[schemars(range(min = 48, max = 1048576))]
    pub memory_limit_mib: i32,

    /// Maximum simultaneous connections (memcached `-c`).
    #[serde(default = "default_max_connections")]
    #[schemars(range(min = 1, max = 65536))]
    pub max_connections: i32,

    /// Worker threads (memcached `-t`).
    #[serde(default = "default_threads")]
    #[schemars(range(min = 1, max = 64))]
    pub threads: i32,

    /// Extra command-line arguments appended after the managed ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub extra_args: Vec<String>,
}

impl Default for MemcachedSettings {
    fn default() -> Self {
        Self {
            memory_limit_mib: default_memory_limit_mib(),
            max_connections: default_max_connections(),
            threads: default_threads(),
            extra_args: Vec::new(),
        }
    }
}

/// Pod-level overrides applied to the generated Deployment's pod template.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateOverrides {
    /// Node labels the pods must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Affinity rules of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// PriorityClass of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,
    /// Extra labels on the pods (the operator's selector labels always win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Extra annotations on the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Observed state of a memcached cluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the Deployment currently runs (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods that pass their readiness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Names of the memcached pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Label selector of the pods, in string form (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Available, Progressing and Degraded conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Default for `spec.replicas`.
pub fn default_replicas() -> i32 {
    1
}
/// Default for `spec.image`.
pub fn default_image() -> String {
    crate::DEFAULT_IMAGE.to_string()
}
/// Default for `spec.port`.
pub fn default_port() -> i32 {
    crate::DEFAULT_PORT
}
/// Default for `spec.memcached.memoryLimitMiB`.
pub fn default_memory_limit_mib() -> i32 {
    crate::DEFAULT_MEMORY_LIMIT_MIB
}
/// Default for `spec.memcached.maxConnections`.
pub fn default_max_connections() -> i32 {
    crate::DEFAULT_MAX_CONNECTIONS
}
/// Default for `spec.memcached.threads`.
pub fn default_threads() -> i32 {
    crate::DEFAULT_THREADS
}

impl Default for MemcachedSpec {
    fn default() -> Self {
        Self {
            replicas: default_replicas(),
            image: default_image(),
            memcached: MemcachedSettings::default(),
            resources: None,
            port: default_port(),
            pod_template: None,
        }
    }
}
