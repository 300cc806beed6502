//! End to end: two operator replicas with leader election on one Lease. Only the leader
//! reconciles; when it is killed (SIGKILL, no chance to release) the other takes over after the
//! lease expires; SIGTERM makes a leader exit 0 and release the lease. Both replicas run as the
//! ServiceAccount of the newest released CSV, with the permissions OLM grants from it, against
//! a stand-in that authorizes with RBAC: the Lease and event calls must never be refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;
use crate::harness::operator_olm as olm;

use std::time::Instant;

use harness::*;
use kube::api::{Api, PostParams};
use memcached_api::v1;

const NS: &str = "cache";
const SUCCESS: &str = "memcached_operator_reconciliations_total{result=\"success\"}";
const ERRORS: &str = "memcached_operator_reconciliations_total{result=\"error\"}";

async fn create_and_wait(env: &Env, name: &str) {
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &v1::Memcached::new(name, v1::MemcachedSpec::default()),
    )
    .await
    .unwrap();
    eventually(&format!("{name} available"), 40, || async {
        let mc = api.get(name).await.ok()?;
        mc.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
            .then_some(())
    })
    .await;
}

fn holder(env: &Env) -> Option<String> {
    env.standin
        .object(
            "coordination.k8s.io",
            "leases",
            OPERATOR_NS,
            "memcached-operator-leader",
        )?
        .pointer("/spec/holderIdentity")?
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_a_standby_takes_over() {
    let env = Env::start_rbac(&[NS]).await;
    let csv = olm::released_csv(&olm::newest_released_version());
    olm::install_olm_rbac(
        &env.client,
        &olm::olm_rbac(&csv, OPERATOR_NS, &olm::TargetNamespaces::All),
    )
    .await;
    let sa = olm::deployment_service_account(&csv);
    let kubeconfig = env.service_account_kubeconfig(OPERATOR_NS, &sa);
    let opts = |name| OperatorOptions {
        name,
        webhook: false,
        kubeconfig: Some(kubeconfig.clone()),
        ..Default::default()
    };
    let mut ops = vec![
        Operator::spawn(&env, opts("replica-a")),
        Operator::spawn(&env, opts("replica-b")),
    ];
    for op in &ops {
        op.wait_ready().await;
    }
    let leader = eventually("one leader", 30, || async {
        let a = ops[0].is_leader().await;
        let b = ops[1].is_leader().await;
        match (a, b) {
            (true, false) => Some(0),
            (false, true) => Some(1),
            (true, true) => panic!("two leaders at once"),
            _ => None,
        }
    })
    .await;
    let standby = 1 - leader;
    assert_eq!(holder(&env).as_deref(), Some(ops[leader].name.as_str()));

    create_and_wait(&env, "first").await;
    assert!(ops[leader].metric(SUCCESS).await.unwrap() > 0.0);
    assert_eq!(
        ops[standby].metric(SUCCESS).await,
        Some(0.0),
        "the standby reconciled"
    );
    assert_eq!(ops[standby].metric(ERRORS).await, Some(0.0));
    assert!(!ops[standby].is_leader().await);

    // Kill the leader without a chance to release the lease.
    ops[leader].signal("KILL");
    ops[leader].wait_exit(10).await;
    let killed = Instant::now();
    eventually("the standby takes over", 30, || async {
        ops[standby].is_leader().await.then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    // Lease duration is 4s: the standby waits for expiry, never earlier than the lease allows.
    eprintln!("takeover after {takeover:?}");
    assert_eq!(holder(&env).as_deref(), Some(ops[standby].name.as_str()));
    create_and_wait(&env, "second").await;
    assert!(ops[standby].metric(SUCCESS).await.unwrap() > 0.0);

    // SIGTERM: clean exit, lease released.
    ops[standby].signal("TERM");
    let status = ops[standby].wait_exit(30).await;
    assert!(status.success(), "{status:?}\n{}", ops[standby].log_text());
    assert_eq!(holder(&env), None, "the lease is still held after SIGTERM");
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{sa}");
    let denied = env.denied_requests(&user);
    assert!(denied.is_empty(), "requests refused to {user}: {denied:?}");
    assert!(
        env.standin
            .requests()
            .iter()
            .any(|r| r.user == user && r.resource == "leases" && r.authorization == "allow"),
        "the replicas used the Lease as {user}"
    );
}
