//! Builders of test inputs shared by the controller's unit tests.

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memcached_api::v1::{Memcached, MemcachedSpec};

use super::cache::{
    CachedDeployment, CachedPod, ContainerState, ContainerStatus, PodStatus, Waiting,
};

/// A Memcached as the API server would hand it out: namespace `cache`, a uid, generation 1.
pub fn sample(name: &str, spec: MemcachedSpec) -> Memcached {
    let mut mc = Memcached::new(name, spec);
    mc.metadata.namespace = Some("cache".into());
    mc.metadata.uid = Some("0b8a6c1e-1111-4222-8333-944455556666".into());
    mc.metadata.generation = Some(1);
    mc
}

/// A Deployment with only the status fields the status computation reads.
pub fn deployment_with_status(
    generation: i64,
    observed_generation: i64,
    replicas: i32,
    updated: i32,
    ready: i32,
    available: i32,
) -> CachedDeployment {
    CachedDeployment {
        metadata: ObjectMeta {
            name: Some("c".into()),
            generation: Some(generation),
            ..Default::default()
        },
        spec: "{}".into(),
        status: Some(DeploymentStatus {
            observed_generation: Some(observed_generation),
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            ..Default::default()
        }),
    }
}

/// A running pod, or one whose memcached container waits with `(reason, message)`.
pub fn pod(name: &str, waiting: Option<(&str, &str)>) -> CachedPod {
    let state = waiting.map(|(reason, message)| ContainerState {
        waiting: Some(Waiting {
            reason: Some(reason.into()),
            message: Some(message.into()),
        }),
    });
    CachedPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("cache".into()),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: vec![ContainerStatus {
                name: "memcached".into(),
                state,
            }],
            ..Default::default()
        }),
    }
}
