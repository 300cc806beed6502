//! RedisCluster against the stand-in (which runs a StatefulSet's pods `<name>-<ordinal>`): the
//! sample becomes a headless Service and a StatefulSet of Redis nodes in cluster mode,
//! `status.nodes` lists its three pods and `Available` follows them, a new size scales it to
//! five nodes; deleting it records a `Deleting` event and releases it, and the garbage
//! collector takes the rest. Nodes that cannot start make it `Degraded`. The manager runs with
//! the role generated from `src/rbac.rs` only: no request of its may be denied.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1 as events;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use redis_api::redis_cluster::{FINALIZER, RedisCluster, RedisClusterStatus};

use redis_operator::controller::redis_cluster as controller;

use crate::*;

const SAMPLE: &str = include_str!("../../config/samples/cache_v1_rediscluster.yaml");

/// The node names a cluster `name` of `size` nodes has: its StatefulSet's pods.
fn nodes(name: &str, size: i32) -> Vec<String> {
    (0..size).map(|i| format!("{name}-{i}")).collect()
}

/// Waits until the RedisCluster `name` reports `size` nodes, `Available`, for its current
/// generation, and returns its status.
async fn wait_for_nodes(api: &Api<RedisCluster>, name: &str, size: i32) -> RedisClusterStatus {
    let what = format!("{size} nodes, Available=True");
    wait_for(&what, || async {
        let object = api.get(name).await.unwrap();
        let status = object.status.unwrap_or_default();
        let done = status.nodes == nodes(name, size)
            && condition(&status.conditions, "Available") == Some("True")
            && status.observed_generation == object.metadata.generation;
        done.then_some(status)
    })
    .await
}

/// The reasons of the events about the object `name`.
async fn event_reasons(env: &Env, name: &str) -> Vec<String> {
    let events: Api<events::Event> = env.api();
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// Fails when the stand-in denied any request (the manager's role lacks a row of src/rbac.rs).
fn assert_nothing_denied(env: &Env) {
    let denied: Vec<String> = env
        .standin
        .requests()
        .iter()
        .filter(|r| r.denied())
        .map(|r| format!("{} {} {}/{}", r.user, r.verb, r.group, r.resource))
        .collect();
    assert!(denied.is_empty(), "denied requests: {denied:?}");
}

/// Checks the headless Service of the cluster `name`.
fn check_service(service: &Service, name: &str) {
    let spec = service.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.selector.unwrap(), controller::selector(name));
    let ports = spec.ports.unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name.as_deref(), Some("redis"));
    assert_eq!(ports[0].port, 6379);
    let owner = &service.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("RedisCluster", name)
    );
}

/// Checks the StatefulSet of the cluster `sample`.
fn check_statefulset(set: &StatefulSet, sample: &RedisCluster) {
    let name = sample.name_any();
    let spec = &set.spec;
    assert_eq!(spec.service_name.as_deref(), Some(name.as_str()));
    assert_eq!(spec.replicas, Some(sample.spec.size));
    let pod = spec.template.spec.clone().unwrap();
    let security = pod.security_context.unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let container = &pod.containers[0];
    assert_eq!(container.name, "redis");
    assert_eq!(container.image.as_deref(), Some(sample.spec.image.as_str()));
    assert_eq!(container.command.as_deref().unwrap(), controller::COMMAND);
    let command = container.command.clone().unwrap().join(" ");
    assert!(command.contains("--cluster-enabled yes"), "{command}");
    let port = &container.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("redis"), 6379)
    );
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    let drop = security.capabilities.as_ref().unwrap().drop.clone();
    assert_eq!(drop.unwrap(), ["ALL"]);
    let owner = &set.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("RedisCluster", name.as_str())
    );
    assert_eq!(owner.controller, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_sample_runs_its_nodes_scales_and_cleans_up() {
    let env = Env::start().await;
    let api: Api<RedisCluster> = env.api();
    let services: Api<Service> = env.api();
    let statefulsets: Api<StatefulSet> = env.api();
    let mut sample: RedisCluster = sample(SAMPLE);
    let name = sample.name_any();
    assert_eq!(
        sample.spec.size, 3,
        "the sample is a cluster of three nodes"
    );
    apply(&api, &sample).await;

    let service = wait_for("the headless Service", || async {
        services.get_opt(&name).await.unwrap()
    })
    .await;
    check_service(&service, &name);
    let set = wait_for("the StatefulSet", || async {
        statefulsets.get_opt(&name).await.unwrap()
    })
    .await;
    check_statefulset(&set, &sample);

    // The stand-in runs the StatefulSet's pods; they become the cluster's nodes.
    let status = wait_for_nodes(&api, &name, 3).await;
    assert_eq!(condition(&status.conditions, "Progressing"), Some("False"));
    assert_eq!(condition(&status.conditions, "Degraded"), Some("False"));
    let object = api.get(&name).await.unwrap();
    assert!(object.finalizers().iter().any(|f| f == FINALIZER));

    // Five nodes: the StatefulSet scales, and status.nodes follows its pods.
    sample.spec.size = 5;
    apply(&api, &sample).await;
    wait_for_nodes(&api, &name, 5).await;
    let set = statefulsets.get(&name).await.unwrap();
    assert_eq!(set.spec.replicas, Some(5));

    // Deletion: the finalizer records an event and lets the RedisCluster go; the garbage
    // collector takes the StatefulSet and the Service.
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for("the RedisCluster to be gone", || async {
        api.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
    wait_for("the StatefulSet and the Service to be gone", || async {
        let set = statefulsets.get_opt(&name).await.unwrap();
        let service = services.get_opt(&name).await.unwrap();
        (set.is_none() && service.is_none()).then_some(())
    })
    .await;
    let reasons = event_reasons(&env, &name).await;
    for reason in ["Created", "Updated", "Deleting"] {
        let found = reasons.iter().any(|r| r == reason);
        assert!(found, "no {reason} event in {reasons:?}");
    }
    assert_nothing_denied(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_cannot_start_degrade_the_cluster() {
    let env = Env::start().await;
    let api: Api<RedisCluster> = env.api();
    let mut sample: RedisCluster = sample(SAMPLE);
    sample.metadata.name = Some("failing".into());
    // The stand-in's pods of an image containing `fail` crash-loop.
    sample.spec.image = "example.com/fail/redis:7.2".into();
    apply(&api, &sample).await;
    let status = wait_for("Degraded=True", || async {
        let status = api.get("failing").await.unwrap().status.unwrap_or_default();
        (condition(&status.conditions, "Degraded") == Some("True")).then_some(status)
    })
    .await;
    assert_eq!(condition(&status.conditions, "Available"), Some("False"));
    let degraded = status.conditions.iter().find(|c| c.type_ == "Degraded");
    let message = &degraded.unwrap().message;
    assert!(message.contains("failing-0: CrashLoopBackOff"), "{message}");
    assert_nothing_denied(&env);
}
