//! End to end: the real `operator run` binary (leader election on, conversion webhook on a test
//! certificate) against the Kubernetes API stand-in with workload simulation. Memcached objects of
//! every served version are created, scaled, broken, fixed and deleted; the test checks the
//! Deployment, Service, status, conditions, events, finalizer removal and owner-based cleanup,
//! that a reconcile of an unchanged object writes nothing, that a bad spec is reported without a
//! retry loop, and that every request the operator made is allowed by the generated RBAC roles,
//! which in turn grant nothing the operator did not use.
//!
//! The stand-in authorizes with RBAC, and the operator runs as the ServiceAccount of the newest
//! released bundle's CSV with exactly the permissions OLM grants from that CSV: no request of
//! it may be refused. Two shorter tests pin the two sides of issue 14: the 0.3.0 CSV's role
//! cannot create a Deployment (a server-side apply that creates is authorized as create too),
//! and the roles generated from `operator::rbac` and the runtime can.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;
use crate::harness::operator_olm as olm;

use std::collections::BTreeSet;
use std::time::Duration;

use harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use memcached_api::{v1, v1alpha1, v1beta1};
use serde_json::{Value, json};

const NS: &str = "cache";

async fn deployment(env: &Env, name: &str) -> Option<Deployment> {
    Api::<Deployment>::namespaced(env.client.clone(), NS)
        .get_opt(name)
        .await
        .unwrap()
}

async fn service(env: &Env, name: &str) -> Option<Service> {
    Api::<Service>::namespaced(env.client.clone(), NS)
        .get_opt(name)
        .await
        .unwrap()
}

fn args(d: &Deployment) -> Vec<String> {
    d.spec.template.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap()
}

fn condition<'a>(
    s: &'a v1::MemcachedStatus,
    t: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    s.conditions.iter().find(|c| c.type_ == t)
}

/// Waits until the v1 view of `name` satisfies `check`, returning it.
async fn wait_v1(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&v1::Memcached) -> bool,
) -> v1::Memcached {
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    eventually(&format!("{name}: {what}"), 30, || {
        let api = api.clone();
        let check = &check;
        async move {
            let mc = api.get_opt(name).await.ok()??;
            check(&mc).then_some(mc)
        }
    })
    .await
}

fn available(mc: &v1::Memcached) -> bool {
    mc.status
        .as_ref()
        .and_then(|s| condition(s, "Available"))
        .is_some_and(|c| c.status == "True" && c.reason == "AllReplicasAvailable")
        && mc.status.as_ref().and_then(|s| s.observed_generation) == mc.metadata.generation
}

async fn wait_events(env: &Env, name: &str, want: &[&str]) -> Vec<String> {
    eventually(&format!("events {want:?} on {name}"), 20, || async {
        let got = env.event_reasons(NS, name).await;
        want.iter()
            .all(|w| got.iter().any(|g| g == w))
            .then_some(got)
    })
    .await
}

/// Creates what OLM creates from `csv` for an OperatorGroup targeting `targets` with the
/// operator in OPERATOR_NS, and starts the operator as the CSV's ServiceAccount. Returns it and
/// its user.
async fn spawn_under_csv(
    env: &Env,
    csv: &Value,
    targets: &olm::TargetNamespaces,
) -> (Operator, String) {
    let rbac = olm::olm_rbac(csv, OPERATOR_NS, targets);
    olm::install_olm_rbac(&env.client, &rbac).await;
    let sa = olm::deployment_service_account(csv);
    let kubeconfig = env.service_account_kubeconfig(OPERATOR_NS, &sa);
    let op = Operator::spawn(
        env,
        OperatorOptions {
            kubeconfig: Some(kubeconfig),
            ..Default::default()
        },
    );
    (op, format!("system:serviceaccount:{OPERATOR_NS}:{sa}"))
}

