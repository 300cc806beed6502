//! proptest strategies that generate valid Memcached objects of every version.
//!
//! "Valid" means what the CRD schema admits after defaulting: values in their schema ranges,
//! defaulted fields present (often at their default, so the "nothing lost" path is exercised),
//! and metadata as the API server sends it (no empty label or annotation maps).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, PodAntiAffinity, ResourceClaim, ResourceRequirements, Toleration,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

use crate::{v1, v1alpha1, v1beta1};

fn dns_label() -> BoxedStrategy<String> {
    "[a-z]([a-z0-9-]{0,14}[a-z0-9])?".boxed()
}

fn text() -> BoxedStrategy<String> {
    // Unicode and JSON-special characters, to catch escaping mistakes in the annotation.
    "[a-zA-Z0-9 _./:\"\\\\{}\u{e9}\u{4e2d}-]{0,24}".boxed()
}

fn time() -> BoxedStrategy<Time> {
    // Kubernetes `Time` has whole-second precision on the wire.
    (0i64..4_102_444_800)
        .prop_map(|s| Time(Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH)))
        .boxed()
}

fn label_map() -> BoxedStrategy<Option<BTreeMap<String, String>>> {
    option::of(btree_map("[a-z]{1,8}(\\.io/[a-z]{1,8})?", text(), 1..4)).boxed()
}

/// Annotations as users set them; `with_ours` also allows the operator's own key, as a stray
/// value on a v1 object.
fn annotations(with_ours: bool) -> BoxedStrategy<Option<BTreeMap<String, String>>> {
    let users = btree_map("[a-z]{1,8}(\\.example\\.org/[a-z]{1,8})?", text(), 0..4);
    let ours: BoxedStrategy<Option<String>> = if with_ours {
        option::weighted(
            0.3,
            prop_oneof![
                text(),
                Just("{}".to_string()),
                Just(r#"{"spec":{"port":1234}}"#.to_string()),
            ],
        )
        .boxed()
    } else {
        Just(None).boxed()
    };
    (users, ours)
        .prop_map(|(mut map, ours)| {
            if let Some(v) = ours {
                map.insert(crate::CONVERSION_ANNOTATION.to_string(), v);
            }
            (!map.is_empty()).then_some(map)
        })
        .boxed()
}

pub fn metadata(with_our_annotation: bool) -> BoxedStrategy<ObjectMeta> {
    (
        (
            dns_label(),
            option::of(dns_label()),
            option::of("[0-9a-f-]{36}"),
        ),
        (
            option::of("[0-9]{1,8}"),
            option::of(1i64..1_000_000),
            option::of(time()),
        ),
        label_map(),
        annotations(with_our_annotation),
        option::of(vec(Just(crate::FINALIZER.to_string()), 1..2)),
    )
        .prop_map(
            |(
                (name, namespace, uid),
                (rv, generation, created),
                labels,
                annotations,
                finalizers,
            )| {
                ObjectMeta {
                    name: Some(name),
                    namespace,
                    uid,
                    resource_version: rv,
                    generation,
                    creation_timestamp: created,
                    labels,
                    annotations,
                    finalizers,
                    ..Default::default()
                }
            },
        )
        .boxed()
}

fn or_default<T: Clone + std::fmt::Debug + 'static>(
    default: T,
    other: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![1 => Just(default), 2 => other].boxed()
}

fn replicas() -> BoxedStrategy<i32> {
    or_default(v1::default_replicas(), 0..=crate::MAX_REPLICAS)
}

fn image() -> BoxedStrategy<String> {
    or_default(
        v1::default_image(),
        "(quay\\.io|registry\\.example\\.com:5000)/[a-z]{1,10}/memcached:[0-9]\\.[0-9]{1,2}",
    )
}

fn memory_limit_mib() -> BoxedStrategy<i32> {
    or_default(
        v1::default_memory_limit_mib(),
        crate::MIN_MEMORY_LIMIT_MIB..=crate::MAX_MEMORY_LIMIT_MIB,
    )
}

