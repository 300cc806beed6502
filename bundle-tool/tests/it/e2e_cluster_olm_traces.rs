//! `bundle-tool install`, `status`, `upgrade` and `approve` against real OLM v0 behaviour: each
//! test replays a watch trace recorded from a real OLM (`tests/fixtures/olm-traces/`, see its
//! README) into the API-server stand-in with `harness/olm_replay.rs`, which waits for the CLI's own
//! writes where the real sequence did. The tests check exit codes, the state each command
//! reports, and that a wait ends where OLM really settled (not at a first `Succeeded` that
//! regresses, not at the starting CSV of an automatic upgrade, not on a transient condition).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::cluster_harness as harness;
use crate::harness::olm_replay as replay;

use harness::{Env, fixtures, olm_crds, text};
use olmkit_cluster::olm::{operator_group_resource, subscription_resource};
use replay::Replay;
use serde_json::json;
use std::process::Output;
use std::time::Duration;

const IMAGE: &str = "localhost:5000/memcached-catalog:v0.3.0";
/// Trace time runs ten times faster than real OLM did.
const SPEED: f64 = 0.1;
/// The CLI's settle period in these tests: ten times the longest gap (0.46 s of trace time,
/// 46 ms here) between a success-looking state and OLM's regression from it.
const SETTLE: &str = "1s";
const LONG: Duration = Duration::from_secs(60);

const V1: &str = "memcached-operator.v0.1.0";
const V2: &str = "memcached-operator.v0.2.0";
const V3: &str = "memcached-operator.v0.3.0";

fn catalog() -> String {
    fixtures().join("olm-traces/catalog").display().to_string()
}

/// `install` with the names the traces use (CatalogSource `memcached-catalog`, OperatorGroup
/// `og`) and fast polling.
async fn install(env: &Env, ns: &str, extra: &[&str]) -> Output {
    let cat = catalog();
    let mut args = vec![
        "install",
        "--catalog-image",
        IMAGE,
        "--package",
        "memcached-operator",
        "--namespace",
        ns,
        "--catalog-dir",
        &cat,
        "--catalog-source",
        "memcached-catalog",
        "--operator-group",
        "og",
        "--poll-interval",
        "50ms",
        "--settle",
        SETTLE,
        "--timeout",
        "60s",
    ];
    args.extend_from_slice(extra);
    env.bundle_tool(&args).await
}

async fn approve(env: &Env, ns: &str, extra: &[&str]) -> Output {
    let cat = catalog();
    let mut args = vec![
        "approve",
        "-n",
        ns,
        "--catalog-dir",
        &cat,
        "--poll-interval",
        "50ms",
        "--settle",
        SETTLE,
        "--timeout",
        "60s",
    ];
    args.extend_from_slice(extra);
    env.bundle_tool(&args).await
}

async fn status(env: &Env, ns: &str, json: bool) -> (i32, String) {
    let cat = catalog();
    let mut args = vec!["status", "-n", ns, "--catalog-dir", &cat];
    if json {
        args.extend_from_slice(&["--output", "json"]);
    }
    let out = env.bundle_tool(&args).await;
    assert!(
        out.stderr.is_empty() || out.status.success(),
        "{}",
        text(&out.stderr)
    );
    (out.status.code().unwrap(), text(&out.stdout))
}

fn ok(out: &Output) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    stderr
}

fn failed(out: &Output) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    stderr
}

/// The row of `name` in a `kubectl get`-style table, split into columns.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
        .split_whitespace()
        .collect()
}

