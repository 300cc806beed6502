//! Can OLM v1 install this bundle? The registry+v1 features OLM v1 rejects or handles
//! differently, checked before a ClusterExtension fails on the cluster (the opt-in `olm-v1`
//! suite of `bundle-tool validate`, and `bundle-tool install --olm-v1`).
//!
//! Sources: operator-controller's docs ("OLM v1 limitations", "Supported extensions") and its
//! registry+v1 renderer's validators (`internal/operator-controller/rukpak/render/registryv1/
//! validators`, run by `registryv1.BundleValidator`). The bundle must support the
//! `AllNamespaces` install mode (Single/OwnNamespace only through the `watchNamespace`
//! configuration, which not every release serves); it must not declare dependencies
//! (`olm.gvk.required`, `olm.package.required`, `olm.constraint`, which is also what required
//! CRDs and APIServices in the CSV become); the OperatorConditions API does not exist under
//! OLM v1; bundles with APIService definitions are rejected; webhooks need a certificate
//! provider (cert-manager upstream, the service CA on OpenShift) and, for conversion webhooks,
//! AllNamespaces only; webhook rules may not target all API groups, OLM's own group or
//! admission webhook configurations; and only the manifest kinds the renderer lists as
//! supported may ship in the bundle. Structural rules the renderer enforces (unique deployment,
//! CRD and webhook names, webhooks pointing at existing deployments and owned CRDs) are
//! checked too.
//!
//! The input is [`Olmv1Bundle`], a borrowed view of the bundle as OLM v1 sees it: a bundle
//! directory or a catalog bundle, with the FBC properties a catalog would carry for it (the
//! caller renders them; dependencies are properties there). The checks are pure and report
//! every problem: errors block an install, warnings need a feature or configuration on the
//! cluster. Each rule id is listed in [`super::RULES`] under the `olm-v1` suite.

use super::rules::{
    OLMV1_APISERVICES, OLMV1_CRDS, OLMV1_DEPENDENCIES, OLMV1_DEPLOYMENTS, OLMV1_INSTALL_MODES,
    OLMV1_OPERATOR_CONDITIONS, OLMV1_PACKAGE, OLMV1_RENDER, OLMV1_UNSUPPORTED_OBJECT,
    OLMV1_WEBHOOKS,
};
use crate::json::arr_at;
use crate::model::Bundle;
use olmkit_core::csv::Csv;
use olmkit_core::k8s_name::is_dns1123_subdomain;
use olmkit_core::rule::At;
use olmkit_core::{Finding, Findings, Report};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Manifest kinds OLM v1's registry+v1 renderer accepts besides the CSV (operator-controller
/// `CheckObjectSupport`, after operator-registry `IsSupported`).
pub const SUPPORTED_KINDS: &[&str] = &[
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Service",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "Secret",
    "ConfigMap",
];

/// FBC property types that declare a dependency (operator-registry `property.TypeGVKRequired`,
/// `TypePackageRequired`, `TypeConstraint`).
const GVK_REQUIRED: &str = "olm.gvk.required";
const PACKAGE_REQUIRED: &str = "olm.package.required";
const CONSTRAINT: &str = "olm.constraint";

/// Where `metadata/dependencies.yaml` findings point.
const DEPENDENCIES_FILE: &str = "metadata/dependencies.yaml";

/// One manifest of the bundle, with the file it came from when known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Olmv1Object<'a> {
    /// File (relative to the bundle or catalog root), if known.
    pub file: Option<&'a str>,
    /// The object.
    pub object: &'a Value,
}

impl<'a> Olmv1Object<'a> {
    /// `kind`.
    pub fn kind(&self) -> &'a str {
        olmkit_core::object::kind(self.object)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        olmkit_core::object::name(self.object)
    }
}

/// One FBC property of the bundle (`type` and `value`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Olmv1Property<'a> {
    /// `type`, e.g. `olm.gvk.required`.
    pub type_: &'a str,
    /// `value`.
    pub value: &'a Value,
}

