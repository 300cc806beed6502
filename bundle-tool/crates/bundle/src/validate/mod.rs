//! Bundle validation: what `operator-sdk bundle validate` checks, and what OLM would reject at
//! install time, found at build time.
//!
//! Validators are pure: they read a loaded [`Bundle`] (and optionally the previous release's
//! bundle) and return every [`Finding`], each with a stable rule id, the file and the field
//! path. Suites:
//! - default (always): operator-framework/api's CSV, CRD and bundle validators, operator-registry's
//!   format checks (annotations, supported kinds), the CSV against OLM's real CSV CRD schema,
//!   the other manifests against Kubernetes schemas, install wiring (deployments, service
//!   accounts, webhooks, install modes), sizes and removed Kubernetes APIs;
//! - `operatorhub` and `good-practices` (opt-in, like `--select-optional suite=...`);
//! - upgrade safety against a previous bundle (`--previous`), as OLM enforces it for CRDs.
//!
//! The rule ids are listed in [`RULES`]. Where upstream only warns, so do we; where upstream
//! says nothing but OLM fails the install, we report an error.

mod crd;
mod csv;
mod format;
mod install;
mod optional;
mod upgrade;

use crate::model::{Bundle, Manifest};
use olmkit_core::{Finding, Report};
use serde_json::Value;
use std::collections::BTreeSet;

/// Optional suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suite {
    /// OperatorHub.io publishing criteria (operator-framework/api `OperatorHubValidator`).
    OperatorHub,
    /// operator-framework/api `GoodPracticesValidator`.
    GoodPractices,
}

impl Suite {
    /// Parses a `--select-optional` value: `suite=operatorhub`, `suite=good-practices`,
    /// `suite=all`, or `name=<validator>` with the same names.
    pub fn parse_selector(s: &str) -> Result<Vec<Suite>, String> {
        let value = s
            .strip_prefix("suite=")
            .or_else(|| s.strip_prefix("name="))
            .unwrap_or(s);
        match value {
            "operatorhub" | "operatorhubv2" => Ok(vec![Suite::OperatorHub]),
            "good-practices" | "goodpractices" => Ok(vec![Suite::GoodPractices]),
            "all" | "operatorframework" => Ok(vec![Suite::OperatorHub, Suite::GoodPractices]),
            other => Err(format!(
                "unknown optional suite {other:?} (expected operatorhub, good-practices or all)"
            )),
        }
    }
}

/// What to check.
#[derive(Clone, Debug, Default)]
pub struct ValidateOptions {
    /// Optional suites to run in addition to the default one.
    pub suites: BTreeSet<Suite>,
}

