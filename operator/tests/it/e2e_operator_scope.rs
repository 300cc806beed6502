//! End to end: WATCH_NAMESPACE=a,b (OLM's MultiNamespace) — the operator reconciles Memcached
//! objects in a and b, ignores the one in c, and never sends a request about namespace c or a
//! cluster-wide one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;

use std::time::Duration;

use harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use memcached_api::v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_only_the_target_namespaces() {
    let env = Env::start(&["a", "b", "c"]).await;
    let op = Operator::spawn(
        &env,
        OperatorOptions {
            webhook: false,
            leader_elect: false,
            watch_namespace: "b, a",
            ..Default::default()
        },
    );
    op.wait_ready().await;
    for ns in ["a", "b", "c"] {
        Api::<v1::Memcached>::namespaced(env.client.clone(), ns)
            .create(
                &PostParams::default(),
                &v1::Memcached::new("cache", v1::MemcachedSpec::default()),
            )
            .await
            .unwrap();
    }
    for ns in ["a", "b"] {
        let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), ns);
        eventually(&format!("{ns}/cache available"), 30, || async {
            let mc = api.get("cache").await.ok()?;
            mc.status?
                .conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
                .then_some(())
        })
        .await;
    }
    // Give the operator ample time to (wrongly) act on c.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c = Api::<v1::Memcached>::namespaced(env.client.clone(), "c")
        .get("cache")
        .await
        .unwrap();
    assert!(c.status.is_none(), "c/cache got a status: {:?}", c.status);
    assert!(c.metadata.finalizers.is_none(), "c/cache got a finalizer");
    assert!(
        Api::<Deployment>::namespaced(env.client.clone(), "c")
            .get_opt("cache")
            .await
            .unwrap()
            .is_none()
    );
    let reqs = env.operator_requests();
    assert!(!reqs.is_empty());
    let outside: Vec<_> = reqs
        .iter()
        .filter(|r| !r.resource.is_empty() && r.namespace != "a" && r.namespace != "b")
        .map(|r| format!("{} {} ns={:?}", r.verb, resource_of(r), r.namespace))
        .collect();
    assert!(outside.is_empty(), "requests outside a,b: {outside:?}");
    assert_eq!(
        op.metric("memcached_operator_managed_objects{kind=\"Memcached\"}")
            .await,
        Some(2.0)
    );
}
