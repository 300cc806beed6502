//! The acceptance set: every valid FBC fixture validates, every invalid one fails with opm's
//! message (the `error_contains` of EXPECTED.yaml).
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{LoadOptions, WriteFormat, load::load_dir_with_files, render_config};
use olmkit_catalog::validate::validate;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/fbc-examples")
}

/// Loads and validates; returns all error text (load error or findings).
fn check(dir: &Path, opts: &LoadOptions) -> Result<(), String> {
    let (cfg, origins) = load_dir_with_files(dir, opts).map_err(|e| e.to_string())?;
    let report = validate(&cfg, Some(&origins));
    if report.has_errors() {
        Err(report.render_text())
    } else {
        Ok(())
    }
}

#[test]
fn valid_fixtures_validate() {
    let mut n = 0;
    for entry in std::fs::read_dir(fixtures().join("valid")).unwrap() {
        let dir = entry.unwrap().path();
        for opts in [LoadOptions::default(), LoadOptions::graph_only()] {
            if let Err(e) = check(&dir, &opts) {
                panic!("{}: {e}", dir.display());
            }
        }
        n += 1;
    }
    assert_eq!(n, 7);
}

#[test]
fn invalid_fixtures_fail_with_opm_messages() {
    let expected_text = std::fs::read(fixtures().join("invalid/EXPECTED.yaml")).unwrap();
    let expected = olmkit_core::docs::parse_document("EXPECTED.yaml", &expected_text).unwrap();
    let map = expected.as_object().unwrap();
    assert_eq!(map.len(), 27);
    let mut failures = Vec::new();
    for (name, exp) in map {
        // A null error_contains marks fixtures that opm rejects with a parser message of its own.
        let want = exp["error_contains"].as_str();
        let dir = fixtures().join("invalid").join(name);
        match check(&dir, &LoadOptions::default()) {
            Ok(()) => failures.push(format!("{name}: validated, expected failure")),
            Err(text) => {
                if let Some(want) = want
                    && !text.contains(want)
                {
                    failures.push(format!("{name}: want {want:?} in:\n{text}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn invalid_fixtures_report_only_their_defect() {
    // Each model-*/convert-* fixture is the baseline with one defect: exactly one rule fires
    // (plus follow-ups that the same defect causes by construction).
    for entry in std::fs::read_dir(fixtures().join("invalid")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !dir.is_dir() || name.starts_with("parse-") {
            continue;
        }
        let (cfg, origins) = load_dir_with_files(&dir, &LoadOptions::default()).unwrap();
        let report = validate(&cfg, Some(&origins));
        let rules: std::collections::BTreeSet<&str> =
            report.findings.iter().map(|f| f.rule.as_str()).collect();
        assert!(!rules.is_empty(), "{name}");
        assert!(rules.len() <= 2, "{name}: {}", report.render_text());
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.file.as_deref() == Some("catalog.yaml")),
            "{name}: findings must name the file: {}",
            report.render_json()
        );
    }
}

#[test]
fn valid_fixtures_round_trip() {
    for entry in std::fs::read_dir(fixtures().join("valid")).unwrap() {
        let dir = entry.unwrap().path();
        let (cfg, _) = load_dir_with_files(&dir, &LoadOptions::default()).unwrap();
        for format in [WriteFormat::Json, WriteFormat::Yaml, WriteFormat::JsonLines] {
            let text = render_config(&cfg, format).unwrap();
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(
                tmp.path().join(format!("catalog.{}", format.extension())),
                &text,
            )
            .unwrap();
            let (again, _) = load_dir_with_files(tmp.path(), &LoadOptions::default()).unwrap();
            let text2 = render_config(&again, format).unwrap();
            assert_eq!(text, text2, "{} {format:?}", dir.display());
            assert!(!validate(&again, None).has_errors());
        }
    }
}
