//! Pure desired-state builders: the Deployment and Service a Memcached should have.
//!
//! Nothing here does I/O. The reconciler calls these with the Memcached it was handed and
//! server-side applies the result; tests call them directly and snapshot the output. Every
//! built object carries [`DESIRED_HASH_ANNOTATION`], a digest of the object itself, so the
//! reconciler can tell "the observed object still matches what we would apply" without
//! applying (see [`super::drift`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec,
    TCPSocketAction, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use memcached_api::v1::Memcached;
use memcached_api::validation::derived_memory_limit_mib;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// `app.kubernetes.io/name` value of everything the operator creates.
pub const APP_NAME: &str = "memcached";
/// `app.kubernetes.io/managed-by` value; the operator's watches select on it so they only
/// cache objects it manages.
pub const MANAGED_BY: &str = "memcached-operator";
/// Label key naming the Memcached an object belongs to.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Label key naming the application.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label key naming the manager.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label selector (string form) of every object the operator manages.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=memcached-operator";
/// Annotation holding the digest of the desired object last applied.
pub const DESIRED_HASH_ANNOTATION: &str = "cache.example.com/desired-hash";
/// Name of the memcached container and of its port (the Service targets the port by name).
pub const CONTAINER_NAME: &str = "memcached";
/// Name of the memcached port on the container and the Service.
pub const PORT_NAME: &str = "memcached";
/// UID and GID memcached runs as: the `memcache` user of the official memcached images.
pub const MEMCACHED_UID: i64 = 11211;

/// Why a desired object could not be built.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BuildDesiredError {
    /// The Memcached lacks a metadata field every object read from the API server has.
    #[error("Memcached has no metadata.{0}; it was not read from the API server")]
    MissingMetadata(&'static str),
}

fn name_of(mc: &Memcached) -> Result<&str, BuildDesiredError> {
    mc.metadata
        .name
        .as_deref()
        .ok_or(BuildDesiredError::MissingMetadata("name"))
}

fn namespace_of(mc: &Memcached) -> Result<&str, BuildDesiredError> {
    mc.metadata
        .namespace
        .as_deref()
        .ok_or(BuildDesiredError::MissingMetadata("namespace"))
}

/// Labels that select the pods of `name`. Immutable once a Deployment exists (its selector
/// cannot change), so this set must never grow.
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), APP_NAME.to_string()),
        (INSTANCE_LABEL.to_string(), name.to_string()),
    ])
}

/// Labels on every object built for `name`: the selector labels plus `managed-by`.
pub fn object_labels(name: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(name);
    labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    labels
}

/// The selector labels in the string form of `status.selector` (scale subresource).
pub fn selector_string(name: &str) -> String {
    selector_labels(name)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn owner_reference(mc: &Memcached) -> Result<OwnerReference, BuildDesiredError> {
    if mc.metadata.uid.is_none() {
        return Err(BuildDesiredError::MissingMetadata("uid"));
    }
    let mut owner = mc
        .controller_owner_ref(&())
        .ok_or(BuildDesiredError::MissingMetadata("name"))?;
    // As controller-runtime's SetControllerReference does: foreground deletion of the
    // Memcached waits for its children.
    owner.block_owner_deletion = Some(true);
    Ok(owner)
}

fn object_meta(mc: &Memcached) -> Result<ObjectMeta, BuildDesiredError> {
    let name = name_of(mc)?;
    Ok(ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace_of(mc)?.to_string()),
        labels: Some(object_labels(name)),
        owner_references: Some(vec![owner_reference(mc)?]),
        ..Default::default()
    })
}

/// The memcached command line: managed flags first, then the user's extra arguments, so a
/// user flag can only add behaviour (validation refuses extra arguments that repeat a managed
/// flag; memcached would silently take the last one).
pub fn memcached_args(mc: &Memcached) -> Vec<String> {
    let spec = &mc.spec;
    let m = &spec.memcached;
    let mut args = vec![
        "-p".to_string(),
        spec.port.to_string(),
        "-m".to_string(),
        m.memory_limit_mib.to_string(),
        "-c".to_string(),
        m.max_connections.to_string(),
        "-t".to_string(),
        m.threads.to_string(),
    ];
    args.extend(m.extra_args.iter().cloned());
    args
}

/// Container resources: the user's, with the memory limit derived from the memcached
/// settings when unset, and the memory request equal to the limit when unset. A cache that
/// gets OOM-killed loses every item, so memory is requested in full (the kubelet then never
/// evicts it for memory pressure below its request). CPU is left to the user: a CPU limit
/// throttles memcached's latency and there is no size-independent good default.
pub fn container_resources(mc: &Memcached) -> ResourceRequirements {
    let user = mc.spec.resources.clone().unwrap_or_default();
    let mut limits = user.limits.unwrap_or_default();
    let mut requests = user.requests.unwrap_or_default();
    let limit = limits
        .entry("memory".to_string())
        .or_insert_with(|| Quantity(format!("{}Mi", derived_memory_limit_mib(&mc.spec))))
        .clone();
    requests.entry("memory".to_string()).or_insert(limit);
    ResourceRequirements {
        claims: user.claims,
        limits: Some(limits),
        requests: Some(requests),
    }
}

