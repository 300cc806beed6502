//! Typed conversion between each spoke (`v1alpha1`, `v1beta1`) and the hub (`v1`).
//!
//! Down (v1 to a spoke) splits the v1 object into what the spoke expresses and what it keeps in
//! the conversion annotation; up (spoke to v1) rebuilds the v1 object from the spoke's fields,
//! the schema defaults, and the annotation. The two are written side by side per field so a new
//! field cannot be added to one direction without the other.

use super::preserved::{self, Preserved, PreservedSettings, PreservedSpec, PreservedStatus};
use super::{ConversionWarning, Converted};
use crate::{v1, v1alpha1, v1beta1};

/// Which v1 fields a spoke has natively.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spoke {
    Alpha,
    Beta,
}

impl Spoke {
    /// `image`, `memoryLimitMiB`, `status.readyReplicas` and `status.conditions` exist in v1beta1.
    fn has_beta_fields(self) -> bool {
        self == Spoke::Beta
    }
}

/// Splits a v1 spec into what `spoke` cannot express; the native fields stay in `spec`.
fn lost_spec(spec: &mut v1::MemcachedSpec, spoke: Spoke) -> PreservedSpec {
    let native = spoke.has_beta_fields();
    let settings = &mut spec.memcached;
    PreservedSpec {
        image: (!native && spec.image != crate::DEFAULT_IMAGE).then(|| spec.image.clone()),
        memcached: PreservedSettings {
            memory_limit_mib: (!native
                && settings.memory_limit_mib != crate::DEFAULT_MEMORY_LIMIT_MIB)
                .then_some(settings.memory_limit_mib),
            max_connections: (settings.max_connections != crate::DEFAULT_MAX_CONNECTIONS)
                .then_some(settings.max_connections),
            threads: (settings.threads != crate::DEFAULT_THREADS).then_some(settings.threads),
            extra_args: (!settings.extra_args.is_empty())
                .then(|| std::mem::take(&mut settings.extra_args)),
        },
        resources: spec.resources.take(),
        port: (spec.port != crate::DEFAULT_PORT).then_some(spec.port),
        pod_template: spec.pod_template.take(),
    }
}

/// Puts kept spec fields back, skipping any the spoke has natively (the spoke's value wins).
fn restore_spec(spec: &mut v1::MemcachedSpec, kept: PreservedSpec, spoke: Spoke) {
    let native = spoke.has_beta_fields();
    let settings = &mut spec.memcached;
    if !native {
        if let Some(image) = kept.image {
            spec.image = image;
        }
        if let Some(mib) = kept.memcached.memory_limit_mib {
            settings.memory_limit_mib = mib;
        }
    }
    if let Some(c) = kept.memcached.max_connections {
        settings.max_connections = c;
    }
    if let Some(t) = kept.memcached.threads {
        settings.threads = t;
    }
    if let Some(args) = kept.memcached.extra_args {
        settings.extra_args = args;
    }
    if let Some(resources) = kept.resources {
        spec.resources = Some(resources);
    }
    if let Some(port) = kept.port {
        spec.port = port;
    }
    if let Some(pod_template) = kept.pod_template {
        spec.pod_template = Some(pod_template);
    }
}

/// Splits a v1 status into what `spoke` cannot express; the native fields stay in `status`.
fn lost_status(status: &mut v1::MemcachedStatus, spoke: Spoke) -> PreservedStatus {
    let native = spoke.has_beta_fields();
    PreservedStatus {
        observed_generation: status.observed_generation.take(),
        replicas: status.replicas.take(),
        ready_replicas: if native {
            None
        } else {
            status.ready_replicas.take()
        },
        selector: status.selector.take(),
        conditions: (!native && !status.conditions.is_empty())
            .then(|| std::mem::take(&mut status.conditions)),
    }
}

/// Puts kept status fields back, skipping any the spoke has natively.
fn restore_status(status: &mut v1::MemcachedStatus, kept: PreservedStatus, spoke: Spoke) {
    let native = spoke.has_beta_fields();
    if kept.observed_generation.is_some() {
        status.observed_generation = kept.observed_generation;
    }
    if kept.replicas.is_some() {
        status.replicas = kept.replicas;
    }
    if kept.selector.is_some() {
        status.selector = kept.selector;
    }
    if !native {
        if kept.ready_replicas.is_some() {
            status.ready_replicas = kept.ready_replicas;
        }
        if let Some(conditions) = kept.conditions {
            status.conditions = conditions;
        }
    }
}

