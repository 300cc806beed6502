//! Bundle validation: what `operator-sdk bundle validate` checks, and what OLM would reject at
//! install time, found at build time.
//!
//! Validators are pure: they read a loaded [`Bundle`] (and optionally the previous release's
//! bundle) and return every [`Finding`](olmkit_core::Finding), each with a stable rule id, the
//! file and the field path. Suites:
//! - default (always): operator-framework/api's CSV, CRD and bundle validators, operator-registry's
//!   format checks (annotations, supported kinds), the CSV against OLM's real CSV CRD schema,
//!   the other manifests against Kubernetes schemas, install wiring (deployments, service
//!   accounts, webhooks, install modes), sizes and removed Kubernetes APIs;
//! - `operatorhub` and `good-practices` (opt-in, like `--select-optional suite=...`);
//! - upgrade safety against a previous bundle (`--previous`), as OLM enforces it for CRDs;
//! - `olm-v1` ([`olmv1`], its own entry point): what OLM v1 (operator-controller) cannot
//!   install, judged with the FBC properties a catalog carries for the bundle.
//!
//! Every rule is a constant of [`rules`] ([`olmkit_core::Rule`]: id, suite, the upstream
//! function it mirrors, description), listed in [`RULES`]. Each area file (format, CSV, CRD,
//! install, optional suites, upgrade) keeps a list of small checks, one per rule or per
//! upstream check, each reporting `ctx.at(file, path).error(&RULE, msg).hint(..)`
//! (`.warning`, `.stricter`). operator-sdk v1.38's verdict is the specification:
//! where upstream reports an error, so do we; where we judge something upstream accepts (a
//! Kubernetes schema, a naming convention, what OLM would fail on at install time), it is a
//! warning, and an error only with the opt-in `strict` suite ([`Suite::Strict`]). The
//! conformance test (`tests/it/conformance.rs`) holds this against operator-sdk's verdicts on
//! the community-operators corpus.

mod crd;
mod crd_upgrade;
mod csv;
mod format;
mod install;
pub mod olmv1;
mod optional;
mod removed;
pub mod rules;
mod upgrade;

use crate::model::{Bundle, Manifest};
use olmkit_core::Report;
use olmkit_core::csv::Csv;
use olmkit_core::rule::{At, Findings};
use serde_json::Value;
use std::collections::BTreeSet;

/// Optional suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suite {
    /// OperatorHub.io publishing criteria (operator-framework/api `OperatorHubValidator`).
    OperatorHub,
    /// operator-framework/api `GoodPracticesValidator`.
    GoodPractices,
    /// bundle-tool's own checks that go beyond operator-sdk (what OLM would fail on at
    /// install time, Kubernetes schemas, naming conventions) become errors instead of warnings.
    Strict,
}

impl Suite {
    /// The suite's name as `--select-optional suite=<name>` and [`RULES`] spell it.
    pub fn name(self) -> &'static str {
        match self {
            Suite::OperatorHub => "operatorhub",
            Suite::GoodPractices => "good-practices",
            Suite::Strict => "strict",
        }
    }

    /// Parses a `--select-optional` value: `suite=operatorhub`, `suite=good-practices`,
    /// `suite=all`, or `name=<validator>` with the same names.
    pub fn parse_selector(s: &str) -> Result<Vec<Suite>, String> {
        let s = s.trim();
        let value = s
            .strip_prefix("suite=")
            .or_else(|| s.strip_prefix("name="))
            .unwrap_or(s)
            .trim();
        match value {
            "operatorhub" | "operatorhubv2" => Ok(vec![Suite::OperatorHub]),
            "good-practices" | "goodpractices" => Ok(vec![Suite::GoodPractices]),
            "strict" => Ok(vec![Suite::Strict]),
            "all" | "operatorframework" => Ok(vec![Suite::OperatorHub, Suite::GoodPractices]),
            other => Err(format!(
                "unknown optional suite {other:?} (expected operatorhub, good-practices, strict or all)"
            )),
        }
    }
}

/// What to check.
#[derive(Clone, Debug, Default)]
pub struct ValidateOptions {
    /// Optional suites to run in addition to the default one.
    pub suites: BTreeSet<Suite>,
    /// The Kubernetes version the bundle is meant for (operator-sdk
    /// `--optional-values k8s-version=1.25`): the removed-APIs check of the operatorhub suite
    /// reports APIs removed in or before it as errors.
    pub k8s_version: Option<String>,
    /// Custom OperatorHub categories (operator-sdk reads them from the JSON file named by
    /// `OPERATOR_BUNDLE_CATEGORIES`); `None` means the standard list.
    pub categories: Option<BTreeSet<String>>,
}

pub use rules::RULES;

/// Validation state: the bundle, precomputed facts and the findings so far.
pub(crate) struct Ctx<'a> {
    pub bundle: &'a Bundle,
    pub csv: Option<&'a Manifest>,
    pub options: &'a ValidateOptions,
    pub findings: Findings,
}

impl<'a> Ctx<'a> {
    fn new(bundle: &'a Bundle, options: &'a ValidateOptions) -> Self {
        Self {
            bundle,
            csv: bundle.csv(),
            options,
            // What operator-sdk does not report (or only warns about) but bundle-tool judges
            // worth fixing is a warning, an error only with `--select-optional suite=strict`.
            findings: Findings::new(options.suites.contains(&Suite::Strict)),
        }
    }

    /// Where the next finding points: `ctx.at(file, path).error(&RULE, msg).hint(..)`.
    pub fn at<'s, 'p>(&'s mut self, file: Option<&'p str>, path: Option<&'p str>) -> At<'s, 'p> {
        self.findings.at(file, path)
    }

    /// The CSV file, for findings about it.
    pub fn csv_file(&self) -> Option<&'a str> {
        self.csv.map(|m| m.file.as_str())
    }

    /// The CSV, as a typed view (of `Null` when the bundle has none).
    pub fn csv_view(&self) -> Csv<'a> {
        Csv::new(self.csv_obj())
    }

    /// The CSV object, or `Null`.
    pub fn csv_obj(&self) -> &'a Value {
        static NULL: Value = Value::Null;
        self.csv.map(|m| &m.object).unwrap_or(&NULL)
    }
}

/// apimachinery's name-validation messages ([`olmkit_core::k8s_name`]) joined with "," as
/// operator-framework/api reports them, or `None` when there are none (the name is valid).
pub(crate) fn name_problem(errors: Vec<String>) -> Option<String> {
    (!errors.is_empty()).then(|| errors.join(","))
}

/// Validates `bundle`; with `previous`, also checks the upgrade from it. Every finding's file is
/// relative to the bundle directory.
pub fn validate_bundle(
    bundle: &Bundle,
    previous: Option<&Bundle>,
    options: &ValidateOptions,
) -> Report {
    let mut ctx = Ctx::new(bundle, options);
    format::check(&mut ctx);
    csv::check(&mut ctx);
    crd::check(&mut ctx);
    install::check(&mut ctx);
    if options.suites.contains(&Suite::OperatorHub) {
        optional::operatorhub(&mut ctx);
    }
    if options.suites.contains(&Suite::GoodPractices) {
        optional::good_practices(&mut ctx);
    }
    if let Some(prev) = previous {
        upgrade::check(&mut ctx, prev);
    }
    ctx.findings.into_report()
}
