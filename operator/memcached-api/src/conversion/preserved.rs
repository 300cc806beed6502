//! The payload of the conversion annotation: the v1 fields a spoke cannot express.
//!
//! The payload mirrors the shape of the v1 object (`spec.memcached.threads`, `status.selector`) so
//! a person reading the annotation recognises the fields. Every field is optional: absent means
//! "the way back rebuilds it by itself". Unknown fields are rejected so that a value that is not
//! ours is never mistaken for one.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::CONVERSION_ANNOTATION;
use crate::v1::PodTemplateOverrides;

/// What a spoke keeps for the way back to v1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Preserved {
    #[serde(default, skip_serializing_if = "PreservedSpec::is_empty")]
    pub spec: PreservedSpec,
    #[serde(default, skip_serializing_if = "PreservedStatus::is_empty")]
    pub status: PreservedStatus,
    /// The conversion annotation that the v1 object itself carried (not ours to interpret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
}

/// v1 spec fields, shaped like `v1.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreservedSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "PreservedSettings::is_empty")]
    pub memcached: PreservedSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplateOverrides>,
}

/// `v1.spec.memcached` fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreservedSettings {
    #[serde(
        default,
        rename = "memoryLimitMiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_limit_mib: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_args: Option<Vec<String>>,
}

/// v1 status fields, shaped like `v1.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreservedStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl PreservedSettings {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl PreservedSpec {
    pub fn is_empty(&self) -> bool {
        self.image.is_none()
            && self.memcached.is_empty()
            && self.resources.is_none()
            && self.port.is_none()
            && self.pod_template.is_none()
    }
}

impl PreservedStatus {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl Preserved {
    fn holds_fields(&self) -> bool {
        !(self.spec.is_empty() && self.status.is_empty())
    }
}

impl olmkit_runtime::conversion::preserved::Kept for Preserved {
    fn is_empty(&self) -> bool {
        !self.holds_fields()
    }
    fn hub_annotation(&mut self) -> &mut Option<String> {
        &mut self.annotation
    }
}

/// Removes the conversion annotation from `metadata`, dropping the map if it becomes empty.
pub(crate) fn take_annotation(metadata: &mut ObjectMeta) -> Option<String> {
    olmkit_runtime::conversion::preserved::take_annotation(metadata, CONVERSION_ANNOTATION)
}

/// Writes the annotation of a spoke converted from v1 (the runtime's scheme, see
/// `olmkit_runtime::conversion::preserved`): `hub_annotation` is the conversion annotation the
/// v1 object carried, if any, wrapped in the payload so the way up can put it back as is.
pub(crate) fn store(metadata: &mut ObjectMeta, kept: Preserved, hub_annotation: Option<String>) {
    olmkit_runtime::conversion::preserved::store(
        metadata,
        CONVERSION_ANNOTATION,
        kept,
        hub_annotation,
    );
}

/// Reads and removes the annotation of a spoke on its way to v1: the payload (empty when absent
/// or unreadable) and, when the value does not parse, the parse error; the unreadable value is
/// put back verbatim for the v1 object to keep.
pub(crate) fn restore(metadata: &mut ObjectMeta) -> (Preserved, Option<serde_json::Error>) {
    olmkit_runtime::conversion::preserved::restore(metadata, CONVERSION_ANNOTATION)
}