fn tcp_probe(initial_delay: i32, period: i32, timeout: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String(PORT_NAME.to_string()),
            host: None,
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        success_threshold: Some(1),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

fn memcached_container(mc: &Memcached) -> Container {
    Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(mc.spec.image.clone()),
        args: Some(memcached_args(mc)),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_string()),
            container_port: mc.spec.port,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        // Readiness gates Service traffic quickly; liveness is slower and more tolerant so a
        // briefly saturated memcached is not restarted (a restart empties the cache).
        readiness_probe: Some(tcp_probe(2, 5, 1, 3)),
        liveness_probe: Some(tcp_probe(10, 10, 5, 6)),
        resources: Some(container_resources(mc)),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(MEMCACHED_UID),
            run_as_group: Some(MEMCACHED_UID),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                localhost_profile: None,
            }),
            ..Default::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    }
}

fn pod_template(mc: &Memcached, name: &str) -> PodTemplateSpec {
    let overrides = mc.spec.pod_template.clone().unwrap_or_default();
    // User labels first, then ours: the selector labels must win or the Deployment would not
    // select its own pods.
    let mut labels = overrides.labels.unwrap_or_default();
    labels.extend(object_labels(name));
    let annotations = overrides.annotations.filter(|a| !a.is_empty());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations,
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![memcached_container(mc)],
            // memcached never talks to the API server and reads no service environment.
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(MEMCACHED_UID),
                run_as_group: Some(MEMCACHED_UID),
                fs_group: Some(MEMCACHED_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            // Spread replicas over nodes when the scheduler can, so one node failure does not
            // empty the whole cache; never block scheduling for it.
            topology_spread_constraints: Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "kubernetes.io/hostname".to_string(),
                when_unsatisfiable: "ScheduleAnyway".to_string(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(name)),
                    match_expressions: None,
                }),
                ..Default::default()
            }]),
            node_selector: overrides.node_selector.filter(|m| !m.is_empty()),
            tolerations: overrides.tolerations.filter(|t| !t.is_empty()),
            affinity: overrides.affinity,
            priority_class_name: overrides.priority_class_name,
            ..Default::default()
        }),
    }
}

/// The Deployment running memcached for `mc`.
pub fn deployment(mc: &Memcached) -> Result<Deployment, BuildDesiredError> {
    let name = name_of(mc)?;
    let mut deployment = Deployment {
        metadata: object_meta(mc)?,
        spec: DeploymentSpec {
            replicas: Some(mc.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(name)),
                match_expressions: None,
            },
            template: pod_template(mc, name),
            ..Default::default()
        },
        status: None,
    };
    stamp_hash(&mut deployment.metadata, &deployment.spec);
    Ok(deployment)
}