/// No request of `user` was refused, and the operator logged no 403.
fn assert_never_forbidden(env: &Env, op: &Operator, user: &str) {
    let denied = env.denied_requests(user);
    assert!(denied.is_empty(), "requests refused to {user}: {denied:?}");
    let log = op.log_text();
    let forbidden: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.to_lowercase().contains("forbidden")
                || l.split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|w| w == "403")
        })
        .collect();
    assert!(forbidden.is_empty(), "the operator logged: {forbidden:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_lifecycle_across_versions() {
    let env = Env::start_rbac(&[NS]).await;
    // Every request, kept across the clears below, for the RBAC check at the end.
    let mut log = Vec::new();
    let version = olm::newest_released_version();
    let (mut op, user) = spawn_under_csv(
        &env,
        &olm::released_csv(&version),
        &olm::TargetNamespaces::All,
    )
    .await;
    eprintln!("running the operator under the permissions of the {version} CSV as {user}");
    op.wait_ready().await;
    eventually("operator is leader", 30, || async {
        op.is_leader().await.then_some(())
    })
    .await;

    // ---- v1: create ----
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    let mut spec = v1::MemcachedSpec {
        replicas: 2,
        ..Default::default()
    };
    spec.memcached.extra_args = vec!["-vv".into()];
    api.create(&PostParams::default(), &v1::Memcached::new("web", spec))
        .await
        .unwrap();
    let mc = wait_v1(&env, "web", "available with 2 pods", |m| {
        available(m) && m.status.as_ref().is_some_and(|s| s.nodes.len() == 2)
    })
    .await;
    let st = mc.status.clone().unwrap();
    assert_eq!(st.replicas, Some(2));
    assert_eq!(st.ready_replicas, Some(2));
    let mut sorted = st.nodes.clone();
    sorted.sort();
    assert_eq!(st.nodes, sorted, "status.nodes are sorted");
    assert_eq!(
        st.selector.as_deref(),
        Some("app.kubernetes.io/instance=web,app.kubernetes.io/name=memcached")
    );
    assert_eq!(
        condition(&st, "Progressing").unwrap().reason,
        "RolloutComplete"
    );
    assert_eq!(condition(&st, "Degraded").unwrap().status, "False");
    for c in &st.conditions {
        assert_eq!(c.observed_generation, mc.metadata.generation);
    }
    assert!(
        mc.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == memcached_api::FINALIZER))
    );

    let d = deployment(&env, "web").await.expect("Deployment web");
    assert_eq!(d.spec.replicas, Some(2));
    assert_eq!(
        args(&d),
        ["-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-vv"]
    );
    let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.uid, mc.metadata.uid.clone().unwrap());
    assert_eq!(owner.controller, Some(true));
    let pod = d.spec.template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0,
        "104Mi"
    );
    let svc = service(&env, "web").await.expect("Service web");
    let port = &svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!(port.name.as_deref(), Some("memcached"));
    assert_eq!(port.port, 11211);
    assert_eq!(
        svc.spec.as_ref().unwrap().type_.as_deref(),
        Some("ClusterIP")
    );
    assert_eq!(
        svc.metadata.owner_references.as_ref().unwrap()[0].uid,
        mc.metadata.uid.clone().unwrap()
    );
    wait_events(&env, "web", &["Created", "Available"]).await;

    // ---- idempotency: an unrelated change triggers a reconcile that writes nothing ----
    // Reconciles started by the rollout (the stand-in's Deployment status steps) may still be
    // writing: wait until the operator has been quiet for a while, so that every write counted
    // below is the annotation's reconcile's.
    wait_quiet(&env, Duration::from_millis(1500)).await;
    let before = op
        .metric("memcached_operator_reconciliations_total{result=\"success\"}")
        .await
        .unwrap();
    log.extend(env.standin.requests());
    env.standin.clear_requests();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"example.com/touched": "1"}}})),
    )
    .await
    .unwrap();
    eventually("a reconcile after the annotation change", 20, || async {
        let n = op
            .metric("memcached_operator_reconciliations_total{result=\"success\"}")
            .await?;
        (n > before).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes: Vec<_> = env
        .operator_requests()
        .into_iter()
        .filter(|r| is_write(r) && r.resource != "leases")
        .map(|r| format!("{} {} {}", r.verb, resource_of(&r), r.name))
        .collect();
    assert!(
        writes.is_empty(),
        "an unchanged reconcile wrote: {writes:?}"
    );

    // ---- v1beta1 and v1alpha1 through the conversion webhook ----
    let beta_api: Api<v1beta1::Memcached> = Api::namespaced(env.client.clone(), NS);
    beta_api
        .create(
            &PostParams::default(),
            &v1beta1::Memcached::new(
                "beta",
                v1beta1::MemcachedSpec {
                    replicas: 1,
                    image: memcached_api::DEFAULT_IMAGE.into(),
                    memory_limit_mib: 128,
                },
            ),
        )
        .await
        .unwrap();
    let alpha_api: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), NS);
    alpha_api
        .create(
            &PostParams::default(),
            &v1alpha1::Memcached::new("alpha", v1alpha1::MemcachedSpec { size: 3 }),
        )
        .await
        .unwrap();
    wait_v1(&env, "beta", "available", available).await;
    wait_v1(&env, "alpha", "available", available).await;
    let d = deployment(&env, "beta").await.unwrap();
    assert_eq!(args(&d)[3], "128");
    assert_eq!(
        deployment(&env, "alpha").await.unwrap().spec.replicas,
        Some(3)
    );
    // Status reads back in the older versions, converted by the webhook.
    let beta = beta_api.get("beta").await.unwrap();
    let bs = beta.status.unwrap();
    assert_eq!(bs.ready_replicas, Some(1));
    assert!(
        bs.conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
    );
    let alpha = alpha_api.get("alpha").await.unwrap();
    assert_eq!(alpha.status.unwrap().nodes.len(), 3);

    // ---- scale, in three ways ----
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    wait_v1(&env, "web", "4 ready", |m| {
        available(m) && m.status.as_ref().and_then(|s| s.ready_replicas) == Some(4)
    })
    .await;
    assert_eq!(
        deployment(&env, "web").await.unwrap().spec.replicas,
        Some(4)
    );
    // The scale subresource (kubectl scale, HPA).
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    wait_v1(&env, "web", "3 ready after /scale", |m| {
        available(m) && m.status.as_ref().and_then(|s| s.ready_replicas) == Some(3)
    })
    .await;
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.status.as_ref().map(|s| s.replicas), Some(3));
    // v1alpha1 spec.size.
    alpha_api
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 1}})),
        )
        .await
        .unwrap();
    eventually("alpha scaled to 1", 30, || async {
        (deployment(&env, "alpha").await?.spec.replicas == Some(1)).then_some(())
    })
    .await;
    // An impossible value through the oldest version: a negative size. The schema (minimum 0,
    // on every served version) refuses it at admission, as a real API server does, with the
    // field named; the operator never sees it (its own InvalidReplicas check, for objects
    // stored before a schema had the bound, is unit-tested in memcached-api's validation).
    let refused = alpha_api
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": -1}})),
        )
        .await
        .expect_err("a negative size is refused");
    match refused {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(s.message.contains("spec.size"), "{}", s.message);
        }
        other => panic!("expected a 422, got {other}"),
    }
    assert_eq!(
        deployment(&env, "alpha").await.unwrap().spec.replicas,
        Some(1)
    );
    let reasons = wait_events(&env, "web", &["DeploymentUpdated"]).await;
    assert!(
        reasons.iter().filter(|r| *r == "DeploymentUpdated").count() >= 1,
        "{reasons:?}"
    );

    // ---- break the pods, then fix them ----
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"image": "registry.example.com/fail/memcached:1"}})),
    )
    .await
    .unwrap();
    let broken = wait_v1(&env, "web", "Degraded PodsFailing", |m| {
        m.status
            .as_ref()
            .and_then(|s| condition(s, "Degraded"))
            .is_some_and(|c| c.status == "True" && c.reason == "PodsFailing")
    })
    .await;
    let msg = &condition(broken.status.as_ref().unwrap(), "Degraded")
        .unwrap()
        .message;
    assert!(msg.contains("CrashLoopBackOff"), "{msg}");
    wait_events(&env, "web", &["PodsFailing"]).await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"image": memcached_api::DEFAULT_IMAGE}})),
    )
    .await
    .unwrap();
    wait_v1(&env, "web", "recovered", |m| {
        available(m)
            && m.status
                .as_ref()
                .and_then(|s| condition(s, "Degraded"))
                .is_some_and(|c| c.status == "False")
    })
    .await;
    wait_events(&env, "web", &["Recovered"]).await;

    // ---- bad input: Degraded with a reason, an event, the running pods kept, no retry loop ----
    let good_deployment = deployment(&env, "web").await.unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "image": "Not A Valid Image!",
            "resources": {"limits": {"memory": "64Mi"}},
        }})),
    )
    .await
    .unwrap();
    let bad = wait_v1(&env, "web", "Degraded InvalidImage", |m| {
        m.status
            .as_ref()
            .and_then(|s| condition(s, "Degraded"))
            .is_some_and(|c| c.status == "True" && c.reason == "InvalidImage")
            && m.status.as_ref().and_then(|s| s.observed_generation) == m.metadata.generation
    })
    .await;
    let msg = &condition(bad.status.as_ref().unwrap(), "Degraded")
        .unwrap()
        .message;
    assert!(
        msg.contains("spec.image") && msg.contains("spec.resources.limits.memory"),
        "{msg}"
    );
    wait_events(&env, "web", &["InvalidImage"]).await;
    let reconciles = op
        .metric("memcached_operator_reconciliations_total{result=\"success\"}")
        .await
        .unwrap();
    log.extend(env.standin.requests());
    env.standin.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during: Vec<_> = env
        .operator_requests()
        .into_iter()
        .filter(|r| r.resource != "leases" && r.verb != "watch")
        .map(|r| format!("{} {} {}", r.verb, resource_of(&r), r.name))
        .collect();
    assert!(
        during.is_empty(),
        "requests while waiting for a spec fix: {during:?}"
    );
    let after = op
        .metric("memcached_operator_reconciliations_total{result=\"success\"}")
        .await
        .unwrap();
    assert!(
        after - reconciles <= 1.0,
        "reconciles kept running: {reconciles} -> {after}"
    );
    let kept = deployment(&env, "web").await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        good_deployment.metadata.resource_version
    );
    // Fixing the spec resumes.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "image": memcached_api::DEFAULT_IMAGE,
            "resources": {"limits": {"memory": "1Gi"}},
        }})),
    )
    .await
    .unwrap();
    wait_v1(&env, "web", "healthy again", |m| {
        available(m)
            && m.status
                .as_ref()
                .and_then(|s| condition(s, "Degraded"))
                .is_some_and(|c| c.status == "False")
    })
    .await;
    let limits = deployment(&env, "web")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap()
        .containers[0]
        .resources
        .clone()
        .unwrap()
        .limits
        .unwrap();
    assert_eq!(limits["memory"].0, "1Gi");

    // ---- delete: the finalizer deletes the children, waits, then lets go ----
    api.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("web and its children gone", 30, || async {
        let gone = api.get_opt("web").await.ok()?.is_none()
            && deployment(&env, "web").await.is_none()
            && service(&env, "web").await.is_none();
        gone.then_some(())
    })
    .await;
    let reasons = env.event_reasons(NS, "web").await;
    assert!(reasons.iter().any(|r| r == "Deleting"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "CleanedUp"), "{reasons:?}");
    let deletes: BTreeSet<String> = env
        .operator_requests()
        .into_iter()
        .filter(|r| r.verb == "delete")
        .map(|r| format!("{} {}", r.resource, r.name))
        .collect();
    assert!(
        deletes.contains("deployments web") && deletes.contains("services web"),
        "{deletes:?}"
    );

    // ---- least privilege: every request allowed, every granted verb used ----
    log.extend(env.standin.requests());
    check_rbac(&log);
    assert!(
        log.iter().any(|r| r.user == user
            && r.checks.iter().any(|c| c.attributes.verb == "create"
                && c.attributes.resource == "deployments"
                && c.allowed)),
        "the operator created its Deployments as {user}"
    );
    let refused: Vec<String> = log
        .iter()
        .filter(|r| r.user == user && (r.denied() || r.code == 403))
        .map(|r| format!("{} {} {} ({})", r.verb, resource_of(r), r.name, r.code))
        .collect();
    assert!(
        refused.is_empty(),
        "requests refused to {user}: {refused:?}"
    );
    assert_never_forbidden(&env, &op, &user);

    // ---- graceful stop: SIGTERM, exit 0, lease released ----
    op.signal("TERM");
    let status = op.wait_exit(30).await;
    assert!(
        status.success(),
        "exit status {status:?}; log:\n{}",
        op.log_text()
    );
    let lease = env
        .standin
        .object(
            "coordination.k8s.io",
            "leases",
            OPERATOR_NS,
            "memcached-operator-leader",
        )
        .unwrap();
    assert!(
        lease
            .pointer("/spec/holderIdentity")
            .is_none_or(|h| h.is_null()),
        "lease still held: {lease}"
    );

    // ---- owner-based cleanup without the operator: drop the finalizer by hand ----
    // (through v1: with the operator gone, so is the conversion webhook.)
    api.delete("beta", &DeleteParams::default()).await.unwrap();
    let stuck = api.get("beta").await.unwrap();
    assert!(
        stuck.metadata.deletion_timestamp.is_some(),
        "the finalizer holds the object"
    );
    assert!(deployment(&env, "beta").await.is_some());
    api.patch(
        "beta",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(
        "beta's children collected through their owner references",
        20,
        || async {
            (deployment(&env, "beta").await.is_none() && service(&env, "beta").await.is_none())
                .then_some(())
        },
    )
    .await;
}

