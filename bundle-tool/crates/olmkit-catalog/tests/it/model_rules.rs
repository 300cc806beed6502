//! The catalog rules table against the validator: one small catalog per rule that breaks
//! exactly that rule, a meta-test that every rule of `RULES` is exercised here and that no
//! finding carries an id outside the table, and the empty-catalog warning (including a catalog
//! whose package directory is a symbolic link, which the loader does not read).
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{
    DeclarativeConfig, LoadOptions,
    load::{load_bytes, load_dir_with_files},
};
use olmkit_catalog::model::Model;
use olmkit_catalog::validate::{RULES, rules, validate};
use olmkit_core::Upstream;
use olmkit_core::findings::{Report, Severity};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn package(name: &str, default: &str) -> Value {
    json!({"schema": "olm.package", "name": name, "defaultChannel": default})
}

fn channel(pkg: &str, name: &str, entries: Value) -> Value {
    json!({"schema": "olm.channel", "package": pkg, "name": name, "entries": entries})
}

fn bundle(pkg: &str, name: &str, version: &str) -> Value {
    json!({
        "schema": "olm.bundle", "package": pkg, "name": name, "image": format!("quay.io/x/{name}:v1"),
        "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": version}}],
    })
}

/// A valid one-package catalog: `p` with channel `stable` holding `p.v1` (1.0.0).
fn base() -> Vec<Value> {
    vec![
        package("p", "stable"),
        channel("p", "stable", json!([{"name": "p.v1"}])),
        bundle("p", "p.v1", "1.0.0"),
    ]
}

fn with(mut blobs: Vec<Value>, edit: impl FnOnce(&mut Vec<Value>)) -> Vec<Value> {
    edit(&mut blobs);
    blobs
}

fn config(blobs: &[Value]) -> DeclarativeConfig {
    let text: String = blobs.iter().map(|b| format!("{b}\n")).collect();
    let mut cfg = DeclarativeConfig::default();
    for b in load_bytes("catalog.json", text.as_bytes(), &LoadOptions::default()).unwrap() {
        cfg.push(b.blob);
    }
    cfg
}

fn two_entries(second: Value) -> Vec<Value> {
    with(base(), |b| {
        b[1] = channel("p", "stable", json!([{"name": "p.v1"}, second]));
        b.push(bundle("p", "p.v2", "2.0.0"));
    })
}