fn quantity() -> BoxedStrategy<Quantity> {
    prop_oneof![
        (1u32..4000).prop_map(|m| format!("{m}m")),
        (1u32..64).prop_map(|g| format!("{g}Gi")),
        (1u32..4096).prop_map(|m| format!("{m}Mi")),
        (1u32..8).prop_map(|c| c.to_string()),
    ]
    .prop_map(Quantity)
    .boxed()
}

fn resources() -> BoxedStrategy<ResourceRequirements> {
    let list = || {
        option::of(btree_map(
            prop_oneof![Just("cpu"), Just("memory")].prop_map(String::from),
            quantity(),
            0..3,
        ))
    };
    (list(), list(), option::of(vec(dns_label(), 0..2)))
        .prop_map(|(limits, requests, claims)| ResourceRequirements {
            limits,
            requests,
            claims: claims.map(|names| {
                names
                    .into_iter()
                    .map(|name| ResourceClaim {
                        name,
                        request: None,
                    })
                    .collect()
            }),
        })
        .boxed()
}

fn toleration() -> BoxedStrategy<Toleration> {
    (
        option::of(dns_label()),
        option::of(prop_oneof![Just("Exists"), Just("Equal")].prop_map(String::from)),
        option::of(dns_label()),
        option::of(
            prop_oneof![
                Just("NoSchedule"),
                Just("NoExecute"),
                Just("PreferNoSchedule")
            ]
            .prop_map(String::from),
        ),
        option::of(0i64..86400),
    )
        .prop_map(
            |(key, operator, value, effect, toleration_seconds)| Toleration {
                key,
                operator,
                value,
                effect,
                toleration_seconds,
            },
        )
        .boxed()
}

fn affinity() -> BoxedStrategy<Affinity> {
    let node = (dns_label(), vec(dns_label(), 1..3)).prop_map(|(key, values)| NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key,
                    operator: "In".into(),
                    values: Some(values),
                }]),
                match_fields: None,
            }],
        }),
        preferred_during_scheduling_ignored_during_execution: None,
    });
    let anti = (1i32..=100, label_map()).prop_map(|(weight, labels)| PodAntiAffinity {
        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: labels,
                    match_expressions: None,
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            },
        }]),
        required_during_scheduling_ignored_during_execution: None,
    });
    (option::of(node), option::of(anti))
        .prop_map(|(node_affinity, pod_anti_affinity)| Affinity {
            node_affinity,
            pod_anti_affinity,
            pod_affinity: None,
        })
        .boxed()
}

fn pod_template() -> BoxedStrategy<v1::PodTemplateOverrides> {
    (
        label_map(),
        option::of(vec(toleration(), 0..3)),
        option::of(affinity()),
        option::of("[a-z]{1,20}"),
        label_map(),
        label_map(),
    )
        .prop_map(
            |(node_selector, tolerations, affinity, priority_class_name, labels, annotations)| {
                v1::PodTemplateOverrides {
                    node_selector,
                    tolerations,
                    affinity,
                    priority_class_name,
                    labels,
                    annotations,
                }
            },
        )
        .boxed()
}

fn extra_arg() -> BoxedStrategy<String> {
    prop_oneof![
        Just("-v".to_string()),
        Just("--enable-largepages".to_string()),
        "-o [a-z_]{1,12}",
        "--max-item-size=[1-9]m",
    ]
    .boxed()
}

fn settings() -> BoxedStrategy<v1::MemcachedSettings> {
    (
        memory_limit_mib(),
        or_default(v1::default_max_connections(), 1..=65536),
        or_default(v1::default_threads(), 1..=64),
        or_default(Vec::new(), vec(extra_arg(), 1..4)),
    )
        .prop_map(|(memory_limit_mib, max_connections, threads, extra_args)| {
            v1::MemcachedSettings {
                memory_limit_mib,
                max_connections,
                threads,
                extra_args,
            }
        })
        .boxed()
}

fn condition() -> BoxedStrategy<Condition> {
    (
        prop_oneof![Just("Available"), Just("Progressing"), Just("Degraded")],
        prop_oneof![Just("True"), Just("False"), Just("Unknown")],
        "[A-Z][a-zA-Z]{0,20}",
        text(),
        option::of(1i64..1000),
        time(),
    )
        .prop_map(
            |(type_, status, reason, message, observed_generation, last_transition_time)| {
                Condition {
                    type_: type_.into(),
                    status: status.into(),
                    reason,
                    message,
                    observed_generation,
                    last_transition_time,
                }
            },
        )
        .boxed()
}

