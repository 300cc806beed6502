//! `bundle-tool install`, `status`, `upgrade` and `approve` against a Kubernetes API stand-in
//! with the real OLM CRDs, while a fake OLM (`harness/cluster_harness.rs`) plays OLM's part.
//! The tests check the exit codes, what the CLI prints, and the API calls it makes (request log).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::cluster_harness as harness;

use harness::{Env, FakeOlm, Scenario, catalog_dir, olm_crds, text, without_times};
use olmkit_cluster::olm::{
    csv_resource, install_plan_resource, operator_group_resource, subscription_resource,
};
use serde_json::json;

const IMAGE: &str = "localhost:5000/memcached-catalog:v0.3.0";

fn install_args<'a>(catalog: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "install",
        "--catalog-image",
        IMAGE,
        "--package",
        "memcached-operator",
        "--namespace",
        "operators",
        "--catalog-dir",
        catalog,
        "--poll-interval",
        "50ms",
        "--settle",
        "300ms",
        "--timeout",
        "30s",
    ];
    v.extend_from_slice(extra);
    v
}

/// A Manual Subscription to alpha that starts at 0.1.0 (each upgrade waits for an approval).
const MANUAL_FROM_0_1_0: &[&str] = &[
    "--channel",
    "alpha",
    "--approval",
    "Manual",
    "--starting-csv",
    "memcached-operator.v0.1.0",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_applies_catalog_source_operator_group_subscription_and_waits_for_the_csv() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    let cat = catalog_dir().display().to_string();

    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    // stdout: the CSV as `kubectl get csv` shows it (a fresh install keeps the bundle's own
    // replaces, as real OLM does: tests/fixtures/olm-traces/install-automatic.jsonl).
    assert_eq!(
        stdout,
        "NAME                        DISPLAY              VERSION   REPLACES                    PHASE\n\
         memcached-operator.v0.3.0   Memcached Operator   0.3.0     memcached-operator.v0.2.0   Succeeded\n"
    );
    // stderr: why this OperatorGroup, what OLM installs, what was applied, progress.
    assert!(stderr.contains("OperatorGroup: memcached-operator.v0.3.0 supports AllNamespaces, so the OperatorGroup targets every namespace"), "{stderr}");
    assert!(
        stderr.contains(
            "OLM will install memcached-operator.v0.3.0 (version 0.3.0), the head of channel stable"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("applied Namespace operators"));
    assert!(stderr.contains("applied Subscription operators/memcached-operator"));
    assert!(stderr.contains("CatalogSource operators/memcached-operator-catalog: READY"));
    assert!(
        stderr.contains("InstallPlan operators/install-1: Installing (memcached-operator.v0.3.0)")
    );
    assert!(stderr.contains(
        "ClusterServiceVersion operators/memcached-operator.v0.3.0: Installing (InstallWaiting)"
    ));
    assert!(stderr.contains("install complete: memcached-operator.v0.3.0 is installed (phase Succeeded) in namespace operators"));

    // The writes: one server-side apply per object, in order, all by field manager bundle-tool.
    let writes = env.cli_writes();
    let expected: Vec<(&str, &str, &str, &str)> = vec![
        ("patch", "namespaces", "operators", "operators"),
        (
            "patch",
            "catalogsources",
            "operators",
            "memcached-operator-catalog",
        ),
        ("patch", "operatorgroups", "operators", "memcached-operator"),
        ("patch", "subscriptions", "operators", "memcached-operator"),
    ];
    assert_eq!(
        writes
            .iter()
            .map(|w| (w.0.as_str(), w.1.as_str(), w.2.as_str(), w.3.as_str()))
            .collect::<Vec<_>>(),
        expected
    );
    for w in &writes {
        assert_eq!(w.4, "application/apply-patch+yaml", "{w:?}");
        assert_eq!(w.5, "bundle-tool", "{w:?}");
    }
    let og = env
        .get(
            &operator_group_resource(),
            Some("operators"),
            "memcached-operator",
        )
        .await
        .unwrap();
    assert!(og["spec"].get("targetNamespaces").is_none());

    // Re-running install is an idempotent apply: the Subscription's generation stays.
    let before = env
        .get(
            &subscription_resource(),
            Some("operators"),
            "memcached-operator",
        )
        .await
        .unwrap();
    env.standin.clear_requests();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = env
        .get(
            &subscription_resource(),
            Some("operators"),
            "memcached-operator",
        )
        .await
        .unwrap();
    assert_eq!(
        before["metadata"]["generation"],
        after["metadata"]["generation"]
    );
    assert_eq!(
        before["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );
    // The namespace exists now, so it is not applied again.
    assert!(env.cli_writes().iter().all(|w| w.1 != "namespaces"));

    // What a cluster admin sees with kubectl.
    let out = env.kubectl(&["get", "csv", "-n", "operators"]).await;
    let table = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "DISPLAY", "VERSION", "RELEASE", "REPLACES", "PHASE"]
    );
    assert!(table.contains("memcached-operator.v0.3.0"), "{table}");
    assert!(table.contains("Succeeded"), "{table}");
    let out = env
        .kubectl(&["get", "subscriptions", "-n", "operators"])
        .await;
    assert!(
        text(&out.stdout).contains(
            "memcached-operator   memcached-operator   memcached-operator-catalog   stable"
        ),
        "{}",
        text(&out.stdout)
    );

    // status: the three tables.
    let out = env
        .bundle_tool(&["status", "-n", "operators", "--catalog-dir", &cat])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    insta::assert_snapshot!("status_after_install", text(&out.stdout));
    let out = env.bundle_tool(&["status", "-A", "--output", "json"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["subscriptions"][0]["installedCSV"],
        "memcached-operator.v0.3.0"
    );
    assert_eq!(v["clusterServiceVersions"][0]["phase"], "Succeeded");
    // status only reads.
    assert!(
        env.cli_requests()
            .iter()
            .any(|r| r.verb == "list" && r.resource == "clusterserviceversions")
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_writes_yaml_that_kubectl_applies() {
    let env = Env::start(olm_crds(), &[]).await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--channel",
            "alpha",
            "--namespace",
            "operators",
            "--catalog-dir",
            &cat,
            "--print",
            // This stand-in has no global-operators in namespace operators, unlike upstream
            // OLM, so the OperatorGroup is asked for (tested for applying below).
            "--operator-group-mode",
            "create",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("drop the OperatorGroup below if operators already has one"),
        "{}",
        text(&out.stderr)
    );
    let yaml = text(&out.stdout);
    insta::assert_snapshot!("print_alpha", yaml);
    assert!(yaml.contains("kind: OperatorGroup"));
    // Nothing was sent to the cluster.
    assert!(env.cli_writes().is_empty());
    // And kubectl applies it as is.
    let file = env.dir.path().join("install.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let out = env.kubectl(&["apply", "-f", file.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let applied = text(&out.stdout);
    assert!(
        applied.contains("subscription.operators.coreos.com/memcached-operator created"),
        "{applied}"
    );
    assert!(
        applied.contains("catalogsource.operators.coreos.com/memcached-operator-catalog created"),
        "{applied}"
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_approval_flow() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    let cat = catalog_dir().display().to_string();

    let out = env
        .bundle_tool(&install_args(&cat, MANUAL_FROM_0_1_0))
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("OLM will install memcached-operator.v0.1.0 (version 0.1.0); each later upgrade (memcached-operator.v0.2.0) waits for an approval"), "{stderr}");
    assert!(
        stderr.contains(
            "InstallPlan install-1 waits for approval to install memcached-operator.v0.1.0"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("next: bundle-tool approve --install-plan install-1 --namespace operators")
    );
    assert!(text(&out.stdout).is_empty());

    let out = env
        .bundle_tool(&["status", "-n", "operators", "--catalog-dir", &cat])
        .await;
    let status = text(&out.stdout);
    assert!(
        status.contains(
            "install-1   memcached-operator.v0.1.0   Manual     false      RequiresApproval"
        ),
        "{status}"
    );
    assert!(status.contains("NEEDS ATTENTION"), "{status}");

    // Approve: say what it installs and where the channel goes next, then wait.
    env.standin.clear_requests();
    let out = env
        .bundle_tool(&[
            "approve",
            "-n",
            "operators",
            "--catalog-dir",
            &cat,
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
            "--timeout",
            "30s",
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("InstallPlan operators/install-1 installs memcached-operator.v0.1.0"),
        "{stderr}"
    );
    assert!(stderr.contains("after it, the channel leads on to memcached-operator.v0.2.0 (each needs its own approval)"), "{stderr}");
    assert!(
        stderr.contains("approval complete: memcached-operator.v0.1.0 is installed"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("memcached-operator.v0.1.0   Memcached Operator   0.1.0"));
    let writes = env.cli_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].0, "patch");
    assert_eq!(writes[0].1, "installplans");
    assert_eq!(writes[0].3, "install-1");
    assert_eq!(writes[0].4, "application/merge-patch+json");
    let ip = env
        .get(&install_plan_resource(), Some("operators"), "install-1")
        .await
        .unwrap();
    assert_eq!(ip["spec"]["approved"], true);

    // The next hop waits for its own approval; approving by name installs it.
    let mut waited = 0;
    loop {
        let ip2 = env
            .get(&install_plan_resource(), Some("operators"), "install-2")
            .await;
        if ip2.is_some_and(|ip| ip["status"]["phase"] == "RequiresApproval") {
            break;
        }
        waited += 1;
        assert!(waited < 200, "install-2 never appeared");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let out = env
        .bundle_tool(&[
            "approve",
            "--install-plan",
            "install-2",
            "-n",
            "operators",
            "--catalog-dir",
            &cat,
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("memcached-operator.v0.2.0, replacing memcached-operator.v0.1.0"),
        "{stderr}"
    );
    assert!(
        stderr.contains("after it, the channel has no further upgrade (it is the head)"),
        "{stderr}"
    );
    let csv = env
        .get(
            &csv_resource(),
            Some("operators"),
            "memcached-operator.v0.2.0",
        )
        .await
        .unwrap();
    assert_eq!(csv["status"]["phase"], "Succeeded");
    assert_eq!(csv["spec"]["replaces"], "memcached-operator.v0.1.0");

    // Nothing left to approve.
    let out = env.bundle_tool(&["approve", "-n", "operators"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("error: no InstallPlan waits for approval in namespace operators")
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_switch_says_where_it_leads_and_refuses_dead_ends() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "alpha"]))
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("memcached-operator.v0.2.0"));

    // Re-running install with another channel would switch without checks: refused.
    env.standin.clear_requests();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: Subscription operators/memcached-operator already exists for package memcached-operator, channel alpha"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: switch channels with bundle-tool upgrade"),
        "{stderr}"
    );
    assert!(env.cli_writes().is_empty());

    // Without --yes and without a terminal: refuse, change nothing.
    env.standin.clear_requests();
    let up = [
        "upgrade",
        "--channel",
        "stable",
        "-n",
        "operators",
        "--catalog-dir",
        &cat,
        "--poll-interval",
        "50ms",
        "--settle",
        "300ms",
        "--timeout",
        "30s",
    ];
    let out = env.bundle_tool(&up).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("OLM will upgrade memcached-operator.v0.2.0 -> memcached-operator.v0.3.0 (1 InstallPlan)"), "{stderr}");
    assert!(stderr.contains("hint: pass --yes"), "{stderr}");
    assert!(env.cli_writes().is_empty());

    let mut args = up.to_vec();
    args.push("--yes");
    let out = env.bundle_tool(&args).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Progress lines depend on timing; the plan, the apply and the end do not.
    let stderr = without_times(&stderr);
    for line in [
        "Subscription operators/memcached-operator (package memcached-operator): channel alpha -> stable",
        "installed: memcached-operator.v0.2.0; OLM will upgrade memcached-operator.v0.2.0 -> memcached-operator.v0.3.0 (1 InstallPlan)",
        "  memcached-operator.v0.2.0 -> memcached-operator.v0.3.0 by replaces (version 0.3.0)",
        "applied Subscription operators/memcached-operator (channel: stable)",
        "[t] InstallPlan operators/install-2: Installing (memcached-operator.v0.3.0)",
        "[t] Subscription operators/memcached-operator: AtLatestKnown, installed memcached-operator.v0.3.0",
        "upgrade complete: memcached-operator.v0.3.0 is installed (phase Succeeded) in namespace operators",
    ] {
        assert!(
            stderr.lines().any(|l| l == line),
            "missing {line:?} in:\n{stderr}"
        );
    }
    assert!(text(&out.stdout).contains("memcached-operator.v0.3.0   Memcached Operator   0.3.0     memcached-operator.v0.2.0   Succeeded"), "{}", text(&out.stdout));
    let writes = env.cli_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        (
            writes[0].1.as_str(),
            writes[0].4.as_str(),
            writes[0].5.as_str()
        ),
        (
            "subscriptions",
            "application/apply-patch+yaml",
            "bundle-tool"
        )
    );
    let sub = env
        .get(
            &subscription_resource(),
            Some("operators"),
            "memcached-operator",
        )
        .await
        .unwrap();
    assert_eq!(sub["spec"]["channel"], "stable");
    assert_eq!(sub["spec"]["source"], "memcached-operator-catalog");
    assert_eq!(
        sub["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "bundle-tool"
    );

    // candidate has no bundle that upgrades 0.3.0: refused, nothing written.
    env.standin.clear_requests();
    let out = env
        .bundle_tool(&[
            "upgrade",
            "--channel",
            "candidate",
            "-n",
            "operators",
            "--catalog-dir",
            &cat,
            "--yes",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: switching Subscription operators/memcached-operator to channel candidate would do nothing: no bundle of channel candidate replaces, skips or skipRanges memcached-operator.v0.3.0"), "{stderr}");
    assert!(stderr.contains("hint: fix the catalog"), "{stderr}");
    assert!(env.cli_writes().is_empty());

    // An unknown channel is refused with the list of channels.
    let out = env
        .bundle_tool(&[
            "upgrade",
            "--channel",
            "beta",
            "-n",
            "operators",
            "--catalog-dir",
            &cat,
            "--yes",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("hint: use one of: alpha, candidate, stable"),
        "{}",
        text(&out.stderr)
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_csv_is_reported_with_its_reason() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(
        &env,
        Scenario {
            fail_csv: Some("memcached-operator.v0.3.0".into()),
            ..Default::default()
        },
    )
    .await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: ClusterServiceVersion operators/memcached-operator.v0.3.0 failed\n  phase Failed, reason InstallCheckFailed: install timeout"), "{stderr}");
    assert!(
        stderr.contains("hint: the operator's Deployment did not become available"),
        "{stderr}"
    );
    let out = env.bundle_tool(&["status", "-n", "operators"]).await;
    assert!(text(&out.stdout).contains("ClusterServiceVersion operators/memcached-operator.v0.3.0 failed (InstallCheckFailed): install timeout"));
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_install_plan_is_reported() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(
        &env,
        Scenario {
            fail_install_plans: true,
            ..Default::default()
        },
    )
    .await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "error: InstallPlan operators/install-1 failed (installing memcached-operator.v0.3.0)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "Installed=False InstallComponentFailed: error creating csv memcached-operator.v0.3.0"
        ),
        "{stderr}"
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_install_plan_times_out_with_what_was_seen() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(
        &env,
        Scenario {
            stuck_install_plans: true,
            ..Default::default()
        },
    )
    .await;
    let cat = catalog_dir().display().to_string();
    let mut args = install_args(&cat, &["--channel", "stable"]);
    let t = args.iter().position(|a| *a == "--timeout").unwrap();
    args[t + 1] = "2s";
    let out = env.bundle_tool(&args).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: install did not finish within 2s; last seen:"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("  InstallPlan operators/install-1: Installing (memcached-operator.v0.3.0)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: InstallPlan install-1 is still Installing"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: rerun with a longer --timeout"),
        "{stderr}"
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolution_failed_is_reported_without_a_local_catalog() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    // No --catalog-dir and no ./catalog: the channel cannot be checked beforehand, OLM says no.
    let out = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--channel",
            "beta",
            "-n",
            "operators",
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
            "--timeout",
            "30s",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("note: no local catalog"), "{stderr}");
    assert!(stderr.contains("error: OLM cannot resolve Subscription operators/memcached-operator\n  ResolutionFailed ConstraintsNotSatisfiable: constraints not satisfiable: no operators found in channel beta of package memcached-operator"), "{stderr}");
    assert!(
        stderr.contains("hint: check that channel \"beta\" exists in package memcached-operator"),
        "{stderr}"
    );

    // With the catalog, the same mistake is caught before anything is applied.
    env.standin.clear_requests();
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "beta"]))
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: channel \"beta\" is not in package memcached-operator (channels: alpha, candidate, stable)"));
    assert!(env.cli_writes().is_empty());
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_groups_are_reused_or_refused_before_applying() {
    let env = Env::start(olm_crds(), &["operators"]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    env.create(
        &operator_group_resource(),
        Some("operators"),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "global-operators", "namespace": "operators"}, "spec": {}}),
    )
    .await;
    let cat = catalog_dir().display().to_string();

    // memcached supports AllNamespaces: the existing global group is reused, none is created.
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("namespace operators already has OperatorGroup global-operators targeting all namespaces; it is reused"), "{stderr}");
    assert!(env.cli_writes().iter().all(|w| w.1 != "operatorgroups"));

    // An OwnNamespace-only operator cannot live under it: refused, nothing applied.
    env.standin.clear_requests();
    let out = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            IMAGE,
            "--package",
            "ownns-operator",
            "-n",
            "operators",
            "--catalog-dir",
            &cat,
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: namespace operators already has OperatorGroup global-operators targeting all namespaces, which needs the AllNamespaces install mode; ownns-operator.v1.0.0 supports only OwnNamespace"), "{stderr}");
    assert!(
        stderr.contains("hint: install into another namespace (--namespace)"),
        "{stderr}"
    );
    assert!(env.cli_writes().is_empty());

    // In its own namespace it gets an OwnNamespace group.
    let out = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            IMAGE,
            "--package",
            "ownns-operator",
            "-n",
            "team-a",
            "--catalog-dir",
            &cat,
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
            "--timeout",
            "30s",
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "supports OwnNamespace, so the OperatorGroup targets its own namespace team-a"
        ),
        "{stderr}"
    );
    let og = env
        .get(&operator_group_resource(), Some("team-a"), "ownns-operator")
        .await
        .unwrap();
    assert_eq!(og["spec"]["targetNamespaces"], json!(["team-a"]));
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_olm_gets_a_clear_error() {
    let env = Env::start(Vec::new(), &[]).await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "stable"]))
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: OLM v0 is not installed on this cluster: the API server does not serve operators.coreos.com/v1alpha1 Subscription"), "{stderr}");
    assert!(stderr.contains("hint: install OLM first"), "{stderr}");
    assert!(env.cli_writes().is_empty());
    let out = env.bundle_tool(&["status", "-n", "operators"]).await;
    assert_eq!(out.status.code(), Some(1));

    // An unreachable API server is an environment problem: exit 2.
    env.standin.shutdown().await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(["status", "-n", "operators"])
        .env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", env.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error (unexpected): check that the cluster is reachable with this kubeconfig and context"), "{}", text(&out.stderr));
}