/// A bundle as OLM v1 sees it: its manifests and the FBC properties a catalog carries for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Olmv1Bundle<'a> {
    /// Package name (empty when the bundle names none).
    pub package: &'a str,
    /// Where the bundle came from, for messages (`bundle/` or `catalog bundle x.v1`).
    pub origin: Cow<'a, str>,
    /// The ClusterServiceVersion.
    pub csv: Olmv1Object<'a>,
    /// Every other manifest.
    pub objects: Vec<Olmv1Object<'a>>,
    /// FBC properties (dependencies appear here as `olm.gvk.required`,
    /// `olm.package.required`, `olm.constraint`).
    pub properties: Vec<Olmv1Property<'a>>,
    /// The file the dependencies come from (`metadata/dependencies.yaml`), when known.
    pub dependencies_file: Option<&'a str>,
}

impl<'a> Olmv1Bundle<'a> {
    /// A loaded bundle directory with the properties a catalog would carry for it (rendered
    /// like `opm render` does) and the package they name. The first ClusterServiceVersion is
    /// the CSV, every other manifest an object; `None` without a CSV.
    pub fn from_bundle(
        bundle: &'a Bundle,
        package: &'a str,
        properties: Vec<Olmv1Property<'a>>,
    ) -> Option<Self> {
        let csv_index = bundle
            .manifests
            .iter()
            .position(|m| m.kind() == crate::kinds::CSV)?;
        let object = |m: &'a crate::model::Manifest| Olmv1Object {
            file: Some(m.file.as_str()),
            object: &m.object,
        };
        Some(Self {
            package,
            origin: Cow::Owned(bundle.root.display().to_string()),
            csv: object(&bundle.manifests[csv_index]),
            objects: bundle
                .manifests
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != csv_index)
                .map(|(_, m)| object(m))
                .collect(),
            properties,
            dependencies_file: bundle.dependencies.as_ref().map(|_| DEPENDENCIES_FILE),
        })
    }

    /// `metadata.name` of the CSV.
    pub fn csv_name(&self) -> &'a str {
        self.csv.name()
    }

    /// Where findings about the CSV point.
    pub fn csv_file(&self) -> String {
        self.csv
            .file
            .map(str::to_string)
            .unwrap_or_else(|| self.origin.to_string())
    }

    /// The CSV through the one lenient CSV view.
    pub fn csv_view(&self) -> Csv<'a> {
        Csv::new(self.csv.object)
    }

    /// The bundle's CRDs.
    fn crds(&self) -> impl Iterator<Item = &Olmv1Object<'a>> {
        self.objects
            .iter()
            .filter(|o| o.kind() == crate::kinds::CRD)
    }

    /// Install mode types the CSV supports, as OLM decodes `spec.installModes` into typed
    /// `InstallMode`s: a list that does not decode (an entry that is not an object, a
    /// non-string `type`, a non-boolean `supported`) counts as no install modes at all, and
    /// unknown types are ignored.
    fn supported_install_modes(&self) -> BTreeSet<&'a str> {
        let Some(list) = self
            .csv_view()
            .spec_field("installModes")
            .and_then(Value::as_array)
        else {
            return BTreeSet::new();
        };
        let mut out = BTreeSet::new();
        for mode in list {
            let Some(m) = mode.as_object() else {
                return BTreeSet::new();
            };
            let type_ = match m.get("type") {
                None => "",
                Some(Value::String(s)) => s.as_str(),
                Some(_) => return BTreeSet::new(),
            };
            let supported = match m.get("supported") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return BTreeSet::new(),
            };
            if supported && super::csv::INSTALL_MODES.contains(&type_) {
                out.insert(type_);
            }
        }
        out
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The findings so far, with the CSV file most of them point at.
struct Check<'v, 'a> {
    bundle: &'v Olmv1Bundle<'a>,
    csv_file: String,
    findings: Findings,
}

impl Check<'_, '_> {
    /// Where a finding about the CSV points: `c.at(path).error(&RULE, msg)`.
    fn at<'s>(&'s mut self, path: &'s str) -> At<'s, 's> {
        self.findings.at(Some(&self.csv_file), Some(path))
    }
}

