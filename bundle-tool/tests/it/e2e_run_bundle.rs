//! `bundle-tool run bundle`, `run bundle-upgrade` and `cleanup` against the Kubernetes API
//! stand-in with the real OLM CRDs:
//! - with the fake OLM dialling the catalog the way OLM does (`FakeOlm::start_serving_catalogs`:
//!   the CatalogSource's `spec.address`, operator-registry's gRPC API), so the served catalog is
//!   what gets installed: from a bundle directory served by bundle-tool itself
//!   (`--catalog-address`), and from an OCI layout served by a registry pod that a fake kubelet
//!   (`harness/registry_pods.rs`) runs with the real catalog server on the pod's ConfigMaps;
//! - with OLM's side replayed from a watch trace recorded on a real OLM (run bundle is an
//!   install from a grpc CatalogSource with Manual approval: `install-manual-then-approve`);
//! - bad input: exit 1, an error, and hints that name only flags the command has.
//!
//! Registry images are refused (bundle-tool cannot pull bundle images yet): see the error case.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::cluster_harness as harness;
use crate::harness::olm_replay as replay;
use crate::harness::registry_pods;

use harness::{Env, FakeOlm, Scenario, olm_crds, text, workspace};
use kube::core::ApiResource;
use olmkit_cluster::olm::{
    catalog_source_resource, csv_resource, operator_group_resource, subscription_resource,
};
use registry_pods::FakeKubelet;
use replay::Replay;
use serde_json::{Value, json};
use std::process::Output;
use std::time::Duration;

const PKG: &str = "memcached-operator";
const V1: &str = "memcached-operator.v0.1.0";
const V3: &str = "memcached-operator.v0.3.0";
const V4: &str = "memcached-operator.v0.4.0";
const CS: &str = "memcached-operator-catalog";
const CRD: &str = "memcacheds.cache.example.com";

fn bundle(version: &str) -> String {
    workspace()
        .join("bundle/memcached-operator")
        .join(version)
        .display()
        .to_string()
}

/// Runs bundle-tool; `run` commands poll fast and settle for 500 ms (the fake OLM moves a CSV
/// every 40 ms) unless the arguments say otherwise.
async fn bt(env: &Env, args: &[&str]) -> Output {
    let mut v: Vec<&str> = args.to_vec();
    if matches!(args.first(), Some(&"run")) {
        v.extend_from_slice(&["--poll-interval", "50ms", "--timeout", "60s"]);
        if !args.contains(&"--settle") {
            v.extend_from_slice(&["--settle", "500ms"]);
        }
    }
    env.bundle_tool(&v).await
}

fn ok(out: &Output) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    stderr
}

fn failed(out: &Output) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{stderr}",
        text(&out.stdout)
    );
    stderr
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config_map() -> ApiResource {
    olmkit_cluster::run_bundle::config_map_resource()
}

fn pod() -> ApiResource {
    olmkit_cluster::run_bundle::pod_resource()
}

fn crd() -> ApiResource {
    olmkit_cluster::run_bundle::crd_resource()
}

/// `(verb, resource, name)` of the CLI's writes.
fn writes(env: &Env) -> Vec<(String, String, String)> {
    env.cli_requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch" | ""))
        .filter(|r| r.user_agent != "fake-kubelet")
        .map(|r| (r.verb, r.resource, r.name))
        .collect()
}

/// `(resource, name)` of what the CLI deleted (a delete of something already gone is a 404).
fn deletes(env: &Env) -> Vec<(String, String)> {
    env.cli_requests()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.user_agent != "fake-kubelet" && r.code < 300)
        .map(|r| (r.resource, r.name))
        .collect()
}

async fn annotations(env: &Env, ns: &str) -> Value {
    env.get(&catalog_source_resource(), Some(ns), CS)
        .await
        .unwrap()["metadata"]["annotations"]
        .clone()
}

