//! Comparing bundle-tool's validation with operator-sdk's recorded verdicts.
//!
//! operator-sdk v1.38 (`bundle validate -o json-alpha1`) reports errors as free text; the
//! [`UPSTREAM_RULES`] table maps each kind of upstream message to the rule ids of ours that
//! report the same problem. A bundle conforms when both verdicts agree, every upstream error
//! has a counterpart error of ours, and every error of ours has an upstream counterpart.
//! Shared by the corpus suite (`conformance.rs`) and the fixture test
//! (`conformance_fixtures.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use olmkit_bundle::{Suite, ValidateOptions, load_bundle_dir, validate_bundle};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// Upstream message fragment -> our rule ids reporting the same problem.
pub const UPSTREAM_RULES: &[(&str, &[&str])] = &[
    (
        "invalid service account found in bundle",
        &["install-service-accounts"],
    ),
    ("spec.preserveUnknownFields", &["crd-versions"]),
    ("but not defined in CSV", &["csv-owned-crds"]),
    ("not found in bundle", &["csv-owned-crds"]),
    ("duplicate CRD", &["csv-owned-crds"]),
    ("maximum bundle compressed size", &["bundle-size"]),
    ("metadata.name", &["csv-name", "crd-versions"]),
    ("spec.replaces", &["csv-replaces"]),
    ("invalid example", &["csv-examples"]),
    ("error decoding example", &["csv-examples"]),
    ("example must have a provided API", &["csv-examples"]),
    (
        "couldn't parse plural.group",
        &["csv-examples", "csv-owned-crds"],
    ),
    ("install modes not found", &["csv-install-modes"]),
    ("none of InstallModeTypes", &["csv-install-modes"]),
    ("only AllNamespaces InstallModeType", &["csv-install-modes"]),
    (
        "csv.Spec.MinKubeVersion has an invalid value",
        &["csv-min-kube-version", "operatorhub"],
    ),
    ("uses wrong case", &["csv-annotations"]),
    ("required field missing", &["csv-required"]),
    ("' is missing", &["csv-required"]),
    ("deprecated and removed in", &["removed-api"]),
    ("unable to use csv.Spec.MinKubeVersion", &["removed-api"]),
    ("invalid value informed via the k8s key", &["removed-api"]),
    ("unsupported media type", &["manifest-kind"]),
    ("bundle manifests dir", &["manifest-kind"]),
    ("categories", &["operatorhub"]),
    ("csv.Spec.", &["operatorhub"]),
    ("csv.Metadata.Annotations", &["operatorhub"]),
    ("Missing annotation", &["bundle-annotations"]),
    ("Expecting annotation", &["bundle-annotations"]),
    ("Could not find annotations file", &["bundle-annotations"]),
    ("spec.versions", &["crd-versions"]),
    ("spec.conversion", &["crd-versions", "crd-conversion"]),
    ("unsupported CRD version", &["crd-versions"]),
    ("no ClusterServiceVersion", &["csv-missing"]),
    ("multiple CSVs", &["csv-missing"]),
    ("unable to find a csv", &["csv-missing"]),
    ("unable to", &["bundle-load"]),
    ("error loading", &["bundle-load"]),
];

/// Our rule ids for one upstream error message (empty when the table has no entry).
pub fn rules_for(message: &str) -> BTreeSet<&'static str> {
    UPSTREAM_RULES
        .iter()
        .find(|(needle, _)| message.contains(needle))
        .map(|(_, rules)| rules.iter().copied().collect())
        .unwrap_or_default()
}

/// One recorded operator-sdk result (a line of `default.jsonl` / `operatorhub.jsonl`).
#[derive(Debug, Clone)]
pub struct Upstream {
    pub package: String,
    pub version: String,
    pub passed: bool,
    pub errors: Vec<String>,
}

impl Upstream {
    pub fn from_json(v: &Value) -> Upstream {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Upstream {
            package: s("package"),
            version: s("version"),
            passed: v.get("passed").and_then(Value::as_bool).unwrap_or(false),
            errors: v
                .get("errors")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Reads a JSON-lines verdict file.
pub fn read_jsonl(path: &Path) -> Vec<Upstream> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Upstream::from_json(&serde_json::from_str(l).expect("a JSON line")))
        .collect()
}

/// The two suites the corpus records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Which {
    Default,
    OperatorHub,
}

impl Which {
    pub fn name(self) -> &'static str {
        match self {
            Which::Default => "default",
            Which::OperatorHub => "operatorhub",
        }
    }
    pub fn options(self) -> ValidateOptions {
        let mut o = ValidateOptions::default();
        if self == Which::OperatorHub {
            o.suites.insert(Suite::OperatorHub);
        }
        o
    }
}

/// Our side of one comparison: the rule ids of our errors, and the messages for diagnostics.
#[derive(Debug, Clone)]
pub struct Ours {
    pub error_rules: BTreeSet<String>,
    pub errors: Vec<String>,
}

/// Loads and validates `dir` with `which`'s options; a bundle that does not load is one
/// `bundle-load` error.
pub fn ours(dir: &Path, which: Which) -> Ours {
    let [ours] = ours_in(dir, [which]);
    ours
}

/// [`ours`] for several suites from one load of the bundle (the corpus suite checks every
/// bundle in both suites: loading is a third of the work).
pub fn ours_in<const N: usize>(dir: &Path, suites: [Which; N]) -> [Ours; N] {
    match load_bundle_dir(dir) {
        Ok(b) => suites.map(|which| {
            let report = validate_bundle(&b, None, &which.options());
            let errors: Vec<_> = report
                .findings
                .iter()
                .filter(|f| f.severity == olmkit_core::Severity::Error)
                .collect();
            Ours {
                error_rules: errors.iter().map(|f| f.rule.clone()).collect(),
                errors: errors
                    .iter()
                    .map(|f| {
                        format!(
                            "[{}] {}: {}",
                            f.rule,
                            f.path.as_deref().unwrap_or(""),
                            f.message
                        )
                    })
                    .collect(),
            }
        }),
        Err(e) => suites.map(|_| Ours {
            error_rules: ["bundle-load".to_string()].into(),
            errors: vec![format!("[bundle-load] {e}")],
        }),
    }
}

/// Why one bundle does not conform; empty when it does.
pub fn disagreements(up: &Upstream, ours: &Ours) -> Vec<String> {
    let mut out = Vec::new();
    let we_pass = ours.error_rules.is_empty();
    if we_pass != up.passed {
        out.push(format!(
            "verdict: operator-sdk {}, bundle-tool {}",
            if up.passed { "passes" } else { "fails" },
            if we_pass { "passes" } else { "fails" }
        ));
    }
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    for e in &up.errors {
        let rules = rules_for(e);
        covered.extend(rules.iter().copied());
        if !rules.iter().any(|r| ours.error_rules.contains(*r)) {
            out.push(format!(
                "upstream error without a counterpart (expected one of {rules:?}): {e}"
            ));
        }
    }
    for (rule, msg) in ours.error_rules.iter().map(|r| {
        (
            r,
            ours.errors
                .iter()
                .find(|m| m.starts_with(&format!("[{r}]"))),
        )
    }) {
        if !covered.contains(rule.as_str()) {
            out.push(format!(
                "our error without an upstream counterpart: {}",
                msg.map(String::as_str).unwrap_or(rule)
            ));
        }
    }
    out
}