/// Every authorization check the stand-in made for the operator's requests (each request's own
/// verb, the create of an apply that created, the admission plugin's finalizers update) is
/// allowed by the generated roles, and every granted verb was checked during this test.
fn check_rbac(log: &[kube_standin::RecordedRequest]) {
    let manager = olmkit_runtime::rbac::manager_role(operator::rbac::PERMISSIONS)
        .rules
        .unwrap();
    let election = olmkit_runtime::rbac::leader_election_role().rules.unwrap();
    let mut used = BTreeSet::new();
    let mut denied = Vec::new();
    for r in log {
        if !r.user_agent.starts_with(OPERATOR_AGENT) || r.resource.is_empty() {
            continue;
        }
        for c in r.checks.iter().filter(|c| c.attributes.resource_request) {
            let a = &c.attributes;
            let resource = if a.subresource.is_empty() {
                a.resource.clone()
            } else {
                format!("{}/{}", a.resource, a.subresource)
            };
            let allowed = if a.resource == "leases" {
                a.namespace == OPERATOR_NS
                    && olmkit_runtime::rbac::allows(&election, &a.group, &resource, &a.verb)
            } else {
                olmkit_runtime::rbac::allows(&manager, &a.group, &resource, &a.verb)
            };
            if !allowed {
                denied.push(format!(
                    "{} {}/{} ns={}",
                    a.verb, a.group, resource, a.namespace
                ));
            }
            used.insert((a.group.clone(), resource, a.verb.clone()));
        }
    }
    assert!(
        denied.is_empty(),
        "requests the roles do not allow: {denied:?}"
    );
    let mut unused = Vec::new();
    for p in operator::rbac::PERMISSIONS
        .iter()
        .chain(olmkit_runtime::rbac::LEADER_ELECTION)
    {
        for verb in p.verbs() {
            if !used.contains(&(
                p.group.to_string(),
                p.resource.to_string(),
                verb.to_string(),
            )) {
                unused.push(format!("{verb} {}/{}", p.group, p.resource));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "granted but never used: {unused:?}; used: {used:?}"
    );
}

/// Issue 14: under the 0.3.0 CSV (patch but no create on deployments and services) the
/// reconcile's server-side apply of a new Deployment is refused on its create check, so no
/// Deployment ever appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_0_3_0_role_cannot_create_the_deployment() {
    let env = Env::start_rbac(&[NS]).await;
    let (op, user) = spawn_under_csv(
        &env,
        &olm::released_csv("0.3.0"),
        &olm::TargetNamespaces::All,
    )
    .await;
    op.wait_ready().await;
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &v1::Memcached::new("web", v1::MemcachedSpec::default()),
    )
    .await
    .unwrap();
    let refused = eventually("the Deployment apply refused with a 403", 30, || async {
        env.standin.requests().into_iter().find(|r| {
            r.user == user && r.resource == "deployments" && r.verb == "patch" && r.code == 403
        })
    })
    .await;
    let checks: Vec<(&str, bool)> = refused
        .checks
        .iter()
        .map(|c| (c.attributes.verb.as_str(), c.allowed))
        .collect();
    assert_eq!(checks, [("patch", true), ("create", false)], "{refused:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        deployment(&env, "web").await.is_none(),
        "no Deployment under 0.3.0's role"
    );
}

