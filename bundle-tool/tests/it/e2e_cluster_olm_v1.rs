//! `bundle-tool install --olm-v1`: the ClusterCatalog, ClusterExtension and installer RBAC it
//! prints or applies, the OLM v1 support check, and a live install against the stand-in with
//! the OLM v1 CRDs while a fake operator-controller plays its part.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::cluster_harness as harness;

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

// --- The README's journey from the repository: the catalog carries olm.csv.metadata only, so
// the installer RBAC comes from the released bundle directory beside it. These runs need no
// cluster (--print), so they run the binary directly in a scratch copy of the repository.

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A scratch project holding copies of the repository's `catalog/` and `bundle/`, and the
/// newest released version there.
fn scratch_repo() -> (tempfile::TempDir, String) {
    let ws = harness::workspace();
    let d = tempfile::tempdir().unwrap();
    copy_dir(&ws.join("catalog"), &d.path().join("catalog"));
    copy_dir(&ws.join("bundle"), &d.path().join("bundle"));
    let mut versions: Vec<semver::Version> =
        std::fs::read_dir(d.path().join("bundle/memcached-operator"))
            .unwrap()
            .filter_map(|e| semver::Version::parse(&e.unwrap().file_name().to_string_lossy()).ok())
            .collect();
    versions.sort();
    let newest = versions.last().unwrap().to_string();
    (d, newest)
}

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn readme_v1_args(image: &str) -> Vec<String> {
    [
        "install",
        "--olm-v1",
        "--print",
        "--catalog-image",
        image,
        "--package",
        "memcached-operator",
        "--namespace",
        "memcached-operator",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn kinds_of(stdout: &[u8]) -> Vec<String> {
    let docs = olmkit_core::docs::parse_documents("stdout", stdout).unwrap();
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn olm_v1_print_reads_the_released_bundle_beside_the_catalog() {
    let (d, newest) = scratch_repo();
    let image = format!("quay.io/example/memcached-operator-catalog:v{newest}");
    let args = readme_v1_args(&image);
    let out = run_in(
        d.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("note: local catalog ./catalog: read for"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "OLM v1 will install memcached-operator.v{newest} (version {newest})"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "./catalog carries olm.csv.metadata, not the manifests of memcached-operator.v{newest}: read them from bundle/memcached-operator/{newest}"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "RBAC derived from bundle/memcached-operator/{newest} ("
        )),
        "{stderr}"
    );
    // The image's tag is the local catalog's head: nothing to warn about.
    assert!(!stderr.contains("warning: the local catalog"), "{stderr}");
    assert_eq!(
        kinds_of(&out.stdout),
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
    let yaml = text(&out.stdout);
    assert!(yaml.contains(&image), "{yaml}");
}

#[test]
fn olm_v1_print_of_an_older_image_tag_works_and_warns() {
    let (d, newest) = scratch_repo();
    // The README's command, verbatim: the v0.3.0 image, from a catalog that has moved on.
    let args = readme_v1_args("quay.io/example/memcached-operator-catalog:v0.3.0");
    let out = run_in(
        d.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(kinds_of(&out.stdout).len(), 8, "{stderr}");
    if newest != "0.3.0" {
        assert!(
            stderr.contains("warning: the local catalog ./catalog cannot be the catalog image quay.io/example/memcached-operator-catalog:v0.3.0: its tag names 0.3.0, but the head of channel stable is"),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("it has bundles newer than 0.3.0 ({newest}")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("hint: pass --catalog-dir with the catalog as it was at v0.3.0 (e.g. a `git worktree` of that release), or use the image tag that matches ./catalog (--catalog-image quay.io/example/memcached-operator-catalog:v{newest})")),
            "{stderr}"
        );
    }
}

#[test]
fn olm_v1_print_finds_the_bundle_beside_an_explicit_catalog_dir_and_honours_the_range() {
    let (d, _) = scratch_repo();
    let elsewhere = tempfile::tempdir().unwrap();
    let catalog = d.path().join("catalog").display().to_string();
    let mut args = readme_v1_args("quay.io/example/memcached-operator-catalog:v0.2.0");
    args.extend(
        ["--catalog-dir", &catalog, "--version-range", "0.2.0"]
            .iter()
            .map(|s| s.to_string()),
    );
    let out = run_in(
        elsewhere.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = d.path().join("bundle/memcached-operator/0.2.0");
    assert!(
        stderr.contains(&format!("read them from {}", dir.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "OLM v1 will install memcached-operator.v0.2.0 (version 0.2.0), the highest version of package memcached-operator within \"0.2.0\""
        ),
        "{stderr}"
    );
    let yaml = text(&out.stdout);
    assert!(yaml.contains("version: \"0.2.0\""), "{yaml}");
}

#[test]
fn olm_v1_print_without_the_bundle_directory_fails_cleanly() {
    let (d, newest) = scratch_repo();
    std::fs::remove_dir_all(d.path().join("bundle")).unwrap();
    let args = readme_v1_args("quay.io/example/memcached-operator-catalog:v0.4.0");
    let out = run_in(
        d.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "no partial output");
    assert!(
        stderr.contains(&format!("error: ./catalog: the catalog carries olm.csv.metadata, not the manifests of memcached-operator.v{newest} that OLM v1 needs for the installer RBAC, and no bundle directory of it was found under bundle/memcached-operator/")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "hint: pass --bundle-dir with the bundle directory of memcached-operator.v{newest}"
        )),
        "{stderr}"
    );
}

#[test]
fn olm_v0_print_names_the_catalog_it_read_and_warns_about_an_older_image() {
    let (d, newest) = scratch_repo();
    let out = run_in(
        d.path(),
        &[
            "install",
            "--print",
            "--catalog-image",
            "quay.io/example/memcached-operator-catalog:v0.2.0",
            "--package",
            "memcached-operator",
            "--namespace",
            "operators",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("note: local catalog ./catalog: read for"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: the local catalog ./catalog cannot be the catalog image quay.io/example/memcached-operator-catalog:v0.2.0"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: pass --catalog-dir"), "{stderr}");
    // The prediction still describes ./catalog, and says so.
    assert!(
        stderr.contains(&format!(
            "OLM will install memcached-operator.v{newest} (version {newest})"
        )),
        "{stderr}"
    );
    // With the image tag that matches ./catalog, there is no warning.
    let out = run_in(
        d.path(),
        &[
            "install",
            "--print",
            "--catalog-image",
            &format!("quay.io/example/memcached-operator-catalog:v{newest}"),
            "--package",
            "memcached-operator",
            "--namespace",
            "operators",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning:"), "{stderr}");
}
