//! End to end: leadership changes hands, and every Memcached is still reconciled.
//!
//! Three operator replicas run as the ServiceAccount of the newest released CSV with exactly the
//! permissions OLM grants from it, against a stand-in that authorizes with RBAC. Many objects
//! exist before any replica starts. Then, round after round, the leader is taken away (SIGTERM,
//! SIGKILL, or SIGSTOP so that its Lease expires while it is frozen), and right after a standby
//! takes over, every object's `spec.replicas` changes, some objects are deleted and new ones are
//! created. Each round must end with every live object converged (its Deployment has the new
//! replica count, `status.observedGeneration` equals `metadata.generation`) and every deleted
//! object gone (its finalizer removed), whoever leads.
//!
//! The second test does the same through an upgrade as OLM performs it: replicas under the new
//! CSV's ServiceAccount start while the old CSV's replicas still run and hold the Lease, then
//! the old ones get SIGTERM.
//!
//! The third test shares the Lease with kube-lease-manager, the elector of the released 0.4.0
//! operator, as the two versions do while OLM replaces one by the other.
//!
//! Takeover times are printed (`takeover after ...`); BENCHMARKS.md keeps them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;
use crate::harness::operator_olm as olm;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::*;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use memcached_api::v1;
use serde_json::{Value, json};

const NS: &str = "cache";
const LEASE: &str = "memcached-operator-leader";
/// Objects that exist before any replica starts.
const OBJECTS: usize = 50;
/// Objects deleted, and as many created, right after each takeover.
const CHURN: usize = 5;
/// How long a round may take to converge: far above what a healthy leader needs (a few
/// seconds), far below "never".
const CONVERGE_SECS: u64 = 90;

