//! CRD upgrade safety (`validate --previous`, `release`) against OLM v1's own cases: every
//! two-CRD case of operator-controller's `crdupgradesafety_test.go`, with its CRDs
//! (`tests/fixtures/crdupgradesafety/`, see its README), gets the verdict upstream asserts:
//! no `crd-upgrade` error where OLM v1 lets the upgrade through, and errors carrying
//! upstream's texts where it refuses it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use olmkit_bundle::load::bundle_from_files;
use olmkit_bundle::{ValidateOptions, validate_bundle};
use olmkit_core::Severity;
use std::collections::BTreeMap;
use std::path::Path;

const CRD: &str = "manifests/cache.example.com_memcacheds.yaml";

/// The generated memcached bundle with its CRD replaced by `crd` (JSON is YAML).
fn bundle_with(crd: &[u8]) -> olmkit_bundle::Bundle {
    let mut files: BTreeMap<String, Vec<u8>> = common::generated()
        .files
        .into_iter()
        .map(|(p, b)| (p.display().to_string(), b))
        .collect();
    files.insert(CRD.to_string(), crd.to_vec());
    bundle_from_files(Path::new("b"), &files).unwrap()
}

/// The `crd-upgrade` errors of upgrading from a bundle shipping `old` to one shipping `new`.
fn refusals(dir: &Path, old: &str, new: &str) -> Vec<String> {
    let prev = bundle_with(&std::fs::read(dir.join(old)).unwrap());
    let cur = bundle_with(&std::fs::read(dir.join(new)).unwrap());
    validate_bundle(&cur, Some(&prev), &ValidateOptions::default())
        .findings
        .into_iter()
        .filter(|f| f.rule == "crd-upgrade" && f.severity == Severity::Error)
        .map(|f| f.message)
        .collect()
}

#[test]
fn olm_v1_crd_upgrade_safety_cases() {
    let dir = common::fixtures().join("crdupgradesafety");
    let table = std::fs::read_to_string(dir.join("EXPECTED.tsv")).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in table.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [old, new, expected] = cols[..] else {
            panic!("bad row {line:?}");
        };
        count += 1;
        let got = refusals(&dir, old, new);
        let all = got.join("\n");
        if expected == "ok" {
            if !got.is_empty() {
                failures.push(format!(
                    "{old} -> {new}: OLM v1 accepts it, we refuse:\n{all}"
                ));
            }
            continue;
        }
        if got.is_empty() {
            failures.push(format!("{old} -> {new}: OLM v1 refuses it, we accept it"));
        }
        for want in expected.split('|') {
            match want.strip_prefix('!') {
                Some(not) if all.contains(not) => failures.push(format!(
                    "{old} -> {new}: says {not:?}, OLM v1 does not:\n{all}"
                )),
                Some(_) => {}
                None if !all.contains(want) => {
                    failures.push(format!("{old} -> {new}: lacks {want:?}:\n{all}"))
                }
                None => {}
            }
        }
    }
    assert_eq!(count, 13);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The case: a new CRD version that removes a field the old one had is refused, as
/// OLM v1 (`NoExistingFieldRemoved`) refuses it; the released memcached CRDs (identical from
/// 0.1.0 to 0.4.0) upgrade cleanly.
#[test]
fn a_removed_field_is_an_error_and_the_released_chain_is_clean() {
    let released = common::fixtures().join("../../bundle/memcached-operator");
    let mut dirs: Vec<_> = std::fs::read_dir(&released)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "{dirs:?}");
    for pair in dirs.windows(2) {
        let prev = olmkit_bundle::load_bundle_dir(&pair[0]).unwrap();
        let cur = olmkit_bundle::load_bundle_dir(&pair[1]).unwrap();
        let r = validate_bundle(&cur, Some(&prev), &ValidateOptions::default());
        assert!(
            !r.findings.iter().any(|f| f.rule == "crd-upgrade"),
            "{:?} -> {:?}:\n{}",
            pair[0],
            pair[1],
            r.render_text()
        );
    }
    let prev = olmkit_bundle::load_bundle_dir(dirs.last().unwrap()).unwrap();
    let mut crd: serde_json::Value = serde_json::to_value(
        prev.manifests
            .iter()
            .find(|m| m.kind() == "CustomResourceDefinition")
            .unwrap()
            .object
            .clone(),
    )
    .unwrap();
    let v1 = crd["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|v| v["name"] == "v1")
        .unwrap();
    let spec = &mut v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let removed = spec.as_object().unwrap().keys().next().unwrap().clone();
    spec.as_object_mut().unwrap().remove(&removed);
    let cur = bundle_with(serde_json::to_string(&crd).unwrap().as_bytes());
    let r = validate_bundle(&cur, Some(&prev), &ValidateOptions::default());
    let want =
        format!("v1: ^.spec.{removed}: existingFieldRemoval: removed field : v1.^.spec.{removed}");
    assert!(
        r.findings.iter().any(|f| f.rule == "crd-upgrade"
            && f.severity == Severity::Error
            && f.message.contains(&want)),
        "{want}\n{}",
        r.render_text()
    );
}