/// The roles generated from `operator::rbac` and the runtime (what the next release carries) let the
/// operator elect itself leader, create the children and publish events, with no 403. The
/// OperatorGroup targets one namespace here, so the leader-election rules come only from the
/// Role OLM makes in the operator's namespace from `permissions` (not lifted cluster-wide).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_roles_suffice() {
    let env = Env::start_rbac(&[NS]).await;
    let csv = olm::csv_from_generated_roles("memcached-operator-controller-manager");
    let targets = olm::TargetNamespaces::Some(vec![NS.to_string()]);
    let (op, user) = spawn_under_csv(&env, &csv, &targets).await;
    op.wait_ready().await;
    eventually("operator is leader", 30, || async {
        op.is_leader().await.then_some(())
    })
    .await;
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    api.create(
        &PostParams::default(),
        &v1::Memcached::new("web", v1::MemcachedSpec::default()),
    )
    .await
    .unwrap();
    wait_v1(&env, "web", "available", available).await;
    assert!(deployment(&env, "web").await.is_some());
    assert!(service(&env, "web").await.is_some());
    wait_events(&env, "web", &["Created", "Available"]).await;
    assert_never_forbidden(&env, &op, &user);
}

/// Waits (at most 30 s) until the operator has made no write, leases aside, for `quiet`.
async fn wait_quiet(env: &Env, quiet: Duration) {
    let writes = || {
        env.operator_requests()
            .into_iter()
            .filter(|r| is_write(r) && r.resource != "leases")
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = writes();
    let mut since = std::time::Instant::now();
    while since.elapsed() < quiet {
        assert!(
            std::time::Instant::now() < deadline,
            "the operator kept writing for 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = writes();
        if now != seen {
            seen = now;
            since = std::time::Instant::now();
        }
    }
}