/// The `kubectl get csv` row the command printed.
fn csv_row(stdout: &str, csv: &str) -> Vec<String> {
    stdout
        .lines()
        .find(|l| l.starts_with(csv))
        .unwrap_or_else(|| panic!("no row {csv} in\n{stdout}"))
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A namespace with the user's own OperatorGroup and an unrelated Subscription: run bundle
/// uses the OperatorGroup and leaves both alone; the catalog is served by bundle-tool itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_bundle_from_a_directory_then_upgrade_then_cleanup_removes_exactly_what_it_created() {
    let env = Env::start(olm_crds(), &["team"]).await;
    env.create(
        &operator_group_resource(),
        Some("team"),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "user-og", "namespace": "team"}, "spec": {}}),
    )
    .await;
    env.create(
        &subscription_resource(),
        Some("team"),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": "other-operator", "namespace": "team"},
               "spec": {"name": "other-operator", "channel": "stable", "source": "other-catalog",
                        "sourceNamespace": "team"}}),
    )
    .await;
    let _olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;
    let addr = format!("127.0.0.1:{}", free_port());

    // run bundle 0.3.0
    let b3 = bundle("0.3.0");
    let out = bt(
        &env,
        &[
            "run",
            "bundle",
            &b3,
            "-n",
            "team",
            "--catalog-address",
            &addr,
            "--listen",
            &addr,
        ],
    )
    .await;
    let stderr = ok(&out);
    let stdout = text(&out.stdout);
    assert_eq!(
        csv_row(&stdout, V3),
        [
            V3,
            "Memcached",
            "Operator",
            "0.3.0",
            "memcached-operator.v0.2.0",
            "Succeeded"
        ]
    );
    for line in [
        format!("bundle {V3} (version 0.3.0) of package {PKG}, from {b3}"),
        "OperatorGroup: namespace team already has OperatorGroup user-og targeting all namespaces; it is reused".into(),
        format!("catalog revision 1: channel run-bundle with {V3} (1 ConfigMap)"),
        "applied ConfigMap team/memcached-operator-catalog-1-0".into(),
        format!("serving the catalog from bundle-tool on {addr} (OLM connects to {addr})"),
        format!("applied CatalogSource team/{CS} (address {addr})"),
        format!("applied Subscription team/{PKG} (channel run-bundle, startingCSV {V3}, Manual approval: run bundle approves it)"),
        format!("InstallPlan team/install-1: approved by bundle-tool ({V3})"),
        format!("run bundle complete: {V3} is installed (phase Succeeded) in namespace team"),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(
        stderr.contains("note: the catalog is no longer served"),
        "{stderr}"
    );
    let sub = env
        .get(&subscription_resource(), Some("team"), PKG)
        .await
        .unwrap();
    assert_eq!(sub["spec"]["installPlanApproval"], "Manual");
    assert_eq!(sub["spec"]["startingCSV"], V3);
    assert_eq!(sub["spec"]["channel"], "run-bundle");
    assert_eq!(
        sub["metadata"]["labels"]["bundle-tool.olmkit.io/run-bundle"],
        PKG
    );
    let cs = env
        .get(&catalog_source_resource(), Some("team"), CS)
        .await
        .unwrap();
    assert_eq!(cs["spec"]["sourceType"], "grpc");
    assert_eq!(cs["spec"]["address"], addr.as_str());
    assert_eq!(
        cs["metadata"]["annotations"]["bundle-tool.olmkit.io/catalog-serving"],
        "local"
    );
    let cm = env
        .get(
            &config_map(),
            Some("team"),
            "memcached-operator-catalog-1-0",
        )
        .await
        .unwrap();
    assert_eq!(cm["metadata"]["ownerReferences"][0]["name"], CS);
    // The fake OLM created the CRD from the served bundle, as OLM's InstallPlan does.
    assert!(env.get(&crd(), None, CRD).await.is_some());
    // Nothing of the user's was written.
    let w = writes(&env);
    assert!(
        !w.iter()
            .any(|(_, r, n)| r == "operatorgroups" || n == "other-operator"),
        "{w:?}"
    );

    // run bundle-upgrade 0.4.0: the same catalog with 0.4.0 added, served again.
    let out = bt(
        &env,
        &[
            "run",
            "bundle-upgrade",
            &bundle("0.4.0"),
            "-n",
            "team",
            "--listen",
            &addr,
        ],
    )
    .await;
    let stderr = ok(&out);
    assert_eq!(
        csv_row(&text(&out.stdout), V4),
        [V4, "Memcached", "Operator", "0.4.0", V3, "Succeeded"]
    );
    for line in [
        format!("installed now: {V3}"),
        format!("upgrade edge: {V4} replaces {V3}, skipRange \"<0.4.0\" (from {V3})"),
        format!("catalog revision 2: channel run-bundle with {V3} -> {V4} (1 ConfigMap)"),
        "applied ConfigMap team/memcached-operator-catalog-2-0".into(),
        "deleted ConfigMap team/memcached-operator-catalog-1-0".into(),
        format!("InstallPlan team/install-2: approved by bundle-tool ({V4})"),
        format!(
            "run bundle-upgrade complete: {V4} is installed (phase Succeeded) in namespace team"
        ),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(!stderr.contains("warning:"), "{stderr}");
    let ann = annotations(&env, "team").await;
    assert_eq!(ann["bundle-tool.olmkit.io/catalog-generation"], "2");
    assert_eq!(
        ann["bundle-tool.olmkit.io/catalog-configmaps"],
        "memcached-operator-catalog-2-0"
    );
    let injected: Value = serde_json::from_str(
        ann["operators.operatorframework.io/injected-bundles"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(injected[1]["csv"], V4);

    // The same bundle again: refused, nothing changes.
    let out = bt(
        &env,
        &[
            "run",
            "bundle-upgrade",
            &bundle("0.4.0"),
            "-n",
            "team",
            "--listen",
            &addr,
        ],
    )
    .await;
    let stderr = failed(&out);
    assert!(
        stderr.contains(&format!(
            "error: {V4} is already installed in namespace team"
        )),
        "{stderr}"
    );

    // cleanup: exactly what run bundle created, and what OLM made from it.
    env.standin.clear_requests();
    let out = bt(&env, &["cleanup", PKG, "-n", "team"]).await;
    let stderr = ok(&out);
    assert_eq!(text(&out.stdout), "");
    let mut d = deletes(&env);
    d.sort();
    assert_eq!(
        d,
        [
            ("catalogsources", CS),
            ("clusterserviceversions", V4),
            ("configmaps", "memcached-operator-catalog-2-0"),
            ("customresourcedefinitions", CRD),
            ("installplans", "install-1"),
            ("installplans", "install-2"),
            ("subscriptions", PKG),
        ]
        .map(|(r, n)| (r.to_string(), n.to_string()))
    );
    for line in [
        format!("deleted Subscription team/{PKG}"),
        format!("deleted CustomResourceDefinition {CRD}"),
        format!("deleted ClusterServiceVersion team/{V4}"),
        format!("deleted CatalogSource team/{CS}"),
        "cleanup complete: package memcached-operator removed from namespace team (7 object(s) deleted)".into(),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(
        env.get(&subscription_resource(), Some("team"), PKG)
            .await
            .is_none()
    );
    assert!(env.get(&csv_resource(), Some("team"), V4).await.is_none());
    assert!(env.get(&crd(), None, CRD).await.is_none());
    // The user's OperatorGroup and Subscription are still there.
    assert!(
        env.get(&operator_group_resource(), Some("team"), "user-og")
            .await
            .is_some()
    );
    assert!(
        env.get(&subscription_resource(), Some("team"), "other-operator")
            .await
            .is_some()
    );

    // Again: nothing left to clean up (operator-sdk warns and succeeds too).
    let stderr = ok(&bt(&env, &["cleanup", PKG, "-n", "team"]).await);
    assert!(
        stderr.contains(
            "warning: nothing of package memcached-operator created by run bundle in namespace team"
        ),
        "{stderr}"
    );
}

/// From an OCI layout written by `image build bundle`, served by a registry pod running
/// `opm serve` on the catalog ConfigMaps (operator-sdk's way); the namespace has no
/// OperatorGroup, so run bundle creates one and cleanup removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_bundle_from_an_oci_layout_through_a_registry_pod_then_upgrade_then_cleanup() {
    let env = Env::start(olm_crds(), &["demo"]).await;
    // `images` in the working directory, where `make release` writes its layout.
    let layout = "images".to_string();
    for v in ["0.3.0", "0.4.0"] {
        let tag = format!("quay.io/example/memcached-operator-bundle:v{v}");
        ok(&env
            .bundle_tool(&[
                "image",
                "build",
                "bundle",
                &bundle(v),
                "--tag",
                &tag,
                "--layout",
                &layout,
            ])
            .await);
    }
    let kubelet = FakeKubelet::start(&env).await;
    let _olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;

    let src = format!("oci:{layout}:quay.io/example/memcached-operator-bundle:v0.3.0");
    let out = bt(&env, &["run", "bundle", &src, "-n", "demo"]).await;
    let stderr = ok(&out);
    assert_eq!(
        csv_row(&text(&out.stdout), V3),
        [
            V3,
            "Memcached",
            "Operator",
            "0.3.0",
            "memcached-operator.v0.2.0",
            "Succeeded"
        ]
    );
    let running = kubelet.running();
    assert_eq!(running.len(), 1, "{running:?}");
    let p1 = &running[0];
    assert_eq!(p1.name, "memcached-operator-catalog-1");
    assert_eq!(
        p1.command,
        ["opm", "serve", "/run-bundle/configs", "--port", "50051"]
    );
    assert_eq!(p1.files, ["/run-bundle/configs/part-0/catalog.json"]);
    let address = format!("{}:50051", p1.ip);
    for line in [
        "applied Pod demo/memcached-operator-catalog-1 (quay.io/operator-framework/opm:latest, opm serve)".to_string(),
        format!("Pod demo/memcached-operator-catalog-1: Running, ready ({})", p1.ip),
        format!("applied CatalogSource demo/{CS} (address {address})"),
        "applied OperatorGroup demo/bundle-tool-run-bundle".into(),
        format!("run bundle complete: {V3} is installed (phase Succeeded) in namespace demo"),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(
        stderr.contains("OperatorGroup: memcached-operator.v0.3.0 supports AllNamespaces, so the OperatorGroup targets every namespace"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Pod demo/memcached-operator-catalog-1: Running, ready"),
        "{stderr}"
    );
    let ann = annotations(&env, "demo").await;
    assert_eq!(
        ann["operators.operatorframework.io/index-image"],
        "quay.io/operator-framework/opm:latest"
    );
    assert_eq!(
        ann["operators.operatorframework.io/registry-pod-name"],
        "memcached-operator-catalog-1"
    );
    let p = env
        .get(&pod(), Some("demo"), "memcached-operator-catalog-1")
        .await
        .unwrap();
    assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "CatalogSource");
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
    // The catalog names no bundle image (OLM would pull it, and a layout is in no registry):
    // OLM installs from the manifests the catalog embeds, which the fake OLM got over gRPC.
    let cm = env
        .get(
            &config_map(),
            Some("demo"),
            "memcached-operator-catalog-1-0",
        )
        .await
        .unwrap();
    assert!(
        cm["data"]["catalog.json"]
            .as_str()
            .unwrap()
            .contains("\"image\":\"\"")
    );
    assert!(env.get(&crd(), None, CRD).await.is_some());

    // Upgrade: a new registry pod serves the new catalog; the old one goes.
    let src4 = format!("oci:{layout}:quay.io/example/memcached-operator-bundle:v0.4.0");
    let out = bt(&env, &["run", "bundle-upgrade", &src4, "-n", "demo"]).await;
    let stderr = ok(&out);
    assert_eq!(
        csv_row(&text(&out.stdout), V4),
        [V4, "Memcached", "Operator", "0.4.0", V3, "Succeeded"]
    );
    assert!(stderr.contains("applied Pod demo/memcached-operator-catalog-2 (quay.io/operator-framework/opm:latest, opm serve)"), "{stderr}");
    assert!(
        stderr.contains("deleted Pod demo/memcached-operator-catalog-1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("deleted ConfigMap demo/memcached-operator-catalog-1-0"),
        "{stderr}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let running = kubelet.running();
    assert_eq!(
        running.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["memcached-operator-catalog-2"]
    );
    let cs = env
        .get(&catalog_source_resource(), Some("demo"), CS)
        .await
        .unwrap();
    assert_eq!(
        cs["spec"]["address"],
        format!("{}:50051", running[0].ip).as_str()
    );

    // cleanup: what was deleted, the OperatorGroup run bundle created included.
    env.standin.clear_requests();
    let out = bt(&env, &["cleanup", PKG, "-n", "demo"]).await;
    let stderr = ok(&out);
    let deleted: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("deleted "))
        .collect();
    assert_eq!(
        deleted,
        [
            "InstallPlan demo/install-1",
            "InstallPlan demo/install-2",
            "Subscription demo/memcached-operator",
            "CustomResourceDefinition memcacheds.cache.example.com",
            "ClusterServiceVersion demo/memcached-operator.v0.4.0",
            "Pod demo/memcached-operator-catalog-2",
            "ConfigMap demo/memcached-operator-catalog-2-0",
            "CatalogSource demo/memcached-operator-catalog",
            "OperatorGroup demo/bundle-tool-run-bundle",
        ]
    );
    assert!(!stderr.contains("kept "), "{stderr}");
    let groups = env
        .api(&operator_group_resource(), Some("demo"))
        .list(&Default::default())
        .await
        .unwrap();
    assert!(groups.items.is_empty());
}

/// OLM's side replayed from a real OLM v0: an install from a grpc CatalogSource with Manual
/// approval (`install-manual-then-approve`: 0.1.0 approved, then 0.3.0 approved). The trace's
/// second InstallPlan came from a catalog that already had 0.3.0; here it is held until
/// `run bundle-upgrade` has put 0.3.0 into the catalog, which is when OLM would see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_bundle_and_bundle_upgrade_follow_a_real_olm_trace() {
    let env = Env::start(olm_crds(), &["traced"]).await;
    let replay = Replay::start_held(
        &env,
        "install-manual-then-approve",
        "traced",
        &[
            ("CatalogSource", "memcached-catalog", CS),
            ("OperatorGroup", "og", "bundle-tool-run-bundle"),
        ],
        0.1,
        19.0,
    )
    .await;
    let addr = format!("127.0.0.1:{}", free_port());
    let out = bt(
        &env,
        &[
            "run",
            "bundle",
            &bundle("0.1.0"),
            "-n",
            "traced",
            "--catalog-address",
            &addr,
            "--listen",
            &addr,
            "--settle",
            "1s",
        ],
    )
    .await;
    let stderr = ok(&out);
    assert_eq!(
        csv_row(&text(&out.stdout), V1),
        [V1, "Memcached", "Operator", "0.1.0", "Succeeded"]
    );
    assert!(
        stderr.contains(&format!(
            "InstallPlan traced/install-00001: approved by bundle-tool ({V1})"
        )),
        "{stderr}"
    );
    assert_eq!(
        replay.now().waiting_for.as_deref(),
        Some("held before t=19")
    );

    // The upgrade adds 0.3.0 to the catalog; then OLM (the replay) offers it.
    let b3 = bundle("0.3.0");
    let args = [
        "run",
        "bundle-upgrade",
        &b3,
        "-n",
        "traced",
        "--listen",
        &addr,
        "--settle",
        "1s",
    ];
    let upgrade = bt(&env, &args);
    let release = async {
        for _ in 0..600 {
            if env
                .get(
                    &config_map(),
                    Some("traced"),
                    "memcached-operator-catalog-2-0",
                )
                .await
                .is_some()
            {
                replay.release();
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run bundle-upgrade never updated the catalog");
    };
    let (out, ()) = tokio::join!(upgrade, release);
    let stderr = ok(&out);
    assert_eq!(
        csv_row(&text(&out.stdout), V3),
        [V3, "Memcached", "Operator", "0.3.0", V1, "Succeeded"]
    );
    for line in [
        format!(
            "{V3} replaces memcached-operator.v0.2.0; in the run-bundle catalog it replaces {V1}, the bundle installed before (as operator-sdk does)"
        ),
        format!("InstallPlan traced/install-00002: approved by bundle-tool ({V3})"),
        "(OLM sets this during a replacement; not a failure)".into(),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    // 0.3.0's skipRange covers 0.1.0: a real catalog would upgrade the same way, no warning.
    assert!(!stderr.contains("warning:"), "{stderr}");
    replay.wait_finished(Duration::from_secs(60)).await;

    // cleanup: the InstallPlans OLM owned by the Subscription go too.
    env.standin.clear_requests();
    ok(&bt(&env, &["cleanup", PKG, "-n", "traced"]).await);
    let mut d = deletes(&env);
    d.sort();
    assert_eq!(
        d,
        [
            ("catalogsources", CS),
            ("clusterserviceversions", V3),
            ("configmaps", "memcached-operator-catalog-2-0"),
            ("installplans", "install-00001"),
            ("installplans", "install-00002"),
            ("operatorgroups", "bundle-tool-run-bundle"),
            ("subscriptions", PKG),
        ]
        .map(|(r, n)| (r.to_string(), n.to_string()))
    );
}

/// Every `--flag` a hint names exists in `bundle-tool <command> --help`.
async fn hints_name_real_flags(env: &Env, stderr: &str, command: &[&str]) {
    let mut help_args = command.to_vec();
    help_args.push("--help");
    let help = text(&env.bundle_tool(&help_args).await.stdout);
    let hints: Vec<&str> = stderr.lines().filter(|l| l.starts_with("hint: ")).collect();
    assert!(!hints.is_empty(), "no hint in\n{stderr}");
    for h in hints {
        for word in h.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')') {
            let flag = word.split('=').next().unwrap();
            if flag.starts_with("--") && flag.len() > 2 {
                assert!(
                    help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
                    "hint {h:?} names {flag}, which `bundle-tool {}` does not have",
                    command.join(" ")
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_hints_naming_real_flags() {
    let env = Env::start(olm_crds(), &["errs", "twogroups", "taken"]).await;
    let run = ["run", "bundle"];
    let upgrade = ["run", "bundle-upgrade"];
    let b3 = bundle("0.3.0");

    // Not a bundle.
    let empty = env.dir.path().join("not-a-bundle");
    std::fs::create_dir_all(&empty).unwrap();
    let e = empty.display().to_string();
    let stderr = failed(&bt(&env, &["run", "bundle", &e, "-n", "errs"]).await);
    assert!(
        stderr.contains(&format!(
            "error: {e}: not a bundle directory (no manifests/ folder)\nhint: BUNDLE is a bundle directory"
        )),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;

    // A catalog image is not a bundle image.
    let layout = env.dir.path().join("images").display().to_string();
    let catalog = workspace().join("catalog").display().to_string();
    ok(&env
        .bundle_tool(&[
            "image",
            "build",
            "catalog",
            &catalog,
            "--configs-only",
            "--tag",
            "quay.io/example/memcached-operator-catalog:v0.4.0",
            "--layout",
            &layout,
        ])
        .await);
    let src = format!("oci:{layout}:quay.io/example/memcached-operator-catalog:v0.4.0");
    let stderr = failed(&bt(&env, &["run", "bundle", &src, "-n", "errs"]).await);
    assert!(
        stderr.contains(&format!(
            "error: {src}: a catalog image, not a bundle image"
        )),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;

    // A namespace that does not exist.
    let stderr = failed(&bt(&env, &["run", "bundle", &b3, "-n", "nowhere"]).await);
    assert!(
        stderr.contains("error: namespace nowhere does not exist"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;

    // Two OperatorGroups: OLM would install nothing.
    for og in ["og-a", "og-b"] {
        env.create(
            &operator_group_resource(),
            Some("twogroups"),
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                   "metadata": {"name": og, "namespace": "twogroups"}, "spec": {}}),
        )
        .await;
    }
    let stderr = failed(&bt(&env, &["run", "bundle", &b3, "-n", "twogroups"]).await);
    assert!(
        stderr.contains("error: namespace twogroups has 2 OperatorGroups (og-a, og-b)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kubectl -n twogroups delete operatorgroup"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;

    // An install mode the CSV does not support.
    let stderr = failed(
        &bt(
            &env,
            &[
                "run",
                "bundle",
                &b3,
                "-n",
                "errs",
                "--install-mode",
                "OwnNamespace",
            ],
        )
        .await,
    );
    assert!(
        stderr.contains(&format!(
            "error: {V3} does not support the OwnNamespace install mode (it supports: AllNamespaces)"
        )),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;

    // The package installed by other means.
    env.create(
        &subscription_resource(),
        Some("taken"),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": "memcached-operator", "namespace": "taken"},
               "spec": {"name": PKG, "channel": "stable", "source": "memcached-catalog",
                        "sourceNamespace": "taken"}}),
    )
    .await;
    let stderr = failed(&bt(&env, &["run", "bundle", &b3, "-n", "taken"]).await);
    assert!(
        stderr.contains("error: package memcached-operator is already installed in namespace taken by other means: Subscription memcached-operator (catalog taken/memcached-catalog, installed: nothing yet)"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &run).await;
    let stderr = failed(
        &bt(
            &env,
            &["run", "bundle-upgrade", &bundle("0.4.0"), "-n", "taken"],
        )
        .await,
    );
    assert!(
        stderr
            .contains("by other means: Subscription memcached-operator (not created by run bundle"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &upgrade).await;
    let stderr = failed(&bt(&env, &["cleanup", PKG, "-n", "taken"]).await);
    assert!(
        stderr.contains("error: package memcached-operator in namespace taken was not installed by run bundle (Subscription memcached-operator)"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &["cleanup"]).await;

    // An upgrade with nothing to upgrade.
    let stderr = failed(
        &bt(
            &env,
            &["run", "bundle-upgrade", &bundle("0.4.0"), "-n", "errs"],
        )
        .await,
    );
    assert!(
        stderr.contains("error: no run bundle of package memcached-operator in namespace errs"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &upgrade).await;

    // Nothing was written by any of these.
    assert_eq!(writes(&env), Vec::<(String, String, String)>::new());
}

/// A registry pod whose image cannot be pulled: exit 1 at once with the kubelet's reason;
/// cleanup removes what was created before it (no Subscription yet), and so does a new run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_pod_that_cannot_pull_its_image_fails_fast_and_its_leftovers_go() {
    let env = Env::start(olm_crds(), &["pulls"]).await;
    let _kubelet = FakeKubelet::start(&env).await;
    let image = "registry.example.com/does-not-exist/opm:v1";
    let out = bt(
        &env,
        &[
            "run",
            "bundle",
            &bundle("0.3.0"),
            "-n",
            "pulls",
            "--index-image",
            image,
        ],
    )
    .await;
    let stderr = failed(&out);
    assert!(
        stderr.contains("error: registry pod pulls/memcached-operator-catalog-1 does not start: ErrImagePull: failed to pull image"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: remove what run bundle created with bundle-tool cleanup memcached-operator --namespace pulls"),
        "{stderr}"
    );
    hints_name_real_flags(&env, &stderr, &["run", "bundle"]).await;
    assert!(
        env.get(&catalog_source_resource(), Some("pulls"), CS)
            .await
            .is_none()
    );

    // cleanup removes what the failed run created (there is no Subscription yet).
    let stderr = ok(&bt(&env, &["cleanup", PKG, "-n", "pulls"]).await);
    for line in [
        "deleted Pod pulls/memcached-operator-catalog-1",
        "deleted ConfigMap pulls/memcached-operator-catalog-1-0",
        "cleanup complete: package memcached-operator removed from namespace pulls (2 object(s) deleted)",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }
    assert!(
        env.get(&pod(), Some("pulls"), "memcached-operator-catalog-1")
            .await
            .is_none()
    );

    // Failed again; then run again with an image that pulls: what the failed run left is
    // replaced, not reused.
    failed(
        &bt(
            &env,
            &[
                "run",
                "bundle",
                &bundle("0.3.0"),
                "-n",
                "pulls",
                "--index-image",
                image,
            ],
        )
        .await,
    );
    let _olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;
    let stderr = ok(&bt(&env, &["run", "bundle", &bundle("0.3.0"), "-n", "pulls"]).await);
    for line in [
        "deleted Pod pulls/memcached-operator-catalog-1",
        "deleted ConfigMap pulls/memcached-operator-catalog-1-0",
        "applied Pod pulls/memcached-operator-catalog-1 (quay.io/operator-framework/opm:latest, opm serve)",
        "run bundle complete: memcached-operator.v0.3.0 is installed (phase Succeeded) in namespace pulls",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }
}

/// From a registry (the test's local `docker-registry`, plain HTTP): bundle-tool pulls the
/// bundle image itself with the push code's credentials; the cluster never pulls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_bundle_from_a_registry_image() {
    let registry = e2e_support::registry::Registry::start();
    let env = Env::start(olm_crds(), &["reg"]).await;
    let image = format!(
        "{}/example/memcached-operator-bundle:v0.3.0",
        registry.host()
    );
    let layout = env.dir.path().join("images").display().to_string();
    ok(&env
        .bundle_tool(&[
            "image",
            "build",
            "bundle",
            &bundle("0.3.0"),
            "--tag",
            &image,
            "--layout",
            &layout,
            "--push",
            "--insecure",
        ])
        .await);
    let _olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;
    let addr = format!("127.0.0.1:{}", free_port());
    // Without --use-http the pull fails, saying so.
    let stderr = failed(
        &bt(
            &env,
            &[
                "run",
                "bundle",
                &image,
                "-n",
                "reg",
                "--catalog-address",
                &addr,
                "--listen",
                &addr,
            ],
        )
        .await,
    );
    assert!(stderr.contains("--use-http"), "{stderr}");
    hints_name_real_flags(&env, &stderr, &["run", "bundle"]).await;
    let out = bt(
        &env,
        &[
            "run",
            "bundle",
            &image,
            "-n",
            "reg",
            "--use-http",
            "--catalog-address",
            &addr,
            "--listen",
            &addr,
            "-o",
            "json",
        ],
    )
    .await;
    let stderr = ok(&out);
    assert!(
        stderr.contains(&format!(
            "bundle {V3} (version 0.3.0) of package {PKG}, from {image}"
        )),
        "{stderr}"
    );
    // -o json: what was created and how it ended, nothing else on stdout.
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["address"], addr.as_str());
    assert_eq!(report["servedBy"], json!({"kind": "local"}));
    assert_eq!(report["source"], image.as_str());
    assert_eq!(report["outcome"], json!({"result": "installed", "csv": V3}));
    let created: Vec<String> = report["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap(),
                o["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        created,
        [
            "ConfigMap memcached-operator-catalog-1-0",
            "CatalogSource memcached-operator-catalog",
            "OperatorGroup bundle-tool-run-bundle",
            "Subscription memcached-operator",
        ]
    );
    let ann = annotations(&env, "reg").await;
    let injected: Value = serde_json::from_str(
        ann["operators.operatorframework.io/injected-bundles"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(injected[0]["imageTag"], image.as_str());

    // cleanup -o json: what was deleted and kept, nothing else on stdout.
    let out = bt(&env, &["cleanup", PKG, "-n", "reg", "-o", "json"]).await;
    ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["package"], PKG);
    assert_eq!(report["namespace"], "reg");
    assert_eq!(report["kept"], json!([]));
    let deleted = report["deleted"].as_array().unwrap();
    assert_eq!(deleted.len(), 7, "{report}");
    assert_eq!(
        deleted[2],
        json!({"kind": "CustomResourceDefinition", "name": CRD})
    );
    assert_eq!(
        deleted[6],
        json!({"kind": "OperatorGroup", "namespace": "reg", "name": "bundle-tool-run-bundle"})
    );
}

/// `--keep-serving`: after the install, bundle-tool goes on serving the catalog (OLM keeps a
/// healthy CatalogSource) until SIGTERM, then exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_serving_serves_the_catalog_until_interrupted() {
    use std::io::BufRead;
    let env = Env::start(olm_crds(), &["kept"]).await;
    let _olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args([
            "run",
            "bundle",
            &bundle("0.3.0"),
            "-n",
            "kept",
            "--catalog-address",
            &addr,
            "--listen",
            &addr,
            "--keep-serving",
            "--poll-interval",
            "50ms",
            "--settle",
            "500ms",
            "--timeout",
            "60s",
        ])
        .current_dir(env.dir.path())
        .env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", env.dir.path())
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen
        .iter()
        .any(|l: &String| l.contains("until interrupted (Ctrl-C)"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("no keep-serving line in\n{}", seen.join("\n")),
        }
    }
    assert!(
        seen.iter().any(|l| l.contains(&format!(
            "serving the catalog on {addr} (OLM connects to {addr}) until interrupted (Ctrl-C)"
        ))),
        "{seen:?}"
    );
    // Still served after the install: the fake OLM keeps the CatalogSource READY.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cs = env
        .get(&catalog_source_resource(), Some("kept"), CS)
        .await
        .unwrap();
    assert_eq!(
        cs["status"]["connectionState"]["lastObservedState"],
        "READY"
    );
    std::net::TcpStream::connect(&addr).expect("the catalog is still served");
    // SIGTERM ends it cleanly.
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(std::net::TcpStream::connect(&addr).is_err());
}