/// Upstream OLM's `operators` namespace, which has `global-operators`: the install reuses it
/// (the trace's `og` is that group here), and the wait ends at the CSV's final Succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_automatic_into_operators_reuses_global_operators_and_settles() {
    let env = Env::start(olm_crds(), &["operators"]).await;
    env.create(
        &operator_group_resource(),
        Some("operators"),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "global-operators", "namespace": "operators"}, "spec": {}}),
    )
    .await;
    let replay = Replay::start(
        &env,
        "install-automatic",
        "operators",
        &[("OperatorGroup", "og", "global-operators")],
        SPEED,
    )
    .await;

    // Printed for kubectl: no OperatorGroup for this well-known namespace.
    let cat = catalog();
    let printed = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--namespace",
            "operators",
            "--catalog-dir",
            &cat,
            "--print",
        ])
        .await;
    let note = ok(&printed);
    assert!(!text(&printed.stdout).contains("kind: OperatorGroup"));
    assert!(note.contains("global-operators"), "{note}");
    assert!(note.contains("--operator-group-mode create"), "{note}");

    let out = install(&env, "operators", &["--channel", "stable"]).await;
    let stderr = ok(&out);
    assert!(
        stderr.contains("OperatorGroup global-operators"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("install complete: {V3} is installed")),
        "{stderr}"
    );
    // AtLatestKnown (t=10.60) and the NeedsReinstall round were not taken for done.
    assert!(replay.now().t >= 13.68, "{:?}", replay.now());
    // NAME, DISPLAY (two words), VERSION, REPLACES, PHASE.
    assert_eq!(row(&text(&out.stdout), V3)[4..], [V2, "Succeeded"]);
    // The CLI created no OperatorGroup of its own.
    assert!(
        env.get(&operator_group_resource(), Some("operators"), "og")
            .await
            .is_none()
    );

    replay.wait_finished(LONG).await;
    let (code, report) = status(&env, "operators", false).await;
    assert_eq!(code, 0);
    let sub = row(&report, "memcached-operator");
    assert_eq!(sub[5], "AtLatestKnown", "{report}");
    assert_eq!(sub[4], V3);
    let csv = row(&report, V3);
    assert_eq!(csv[4], V2, "REPLACES of 0.3.0 is 0.2.0:\n{report}");
    assert_eq!(csv[5], "Succeeded");
    assert_eq!(row(&report, "install-00001")[4], "Complete");
    assert!(report.contains("OPERATORGROUPS"), "{report}");
    assert_eq!(
        row(&report, "global-operators")[1..],
        ["(all", "namespaces)", "-"]
    );
    assert!(!report.contains("NEEDS ATTENTION"), "{report}");
    let (_, j) = status(&env, "operators", true).await;
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(j["operatorGroups"][0]["name"], "global-operators");
    assert_eq!(j["operatorGroups"][0]["namespaces"], json!([""]));
    env.standin.shutdown().await;
}

/// Automatic from startingCSV 0.1.0 on alpha: OLM installs 0.1.0 (Succeeded at t=13.93), then
/// upgrades to 0.3.0 through a transient ResolutionFailed and a NeedsReinstall round after the
/// first Succeeded of 0.3.0 (t=23.39); OLM settles at t=28.55.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_upgrade_from_a_starting_csv_waits_for_the_head() {
    let env = Env::start(olm_crds(), &[]).await;
    let ns = "auto-upgrade";
    let replay = Replay::start(&env, "automatic-upgrade-from-starting-csv", ns, &[], SPEED).await;
    let out = install(&env, ns, &["--channel", "alpha", "--starting-csv", V1]).await;
    let stderr = ok(&out);
    assert!(
        stderr.contains(&format!("then upgrade automatically: {V3}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("install complete: {V3} is installed")),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot resolve"), "{stderr}");
    // It saw the transient condition and said it is harmless.
    assert!(stderr.contains("not a failure"), "{stderr}");
    assert!(replay.now().t >= 28.55, "stopped early: {:?}", replay.now());

    replay.wait_finished(LONG).await;
    let (_, report) = status(&env, ns, false).await;
    assert_eq!(row(&report, V3)[4], V1, "{report}");
    assert_eq!(row(&report, "install-00002")[4], "Complete");
    assert!(!report.contains("NEEDS ATTENTION"), "{report}");
    env.standin.shutdown().await;
}

