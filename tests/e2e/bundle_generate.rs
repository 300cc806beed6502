//! `bundle-tool generate crds|bundle` through the real binary: our operator's bundle from
//! `config/manifests` (run through the real `kubectl kustomize`), the fixture project, stdin,
//! byte-identical regeneration, exit codes 0/1/2 with `error:`/`hint:` lines, JSON output, and
//! no partial output when generation or validation fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn project() -> PathBuf {
    root().join("tests/fixtures/bundle/memcached-project")
}

fn bt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("RUST_LOG");
    c
}

fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    olmkit_core::fsio::read_tree(dir).unwrap()
}

#[test]
fn generate_crds_writes_what_operator_crd_prints() {
    let dir = tempfile::tempdir().unwrap();
    bt().args(["generate", "crds", "--output-dir"])
        .arg(dir.path())
        .assert()
        .success();
    let written =
        std::fs::read_to_string(dir.path().join("cache.example.com_memcacheds.yaml")).unwrap();
    // `operator crd` prints serde_saphyr::to_string(&memcached_api::crd()).
    let operator_crd = serde_saphyr::to_string(&memcached_api::crd()).unwrap();
    assert_eq!(written, operator_crd);
    let v: Value = serde_saphyr::from_str(&written).unwrap();
    let versions: Vec<&str> = v["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1alpha1", "v1beta1", "v1"]);
}

#[test]
fn our_operator_bundle_from_config_manifests_validates() {
    let out = tempfile::tempdir().unwrap();
    let bundle = out.path().join("bundle/memcached-operator/0.1.0");
    bt().current_dir(root())
        .args([
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
            "--output-dir",
        ])
        .arg(&bundle)
        .assert()
        .success();
    bt().arg("validate").arg(&bundle).assert().success();
    let csv: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            bundle.join("manifests/memcached-operator.clusterserviceversion.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let hooks = csv["spec"]["webhookdefinitions"].as_array().unwrap();
    let conv = hooks
        .iter()
        .find(|w| w["type"] == "ConversionWebhook")
        .expect("conversion webhook");
    assert_eq!(conv["conversionCRDs"][0], "memcacheds.cache.example.com");
    assert_eq!(conv["webhookPath"], "/convert");
    let supported: Vec<&str> = csv["spec"]["installModes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["supported"] == true)
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(supported, ["AllNamespaces"]);
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .unwrap();
    assert_eq!(owned.len(), memcached_api::SERVED_VERSIONS.len());
}

#[test]
fn fixture_project_kustomize_and_stdin_give_identical_bytes_twice() {
    let out = tempfile::tempdir().unwrap();
    let a = out.path().join("a");
    let b = out.path().join("b");
    bt().args([
        "generate",
        "bundle",
        "--version",
        "0.1.0",
        "--channels",
        "stable,fast",
        "--default-channel",
        "stable",
        "--kustomize",
    ])
    .arg(project().join("config/manifests"))
    .arg("--output-dir")
    .arg(&a)
    .assert()
    .success()
    .stderr(predicates::str::contains(
        "note: install modes: only AllNamespaces",
    ))
    .stderr(predicates::str::contains("wrote memcached-operator.v0.1.0"));
    let first = tree(&a);
    // Again over the existing output: replaced with the same bytes.
    bt().args([
        "generate",
        "bundle",
        "--version",
        "0.1.0",
        "--channels",
        "stable,fast",
        "--default-channel",
        "stable",
        "--kustomize",
    ])
    .arg(project().join("config/manifests"))
    .arg("--output-dir")
    .arg(&a)
    .assert()
    .success();
    assert_eq!(tree(&a), first);
    // The same manifests on stdin.
    let stream = std::fs::read(project().join("kustomized.yaml")).unwrap();
    let assert = bt()
        .args([
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--channels",
            "stable,fast",
            "--default-channel",
            "stable",
            "--manifests",
            "-",
            "-o",
            "json",
            "--output-dir",
        ])
        .arg(&b)
        .write_stdin(stream)
        .assert()
        .success();
    assert_eq!(tree(&b), first);
    let summary: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(summary["csvName"], "memcached-operator.v0.1.0");
    assert_eq!(summary["validation"]["valid"], true);
    assert!(
        summary["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "bundle.Dockerfile")
    );
    let created = String::from_utf8(
        first[&PathBuf::from("manifests/memcached-operator.clusterserviceversion.yaml")].clone(),
    )
    .unwrap();
    assert!(
        created.contains("createdAt: \"2023-11-14T22:13:20Z\""),
        "SOURCE_DATE_EPOCH drives createdAt"
    );
}

#[test]
fn default_output_dir_is_bundle_package_version() {
    let cwd = tempfile::tempdir().unwrap();
    bt().current_dir(cwd.path())
        .args(["generate", "bundle", "--version", "0.2.0", "--kustomize"])
        .arg(project().join("config/manifests"))
        .assert()
        .success();
    assert!(cwd.path().join("bundle/memcached-operator/0.2.0/manifests/memcached-operator.clusterserviceversion.yaml").is_file());
}

fn stream_text() -> String {
    std::fs::read_to_string(project().join("kustomized.yaml")).unwrap()
}

#[test]
fn bad_input_names_the_document_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("bundle");
    let broken = stream_text().replace(
        "image: quay.io/example/memcached-operator:0.1.0",
        "imagex: oops",
    );
    bt().args(["generate", "bundle", "--version", "0.1.0", "--manifests", "-", "--output-dir"])
        .arg(&target)
        .write_stdin(broken)
        .assert()
        .code(1)
        .stderr(predicates::str::is_match(r"error: <stdin> document \d+ \(Deployment memcached-operator-controller-manager\): spec\.template\.spec\.containers\[0\]\.image: is required").unwrap());
    assert!(!target.exists());

    bt().args(["generate", "bundle", "--version", "one", "--manifests", "-"])
        .write_stdin(stream_text())
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "error: --version \"one\": not a semantic version",
        ));

    bt().args([
        "generate",
        "bundle",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
    ])
    .write_stdin("not: [valid\n")
    .assert()
    .code(1)
    .stderr(predicates::str::contains(
        "error: <stdin> document 1: invalid YAML",
    ))
    .stderr(predicates::str::contains("hint: "));

    bt().args([
        "generate",
        "bundle",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
    ])
    .write_stdin("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only}\n")
    .assert()
    .code(1)
    .stderr(predicates::str::contains(
        "error: no Deployment in the input manifests",
    ))
    .stderr(predicates::str::contains(
        "hint: feed the operator's full manifests",
    ));
}

