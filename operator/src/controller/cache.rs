//! Compact forms of the child objects the controller caches (Deployments, Services, Pods).
//!
//! The k8s-openapi structs are built for completeness, not size: a deserialized Deployment
//! takes about 12 KB of memory, a Pod 8 KB, mostly empty `Option`s of large nested structs. With
//! 1,000 Memcached objects that alone would be 25 MB. The controller reads little of them:
//! - a Deployment's or Service's spec only for the drift check, so it is kept as compact JSON
//!   text (about 2 KB) and parsed when compared;
//! - a Deployment's status, kept typed (it is small);
//! - a Pod's phase, scheduling failure and container waiting states, kept in a small struct.
//!
//! Each type implements [`kube::Resource`] for its real kind, so `Api`, watchers and stores use
//! it directly, and deserializes from the full object (unknown fields are skipped).

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

/// Reads any JSON value and keeps it as compact text. Works inside serde's buffered contexts
/// (tagged watch events), unlike `RawValue`.
fn compact_json<'de, D: Deserializer<'de>>(d: D) -> Result<Box<str>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(v.to_string().into_boxed_str())
}

fn parse_spec(spec: &str) -> Value {
    serde_json::from_str(spec).unwrap_or_else(|_| json!({}))
}

macro_rules! resource {
    ($t:ty, $kind:literal, $group:literal, $version:literal, $plural:literal) => {
        impl Resource for $t {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A Deployment as the controller caches it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedDeployment {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` as compact JSON.
    #[serde(default, deserialize_with = "compact_json")]
    pub spec: Box<str>,
    /// Status.
    #[serde(default)]
    pub status: Option<DeploymentStatus>,
}
resource!(CachedDeployment, "Deployment", "apps", "v1", "deployments");

/// A Service as the controller caches it (its status is never read).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedService {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` as compact JSON.
    #[serde(default, deserialize_with = "compact_json")]
    pub spec: Box<str>,
}
resource!(CachedService, "Service", "", "v1", "services");

/// The comparable form of a cached child: what the drift check matches the desired object
/// against.
pub trait Comparable {
    /// `{apiVersion, kind, metadata, spec}` as JSON.
    fn comparable(&self) -> Value;
}

impl Comparable for CachedDeployment {
    fn comparable(&self) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self.metadata,
            "spec": parse_spec(&self.spec),
        })
    }
}

impl Comparable for CachedService {
    fn comparable(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata,
            "spec": parse_spec(&self.spec),
        })
    }
}

impl CachedDeployment {
    /// `spec.replicas`.
    pub fn replicas(&self) -> Option<i64> {
        parse_spec(&self.spec).get("replicas")?.as_i64()
    }

    /// Image of the first container.
    pub fn image(&self) -> Option<String> {
        parse_spec(&self.spec)
            .pointer("/template/spec/containers/0/image")?
            .as_str()
            .map(str::to_string)
    }
}

/// A container waiting state.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Waiting {
    /// Machine-readable reason, e.g. `CrashLoopBackOff`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default)]
    pub message: Option<String>,
}

/// A container state (only `waiting` is read).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ContainerState {
    /// Set while the container is not running.
    #[serde(default)]
    pub waiting: Option<Waiting>,
}

/// A container status.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ContainerStatus {
    /// Container name.
    #[serde(default)]
    pub name: String,
    /// Current state.
    #[serde(default)]
    pub state: Option<ContainerState>,
}

/// A pod condition.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PodCondition {
    /// Condition type.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Message.
    #[serde(default)]
    pub message: Option<String>,
}

/// The parts of a pod status the controller reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// Pod phase.
    #[serde(default)]
    pub phase: Option<String>,
    /// Conditions (only PodScheduled is kept).
    #[serde(default, deserialize_with = "scheduling_conditions")]
    pub conditions: Vec<PodCondition>,
    /// Container statuses.
    #[serde(default)]
    pub container_statuses: Vec<ContainerStatus>,
    /// Init container statuses.
    #[serde(default)]
    pub init_container_statuses: Vec<ContainerStatus>,
}

fn scheduling_conditions<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PodCondition>, D::Error> {
    let all = Option::<Vec<PodCondition>>::deserialize(d)?.unwrap_or_default();
    Ok(all
        .into_iter()
        .filter(|c| c.type_ == "PodScheduled")
        .collect())
}

/// A Pod as the controller caches it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedPod {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Status.
    #[serde(default)]
    pub status: Option<PodStatus>,
}
resource!(CachedPod, "Pod", "", "v1", "pods");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_keeps_spec_text_and_typed_status() {
        let d: CachedDeployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "namespace": "n", "generation": 3},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "m", "image": "x:1"}]}}},
            "status": {"observedGeneration": 3, "readyReplicas": 2},
        }))
        .unwrap();
        assert_eq!(d.replicas(), Some(2));
        assert_eq!(d.image().as_deref(), Some("x:1"));
        assert_eq!(d.status.as_ref().unwrap().ready_replicas, Some(2));
        let v = d.comparable();
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(v["metadata"]["name"], "a");
        assert_eq!(<CachedDeployment as Resource>::plural(&()), "deployments");
        assert_eq!(<CachedDeployment as Resource>::api_version(&()), "apps/v1");
        assert_eq!(<CachedService as Resource>::api_version(&()), "v1");
    }

    #[test]
    fn deserializes_inside_a_tagged_watch_event() {
        // kube decodes watch events through an adjacently tagged enum, which buffers content.
        let line = r#"{"object":{"metadata":{"name":"a"},"spec":{"replicas":1}},"type":"ADDED"}"#;
        let ev: kube::core::WatchEvent<CachedDeployment> = serde_json::from_str(line).unwrap();
        match ev {
            kube::core::WatchEvent::Added(d) => assert_eq!(d.replicas(), Some(1)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pod_keeps_only_what_status_reads() {
        let p: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "m", "image": "x"}]},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
                ],
                "containerStatuses": [{"name": "m", "ready": false, "restartCount": 3, "image": "x", "imageID": "",
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}}]
            }
        }))
        .unwrap();
        let st = p.status.unwrap();
        assert_eq!(st.conditions.len(), 1);
        assert_eq!(st.conditions[0].reason.as_deref(), Some("Unschedulable"));
        assert_eq!(
            st.container_statuses[0]
                .state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("CrashLoopBackOff")
        );
    }
}