/// Manual on alpha from 0.1.0: install stops at the first plan, each approval waits for its
/// CSV, and the ResolutionFailed ConstraintsNotSatisfiable that OLM sets while 0.1.0 is being
/// replaced (t=25.26), and never clears, is no failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_install_then_approve_both_plans() {
    let env = Env::start(olm_crds(), &[]).await;
    let ns = "manual";
    let replay = Replay::start(&env, "install-manual-then-approve", ns, &[], SPEED).await;
    let out = install(
        &env,
        ns,
        &[
            "--channel",
            "alpha",
            "--approval",
            "Manual",
            "--starting-csv",
            V1,
        ],
    )
    .await;
    let stderr = ok(&out);
    assert!(
        stderr.contains(&format!(
            "InstallPlan install-00001 waits for approval to install {V1}"
        )),
        "{stderr}"
    );

    let (_, report) = status(&env, ns, false).await;
    assert!(
        row(&report, "memcached-operator")
            .join(" ")
            .ends_with(&format!("{V1} (needs approval)")),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "bundle-tool approve --install-plan install-00001 --namespace {ns}"
        )),
        "{report}"
    );

    // The only plan waiting: no --install-plan needed.
    let stderr = ok(&approve(&env, ns, &[]).await);
    assert!(
        stderr.contains(&format!("approval complete: {V1} is installed")),
        "{stderr}"
    );

    // OLM offers 0.3.0 directly (skipRange), not 0.2.0.
    replay.wait_for(19.453, LONG).await;
    let (_, report) = status(&env, ns, false).await;
    assert!(
        row(&report, "memcached-operator")
            .join(" ")
            .ends_with(&format!("{V3} (needs approval)")),
        "{report}"
    );

    let out = approve(&env, ns, &["--install-plan", "install-00002"]).await;
    let stderr = ok(&out);
    assert!(
        stderr.contains(&format!("approval complete: {V3} is installed")),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot resolve"), "{stderr}");
    assert!(stderr.contains("ConstraintsNotSatisfiable"), "{stderr}");
    // Not at the first Succeeded (t=28.15, with 0.1.0 still there, then NeedsCertRotation).
    assert!(replay.now().t >= 33.23, "stopped early: {:?}", replay.now());

    replay.wait_finished(LONG).await;
    let (code, report) = status(&env, ns, false).await;
    assert_eq!(code, 0);
    assert_eq!(row(&report, V3)[4], V1, "{report}");
    assert!(report.contains("NOTES"), "{report}");
    assert!(
        report.contains("left over from its replacement"),
        "{report}"
    );
    assert!(!report.contains("NEEDS ATTENTION"), "{report}");
    for ip in ["install-00001", "install-00002"] {
        assert_eq!(row(&report, ip)[4], "Complete", "{report}");
    }
    env.standin.shutdown().await;
}

/// Manual on alpha from 0.2.0; OLM already offers 0.3.0 from alpha when the channel is
/// switched to stable, keeps that plan (0.3.0 is stable's head too), and installs it once
/// approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_switch_keeps_the_pending_plan_then_approve() {
    let env = Env::start(olm_crds(), &[]).await;
    let ns = "switch";
    let replay = Replay::start(&env, "channel-switch", ns, &[], SPEED).await;
    let out = install(
        &env,
        ns,
        &[
            "--channel",
            "alpha",
            "--approval",
            "Manual",
            "--starting-csv",
            V2,
        ],
    )
    .await;
    assert!(ok(&out).contains("InstallPlan install-00001 waits for approval"));
    let stderr = ok(&approve(&env, ns, &[]).await);
    assert!(
        stderr.contains(&format!("approval complete: {V2} is installed")),
        "{stderr}"
    );
    replay.wait_for(18.86, LONG).await;

    let cat = catalog();
    let out = env
        .bundle_tool(&[
            "upgrade",
            "--channel",
            "stable",
            "-n",
            ns,
            "--catalog-dir",
            &cat,
            "--yes",
            "--poll-interval",
            "50ms",
            "--settle",
            SETTLE,
            "--timeout",
            "60s",
        ])
        .await;
    let stderr = ok(&out);
    assert!(stderr.contains("channel alpha -> stable"), "{stderr}");
    assert!(
        stderr.contains(&format!("OLM will upgrade {V2} -> {V3}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "InstallPlan install-00002 waits for approval to install {V3}"
        )),
        "{stderr}"
    );
    let sub = env
        .get(&subscription_resource(), Some(ns), "memcached-operator")
        .await
        .unwrap();
    assert_eq!(sub["spec"]["channel"], "stable");

    let out = approve(&env, ns, &["--install-plan", "install-00002"]).await;
    let stderr = ok(&out);
    assert!(
        stderr.contains(&format!("approval complete: {V3} is installed")),
        "{stderr}"
    );
    assert!(replay.now().t >= 42.79, "stopped early: {:?}", replay.now());

    replay.wait_finished(LONG).await;
    let (_, report) = status(&env, ns, false).await;
    let sub = row(&report, "memcached-operator");
    assert_eq!(sub[2], "stable", "{report}");
    assert_eq!(sub[5], "AtLatestKnown", "{report}");
    assert_eq!(row(&report, V3)[4], V2, "{report}");
    assert!(!report.contains("NEEDS ATTENTION"), "{report}");
    env.standin.shutdown().await;
}