#[test]
fn a_bundle_that_does_not_validate_is_not_written() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("bundle");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("previous.txt"), "kept").unwrap();
    // Generation succeeds, but the Deployment's selector no longer matches its pods.
    let broken = stream_text().replacen(
        "  selector:\n    matchLabels:\n      control-plane: controller-manager",
        "  selector:\n    matchLabels:\n      control-plane: other",
        1,
    );
    assert_ne!(broken, stream_text());
    bt().args([
        "generate",
        "bundle",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
        "--output-dir",
    ])
    .arg(&target)
    .write_stdin(broken)
    .assert()
    .code(1)
    .stderr(predicates::str::contains("error[install-deployments]"))
    .stderr(predicates::str::contains("nothing was written"))
    .stderr(predicates::str::contains("hint:"));
    assert_eq!(tree(&target).len(), 1);
    assert_eq!(
        std::fs::read_to_string(target.join("previous.txt")).unwrap(),
        "kept"
    );
}

#[test]
fn kubectl_problems_map_to_exit_codes() {
    let empty = tempfile::tempdir().unwrap();
    // No kubectl on PATH: the user's environment, with a hint (exit 1).
    bt().env("PATH", empty.path())
        .args([
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
        ])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("kubectl is not installed"))
        .stderr(predicates::str::contains("hint: install kubectl"));
    // A kubectl that cannot be executed: unexpected (exit 2).
    std::fs::write(empty.path().join("kubectl"), "not a program").unwrap();
    bt().env("PATH", empty.path())
        .args([
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "error (unexpected): cannot run kubectl",
        ));
    // A kustomization that kustomize rejects.
    bt().args(["generate", "bundle", "--version", "0.1.0", "--kustomize"])
        .arg(empty.path())
        .assert()
        .code(1)
        .stderr(predicates::str::contains("failed"));
    // A bad SOURCE_DATE_EPOCH.
    bt().env("SOURCE_DATE_EPOCH", "yesterday")
        .args([
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--manifests",
            "-",
        ])
        .write_stdin(stream_text())
        .assert()
        .code(1)
        .stderr(predicates::str::contains("SOURCE_DATE_EPOCH"));
}
