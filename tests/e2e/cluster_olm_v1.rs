//! `bundle-tool install --olm-v1`: the ClusterCatalog, ClusterExtension and installer RBAC it
//! prints or applies, the OLM v1 support check, and a live install against the stand-in with
//! the OLM v1 CRDs while a fake operator-controller plays its part.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "cluster_harness.rs"]
mod harness;

use harness::{Env, FakeOperatorController, fixtures, olmv1_crds, text, without_times};

const IMAGE: &str = "localhost:5000/memcached-catalog:v0.3.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_v1_manifests_from_a_bundle_directory() {
    let env = Env::start(Vec::new(), &[]).await;
    let bundle = fixtures().join("cluster/bundle").display().to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--olm-v1",
            "--print",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--channel",
            "stable",
            "-n",
            "memcached-system",
            "--bundle-dir",
            &bundle,
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The support check's warning about the conversion webhook goes to stderr.
    assert!(stderr.contains("warning[olmv1-webhooks]"), "{stderr}");
    assert!(stderr.contains("installer ServiceAccount memcached-system/memcached-operator-installer: RBAC derived from"), "{stderr}");
    let yaml = text(&out.stdout);
    let docs = olmkit_core::docs::parse_documents("stdout", yaml.as_bytes()).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ClusterCatalog",
            "ClusterExtension"
        ]
    );
    assert!(
        env.cli_requests().is_empty(),
        "--print must not touch the cluster"
    );
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_bundles_are_refused_for_olm_v1() {
    let env = Env::start(Vec::new(), &[]).await;
    let bundle = fixtures()
        .join("real-bundles/node-healthcheck-operator/0.7.0")
        .display()
        .to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--olm-v1",
            "--print",
            "--catalog-image",
            IMAGE,
            "--package",
            "node-healthcheck-operator",
            "-n",
            "nhc",
            "--bundle-dir",
            &bundle,
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error[olmv1-dependencies]"), "{stderr}");
    assert!(
        stderr
            .contains("OLM v1 does not resolve dependencies; the bundle declares olm.gvk.required"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: OLM v1 cannot install node-healthcheck-operator.v0.7.0 as it is"),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty(), "no partial output");
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_v1_install_waits_for_the_cluster_extension() {
    let env = Env::start(olmv1_crds(), &[]).await;
    let _oc = FakeOperatorController::start(&env).await;
    let bundle = fixtures().join("cluster/bundle").display().to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--olm-v1",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--channel",
            "stable",
            "-n",
            "memcached-system",
            "--bundle-dir",
            &bundle,
            "--poll-interval",
            "50ms",
            "--timeout",
            "30s",
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        without_times(&stderr).contains("[t] ClusterCatalog memcached-operator-catalog: Serving"),
        "{stderr}"
    );
    assert!(stderr.contains("install complete: ClusterExtension memcached-operator installed bundle memcached-operator.v0.3.0"), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "memcached-operator\tmemcached-operator.v0.3.0\n"
    );
    let writes = env.cli_writes();
    let applied: Vec<&str> = writes.iter().map(|w| w.1.as_str()).collect();
    assert_eq!(
        applied,
        [
            "namespaces",
            "serviceaccounts",
            "clusterroles",
            "clusterrolebindings",
            "roles",
            "rolebindings",
            "clustercatalogs",
            "clusterextensions"
        ]
    );
    assert!(writes.iter().all(|w| w.5 == "bundle-tool"));

    // kubectl shows the extension with its printer columns.
    let out = env.kubectl(&["get", "clusterextensions"]).await;
    let table = text(&out.stdout);
    assert!(table.contains("memcached-operator.v0.3.0"), "{table}");

    // A channel the catalog does not have: operator-controller blocks, the CLI says so.
    let out = env
        .bundle_tool(&[
            "install",
            "--olm-v1",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "--channel",
            "beta",
            "--subscription",
            "memcached-beta",
            "-n",
            "memcached-system",
            "--bundle-dir",
            &bundle,
            "--poll-interval",
            "50ms",
            "--timeout",
            "30s",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: ClusterExtension memcached-beta is blocked\n  Progressing=False Blocked: no bundles found for package \"memcached-operator\" matching channel \"beta\""), "{stderr}");
    env.standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn olm_v1_missing_is_reported() {
    let env = Env::start(Vec::new(), &[]).await;
    let bundle = fixtures().join("cluster/bundle").display().to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--olm-v1",
            "--catalog-image",
            IMAGE,
            "--package",
            "memcached-operator",
            "-n",
            "memcached-system",
            "--bundle-dir",
            &bundle,
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: OLM v1 is not installed on this cluster"));
    env.standin.shutdown().await;
}
