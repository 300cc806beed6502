//! `cache.example.com/v1` RedisCluster.
//!
//! Scaffolded by `bundle-tool create api`; yours to edit. After changing the types, run
//! `make manifests` to regenerate the CRD in `config/crd/bases`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Desired state of a RedisCluster: `size` Redis nodes in cluster mode, each a pod of a
/// StatefulSet running `image`, reachable by name through a headless Service.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1",
    kind = "RedisCluster",
    doc = "RedisCluster is the Schema for the redisclusters API",
    plural = "redisclusters",
    singular = "rediscluster",
    shortname = "rdc",
    namespaced,
    status = "RedisClusterStatus",
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".spec.size",
        description = "Desired Redis nodes"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RedisClusterSpec {
    /// Number of Redis nodes: the replicas of the cluster's StatefulSet.
    #[serde(default = "default_size")]
    #[schemars(range(min = 1))]
    pub size: i32,

    /// The Redis image every node runs; it must provide `redis-server` and run as a non-root
    /// user (the official image's `redis`, uid 999).
    #[serde(default = "default_image")]
    #[schemars(length(min = 1))]
    pub image: String,
}

// By hand, not derived: a derived default would be a cluster of 0 nodes without an image,
// which the schema refuses; this one is what an empty `spec: {}` becomes on the server.
impl Default for RedisClusterSpec {
    fn default() -> Self {
        Self {
            size: default_size(),
            image: default_image(),
        }
    }
}

/// Observed state of a RedisCluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RedisClusterStatus {
    /// The names of the cluster's Redis pods that are running, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,

    /// `Available`, `Progressing` and `Degraded`: the state of the RedisCluster, as Kubernetes
    /// conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Default of `spec.size`: three nodes, the fewest masters `redis-cli --cluster create`
/// accepts.
pub fn default_size() -> i32 {
    3
}

/// Default of `spec.image`.
pub fn default_image() -> String {
    "docker.io/library/redis:7.2".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn an_empty_spec_is_three_nodes_of_the_default_image() {
        let spec: RedisClusterSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec, RedisClusterSpec::default());
        assert_eq!(spec.size, 3);
        assert_eq!(spec.image, "docker.io/library/redis:7.2");
    }

    #[test]
    fn the_schema_defaults_and_bounds_the_size() {
        let crd = serde_json::to_value(RedisCluster::crd()).unwrap();
        let size = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["size"];
        assert_eq!(size["default"], 3);
        assert_eq!(size["minimum"].as_f64(), Some(1.0));
        let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        assert_eq!(status["nodes"]["type"], "array");
    }
}