fn holder(env: &Env) -> Option<String> {
    env.standin
        .object("coordination.k8s.io", "leases", OPERATOR_NS, LEASE)?
        .pointer("/spec/holderIdentity")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

async fn create(env: &Env, name: &str, replicas: i32) {
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    let spec = v1::MemcachedSpec {
        replicas,
        ..Default::default()
    };
    api.create(&PostParams::default(), &v1::Memcached::new(name, spec))
        .await
        .unwrap();
}

async fn set_replicas(env: &Env, name: &str, replicas: i32) {
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

async fn delete(env: &Env, name: &str) {
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

/// Why `name` is not converged to `replicas`, or None when it is.
fn not_converged(env: &Env, name: &str, replicas: i32) -> Option<String> {
    let Some(mc) = env
        .standin
        .object("cache.example.com", "memcacheds", NS, name)
    else {
        return Some("the Memcached is gone".into());
    };
    let generation = mc.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = mc
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if generation != observed {
        return Some(format!(
            "observedGeneration {observed:?}, generation {generation:?}"
        ));
    }
    let dep = env.standin.object("apps", "deployments", NS, name)?;
    let have = dep.pointer("/spec/replicas").and_then(Value::as_i64);
    (have != Some(i64::from(replicas)))
        .then(|| format!("Deployment replicas {have:?}, want {replicas}"))
}

/// What the test expects: live objects with their replica count, and deleted names.
struct Expected {
    live: Vec<(String, i32)>,
    deleted: Vec<String>,
}

impl Expected {
    /// Every way the cluster differs from the expectation.
    fn problems(&self, env: &Env) -> Vec<String> {
        let mut out = Vec::new();
        for (name, replicas) in &self.live {
            if let Some(why) = not_converged(env, name, *replicas) {
                out.push(format!("{name}: {why}"));
            }
        }
        for name in &self.deleted {
            if let Some(mc) = env
                .standin
                .object("cache.example.com", "memcacheds", NS, name)
            {
                let finalizers = mc.pointer("/metadata/finalizers").cloned();
                out.push(format!("{name}: still present, finalizers {finalizers:?}"));
            }
        }
        out
    }

    async fn wait(&self, env: &Env, what: &str, ops: &[Operator]) {
        let deadline = Instant::now() + Duration::from_secs(CONVERGE_SECS);
        loop {
            let problems = self.problems(env);
            if problems.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                let leader = holder(env);
                for op in ops {
                    eprintln!("----- {} log (tail) -----", op.name);
                    let log = op.log_text();
                    let lines: Vec<&str> = log.lines().collect();
                    eprintln!("{}", lines[lines.len().saturating_sub(40)..].join("\n"));
                }
                panic!(
                    "{what}: {} object(s) left unreconciled after {CONVERGE_SECS}s (lease held by \
                     {leader:?}):\n  {}",
                    problems.len(),
                    problems.join("\n  ")
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Right after a takeover: every live object gets `replicas`, the first `CHURN` are
    /// deleted and `CHURN` new ones created.
    async fn churn(&mut self, env: &Env, round: usize, replicas: i32) {
        let gone: Vec<(String, i32)> = self.live.drain(..CHURN).collect();
        for (name, _) in &gone {
            delete(env, name).await;
        }
        self.deleted.extend(gone.into_iter().map(|(n, _)| n));
        for (name, r) in &mut self.live {
            set_replicas(env, name, replicas).await;
            *r = replicas;
        }
        for i in 0..CHURN {
            let name = format!("mc-r{round}-{i}");
            create(env, &name, replicas).await;
            self.live.push((name, replicas));
        }
    }
}

/// A replica's options: the ServiceAccount's kubeconfig, no webhook (the client writes the
/// storage version), fast lease timing.
fn replica<'a>(name: &'a str, kubeconfig: &Path) -> OperatorOptions<'a> {
    OperatorOptions {
        name,
        webhook: false,
        kubeconfig: Some(kubeconfig.to_path_buf()),
        rust_log: "warn,operator=info,olmkit_runtime=info",
        ..Default::default()
    }
}

/// Waits until a replica other than `old` holds the Lease and says it leads; returns its index
/// and how long that took.
async fn next_leader(env: &Env, ops: &[Operator], old: &str, since: Instant) -> (usize, Duration) {
    let idx = eventually(&format!("a replica other than {old} leads"), 60, || async {
        let h = holder(env)?;
        if h == old {
            return None;
        }
        let i = ops.iter().position(|o| o.name == h)?;
        ops[i].is_leader().await.then_some(i)
    })
    .await;
    (idx, since.elapsed())
}

async fn install_csv_rbac(env: &Env, csv: &Value) -> PathBuf {
    olm::install_olm_rbac(
        &env.client,
        &olm::olm_rbac(csv, OPERATOR_NS, &olm::TargetNamespaces::All),
    )
    .await;
    let sa = olm::deployment_service_account(csv);
    env.service_account_kubeconfig(OPERATOR_NS, &sa)
}

fn assert_nothing_denied(env: &Env, csv: &Value) {
    let sa = olm::deployment_service_account(csv);
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{sa}");
    let denied = env.denied_requests(&user);
    assert!(denied.is_empty(), "requests refused to {user}: {denied:?}");
}

#[derive(Clone, Copy, Debug)]
enum Takeover {
    /// SIGTERM: the leader finishes in-flight reconciles and releases the Lease.
    Term,
    /// SIGKILL: the Lease stays held until it expires.
    Kill,
    /// SIGSTOP: the leader freezes, its Lease expires, a standby takes over; on SIGCONT the old
    /// leader must notice it lost the Lease and stop reconciling.
    Expire,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_is_reconciled_after_each_takeover() {
    let env = Env::start_rbac(&[NS]).await;
    let csv = olm::released_csv(&olm::newest_released_version());
    let kubeconfig = install_csv_rbac(&env, &csv).await;

    let mut expected = Expected {
        live: Vec::new(),
        deleted: Vec::new(),
    };
    for i in 0..OBJECTS {
        let name = format!("mc-{i}");
        create(&env, &name, 1).await;
        expected.live.push((name, 1));
    }

    let names: Vec<String> = (0..12).map(|i| format!("replica-{i}")).collect();
    let mut next_name = names.iter();
    let mut ops: Vec<Operator> = (0..3)
        .map(|_| Operator::spawn(&env, replica(next_name.next().unwrap(), &kubeconfig)))
        .collect();
    expected
        .wait(
            &env,
            "first leader, objects created before it started",
            &ops,
        )
        .await;

    let rounds = [
        Takeover::Term,
        Takeover::Kill,
        Takeover::Expire,
        Takeover::Term,
        Takeover::Kill,
        Takeover::Term,
    ];
    let mut frozen: Option<usize> = None;
    for (round, how) in rounds.into_iter().enumerate() {
        let old = eventually("a leader", 60, || async { holder(&env) }).await;
        let old_idx = ops.iter().position(|o| o.name == old).unwrap();
        let since = Instant::now();
        match how {
            Takeover::Term => ops[old_idx].signal("TERM"),
            Takeover::Kill => ops[old_idx].signal("KILL"),
            Takeover::Expire => ops[old_idx].signal("STOP"),
        }
        let (new_idx, took) = next_leader(&env, &ops, &old, since).await;
        eprintln!(
            "round {round}: {how:?} of {old}: takeover after {took:?} by {}",
            ops[new_idx].name
        );
        expected
            .churn(&env, round, i32::try_from(round).unwrap() + 2)
            .await;
        expected
            .wait(&env, &format!("round {round} ({how:?} of {old})"), &ops)
            .await;

        match how {
            Takeover::Term => {
                let status = ops[old_idx].wait_exit(40).await;
                assert!(status.success(), "{old} after SIGTERM: {status:?}");
                assert!(
                    ops[old_idx].log_text().contains("released the lease"),
                    "{old} did not release the Lease:\n{}",
                    ops[old_idx].log_text()
                );
            }
            Takeover::Kill => {
                ops[old_idx].wait_exit(10).await;
            }
            Takeover::Expire => {
                ops[old_idx].signal("CONT");
                eventually(&format!("{old} steps down after SIGCONT"), 30, || async {
                    (!ops[old_idx].is_leader().await).then_some(())
                })
                .await;
                frozen = Some(old_idx);
            }
        }
        if !matches!(how, Takeover::Expire) {
            let fresh = Operator::spawn(&env, replica(next_name.next().unwrap(), &kubeconfig));
            // Until it serves /readyz its SIGTERM handler may not be installed yet.
            fresh.wait_ready().await;
            ops[old_idx] = fresh;
        }
    }

    // The replica that was frozen and stepped down is still a candidate: make it the only one.
    let thawed = frozen.expect("an Expire round ran");
    let others: BTreeSet<usize> = (0..ops.len()).filter(|&i| i != thawed).collect();
    for &i in &others {
        ops[i].signal("TERM");
    }
    for &i in &others {
        let status = ops[i].wait_exit(40).await;
        assert!(status.success(), "{}: {status:?}", ops[i].name);
    }
    eventually("the thawed replica leads again", 60, || async {
        ops[thawed].is_leader().await.then_some(())
    })
    .await;
    expected.churn(&env, rounds.len(), 1).await;
    expected
        .wait(&env, "the thawed replica leading again", &ops)
        .await;
    assert_nothing_denied(&env, &csv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_is_reconciled_through_an_upgrade_with_overlapping_replicas() {
    let env = Env::start_rbac(&[NS]).await;
    // The old CSV's replicas run with the released CSV's RBAC, the new ones with the roles the
    // next release will carry (generated from the operator's API-call table), under another
    // ServiceAccount, as two CSVs of an OLM upgrade do.
    let old_csv = olm::released_csv(&olm::newest_released_version());
    let old_kubeconfig = install_csv_rbac(&env, &old_csv).await;
    let new_csv = olm::csv_from_generated_roles("memcached-operator-next");
    let new_kubeconfig = install_csv_rbac(&env, &new_csv).await;

    let mut expected = Expected {
        live: Vec::new(),
        deleted: Vec::new(),
    };
    for i in 0..OBJECTS {
        let name = format!("mc-{i}");
        create(&env, &name, 1).await;
        expected.live.push((name, 1));
    }
    let mut ops: Vec<Operator> = ["old-0", "old-1"]
        .into_iter()
        .map(|n| Operator::spawn(&env, replica(n, &old_kubeconfig)))
        .collect();
    expected.wait(&env, "old replicas", &ops).await;

    // OLM creates the new Deployment while the old one still runs.
    for n in ["new-0", "new-1"] {
        ops.push(Operator::spawn(&env, replica(n, &new_kubeconfig)));
    }
    for op in &ops[2..] {
        op.wait_ready().await;
    }
    expected.churn(&env, 0, 3).await;
    expected
        .wait(&env, "old and new replicas side by side", &ops)
        .await;

    // Then it deletes the old Deployment: its pods get SIGTERM.
    let old_leader = holder(&env).unwrap();
    let since = Instant::now();
    ops[0].signal("TERM");
    ops[1].signal("TERM");
    let (idx, took) = next_leader(&env, &ops, &old_leader, since).await;
    eprintln!(
        "upgrade: takeover after {took:?} by {} (old leader {old_leader})",
        ops[idx].name
    );
    assert!(ops[idx].name.starts_with("new-"), "{}", ops[idx].name);
    expected.churn(&env, 1, 4).await;
    expected
        .wait(&env, "new replicas after the old ones stopped", &ops)
        .await;
    for op in &mut ops[..2] {
        let status = op.wait_exit(40).await;
        assert!(status.success(), "{}: {status:?}", op.name);
    }
    assert_nothing_denied(&env, &old_csv);
    assert_nothing_denied(&env, &new_csv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_shared_with_the_elector_of_0_4_0() {
    use kube_lease_manager::LeaseManagerBuilder;
    let env = Env::start_rbac(&[NS]).await;
    let csv = olm::released_csv(&olm::newest_released_version());
    let kubeconfig = install_csv_rbac(&env, &csv).await;
    let old_elector = |identity: &'static str| {
        let client = env.client.clone();
        async move {
            LeaseManagerBuilder::new(client, LEASE)
                .with_namespace(OPERATOR_NS)
                .with_identity(identity)
                .with_duration(4)
                .with_grace(2)
                .build()
                .await
                .unwrap()
                .watch()
                .await
        }
    };
    // The old version leads.
    let (mut old_leads, old_task) = old_elector("old-0").await;
    tokio::time::timeout(Duration::from_secs(20), old_leads.wait_for(|l| *l))
        .await
        .expect("kube-lease-manager acquires the Lease")
        .unwrap();
    let mut new = Operator::spawn(&env, replica("new-0", &kubeconfig));
    new.wait_ready().await;
    // Several lease durations: the new version must wait while the old one renews.
    for _ in 0..30 {
        assert!(
            !new.is_leader().await,
            "took a Lease kube-lease-manager renews"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert_eq!(holder(&env).as_deref(), Some("old-0"));

    // The old version stops and releases: the new one takes over within a retry period.
    let since = Instant::now();
    drop(old_leads);
    old_task.await.unwrap().unwrap();
    let (_, took) = next_leader(&env, std::slice::from_ref(&new), "old-0", since).await;
    eprintln!("from kube-lease-manager: takeover after {took:?}");

    // And the other way round: the new version releases, kube-lease-manager takes it.
    let (mut old_leads, _old_task) = old_elector("old-1").await;
    new.signal("TERM");
    assert!(new.wait_exit(40).await.success());
    tokio::time::timeout(Duration::from_secs(20), old_leads.wait_for(|l| *l))
        .await
        .expect("kube-lease-manager takes the released Lease")
        .unwrap();
    assert_eq!(holder(&env).as_deref(), Some("old-1"));
}
