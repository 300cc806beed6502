//! `bundle-tool validate` through the real binary: all real bundles pass, broken bundles fail
//! with every problem reported in one run (text and JSON), unreadable bundles are reported
//! without stopping the others, and `--previous` checks upgrades.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn bt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env_remove("RUST_LOG");
    c
}

fn real_bundles() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for op in [
        "authorino-operator",
        "node-healthcheck-operator",
        "skupper-operator",
    ] {
        for e in std::fs::read_dir(fixtures().join("real-bundles").join(op)).unwrap() {
            let p = e.unwrap().path();
            if p.join("manifests").is_dir() {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

#[test]
fn every_real_bundle_passes_in_one_run() {
    let dirs = real_bundles();
    assert_eq!(dirs.len(), 29);
    let out = bt()
        .arg("validate")
        .args(&dirs)
        .args(["--select-optional", "suite=all", "-o", "json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["valid"], true);
    assert_eq!(report["errors"], 0);
    assert!(
        report["warnings"].as_u64().unwrap() > 0,
        "real bundles have known warnings"
    );
    bt().arg("validate")
        .args(&dirs)
        .assert()
        .success()
        // 11 of bundle-tool's own warnings, plus operator-sdk's "minKubeVersion is not
        // informed" for the 9 CSVs without one.
        .stdout(predicates::str::ends_with("0 error(s), 20 warning(s)\n"))
        // what was checked, on stderr: the data on stdout stays the report
        .stderr(predicates::str::contains(
            "checked 29 bundle(s) (authorino-operator ",
        ))
        .stderr(predicates::str::contains("rules of suite(s) default\n"));
}

#[test]
fn broken_bundles_report_every_problem_with_rule_file_and_path() {
    let broken = fixtures().join("bundle/broken");
    // suite=strict: bundle-tool's own checks (warnings by default) are errors too.
    let out = bt()
        .arg("validate")
        .arg(broken.join("many-errors"))
        .arg(broken.join("unparsable"))
        .args(["--output", "json", "--select-optional", "suite=strict"])
        .assert()
        .code(1);
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["valid"], false);
    let findings = report["findings"].as_array().unwrap();
    let rules: BTreeSet<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    for r in [
        "bundle-default-channel",
        "bundle-load",
        "crd-versions",
        "csv-install-modes",
        "csv-replaces",
        "csv-skip-range",
        "dockerfile-labels",
        "manifest-kind",
    ] {
        assert!(rules.contains(r), "{r} missing from {rules:?}");
    }
    for f in findings {
        assert!(
            f["file"].as_str().is_some_and(|s| s.contains("broken/")),
            "{f}"
        );
    }
    let replaces = findings
        .iter()
        .find(|f| f["rule"] == "csv-replaces")
        .unwrap();
    assert_eq!(replaces["path"], "spec.replaces");
    assert!(
        replaces["file"]
            .as_str()
            .unwrap()
            .ends_with("many-errors/manifests/memcached-operator.clusterserviceversion.yaml")
    );
    // CSV names need not start with the package name: a warning even when strict.
    assert_eq!(replaces["severity"], "warning");

    // Without strict, what operator-sdk accepts is a warning; its own errors stay errors.
    bt().arg("validate")
        .arg(broken.join("many-errors"))
        .assert()
        .code(1)
        .stdout(predicates::str::contains("warning[csv-replaces] "))
        .stdout(predicates::str::contains(
            "warning[bundle-default-channel] ",
        ))
        .stdout(predicates::str::contains("error[manifest-kind] "))
        .stdout(predicates::str::contains(
            "  hint: usually memcached-operator.v<previous version>",
        ))
        .stdout(predicates::str::is_match(r"\d+ error\(s\), \d+ warning\(s\)\n$").unwrap());
}

#[test]
fn a_missing_bundle_is_a_finding_and_bad_flags_are_user_errors() {
    let good = fixtures().join("real-bundles/skupper-operator/1.8.1");
    bt().arg("validate")
        .arg("/nonexistent/bundle")
        .arg(&good)
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "error[bundle-load] /nonexistent/bundle",
        ))
        .stdout(predicates::str::contains("hint:"));
    bt().arg("validate")
        .arg(&good)
        .args(["--select-optional", "suite=nope"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "error: --select-optional suite=nope",
        ))
        .stderr(predicates::str::contains(
            "hint: use --select-optional suite=operatorhub",
        ));
    // clap's own usage errors.
    bt().arg("validate").assert().code(2);
}

/// operator-sdk's flags: `--select-optional name=operatorhub`, `--optional-values
/// k8s-version=...` and the `OPERATOR_BUNDLE_CATEGORIES` file.
#[test]
fn operator_sdk_spellings_optional_values_and_custom_categories() {
    let conformance = fixtures().join("conformance");
    // A real bundle operator-sdk fails in the operatorhub suite only ("Drivers and plugins").
    let silicom = conformance.join("silicom-sts-operator/0.0.6");
    bt().arg("validate").arg(&silicom).assert().success();
    for sel in ["name=operatorhub", "suite=operatorhub"] {
        bt().arg("validate")
            .arg(&silicom)
            .args(["--select-optional", sel])
            .assert()
            .code(1)
            .stdout(predicates::str::contains(
                "value \"Drivers and plugins\" is not in the set of standard categories",
            ));
    }
    let dir = tempfile::tempdir().unwrap();
    let cats = dir.path().join("categories.json");
    std::fs::write(
        &cats,
        r#"{"categories": ["Drivers and plugins", "Networking"]}"#,
    )
    .unwrap();
    bt().arg("validate")
        .arg(&silicom)
        .args(["--select-optional", "name=operatorhub"])
        .env("OPERATOR_BUNDLE_CATEGORIES", &cats)
        .assert()
        .success();
    std::fs::write(&cats, "not json").unwrap();
    bt().arg("validate")
        .arg(&silicom)
        .args(["--select-optional", "name=operatorhub"])
        .env("OPERATOR_BUNDLE_CATEGORIES", &cats)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("OPERATOR_BUNDLE_CATEGORIES"))
        .stderr(predicates::str::contains("categories.json"));
    // v1beta1 CRDs are removed in 1.22: a warning, an error when targeting 1.22 or later
    // (argocd-operator 0.0.4 fails anyway, on its v1beta1 CRDs' preserveUnknownFields).
    let argocd = conformance.join("argocd-operator/0.0.4");
    bt().arg("validate")
        .arg(&argocd)
        .args(["--select-optional", "name=operatorhub"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains("warning[removed-api] "))
        .stdout(predicates::str::contains("error[removed-api] ").not());
    bt().arg("validate")
        .arg(&argocd)
        .args(["--select-optional", "name=operatorhub"])
        .args(["--optional-values", "k8s-version=1.22"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains("error[removed-api] "));
    let etcd = conformance.join("etcd/0.6.1");
    bt().arg("validate")
        .arg(&etcd)
        .args(["--optional-values", "k8s-versio=1.22"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("unknown key \"k8s-versio\""));
}

#[test]
fn previous_bundle_upgrade_checks() {
    let a = fixtures().join("real-bundles/authorino-operator");
    bt().arg("validate")
        .arg(a.join("0.13.0"))
        .arg("--previous")
        .arg(a.join("0.12.0"))
        .assert()
        .success()
        .stdout("0 error(s), 0 warning(s)\n");
    // OLM v1's CRD upgrade safety check refuses 0.0.1 -> 0.4.0 (fields made required, status
    // fields removed); the CRD 0.4.0 stops shipping stays behind (a warning).
    bt().arg("validate")
        .arg(a.join("0.4.0"))
        .arg("--previous")
        .arg(a.join("0.0.1"))
        .assert()
        .code(1)
        .stdout(predicates::str::contains("warning[crd-upgrade]"))
        .stdout(predicates::str::contains("error[crd-upgrade]"))
        .stdout(predicates::str::contains(
            "v1beta1: ^.spec: required: new required fields: [listener oidcServer]",
        ))
        .stdout(predicates::str::contains(
            "v1beta1: ^.status.ready: existingFieldRemoval: removed field",
        ));
    // Going backwards is an error.
    bt().arg("validate")
        .arg(a.join("0.12.0"))
        .arg("--previous")
        .arg(a.join("0.13.0"))
        .assert()
        .code(1)
        .stdout(predicates::str::contains("error[upgrade-edge]"));
    bt().arg("validate")
        .arg(a.join("0.13.0"))
        .arg("--previous")
        .arg("/nonexistent")
        .assert()
        .code(1)
        .stderr(predicates::str::contains("hint: --previous must be"));
}

/// `suite=olm-v1`: what OLM v1 (operator-controller) cannot install as it is. node-healthcheck
/// 0.7.0 declares a package dependency (OLM v1 resolves none: an error); our operator's
/// conversion webhook needs a certificate provider under OLM v1 (a warning).
#[test]
fn olm_v1_suite_reports_what_olm_v1_cannot_install() {
    let nhc = fixtures().join("real-bundles/node-healthcheck-operator/0.7.0");
    let out = bt().arg("validate").arg(&nhc).output().unwrap();
    assert!(out.status.success(), "passes the default suite");
    let out = bt()
        .args([
            "validate",
            "--select-optional",
            "suite=olm-v1",
            "-o",
            "json",
        ])
        .arg(&nhc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let dep = findings
        .iter()
        .find(|f| f["rule"] == "olmv1-dependencies")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(dep["severity"], "error");
    assert!(
        dep["file"]
            .as_str()
            .unwrap()
            .ends_with("metadata/dependencies.yaml"),
        "{dep}"
    );

    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle/memcached-operator/0.3.0");
    let out = bt()
        .args(["validate", "--select-optional", "suite=olm-v1"])
        .arg(&ours)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("warning[olmv1-webhooks]"), "{text}");

    let out = bt()
        .args(["validate", "--select-optional", "suite=olm-v2"])
        .arg(&ours)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("suite=olm-v1"));
}
