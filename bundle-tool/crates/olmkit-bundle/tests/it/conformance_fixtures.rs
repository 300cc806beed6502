//! Real bundles from community-operators-prod with operator-sdk v1.38's recorded verdicts,
//! copied into `tests/fixtures/conformance/` (attribution in `tests/fixtures/ATTRIBUTION.md`):
//! the cases behind each fix of issue 15 (duplicate YAML keys, old controller-gen indentation,
//! a broken dependencies.yaml, a stray pod-template key, leftover CRD fields, a default channel
//! outside the bundle's channels, a missing apiVersion) and upstream's errors (a bundled
//! ServiceAccount shadowing the CSV's, v1beta1 CRDs preserving unknown fields, a non-standard
//! OperatorHub category). Unlike `conformance.rs`, this needs nothing outside the repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::upstream;

use std::path::{Path, PathBuf};
use upstream::{Upstream, Which, disagreements, ours};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/conformance")
}

/// (bundle dir, operator-sdk verdict file) of every fixture.
fn cases() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for pkg in std::fs::read_dir(fixtures()).unwrap() {
        let pkg = pkg.unwrap().path();
        for entry in std::fs::read_dir(&pkg).unwrap() {
            let verdict = entry.unwrap().path();
            if let Some(name) = verdict.file_name().and_then(|n| n.to_str())
                && let Some(version) = name.strip_suffix(".operator-sdk.json")
            {
                out.push((pkg.join(version), verdict));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn fixtures_get_operator_sdks_verdicts() {
    let cases = cases();
    assert!(cases.len() >= 8, "{} fixtures", cases.len());
    let (mut passing, mut failing) = (0, 0);
    let mut problems = Vec::new();
    for (dir, verdict) in &cases {
        let recorded: serde_json::Value =
            serde_json::from_slice(&std::fs::read(verdict).unwrap()).unwrap();
        for which in [Which::Default, Which::OperatorHub] {
            let up = Upstream::from_json(&recorded[which.name()]);
            assert!(
                !up.package.is_empty(),
                "{}: no {} verdict",
                verdict.display(),
                which.name()
            );
            if up.passed {
                passing += 1;
            } else {
                failing += 1;
            }
            let d = disagreements(&up, &ours(dir, which));
            if !d.is_empty() {
                problems.push(format!(
                    "{} ({}): {}",
                    dir.display(),
                    which.name(),
                    d.join("; ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Both kinds of verdict are covered.
    assert!(
        passing >= 8 && failing >= 4,
        "{passing} passing, {failing} failing"
    );
}

#[test]
fn lenient_yaml_is_reported_with_file_and_line() {
    // nlp-server has duplicate keys; pubsubplus has an old controller-gen quoted scalar.
    for (pkg, file) in [
        ("nlp-server/0.8.6", "manifests/nlp-server-role-binding.yaml"),
        (
            "pubsubplus-eventbroker-operator/1.4.2",
            "manifests/pubsubplus.solace.com_pubsubpluseventbrokers.yaml",
        ),
    ] {
        let b = olmkit_bundle::load_bundle_dir(&fixtures().join(pkg)).unwrap();
        let r = olmkit_bundle::validate_bundle(&b, None, &Default::default());
        assert!(
            r.findings.iter().any(|f| f.rule == "yaml-syntax"
                && f.file.as_deref() == Some(file)
                && f.path.as_deref().is_some_and(|p| p.starts_with("line "))),
            "{pkg}:\n{}",
            r.render_text()
        );
    }
}