/// Checks a bundle against OLM v1's rules; every problem is reported.
pub fn check_olmv1_support(bundle: &Olmv1Bundle) -> Report {
    let mut c = Check {
        bundle,
        csv_file: bundle.csv_file(),
        findings: Findings::new(false),
    };
    package_name(&mut c);
    install_modes(&mut c);
    declared_dependencies(&mut c);
    csv_required_apis(&mut c);
    api_services(&mut c);
    operator_conditions(&mut c);
    deployments(&mut c);
    crd_uniqueness(&mut c);
    owned_crd_existence(&mut c);
    object_support(&mut c);
    webhook_support(&mut c);
    webhook_names(&mut c);
    webhook_deployments(&mut c);
    conversion_webhooks(&mut c);
    webhook_rules(&mut c);
    c.findings.into_report()
}

/// `olmv1-render`: the bundle does not convert to the properties a catalog (and so OLM v1)
/// would carry for it, so none of the other OLM v1 checks can run; `file` is the file the
/// conversion refused, when known.
pub fn render_failed(file: Option<&str>, message: String) -> Finding {
    let f = Finding::error(OLMV1_RENDER.id, message).hint(
        "OLM v1 installs bundles from a catalog: fix the file so that `bundle-tool render` accepts the bundle",
    );
    match file {
        Some(file) => f.file(file.to_string()),
        None => f,
    }
}

/// `olmv1-package`: operator-controller `CheckPackageNameNotEmpty`.
fn package_name(c: &mut Check) {
    if c.bundle.package.is_empty() {
        c.findings
            .at(Some(c.bundle.origin.as_ref()), None)
            .error(&OLMV1_PACKAGE, "the bundle has no package name");
    }
}

/// `olmv1-install-modes`: operator-controller's registry+v1 renderer resolves the watch
/// namespace from the install modes (`render.validateTargetNamespaces`): AllNamespaces, or
/// Own/SingleNamespace with a `watchNamespace` configuration; MultiNamespace never.
fn install_modes(c: &mut Check) {
    let modes = c.bundle.supported_install_modes();
    if modes.contains("AllNamespaces") {
        return;
    }
    let name = c.bundle.csv_name();
    if modes.contains("OwnNamespace") || modes.contains("SingleNamespace") {
        c.at("spec.installModes").warning(&OLMV1_INSTALL_MODES, format!(
                "{name} does not support AllNamespaces; OLM v1 installs it only with a watchNamespace configuration (ClusterExtension spec.config.inline.watchNamespace), which needs an OLM v1 release that serves it"
            )).hint("support AllNamespaces if the operator can watch every namespace; OLM v1 treats APIs as cluster-wide");
    } else {
        c.at("spec.installModes").error(&OLMV1_INSTALL_MODES, format!(
                "{name} supports neither AllNamespaces nor Own/SingleNamespace; OLM v1 cannot install it (MultiNamespace is not supported)"
            )).hint("mark AllNamespaces as supported in spec.installModes");
    }
}

/// `olmv1-dependencies` (declared): OLM v1 does not resolve dependencies (operator-controller
/// docs, "OLM v1 limitations"); every dependency property of the bundle is reported where it
/// was declared.
fn declared_dependencies(c: &mut Check) {
    let b = c.bundle;
    let file = b
        .dependencies_file
        .map(str::to_string)
        .unwrap_or_else(|| b.csv_file());
    let path = if b.dependencies_file == Some(DEPENDENCIES_FILE) {
        "dependencies"
    } else {
        "properties"
    };
    for p in &b.properties {
        if ![GVK_REQUIRED, PACKAGE_REQUIRED, CONSTRAINT].contains(&p.type_) {
            continue;
        }
        c.findings.at(Some(&file), Some(path)).error(&OLMV1_DEPENDENCIES, format!(
                "OLM v1 does not resolve dependencies; the bundle declares {} {}",
                p.type_,
                serde_json::to_string(p.value).unwrap_or_default()
            )).hint("install the dependency separately and drop it from metadata/dependencies.yaml and the CSV's required APIs");
    }
}

