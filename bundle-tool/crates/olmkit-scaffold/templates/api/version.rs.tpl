//! `{{full_group}}/{{version}}` {{kind}}.
//!
//! Scaffolded by `bundle-tool create api`; yours to edit. After changing the types, run
//! `make manifests` to regenerate the CRD in `config/crd/bases`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

{{#if deploy_image}}
/// Desired state of a {{kind}}: `size` pods running the operator's image, as a Deployment:
/// `{{image}}`
/// unless the manager's `{{kind_env}}_IMAGE` says otherwise.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
{{else}}
/// Desired state of a {{kind}}.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
{{/if}}
#[kube(
    group = "{{full_group}}",
    version = "{{version}}",
    kind = "{{kind}}",
    doc = "{{kind}} is the Schema for the {{plural}} API",
    plural = "{{plural}}",
    singular = "{{kind_lower}}",
    {{short_names}}
    {{namespaced_attr}}
    status = "{{kind}}Status",
    {{#if deploy_image}}
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".spec.size",
        description = "Desired pods"
    ),
    {{/if}}
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
pub struct {{kind}}Spec {
{{#if deploy_image}}
    /// Number of pods running the image.
    #[serde(default = "default_size")]
    #[schemars(range(min = 1))]
    pub size: i32,
{{#if has_port}}

    /// Port the container listens on.
    #[serde(default = "default_container_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: i32,
{{/if}}
{{else}}
    // TODO(user): the desired state of a {{kind}}. `foo` is an example: replace it with your
    // fields (and the sample in config/samples), then run `make manifests`.
    /// An example field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foo: Option<String>,
{{/if}}
}

/// Observed state of a {{kind}}.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct {{kind}}Status {
    /// {{condition_types}}: the state of the {{kind}}, as Kubernetes conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
{{#if deploy_image}}

/// Default of `spec.size`.
pub fn default_size() -> i32 {
    1
}
{{#if has_port}}

/// Default of `spec.containerPort`.
pub fn default_container_port() -> i32 {
    {{container_port}}
}
{{/if}}
{{/if}}