/// One catalog per rule id, each breaking that rule.
fn cases() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            rules::PACKAGE_NAME.id,
            with(base(), |b| b.push(package("", ""))),
        ),
        (
            rules::DUPLICATE_PACKAGE.id,
            with(base(), |b| b.push(package("p", "stable"))),
        ),
        (
            rules::UNKNOWN_PACKAGE.id,
            with(base(), |b| b.push(channel("q", "s", json!([])))),
        ),
        (
            rules::CHANNEL_NAME.id,
            with(base(), |b| b.push(channel("p", "", json!([])))),
        ),
        (
            rules::DUPLICATE_CHANNEL.id,
            with(base(), |b| b.push(b[1].clone())),
        ),
        (
            rules::DUPLICATE_ENTRY.id,
            with(base(), |b| {
                b[1] = channel("p", "stable", json!([{"name": "p.v1"}, {"name": "p.v1"}]))
            }),
        ),
        (
            rules::BUNDLE_PACKAGE.id,
            with(base(), |b| b[2]["package"] = json!("")),
        ),
        (
            rules::DUPLICATE_BUNDLE.id,
            with(base(), |b| b.push(b[2].clone())),
        ),
        (
            rules::BUNDLE_PROPERTIES.id,
            with(base(), |b| {
                let props = b[2]["properties"].as_array_mut().unwrap();
                props.push(json!({"type": "olm.gvk", "value": "x"}));
            }),
        ),
        (
            rules::PACKAGE_PROPERTY.id,
            with(base(), |b| b[2]["properties"] = json!([])),
        ),
        (
            rules::BUNDLE_VERSION.id,
            with(base(), |b| b[2] = bundle("p", "p.v1", "v1")),
        ),
        (
            rules::IMAGE_PULLSPEC.id,
            with(base(), |b| b[2]["image"] = json!("Quay.io/X:1")),
        ),
        (
            rules::BUNDLE_IMAGE.id,
            with(base(), |b| b[2]["image"] = json!("")),
        ),
        (
            rules::BUNDLE_NOT_IN_CHANNEL.id,
            with(base(), |b| b.push(bundle("p", "p.v0", "0.1.0"))),
        ),
        (
            rules::ENTRY_WITHOUT_BUNDLE.id,
            with(base(), |b| {
                b.pop();
            }),
        ),
        (
            rules::DEFAULT_CHANNEL.id,
            with(base(), |b| b[0] = package("p", "fast")),
        ),
        (rules::PACKAGE_CHANNELS.id, vec![package("p", "")]),
        (
            rules::CHANNEL_EMPTY.id,
            with(base(), |b| b.push(channel("p", "fast", json!([])))),
        ),
        (rules::CHANNEL_HEAD.id, two_entries(json!({"name": "p.v2"}))),
        (
            rules::REPLACES_CYCLE.id,
            with(
                two_entries(json!({"name": "p.v2", "replaces": "p.v1"})),
                |b| {
                    b[1]["entries"][0]["replaces"] = json!("p.v2");
                    b[1]["entries"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name": "p.v3", "replaces": "p.v2"}));
                    b.push(bundle("p", "p.v3", "3.0.0"));
                },
            ),
        ),
        (
            rules::STRANDED_BUNDLE.id,
            // The chain from the head stops before p.v2, which p.v4 skips: p.v1 is on no path.
            with(base(), |b| {
                b[1] = channel(
                    "p",
                    "stable",
                    json!([
                        {"name": "p.v1"},
                        {"name": "p.v2", "replaces": "p.v1"},
                        {"name": "p.v3", "replaces": "p.v2"},
                        {"name": "p.v4", "replaces": "p.v3", "skips": ["p.v2"]},
                    ]),
                );
                for v in 2..=4 {
                    b.push(bundle("p", &format!("p.v{v}"), &format!("{v}.0.0")));
                }
            }),
        ),
        (
            rules::EMPTY_SKIP.id,
            two_entries(json!({"name": "p.v2", "replaces": "p.v1", "skips": [""]})),
        ),
        (
            rules::SKIP_RANGE.id,
            two_entries(json!({"name": "p.v2", "replaces": "p.v1", "skipRange": "nope!"})),
        ),
        (
            rules::DUPLICATE_VERSION.id,
            with(
                two_entries(json!({"name": "p.v2", "replaces": "p.v1"})),
                |b| {
                    b[3] = bundle("p", "p.v2", "1.0.0");
                },
            ),
        ),
        (
            rules::DEPRECATION.id,
            with(base(), |b| {
                b.push(json!({"schema": "olm.deprecations", "package": "p",
                    "entries": [{"reference": {"schema": "olm.bundle", "name": "p.v9"}, "message": "gone"}]}));
            }),
        ),
        (rules::EMPTY_CATALOG.id, Vec::new()),
    ]
}

fn rule_ids(report: &Report) -> BTreeSet<String> {
    report.findings.iter().map(|f| f.rule.clone()).collect()
}

#[test]
fn the_base_catalog_is_valid() {
    let report = validate(&config(&base()), None);
    assert!(report.findings.is_empty(), "{}", report.render_text());
}