/// `olmv1-dependencies` (CSV): required CRDs and APIServices are dependencies too (operator-
/// registry turns them into `olm.gvk.required`); those the properties do not already carry are
/// reported at the CSV field.
fn csv_required_apis(c: &mut Check) {
    let required_gvks: BTreeSet<String> = c
        .bundle
        .properties
        .iter()
        .filter(|p| p.type_ == GVK_REQUIRED)
        .filter_map(|p| {
            Some(format!(
                "{}/{}",
                p.value.get("group")?.as_str()?,
                p.value.get("kind")?.as_str()?
            ))
        })
        .collect();
    let csv = c.bundle.csv_view();
    let required_crds: Vec<&Value> = csv.required_crds().map(|d| d.raw).collect();
    let required_apis: Vec<&Value> = csv.required_api_services().map(|d| d.raw).collect();
    for (path, required) in [
        ("spec.customresourcedefinitions.required", required_crds),
        ("spec.apiservicedefinitions.required", required_apis),
    ] {
        for (i, r) in required.into_iter().enumerate() {
            let name = str_of(r, "name");
            let group = match str_of(r, "group") {
                // A required CRD's group is the part of its name after the plural.
                "" => name.split_once('.').map(|(_, g)| g).unwrap_or(""),
                g => g,
            };
            let kind = str_of(r, "kind");
            if required_gvks.contains(&format!("{group}/{kind}")) {
                continue;
            }
            c.at(&format!("{path}[{i}]")).error(
                &OLMV1_DEPENDENCIES,
                format!(
                    "OLM v1 does not resolve dependencies; the CSV requires {kind} ({})",
                    if name.is_empty() { group } else { name }
                ),
            );
        }
    }
}

/// `olmv1-apiservices`: operator-controller's registry+v1 conversion rejects owned APIService
/// definitions (`convert.Convert`: "apiServiceDefintions are not supported").
fn api_services(c: &mut Check) {
    let owned = c.bundle.csv_view().owned_api_services().count();
    if owned == 0 {
        return;
    }
    c.at("spec.apiservicedefinitions.owned").error(&OLMV1_APISERVICES, format!(
            "OLM v1 rejects bundles with APIService definitions (\"apiServiceDefintions are not supported\"); this CSV owns {}",
            owned
        ));
}

/// `olmv1-operator-conditions`: a CSV that asks for permission on OperatorConditions, or
/// deployments reading `OPERATOR_CONDITION_NAME`, relies on an API OLM v1 does not provide
/// (operator-controller docs, "OLM v1 limitations").
fn operator_conditions(c: &mut Check) {
    let csv = c.bundle.csv_view();
    let grants_conditions = csv
        .permissions()
        .chain(csv.cluster_permissions())
        .flat_map(|p| p.rules())
        .any(|rule| {
            strings(rule.get("apiGroups"))
                .iter()
                .any(|g| g == "operators.coreos.com")
                && strings(rule.get("resources"))
                    .iter()
                    .any(|r| r.starts_with("operatorconditions"))
        });
    let reads_condition_name = csv
        .deployments()
        .any(|d| d.raw.to_string().contains("OPERATOR_CONDITION_NAME"));
    if grants_conditions || reads_condition_name {
        c.at("spec.install").warning(&OLMV1_OPERATOR_CONDITIONS, "the operator uses the OperatorConditions API (operators.coreos.com operatorconditions), which OLM v1 does not provide; it may fail at start or when reporting upgradeability").hint("make the operator tolerate a missing OperatorCondition, or pin the ClusterExtension to a version");
    }
}

/// `olmv1-deployments`: operator-controller `CheckDeploymentSpecUniqueness` and
/// `CheckDeploymentNameIsDNS1123SubDomain`.
fn deployments(c: &mut Check) {
    let mut seen = BTreeSet::new();
    for d in c.bundle.csv_view().deployments() {
        let (i, name) = (d.index, d.name().unwrap_or(""));
        let path = format!("spec.install.spec.deployments[{i}].name");
        if !seen.insert(name) {
            c.at(&path).error(
                &OLMV1_DEPLOYMENTS,
                format!(
                    "cluster service version contains duplicate strategy deployment spec '{name}'"
                ),
            );
        }
        if !is_dns1123_subdomain(name) {
            c.at(&path).error(&OLMV1_DEPLOYMENTS, format!("invalid cluster service version strategy deployment name '{name}': not a DNS-1123 subdomain"));
        }
    }
}