/// The whole of stdout as one JSON document (nothing else may be printed there).
fn json_stdout(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&text(&out.stdout)).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            text(&out.stdout)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_json_says_where_the_switch_leads_and_what_happened() {
    let env = Env::start(olm_crds(), &[]).await;
    let _olm = FakeOlm::start(&env, Scenario::default()).await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, &["--channel", "alpha"]))
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let up = [
        "upgrade",
        "--channel",
        "stable",
        "-n",
        "operators",
        "--catalog-dir",
        &cat,
        "-o",
        "json",
        "--poll-interval",
        "50ms",
        "--settle",
        "300ms",
        "--timeout",
        "30s",
    ];
    // Not confirmed: the prediction is printed, nothing is applied, the exit code stays 1.
    env.standin.clear_requests();
    let out = env.bundle_tool(&up).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("hint: pass --yes"));
    assert!(env.cli_writes().is_empty());
    let v = json_stdout(&out);
    assert_eq!(
        v["subscription"],
        json!({
            "namespace": "operators",
            "name": "memcached-operator",
            "package": "memcached-operator",
            "approval": "Automatic",
        })
    );
    assert_eq!(v["fromChannel"], "alpha");
    assert_eq!(v["toChannel"], "stable");
    assert_eq!(v["installed"], "memcached-operator.v0.2.0");
    assert_eq!(
        v["prediction"],
        json!({"kind": "upgrades", "hops": ["memcached-operator.v0.3.0"]})
    );
    assert_eq!(v["leadsTo"], "memcached-operator.v0.3.0");
    assert_eq!(v["applied"], false);
    assert_eq!(v["outcome"], serde_json::Value::Null);

    // Confirmed: applied, and the outcome is the CSV OLM installed; no CSV table on stdout.
    let mut args = up.to_vec();
    args.push("--yes");
    let out = env.bundle_tool(&args).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("upgrade complete: memcached-operator.v0.3.0 is installed (phase Succeeded) in namespace operators"),
        "{stderr}"
    );
    let v = json_stdout(&out);
    assert_eq!(v["leadsTo"], "memcached-operator.v0.3.0");
    assert_eq!(v["applied"], true);
    assert_eq!(
        v["outcome"],
        json!({"result": "installed", "csv": "memcached-operator.v0.3.0"})
    );
    assert_eq!(env.cli_writes().len(), 1);
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_json_says_what_the_plan_installs_and_how_it_ended() {
    let env = Env::start(olm_crds(), &[]).await;
    let olm = FakeOlm::start(&env, Scenario::default()).await;
    let cat = catalog_dir().display().to_string();
    let out = env
        .bundle_tool(&install_args(&cat, MANUAL_FROM_0_1_0))
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let approve = |plan: &'static str| {
        [
            "approve",
            "--install-plan",
            plan,
            "-n",
            "operators",
            "--catalog-dir",
            cat.as_str(),
            "--output",
            "json",
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
            "--timeout",
            "30s",
        ]
        .map(String::from)
    };
    let args = approve("install-1");
    let out = env
        .bundle_tool(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("approval complete: memcached-operator.v0.1.0 is installed"),
        "{stderr}"
    );
    let v = json_stdout(&out);
    assert_eq!(
        v["installPlan"],
        json!({"namespace": "operators", "name": "install-1"})
    );
    assert_eq!(v["csvs"], json!(["memcached-operator.v0.1.0"]));
    assert_eq!(
        v["subscription"],
        json!({"namespace": "operators", "name": "memcached-operator", "package": "memcached-operator"})
    );
    assert_eq!(v["channel"], "alpha");
    assert_eq!(v["installed"], serde_json::Value::Null);
    assert_eq!(v["leadsTo"], "memcached-operator.v0.1.0");
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["next"], json!(["memcached-operator.v0.2.0"]));
    assert_eq!(v["applied"], true);
    assert_eq!(
        v["outcome"],
        json!({"result": "installed", "csv": "memcached-operator.v0.1.0"})
    );

    // The next hop fails: the JSON still says what was approved and how it failed (exit 1).
    let mut waited = 0;
    loop {
        let ip2 = env
            .get(&install_plan_resource(), Some("operators"), "install-2")
            .await;
        if ip2.is_some_and(|ip| ip["status"]["phase"] == "RequiresApproval") {
            break;
        }
        waited += 1;
        assert!(waited < 200, "install-2 never appeared");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    olm.scenario.lock().unwrap().fail_csv = Some("memcached-operator.v0.2.0".into());
    let args = approve("install-2");
    let out = env
        .bundle_tool(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: ClusterServiceVersion operators/memcached-operator.v0.2.0 failed"),
        "{stderr}"
    );
    let v = json_stdout(&out);
    assert_eq!(v["installed"], "memcached-operator.v0.1.0");
    assert_eq!(v["leadsTo"], "memcached-operator.v0.2.0");
    assert_eq!(v["next"], json!([]));
    assert_eq!(v["applied"], true);
    assert_eq!(v["outcome"]["result"], "failed");
    assert_eq!(
        v["outcome"]["summary"],
        "ClusterServiceVersion operators/memcached-operator.v0.2.0 failed"
    );
    env.standin.shutdown().await;
}