#[test]
fn each_case_breaks_its_rule_with_the_tables_severity() {
    for (rule, blobs) in cases() {
        let report = validate(&config(&blobs), None);
        let info = RULES.iter().find(|r| r.id == rule).unwrap();
        let hits: Vec<_> = report.findings.iter().filter(|f| f.rule == rule).collect();
        assert!(
            !hits.is_empty(),
            "{rule}: not reported:\n{}",
            report.render_text()
        );
        // What mirrors opm is an error (opm refuses it); bundle-tool's own rules warn.
        let severity = match info.upstream {
            Upstream::Mirrors(_) => Severity::Error,
            Upstream::Stricter => Severity::Warning,
        };
        assert!(
            hits.iter().all(|f| f.severity == severity),
            "{rule}: severity differs from what RULES says it mirrors"
        );
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/fbc-examples")
}

#[test]
fn rules_table_and_findings_agree() {
    let table: BTreeSet<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(table.len(), RULES.len(), "a rule id is listed twice");
    let mut produced = BTreeSet::new();
    for (_, blobs) in cases() {
        produced.extend(rule_ids(&validate(&config(&blobs), None)));
    }
    // The opm fixtures too: whatever the validator says about them is in the table.
    for kind in ["valid", "invalid"] {
        for entry in std::fs::read_dir(fixtures().join(kind)).unwrap() {
            let dir = entry.unwrap().path();
            if let Ok((cfg, origins)) = load_dir_with_files(&dir, &LoadOptions::graph_only()) {
                produced.extend(rule_ids(&validate(&cfg, Some(&origins))));
            }
        }
    }
    let produced: BTreeSet<&str> = produced.iter().map(String::as_str).collect();
    let unlisted: Vec<_> = produced.difference(&table).collect();
    assert!(
        unlisted.is_empty(),
        "finding ids missing from RULES: {unlisted:?}"
    );
    let untested: Vec<_> = table.difference(&produced).collect();
    assert!(untested.is_empty(), "rules no case produces: {untested:?}");
    for r in RULES {
        assert!(!r.description.is_empty(), "{}: no description", r.id);
        assert_eq!(r.suite, "default", "{}: the catalog has one suite", r.id);
        if let Upstream::Mirrors(f) = r.upstream {
            assert!(!f.is_empty(), "{}: no upstream function", r.id);
        }
    }
}

#[test]
fn an_empty_catalog_is_a_warning_that_counts_packages() {
    let cfg = DeclarativeConfig::default();
    let report = validate(&cfg, None);
    assert!(!report.has_errors());
    assert_eq!(report.counts().warnings, 1, "{}", report.render_text());
    let f = &report.findings[0];
    assert_eq!(f.rule, rules::EMPTY_CATALOG.id);
    assert!(f.message.contains("found 0 packages"), "{}", f.message);
    assert!(Model::new(&cfg, None).packages.is_empty());
    // A catalog with packages does not get it.
    assert!(!rule_ids(&validate(&config(&base()), None)).contains(rules::EMPTY_CATALOG.id));
}

fn write_base(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let text: String = base().iter().map(|b| format!("{b}\n")).collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
}

#[cfg(unix)]
#[test]
fn a_linked_package_directory_is_not_a_silent_success() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    // Inside the catalog: the loader does not descend linked directories (like opm), so the
    // package is not read; the validator must say that it found nothing, and why that may be.
    let root = tmp.path().join("inside");
    write_base(&root.join("store/p"));
    std::fs::write(root.join(".indexignore"), "store/\n").unwrap();
    symlink(root.join("store/p"), root.join("p")).unwrap();
    let (cfg, origins) = load_dir_with_files(&root, &LoadOptions::graph_only()).unwrap();
    assert!(cfg.packages.is_empty());
    let report = validate(&cfg, Some(&origins));
    assert!(!report.has_errors(), "{}", report.render_text());
    let warning = report
        .findings
        .iter()
        .find(|f| f.rule == rules::EMPTY_CATALOG.id)
        .unwrap_or_else(|| panic!("no empty-catalog warning:\n{}", report.render_text()));
    assert!(
        warning.message.contains("found 0 packages"),
        "{}",
        warning.message
    );
    assert!(
        warning
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("symbolic links"),
        "{warning:?}"
    );
    // Outside the catalog: the loader refuses the link, naming it.
    let root = tmp.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    write_base(&tmp.path().join("elsewhere/p"));
    symlink(tmp.path().join("elsewhere/p"), root.join("p")).unwrap();
    let err = load_dir_with_files(&root, &LoadOptions::graph_only())
        .unwrap_err()
        .to_string();
    assert!(err.contains("p"), "{err}");
    // The same package copied in validates cleanly.
    let root = tmp.path().join("copied");
    write_base(&root.join("p"));
    let (cfg, origins) = load_dir_with_files(&root, &LoadOptions::graph_only()).unwrap();
    let report = validate(&cfg, Some(&origins));
    assert!(report.findings.is_empty(), "{}", report.render_text());
}
