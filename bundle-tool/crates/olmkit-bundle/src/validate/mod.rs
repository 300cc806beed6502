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
//! - upgrade safety against a previous bundle (`--previous`), as OLM enforces it for CRDs;
//! - `olm-v1` ([`olmv1`], its own entry point): what OLM v1 (operator-controller) cannot
//!   install, judged with the FBC properties a catalog carries for the bundle.
//!
//! The rule ids are listed in [`RULES`]. operator-sdk v1.38's verdict is the specification:
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

/// Every rule id, with its suite and what it checks (for `--help` and documentation).
pub const RULES: &[(&str, &str, &str)] = &[
    (
        "yaml-syntax",
        "default",
        "(warning) YAML that only Go's lenient decoder reads (duplicate keys, under-indented quoted scalars), or a metadata file upstream ignores",
    ),
    (
        "bundle-annotations",
        "default",
        "metadata/annotations.yaml exists with the mediatype, package and channels keys (operator-registry validateAnnotations: errors); other values and empty entries (warnings)",
    ),
    (
        "bundle-default-channel",
        "default",
        "(warning) the default channel is one of the bundle's channels",
    ),
    (
        "bundle-size",
        "default",
        "the manifests, each gzip-compressed and base64-encoded, sum to at most 1 MiB (operator-framework/api validateBundleSize; warning above 85%)",
    ),
    (
        "dockerfile-labels",
        "default",
        "(warning) bundle.Dockerfile LABELs equal the annotations",
    ),
    (
        "dockerfile-copy",
        "default",
        "(warning) bundle.Dockerfile COPY sources name something in the bundle, resolved against a build context above it",
    ),
    (
        "manifest-kind",
        "default",
        "every manifest is a kind OLM installs from a registry+v1 bundle, and manifests/ holds no folder or hidden file (operator-sdk ValidateBundleContent, operator-framework/api loadBundle)",
    ),
    (
        "manifest-metadata",
        "default",
        "every manifest has a kind and a metadata.name (errors, as operator-sdk); apiVersion, name syntax per kind and duplicates (warnings)",
    ),
    (
        "manifest-namespace",
        "default",
        "namespaced manifests carry no metadata.namespace (OLM installs into the operator's namespace)",
    ),
    (
        "manifest-size",
        "default",
        "(warning) no single object exceeds 1 MiB as JSON",
    ),
    (
        "csv-missing",
        "default",
        "the bundle has exactly one ClusterServiceVersion (operator-framework/api loadBundle)",
    ),
    (
        "csv-schema",
        "default",
        "(warning) the CSV, as Go decodes it, validates against OLM's ClusterServiceVersion CRD schema",
    ),
    (
        "csv-name",
        "default",
        "metadata.name is a DNS-1123 subdomain and a label value (operator-framework/api parseCSVNameFormat: error); shaped <operator>.v<semver> (warning)",
    ),
    (
        "csv-version",
        "default",
        "spec.version is semver (Go decoding: error), set and matching the name (warnings)",
    ),
    (
        "csv-package",
        "default",
        "(warning) the CSV name starts with the package name",
    ),
    (
        "csv-replaces",
        "default",
        "spec.replaces is a valid CSV name (operator-framework/api parseCSVNameFormat: error); shape, self-reference and operator name (warnings)",
    ),
    (
        "csv-skips",
        "default",
        "(warning) spec.skips entries are CSV names sharing this CSV's operator name",
    ),
    (
        "csv-skip-range",
        "default",
        "(warning) olm.skipRange parses as an OLM (blang) semver range",
    ),
    (
        "csv-annotations",
        "default",
        "case-sensitive OLM annotation keys are spelled right (operator-framework/api ValidateAnnotationNames: error); olm.properties is not used (warning)",
    ),
    (
        "csv-min-kube-version",
        "default",
        "spec.minKubeVersion parses as strict semver (operator-framework/api validateMinKubeVersion: error; a warning when empty)",
    ),
    (
        "csv-install-modes",
        "default",
        "install modes exist, one is supported, only AllNamespaces with conversion CRDs (operator-framework/api validateInstallModes: errors); duplicates and unknown types (warnings)",
    ),
    (
        "csv-examples",
        "default",
        "alm-examples is JSON listing provided APIs only (operator-framework/api validateExamplesAnnotations: errors); owned APIs have examples (warning)",
    ),
    (
        "csv-required",
        "default",
        "fields without omitempty are set: displayName, install strategy, deployments (operator-framework/api checkEmptyFields: errors); the strategy is deployment (warning)",
    ),
    (
        "csv-owned-crds",
        "default",
        "owned CRDs are shipped and shipped CRDs are owned (operator-framework/api validateOwnedCRDs: errors); listed twice, served versions not listed (warnings)",
    ),
    (
        "csv-webhooks",
        "default",
        "(warning) webhookdefinitions reference install deployments, do not intercept OLM's own resources, and convert owned CRDs",
    ),
    (
        "crd-schema",
        "default",
        "(warning) CRDs, as Go decodes them, validate as apiextensions.k8s.io/v1 objects",
    ),
    (
        "crd-versions",
        "default",
        "name <plural>.<group>, one storage version, unique versions, conversionReviewVersions, preserveUnknownFields not true, apiextensions v1/v1beta1 only (apiextensions ValidateCustomResourceDefinition via operator-framework/api validateInternalCRD: errors)",
    ),
    (
        "crd-conversion",
        "default",
        "(warning) CRDs with a conversion webhook are wired to a ConversionWebhook definition",
    ),
    (
        "install-deployments",
        "default",
        "(warning) install deployments exist, are unique, valid apps/v1 DeploymentSpecs (as Go decodes them) with matching selectors",
    ),
    (
        "install-service-accounts",
        "default",
        "no bundled ServiceAccount is named like a deployment's serviceAccountName (operator-framework/api validateServiceAccounts: error); every deployment's account is created by OLM or shipped (warning)",
    ),
    (
        "install-permissions",
        "default",
        "(warning) permissions are for service accounts some deployment uses",
    ),
    (
        "kube-schema",
        "default",
        "(warning) Services, ConfigMaps, RBAC and webhook configurations, as Go decodes them, validate against Kubernetes schemas",
    ),
    (
        "deprecated-api",
        "default",
        "(warning) no manifest uses an API removed from Kubernetes (an error with suite=strict when minKubeVersion is past the removal)",
    ),
    (
        "operatorhub",
        "operatorhub",
        "OperatorHub.io criteria: provider, maintainers, links, capabilities, categories, version, icon, minKubeVersion (operator-framework/api validateHubCSVSpec, checkCategories, checkCapabilities); naming and channels (warnings)",
    ),
    (
        "removed-api",
        "operatorhub",
        "APIs removed in Kubernetes 1.22/1.25/1.26 (operator-framework/api validateDeprecatedAPIS): errors when k8s-version or minKubeVersion is at or past the removal, warnings otherwise and for 1.25 permission rules",
    ),
    (
        "good-practices",
        "good-practices",
        "resource requests, channel naming, CRD descriptions",
    ),
    (
        "crd-upgrade",
        "previous",
        "CRD upgrade safety: what OLM v1's CRD upgrade safety preflight refuses (operator-controller crdupgradesafety NoScopeChange, NoStoredVersionRemoved, NoExistingFieldRemoved and the per-field Enum, Required, Maximum/Minimum and length/item/property bounds, Default, Type, pattern, nullable and unhandled changes: errors); served versions kept (error); a CRD no longer shipped (warning)",
    ),
    (
        "upgrade-edge",
        "previous",
        "the new CSV replaces, skips or skipRanges the previous one",
    ),
    (
        "olmv1-render",
        "olm-v1",
        "the bundle converts to the FBC properties OLM v1 reads (opm render's registry+v1 conversion)",
    ),
    (
        "olmv1-package",
        "olm-v1",
        "the bundle names its package (operator-controller CheckPackageNameNotEmpty)",
    ),
    (
        "olmv1-install-modes",
        "olm-v1",
        "AllNamespaces is supported (error without Own/SingleNamespace either; warning when OLM v1 needs a watchNamespace configuration)",
    ),
    (
        "olmv1-dependencies",
        "olm-v1",
        "no dependencies: olm.gvk.required, olm.package.required, olm.constraint properties, required CRDs and APIServices (OLM v1 does not resolve them)",
    ),
    (
        "olmv1-apiservices",
        "olm-v1",
        "the CSV owns no APIService definitions (operator-controller: \"apiServiceDefintions are not supported\")",
    ),
    (
        "olmv1-operator-conditions",
        "olm-v1",
        "(warning) the operator does not use the OperatorConditions API, which OLM v1 does not provide",
    ),
    (
        "olmv1-deployments",
        "olm-v1",
        "install deployment names are unique DNS-1123 subdomains (operator-controller CheckDeploymentSpecUniqueness, CheckDeploymentNameIsDNS1123SubDomain)",
    ),
    (
        "olmv1-crds",
        "olm-v1",
        "CRD names are unique and owned CRDs are shipped (operator-controller CheckCRDResourceUniqueness, CheckOwnedCRDExistence)",
    ),
    (
        "olmv1-unsupported-object",
        "olm-v1",
        "every manifest is a kind OLM v1 installs (operator-controller CheckObjectSupport)",
    ),
    (
        "olmv1-webhooks",
        "olm-v1",
        "webhooks need a certificate provider (warning); unique DNS-1123 names, existing deployments, conversion webhooks with AllNamespaces only and owned, unshared CRDs, no forbidden rules (operator-controller CheckWebhook*, CheckConversionWebhook*: errors)",
    ),
];

/// Validation state: the bundle, precomputed facts and the findings so far.
pub(crate) struct Ctx<'a> {
    pub bundle: &'a Bundle,
    pub csv: Option<&'a Manifest>,
    pub options: &'a ValidateOptions,
    pub findings: Vec<Finding>,
}

impl<'a> Ctx<'a> {
    fn new(bundle: &'a Bundle, options: &'a ValidateOptions) -> Self {
        Self {
            bundle,
            csv: bundle.csv(),
            options,
            findings: Vec::new(),
        }
    }

    /// A problem operator-sdk does not report (or only warns about) but that bundle-tool
    /// judges worth fixing: a warning, or an error with `--select-optional suite=strict`.
    /// Upstream's verdict is the specification; stricter judgements never fail by default.
    pub fn stricter(
        &mut self,
        rule: &str,
        file: Option<&str>,
        path: Option<&str>,
        msg: impl Into<String>,
    ) -> &mut Finding {
        if self.options.suites.contains(&Suite::Strict) {
            self.error(rule, file, path, msg)
        } else {
            self.warning(rule, file, path, msg)
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
    let mut report = Report {
        findings: ctx.findings,
    };
    report.normalize();
    report
}
