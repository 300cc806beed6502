//! `devsectim.io/v1alpha1` WhaleSay.
//!
//! Scaffolded by `bundle-tool create api`; yours to edit. After changing the types, run
//! `make manifests` to regenerate the CRD in `config/crd/bases`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Desired state of a WhaleSay: `size` pods running the operator's image (`docker.io/docker/whalesay:latest` unless
/// the manager's `WHALESAY_IMAGE` says otherwise), as a Deployment, each saying `message` (the
/// container's argument) when it starts.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "devsectim.io",
    version = "v1alpha1",
    kind = "WhaleSay",
    doc = "WhaleSay is the Schema for the whalesays API",
    plural = "whalesays",
    singular = "whalesay",
    shortname = "wsay",
    namespaced,
    status = "WhaleSayStatus",
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".spec.message",
        description = "What the whale says"
    ),
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".spec.size",
        description = "Desired pods"
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
pub struct WhaleSaySpec {
    /// What the whale says: the argument of the container's `cowsay`.
    #[schemars(length(min = 1))]
    pub message: String,

    /// Number of pods running the image.
    #[serde(default = "default_size")]
    #[schemars(range(min = 1))]
    pub size: i32,
}

/// Observed state of a WhaleSay.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct WhaleSayStatus {
    /// `Available`, `Progressing` and `Degraded`: the state of the WhaleSay, as Kubernetes conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Default of `spec.size`.
pub fn default_size() -> i32 {
    1
}