/// The v1 pieces a spoke is built from, after the lost fields went into the annotation.
struct Split {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: v1::MemcachedSpec,
    status: Option<v1::MemcachedStatus>,
}

fn split_hub(hub: v1::Memcached, spoke: Spoke) -> Split {
    let v1::Memcached {
        mut metadata,
        mut spec,
        mut status,
    } = hub;
    let hub_annotation = preserved::take_annotation(&mut metadata);
    let kept = Preserved {
        spec: lost_spec(&mut spec, spoke),
        status: status
            .as_mut()
            .map(|s| lost_status(s, spoke))
            .unwrap_or_default(),
        annotation: None,
    };
    preserved::store(&mut metadata, kept, hub_annotation);
    Split {
        metadata,
        spec,
        status,
    }
}

/// Rebuilds a v1 object from a spoke's metadata, its native fields (already in `spec`/`status`)
/// and its annotation.
fn join_hub(
    mut metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    mut spec: v1::MemcachedSpec,
    mut status: Option<v1::MemcachedStatus>,
    spoke: Spoke,
) -> Converted<v1::Memcached> {
    let (kept, error) = preserved::restore(&mut metadata);
    restore_spec(&mut spec, kept.spec, spoke);
    if !kept.status.is_empty() {
        restore_status(
            status.get_or_insert_with(Default::default),
            kept.status,
            spoke,
        );
    }
    let warnings = error
        .map(|e| {
            ConversionWarning::UnreadableAnnotation {
                reason: e.to_string(),
            }
            .to_string()
        })
        .into_iter()
        .collect();
    Converted {
        object: v1::Memcached {
            metadata,
            spec,
            status: status.take(),
        },
        warnings,
    }
}

/// Converts a v1 object to v1alpha1, keeping what v1alpha1 cannot express in the annotation.
pub fn v1_to_v1alpha1(hub: v1::Memcached) -> v1alpha1::Memcached {
    let Split {
        metadata,
        spec,
        status,
    } = split_hub(hub, Spoke::Alpha);
    v1alpha1::Memcached {
        metadata,
        spec: v1alpha1::MemcachedSpec {
            size: spec.replicas,
        },
        status: status.map(|s| v1alpha1::MemcachedStatus { nodes: s.nodes }),
    }
}

/// Converts a v1alpha1 object to v1, restoring the fields kept in the annotation.
pub fn v1alpha1_to_v1(spoke: v1alpha1::Memcached) -> Converted<v1::Memcached> {
    let v1alpha1::Memcached {
        metadata,
        spec,
        status,
    } = spoke;
    let spec = v1::MemcachedSpec {
        replicas: spec.size,
        ..Default::default()
    };
    let status = status.map(|s| v1::MemcachedStatus {
        nodes: s.nodes,
        ..Default::default()
    });
    join_hub(metadata, spec, status, Spoke::Alpha)
}

/// Converts a v1 object to v1beta1, keeping what v1beta1 cannot express in the annotation.
pub fn v1_to_v1beta1(hub: v1::Memcached) -> v1beta1::Memcached {
    let Split {
        metadata,
        spec,
        status,
    } = split_hub(hub, Spoke::Beta);
    v1beta1::Memcached {
        metadata,
        spec: v1beta1::MemcachedSpec {
            replicas: spec.replicas,
            image: spec.image,
            memory_limit_mib: spec.memcached.memory_limit_mib,
        },
        status: status.map(|s| v1beta1::MemcachedStatus {
            nodes: s.nodes,
            ready_replicas: s.ready_replicas,
            conditions: s.conditions,
        }),
    }
}

/// Converts a v1beta1 object to v1, restoring the fields kept in the annotation.
pub fn v1beta1_to_v1(spoke: v1beta1::Memcached) -> Converted<v1::Memcached> {
    let v1beta1::Memcached {
        metadata,
        spec,
        status,
    } = spoke;
    let spec = v1::MemcachedSpec {
        replicas: spec.replicas,
        image: spec.image,
        memcached: v1::MemcachedSettings {
            memory_limit_mib: spec.memory_limit_mib,
            ..Default::default()
        },
        ..Default::default()
    };
    let status = status.map(|s| v1::MemcachedStatus {
        nodes: s.nodes,
        ready_replicas: s.ready_replicas,
        conditions: s.conditions,
        ..Default::default()
    });
    join_hub(metadata, spec, status, Spoke::Beta)
}