/// Every rule id, with its suite and what it checks (for `--help` and documentation).
pub const RULES: &[(&str, &str, &str)] = &[
    (
        "bundle-annotations",
        "default",
        "metadata/annotations.yaml exists and has the required operators.operatorframework.io.bundle.* keys with valid values",
    ),
    (
        "bundle-default-channel",
        "default",
        "the default channel is one of the bundle's channels",
    ),
    (
        "bundle-size",
        "default",
        "the gzip-compressed manifests fit OLM's bundle size limit (~4 MiB; warning above 85%)",
    ),
    (
        "dockerfile-labels",
        "default",
        "bundle.Dockerfile LABELs equal the annotations",
    ),
    (
        "dockerfile-copy",
        "default",
        "bundle.Dockerfile COPY sources exist in the bundle directory",
    ),
    (
        "manifest-kind",
        "default",
        "every manifest is a kind OLM installs from a registry+v1 bundle",
    ),
    (
        "manifest-metadata",
        "default",
        "every manifest has apiVersion, kind and a valid metadata.name; no duplicates",
    ),
    (
        "manifest-namespace",
        "default",
        "namespaced manifests carry no metadata.namespace (OLM installs into the operator's namespace)",
    ),
    (
        "manifest-size",
        "default",
        "no single manifest exceeds 1 MiB",
    ),
    (
        "csv-missing",
        "default",
        "the bundle has exactly one ClusterServiceVersion",
    ),
    (
        "csv-schema",
        "default",
        "the CSV validates against OLM's ClusterServiceVersion CRD schema",
    ),
    (
        "csv-name",
        "default",
        "metadata.name is a DNS-1123 subdomain of at most 63 characters shaped <package>.v<semver>",
    ),
    (
        "csv-version",
        "default",
        "spec.version is semver and matches the name",
    ),
    (
        "csv-package",
        "default",
        "the CSV name starts with the package name",
    ),
    (
        "csv-replaces",
        "default",
        "spec.replaces names a CSV of the same package, not itself",
    ),
    (
        "csv-skips",
        "default",
        "spec.skips entries are CSV names of the same package",
    ),
    (
        "csv-skip-range",
        "default",
        "olm.skipRange parses as an OLM (blang) semver range",
    ),
    (
        "csv-annotations",
        "default",
        "case-sensitive OLM annotation keys are spelled right; olm.properties is not used",
    ),
    (
        "csv-min-kube-version",
        "default",
        "spec.minKubeVersion is a version",
    ),
    (
        "csv-install-modes",
        "default",
        "install modes exist, are unique, one is supported, and only AllNamespaces with conversion webhooks",
    ),
    (
        "csv-examples",
        "default",
        "alm-examples parses and names owned kinds/versions; owned APIs have examples",
    ),
    (
        "csv-required",
        "default",
        "displayName is set and the install strategy is deployment",
    ),
    (
        "csv-owned-crds",
        "default",
        "owned CRDs match the CRDs shipped (names, versions, kinds)",
    ),
    (
        "csv-webhooks",
        "default",
        "webhookdefinitions reference install deployments, do not intercept OLM's own resources, and convert owned CRDs",
    ),
    (
        "crd-schema",
        "default",
        "CRDs validate as apiextensions.k8s.io/v1 objects",
    ),
    (
        "crd-versions",
        "default",
        "CRDs have exactly one storage version, served versions and a name <plural>.<group>",
    ),
    (
        "crd-conversion",
        "default",
        "CRDs with a conversion webhook are wired to a ConversionWebhook definition",
    ),
    (
        "install-deployments",
        "default",
        "install deployments exist, are unique, valid apps/v1 DeploymentSpecs with matching selectors",
    ),
    (
        "install-service-accounts",
        "default",
        "every deployment's service account is created by OLM or shipped; no bundled account shadows one OLM creates",
    ),
    (
        "install-permissions",
        "default",
        "permissions are for service accounts some deployment uses",
    ),
    (
        "kube-schema",
        "default",
        "Services, ConfigMaps, RBAC and webhook configurations validate against Kubernetes schemas",
    ),
    (
        "deprecated-api",
        "default",
        "no manifest uses an API removed from Kubernetes (error when minKubeVersion is past the removal)",
    ),
    (
        "operatorhub",
        "operatorhub",
        "OperatorHub.io criteria: provider, maintainers, links, capabilities, categories, icon, minKubeVersion, naming, channels",
    ),
    (
        "good-practices",
        "good-practices",
        "resource requests, channel naming, CRD descriptions",
    ),
    (
        "crd-upgrade",
        "previous",
        "CRD upgrade safety: stored and served versions kept, scope unchanged, no new required fields or tightened bounds",
    ),
    (
        "upgrade-edge",
        "previous",
        "the new CSV replaces, skips or skipRanges the previous one",
    ),
];

/// Validation state: the bundle, precomputed facts and the findings so far.
pub(crate) struct Ctx<'a> {
    pub bundle: &'a Bundle,
    pub csv: Option<&'a Manifest>,
    pub findings: Vec<Finding>,
}

impl<'a> Ctx<'a> {
    fn new(bundle: &'a Bundle) -> Self {
        Self {
            bundle,
            csv: bundle.csv(),
            findings: Vec::new(),
        }
    }

    pub fn error(
        &mut self,
        rule: &str,
        file: Option<&str>,
        path: Option<&str>,
        msg: impl Into<String>,
    ) -> &mut Finding {
        self.push(Finding::error(rule, msg), file, path)
    }

    pub fn warning(
        &mut self,
        rule: &str,
        file: Option<&str>,
        path: Option<&str>,
        msg: impl Into<String>,
    ) -> &mut Finding {
        self.push(Finding::warning(rule, msg), file, path)
    }

    fn push(&mut self, mut f: Finding, file: Option<&str>, path: Option<&str>) -> &mut Finding {
        f.file = file.map(str::to_string);
        f.path = path.filter(|p| !p.is_empty()).map(str::to_string);
        self.findings.push(f);
        let last = self.findings.len() - 1;
        &mut self.findings[last]
    }

    /// The CSV file, for findings about it.
    pub fn csv_file(&self) -> Option<&'a str> {
        self.csv.map(|m| m.file.as_str())
    }

    /// The CSV object, or `Null`.
    pub fn csv_obj(&self) -> &'a Value {
        static NULL: Value = Value::Null;
        self.csv.map(|m| &m.object).unwrap_or(&NULL)
    }
}

/// Adds a hint to the finding just pushed.
pub(crate) fn hint(f: &mut Finding, h: impl Into<String>) {
    f.hint = Some(h.into());
}

/// Validates `bundle`; with `previous`, also checks the upgrade from it. Every finding's file is
/// relative to the bundle directory.
pub fn validate_bundle(
    bundle: &Bundle,
    previous: Option<&Bundle>,
    options: &ValidateOptions,
) -> Report {
    let mut ctx = Ctx::new(bundle);
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
    let mut report = Report {
        findings: ctx.findings,
    };
    report.normalize();
    report
}