/// Two OperatorGroups: OLM only flags them and does nothing; the Subscription says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operator_groups_are_refused_and_flagged_by_status() {
    let ns = "two-ogs";
    let env = Env::start(olm_crds(), &[ns]).await;
    let replay = Replay::start(&env, "two-operatorgroups", ns, &[], SPEED).await;
    // What the user applied before running bundle-tool.
    env.create(
        &olmkit_cluster::olm::catalog_source_resource(),
        Some(ns),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": "memcached-catalog", "namespace": ns},
               "spec": {"sourceType": "grpc", "address": "127.0.0.1:50551"}}),
    )
    .await;
    for og in ["og", "og-2"] {
        env.create(
            &operator_group_resource(),
            Some(ns),
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                   "metadata": {"name": og, "namespace": ns}, "spec": {}}),
        )
        .await;
    }
    replay.wait_for(3.826, LONG).await;

    let stderr = failed(&install(&env, ns, &["--channel", "stable"]).await);
    assert!(
        stderr.contains(
            "has 2 OperatorGroups (og, og-2); OLM marks them MultipleOperatorGroupsFound"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: delete all but one OperatorGroup"),
        "{stderr}"
    );
    assert!(
        env.get(&subscription_resource(), Some(ns), "memcached-operator")
            .await
            .is_none(),
        "nothing was applied"
    );

    let (code, report) = status(&env, ns, false).await;
    assert_eq!(code, 0);
    for og in ["og", "og-2"] {
        assert_eq!(
            row(&report, og)[3..],
            [
                "MultipleOperatorGroup=True",
                "(MultipleOperatorGroupsFound)"
            ],
            "{report}"
        );
    }
    assert!(report.contains("NEEDS ATTENTION"), "{report}");
    assert!(
        report.contains(&format!("kubectl -n {ns} delete operatorgroup og-2")),
        "{report}"
    );

    // Applied anyway (as kubectl apply would): OLM stays silent on the Subscription.
    env.create(
        &subscription_resource(),
        Some(ns),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": "memcached-operator", "namespace": ns},
               "spec": {"channel": "stable", "name": "memcached-operator",
                        "source": "memcached-catalog", "sourceNamespace": ns,
                        "installPlanApproval": "Automatic"}}),
    )
    .await;
    replay.wait_finished(LONG).await;
    let (_, j) = status(&env, ns, true).await;
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(j["subscriptions"][0]["state"], "");
    assert_eq!(j["operatorGroups"].as_array().unwrap().len(), 2);
    assert_eq!(
        j["operatorGroups"][1]["conditions"][0]["reason"],
        "MultipleOperatorGroupsFound"
    );
    assert!(
        j["attention"][0]
            .as_str()
            .unwrap()
            .contains("MultipleOperatorGroupsFound"),
        "{j}"
    );
    env.standin.shutdown().await;
}

/// A catalog OLM cannot reach: ResolutionFailed ErrorPreventedResolution while catalogHealth
/// says healthy. The install waits its resolution grace, then fails saying what it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_catalog_fails_after_the_grace_period() {
    let env = Env::start(olm_crds(), &[]).await;
    let ns = "unreachable";
    let replay = Replay::start(&env, "catalog-unreachable", ns, &[], SPEED).await;
    let out = install(
        &env,
        ns,
        &["--channel", "stable", "--resolution-grace", "1s"],
    )
    .await;
    let stderr = failed(&out);
    assert!(
        stderr.contains(&format!(
            "OLM cannot reach the catalog of Subscription {ns}/memcached-operator"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("connect: connection refused"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "CatalogSource {ns}/memcached-catalog: connection TRANSIENT_FAILURE"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("unchanged for"), "{stderr}");
    assert!(stderr.contains("hint:"), "{stderr}");
    assert!(text(&out.stdout).is_empty());

    replay.wait_finished(LONG).await;
    let (_, report) = status(&env, ns, false).await;
    assert!(
        report.contains("ResolutionFailed (ErrorPreventedResolution)"),
        "{report}"
    );
    env.standin.shutdown().await;
}