fn conditions() -> BoxedStrategy<Vec<Condition>> {
    // A list-map keyed by type: at most one condition per type.
    vec(condition(), 0..4)
        .prop_map(|mut list| {
            let mut seen = std::collections::BTreeSet::new();
            list.retain(|c| seen.insert(c.type_.clone()));
            list
        })
        .boxed()
}

fn nodes() -> BoxedStrategy<Vec<String>> {
    vec("memcached-[a-z0-9]{5}", 0..4).boxed()
}

pub fn v1_spec() -> BoxedStrategy<v1::MemcachedSpec> {
    (
        replicas(),
        image(),
        settings(),
        option::of(resources()),
        or_default(v1::default_port(), 1..=65535),
        option::of(pod_template()),
    )
        .prop_map(
            |(replicas, image, memcached, resources, port, pod_template)| v1::MemcachedSpec {
                replicas,
                image,
                memcached,
                resources,
                port,
                pod_template,
            },
        )
        .boxed()
}

pub fn v1_status() -> BoxedStrategy<v1::MemcachedStatus> {
    (
        option::of(1i64..1000),
        option::of(0..=crate::MAX_REPLICAS),
        option::of(0..=crate::MAX_REPLICAS),
        nodes(),
        option::of("app\\.kubernetes\\.io/instance=[a-z]{1,8}"),
        conditions(),
    )
        .prop_map(
            |(observed_generation, replicas, ready_replicas, nodes, selector, conditions)| {
                v1::MemcachedStatus {
                    observed_generation,
                    replicas,
                    ready_replicas,
                    nodes,
                    selector,
                    conditions,
                }
            },
        )
        .boxed()
}

/// v1 objects; `metadata` may carry a stray conversion annotation.
pub fn v1_object() -> BoxedStrategy<v1::Memcached> {
    (metadata(true), v1_spec(), option::of(v1_status()))
        .prop_map(|(metadata, spec, status)| v1::Memcached {
            metadata,
            spec,
            status,
        })
        .boxed()
}

/// v1alpha1 objects as a v1alpha1 client writes them (no conversion annotation).
pub fn v1alpha1_object() -> BoxedStrategy<v1alpha1::Memcached> {
    (
        metadata(false),
        0..=crate::MAX_REPLICAS,
        option::of(nodes()),
    )
        .prop_map(|(metadata, size, nodes)| v1alpha1::Memcached {
            metadata,
            spec: v1alpha1::MemcachedSpec { size },
            status: nodes.map(|nodes| v1alpha1::MemcachedStatus { nodes }),
        })
        .boxed()
}

/// v1beta1 objects as a v1beta1 client writes them (no conversion annotation).
pub fn v1beta1_object() -> BoxedStrategy<v1beta1::Memcached> {
    (
        metadata(false),
        (replicas(), image(), memory_limit_mib()),
        option::of((nodes(), option::of(0..=crate::MAX_REPLICAS), conditions())),
    )
        .prop_map(
            |(metadata, (replicas, image, memory_limit_mib), status)| v1beta1::Memcached {
                metadata,
                spec: v1beta1::MemcachedSpec {
                    replicas,
                    image,
                    memory_limit_mib,
                },
                status: status.map(|(nodes, ready_replicas, conditions)| {
                    v1beta1::MemcachedStatus {
                        nodes,
                        ready_replicas,
                        conditions,
                    }
                }),
            },
        )
        .boxed()
}

/// Objects of every version, including spokes that came from v1 and so carry the annotation.
pub fn any_object() -> BoxedStrategy<super::AnyMemcached> {
    use super::{AnyMemcached, Version};
    prop_oneof![
        v1alpha1_object().prop_map(AnyMemcached::V1alpha1),
        v1beta1_object().prop_map(AnyMemcached::V1beta1),
        v1_object().prop_map(AnyMemcached::V1),
        (
            v1_object(),
            prop_oneof![Just(Version::V1alpha1), Just(Version::V1beta1)]
        )
            .prop_map(|(hub, v)| AnyMemcached::from_hub(hub, v)),
    ]
    .boxed()
}