/// The ClusterIP Service in front of the memcached pods of `mc`.
pub fn service(mc: &Memcached) -> Result<Service, BuildDesiredError> {
    let name = name_of(mc)?;
    let mut service = Service {
        metadata: object_meta(mc)?,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(selector_labels(name)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_string()),
                port: mc.spec.port,
                target_port: Some(IntOrString::String(PORT_NAME.to_string())),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    stamp_hash(&mut service.metadata, &service.spec);
    Ok(service)
}

/// Records a digest of `meta` (before stamping) and `spec` in [`DESIRED_HASH_ANNOTATION`].
///
/// The digest lets the drift check notice fields the operator stopped setting: a subset
/// comparison alone cannot see that an observed `nodeSelector` is one we no longer want.
fn stamp_hash<S: serde::Serialize>(meta: &mut ObjectMeta, spec: &S) {
    let mut hasher = Sha256::new();
    // Serialising these k8s-openapi types cannot fail (no maps with non-string keys); an
    // empty digest input would only cost one extra apply.
    hasher.update(serde_json::to_vec(&*meta).unwrap_or_default());
    hasher.update(b"\0");
    hasher.update(serde_json::to_vec(spec).unwrap_or_default());
    let digest = hex::encode(&hasher.finalize()[..16]);
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DESIRED_HASH_ANNOTATION.to_string(), digest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Toleration;
    use memcached_api::v1::{MemcachedSpec, PodTemplateOverrides};

    pub(crate) fn sample(name: &str, spec: MemcachedSpec) -> Memcached {
        let mut mc = Memcached::new(name, spec);
        mc.metadata.namespace = Some("cache".into());
        mc.metadata.uid = Some("0b8a6c1e-1111-4222-8333-944455556666".into());
        mc.metadata.generation = Some(1);
        mc
    }

    #[test]
    fn default_spec_deployment_snapshot() {
        let d = deployment(&sample("web-cache", MemcachedSpec::default())).unwrap();
        insta::assert_yaml_snapshot!(d);
    }

    #[test]
    fn tuned_spec_deployment_snapshot() {
        let mut spec = MemcachedSpec {
            replicas: 3,
            image: "registry.example.com:5000/cache/memcached:1.6.39@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
            port: 11311,
            ..Default::default()
        };
        spec.memcached.memory_limit_mib = 1024;
        spec.memcached.max_connections = 4096;
        spec.memcached.threads = 8;
        spec.memcached.extra_args = vec!["-o".into(), "modern".into(), "-vv".into()];
        spec.resources = Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
            limits: Some([("cpu".to_string(), Quantity("2".into()))].into()),
            claims: None,
        });
        spec.pod_template = Some(PodTemplateOverrides {
            node_selector: Some([("pool".to_string(), "cache".to_string())].into()),
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("cache".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None,
            }]),
            priority_class_name: Some("high".into()),
            labels: Some(
                [
                    ("team".to_string(), "web".to_string()),
                    // Must lose against the operator's selector label.
                    (INSTANCE_LABEL.to_string(), "hijack".to_string()),
                ]
                .into(),
            ),
            annotations: Some([("prometheus.io/scrape".to_string(), "false".to_string())].into()),
            affinity: None,
        });
        let d = deployment(&sample("sessions", spec)).unwrap();
        insta::assert_yaml_snapshot!(d);
    }

    #[test]
    fn service_snapshot() {
        let s = service(&sample("web-cache", MemcachedSpec::default())).unwrap();
        insta::assert_yaml_snapshot!(s);
    }

    #[test]
    fn args_have_managed_flags_then_extra_args() {
        let mut spec = MemcachedSpec::default();
        spec.memcached.extra_args = vec!["-vv".into()];
        let args = memcached_args(&sample("a", spec));
        assert_eq!(
            args,
            ["-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-vv"]
        );
    }

    #[test]
    fn derived_memory_limit_unless_user_sets_it() {
        let mc = sample("a", MemcachedSpec::default());
        let r = container_resources(&mc);
        // 64 MiB items + 32 MiB process + 1024 connections * 8 KiB.
        assert_eq!(r.limits.unwrap()["memory"].0, "104Mi");
        assert_eq!(r.requests.unwrap()["memory"].0, "104Mi");

        let mut spec = MemcachedSpec::default();
        spec.resources = Some(ResourceRequirements {
            limits: Some([("memory".to_string(), Quantity("1Gi".into()))].into()),
            requests: Some([("memory".to_string(), Quantity("512Mi".into()))].into()),
            claims: None,
        });
        let r = container_resources(&sample("a", spec));
        assert_eq!(r.limits.unwrap()["memory"].0, "1Gi");
        assert_eq!(r.requests.unwrap()["memory"].0, "512Mi");
    }

    #[test]
    fn selector_labels_win_over_user_labels() {
        let spec = MemcachedSpec {
            pod_template: Some(PodTemplateOverrides {
                labels: Some([(INSTANCE_LABEL.to_string(), "other".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let d = deployment(&sample("mine", spec)).unwrap();
        let labels = d.spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[INSTANCE_LABEL], "mine");
    }

    #[test]
    fn owned_by_the_memcached_as_controller() {
        let d = deployment(&sample("a", MemcachedSpec::default())).unwrap();
        let owners = d.metadata.owner_references.unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "Memcached");
        assert_eq!(owners[0].api_version, "cache.example.com/v1");
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, Some(true));
    }

    #[test]
    fn hash_changes_with_spec_and_is_stable() {
        let a = deployment(&sample("a", MemcachedSpec::default())).unwrap();
        let b = deployment(&sample("a", MemcachedSpec::default())).unwrap();
        let hash = |d: &Deployment| {
            d.metadata.annotations.as_ref().unwrap()[DESIRED_HASH_ANNOTATION].clone()
        };
        assert_eq!(hash(&a), hash(&b));
        let c = deployment(&sample(
            "a",
            MemcachedSpec {
                replicas: 2,
                ..Default::default()
            },
        ))
        .unwrap();
        assert_ne!(hash(&a), hash(&c));
    }

    #[test]
    fn missing_metadata_is_an_error_not_a_panic() {
        let mc = Memcached::new("a", MemcachedSpec::default());
        assert_eq!(
            deployment(&mc).unwrap_err(),
            BuildDesiredError::MissingMetadata("namespace")
        );
    }

    #[test]
    fn selector_string_is_sorted() {
        assert_eq!(
            selector_string("x"),
            "app.kubernetes.io/instance=x,app.kubernetes.io/name=memcached"
        );
    }
}