/// `olmv1-crds` (uniqueness): operator-controller `CheckCRDResourceUniqueness`.
fn crd_uniqueness(c: &mut Check) {
    let b = c.bundle;
    let mut seen = BTreeSet::new();
    for crd in b.crds() {
        if seen.insert(crd.name()) {
            continue;
        }
        c.findings
            .at(Some(crd.file.unwrap_or(b.origin.as_ref())), None)
            .error(
                &OLMV1_CRDS,
                format!(
                    "bundle contains duplicate custom resource definition '{}'",
                    crd.name()
                ),
            );
    }
}

/// The names in `spec.customresourcedefinitions.owned`, in order.
fn owned_crd_names<'a>(b: &Olmv1Bundle<'a>) -> Vec<&'a str> {
    b.csv_view()
        .owned_crds()
        .map(|o| o.name().unwrap_or(""))
        .collect()
}

/// `olmv1-crds` (owned): operator-controller `CheckOwnedCRDExistence`.
fn owned_crd_existence(c: &mut Check) {
    let shipped: BTreeSet<&str> = c.bundle.crds().map(|crd| crd.name()).collect();
    for (i, name) in owned_crd_names(c.bundle).iter().enumerate() {
        if !shipped.contains(name) {
            c.at(&format!("spec.customresourcedefinitions.owned[{i}]")).error(&OLMV1_CRDS, format!("cluster service definition references owned custom resource definition '{name}' not found in bundle"));
        }
    }
}

/// `olmv1-unsupported-object`: operator-controller `CheckObjectSupport`.
fn object_support(c: &mut Check) {
    let b = c.bundle;
    for o in &b.objects {
        let kind = o.kind();
        if SUPPORTED_KINDS.contains(&kind) {
            continue;
        }
        c.findings
            .at(Some(o.file.unwrap_or(b.origin.as_ref())), None)
            .error(
                &OLMV1_UNSUPPORTED_OBJECT,
                format!(
                    "bundle contains unsupported resource: Name: {}, Kind: {kind}",
                    o.name()
                ),
            )
            .hint(format!(
                "OLM v1 installs only these kinds from a bundle: ClusterServiceVersion, {}",
                SUPPORTED_KINDS.join(", ")
            ));
    }
}

/// `olmv1-webhooks` (support): webhooks need a certificate provider, and older releases
/// refuse them outright (operator-controller `convert.Convert`: "webhookDefinitions are not
/// supported").
fn webhook_support(c: &mut Check) {
    let count = c.bundle.csv_view().webhook_definitions().count();
    if count == 0 {
        return;
    }
    c.at("spec.webhookdefinitions").warning(&OLMV1_WEBHOOKS, format!(
            "the bundle defines {count} webhook(s); OLM v1 installs them only with a certificate provider (cert-manager upstream, the service CA on OpenShift); older OLM v1 releases reject such bundles (\"webhookDefinitions are not supported\")"
        )).hint("install cert-manager on the cluster before the ClusterExtension");
}

/// `olmv1-webhooks` (names): operator-controller `CheckWebhookNameUniqueness` and
/// `CheckWebhookNameIsDNS1123SubDomain`.
fn webhook_names(c: &mut Check) {
    let mut names_by_type: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (i, wh) in c
        .bundle
        .csv_view()
        .webhook_definitions()
        .map(|w| (w.index, w.raw))
    {
        let path = format!("spec.webhookdefinitions[{i}]");
        let t = str_of(wh, "type");
        let name = str_of(wh, "generateName");
        if !names_by_type.entry(t).or_default().insert(name) {
            c.at(&path).error(
                &OLMV1_WEBHOOKS,
                format!("duplicate webhook '{name}' of type '{t}'"),
            );
        }
        if !is_dns1123_subdomain(name) {
            c.at(&format!("{path}.generateName")).error(
                &OLMV1_WEBHOOKS,
                format!(
                    "webhook of type '{t}' has invalid name '{name}': not a DNS-1123 subdomain"
                ),
            );
        }
    }
}

/// `olmv1-webhooks` (deployments): operator-controller
/// `CheckWebhookDeploymentReferentialIntegrity`.
fn webhook_deployments(c: &mut Check) {
    let deployments: BTreeSet<&str> = c
        .bundle
        .csv_view()
        .deployments()
        .map(|d| d.name().unwrap_or(""))
        .collect();
    for (i, wh) in c
        .bundle
        .csv_view()
        .webhook_definitions()
        .map(|w| (w.index, w.raw))
    {
        let dep = str_of(wh, "deploymentName");
        if deployments.contains(dep) {
            continue;
        }
        c.at(&format!("spec.webhookdefinitions[{i}].deploymentName")).error(&OLMV1_WEBHOOKS, format!(
                "webhook of type '{}' with name '{}' references non-existent deployment '{dep}'",
                str_of(wh, "type"),
                str_of(wh, "generateName")
            ));
    }
}

/// `olmv1-webhooks` (conversion): operator-controller `CheckConversionWebhookSupport`,
/// `CheckConversionWebhooksReferenceOwnedCRDs` and
/// `CheckConversionWebhookCRDReferenceUniqueness`.
fn conversion_webhooks(c: &mut Check) {
    let modes = c.bundle.supported_install_modes();
    let all_namespaces_only = modes.len() == 1 && modes.contains("AllNamespaces");
    let owned: BTreeSet<&str> = owned_crd_names(c.bundle).into_iter().collect();
    let mut hooks_by_crd: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (i, wh) in c
        .bundle
        .csv_view()
        .webhook_definitions()
        .map(|w| (w.index, w.raw))
    {
        if str_of(wh, "type") != "ConversionWebhook" {
            continue;
        }
        let path = format!("spec.webhookdefinitions[{i}]");
        let name = str_of(wh, "generateName");
        if !all_namespaces_only {
            c.at(&path).error(&OLMV1_WEBHOOKS, format!(
                    "conversion webhook '{name}': OLM v1 (like OLM v0) requires a bundle with conversion webhooks to support only AllNamespaces"
                ));
        }
        for crd in strings(wh.get("conversionCRDs")) {
            if !owned.contains(crd.as_str()) {
                c.at(&format!("{path}.conversionCRDs")).error(&OLMV1_WEBHOOKS, format!(
                        "conversion webhook '{name}' references custom resource definition '{crd}' not owned bundle"
                    ));
            }
            hooks_by_crd.entry(crd).or_default().push(name);
        }
    }
    for (crd, hooks) in hooks_by_crd {
        if hooks.len() > 1 {
            c.at("spec.webhookdefinitions").error(
                &OLMV1_WEBHOOKS,
                format!(
                    "conversion webhooks [{}] reference same custom resource definition '{crd}'",
                    hooks.join(",")
                ),
            );
        }
    }
}

/// `olmv1-webhooks` (rules): operator-controller `CheckWebhookRules`: admission webhooks may
/// not intercept every API group, OLM's own group, or admission webhook configurations.
fn webhook_rules(c: &mut Check) {
    for (i, wh) in c
        .bundle
        .csv_view()
        .webhook_definitions()
        .map(|w| (w.index, w.raw))
    {
        if str_of(wh, "type") == "ConversionWebhook" {
            continue;
        }
        let name = str_of(wh, "generateName");
        for (j, rule) in arr_at(wh, "/rules").iter().enumerate() {
            let path = format!("spec.webhookdefinitions[{i}].rules[{j}]");
            for group in strings(rule.get("apiGroups")) {
                if group == "*" || group == "olm.operatorframework.io" {
                    c.at(&path).error(&OLMV1_WEBHOOKS, format!(
                            "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference API group \"{group}\""
                        ));
                }
                if group != "admissionregistration.k8s.io" {
                    continue;
                }
                for r in strings(rule.get("resources")) {
                    let lower = r.to_ascii_lowercase();
                    if lower == "*"
                        || lower.starts_with("mutatingwebhookconfiguration")
                        || lower.starts_with("validatingwebhookconfiguration")
                    {
                        c.at(&path).error(&OLMV1_WEBHOOKS, format!(
                                "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference resource \"{r}\" for API group \"{group}\""
                            ));
                    }
                }
            }
        }
    }
}
