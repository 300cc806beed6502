//! ClusterServiceVersion checks.
//!
//! operator-framework/api `CSVValidator` (`pkg/validation/internal/csv.go` `validateCSV`: name
//! format, replaces, examples, install modes, annotation case, minKubeVersion, required fields)
//! and `BundleValidator` (`bundle.go` `validateOwnedCRDs`: owned CRDs against shipped CRDs) are
//! errors as upstream has them. OLM's schema for the CSV, naming conventions, upgrade edges and
//! what OLM checks when it installs webhooks are bundle-tool's own: warnings, errors with
//! `suite=strict`.

use super::Ctx;
use super::crd::crd_facts;
use super::format::parse_tolerant;
use super::rules::{
    CSV_ANNOTATIONS, CSV_EXAMPLES, CSV_INSTALL_MODES, CSV_MIN_KUBE_VERSION, CSV_NAME,
    CSV_OWNED_CRDS, CSV_PACKAGE, CSV_REPLACES, CSV_REQUIRED, CSV_SCHEMA, CSV_SKIP_RANGE, CSV_SKIPS,
    CSV_VERSION, CSV_WEBHOOKS,
};
use crate::json::arr_at;
use crate::naming::{package_of_csv_name, parse_csv_name};
use crate::schemas;
use olmkit_core::Rule;
use olmkit_core::csv::str_at;
use olmkit_core::csv::{ALM_EXAMPLES, Csv};
use olmkit_core::version_range::VersionRange;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Annotation keys OLM reads case-sensitively (operator-framework/api
/// `CaseSensitiveAnnotationKeySet`).
const CASE_SENSITIVE: &[&str] = &[
    "olm.operatorGroup",
    "olm.operatorNamespace",
    "olm.targetNamespaces",
    "olm.providedAPIs",
    "olm.skipRange",
];

/// The install mode types OLM knows (`v1alpha1.InstallModeType`).
pub(super) const INSTALL_MODES: [&str; 4] = [
    "OwnNamespace",
    "SingleNamespace",
    "MultiNamespace",
    "AllNamespaces",
];

/// operator-framework/api `parseCSVNameFormat`: `IsDNS1123Subdomain` and `IsValidLabelValue`
/// (OLM copies the name into labels), their messages joined with ",".
fn csv_name_problem(name: &str) -> Option<String> {
    let mut problems = olmkit_core::k8s_name::dns1123_subdomain_errors(name);
    problems.extend(olmkit_core::k8s_name::label_value_errors(name));
    super::name_problem(problems)
}

/// The CSV against OLM's ClusterServiceVersion CRD schema, as Go decodes it (operator-sdk
/// does not check it: stricter; unknown fields, which Go drops, are warnings).
fn schema(ctx: &mut Ctx, file: &str) {
    // The CSV as Go decodes it into `v1alpha1.ClusterServiceVersion`: `null`s are zero
    // values, and fields Go requires are always present afterwards (a missing
    // `resources[].name` of a built-in kind decodes to ""), so "required property" cannot
    // fail for the object OLM stores; unknown fields are dropped (a warning, even if strict).
    match schemas::validate_csv(&crate::json::without_nulls(ctx.csv_obj())) {
        Ok(violations) => {
            for v in violations {
                if v.message.ends_with("is a required property") {
                    continue;
                }
                if crate::json::is_unknown_field(&v.message) {
                    ctx.at(Some(file), Some(&v.path)).warning(
                        &CSV_SCHEMA,
                        format!("{} (ignored: Go drops unknown fields)", v.message),
                    );
                } else {
                    ctx.at(Some(file), Some(&v.path))
                        .stricter(&CSV_SCHEMA, v.message);
                }
            }
        }
        Err(e) => {
            ctx.at(Some(file), None).warning(
                &CSV_SCHEMA,
                format!("cannot check against the CSV schema: {e}"),
            );
        }
    }
}

/// The CSV's name, version and upgrade edges.
fn names(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let name = ctx.csv_view().name().unwrap_or("");
    let parsed = csv_name(ctx, f, name);
    csv_version(ctx, f, parsed.as_ref().map(|p| &p.1));
    csv_package(ctx, f, name, parsed.as_ref().map(|p| p.0.as_str()));
    // Upgrade edges name CSVs, whose names need not start with the package name: compare
    // with this CSV's own operator part.
    let operator = package_of_csv_name(name);
    replaces(ctx, f, name, operator);
    skips(ctx, f, operator);
    skip_range(ctx, f);
}

/// operator-framework/api `parseCSVNameFormat`: a DNS-1123 subdomain that is also a valid
/// label value (OLM copies it into labels, so at most 63 characters): an error. Not shaped
/// `<operator>.v<semver>`: a warning. Returns the name's operator and version parts.
fn csv_name(ctx: &mut Ctx, f: Option<&str>, name: &str) -> Option<(String, semver::Version)> {
    let problem = csv_name_problem(name);
    if let Some(p) = &problem {
        ctx.at(f, Some("metadata.name"))
            .error(&CSV_NAME, format!("metadata.name {name:?} is invalid: {p}"));
    }
    match parse_csv_name(name) {
        Ok(p) => Some(p),
        Err(e) if problem.is_none() => {
            ctx.at(f, Some("metadata.name"))
                .warning(
                    &CSV_NAME,
                    format!("metadata.name {e}; the convention is <operator>.v<semver>"),
                )
                .hint("name the CSV <package>.v<semver>, e.g. memcached-operator.v0.1.0");
            None
        }
        Err(_) => None,
    }
}

/// `spec.version`: one that is not semver makes Go's decoding of the CSV fail (an upstream
/// error: operator-framework/api's bundle loader decodes the typed CSV); a missing one is
/// allowed upstream (`version` is omitempty; stricter), one differing from the name's a warning.
fn csv_version(ctx: &mut Ctx, f: Option<&str>, name_version: Option<&semver::Version>) {
    let field = ctx.csv_view().spec_field("version");
    let at = ctx.at(f, Some("spec.version"));
    let version = match field {
        Some(Value::String(v)) => match semver::Version::parse(v) {
            Ok(v) => v,
            Err(e) => {
                let msg = format!("spec.version {v:?} is not a semantic version: {e}");
                at.error(&CSV_VERSION, msg);
                return;
            }
        },
        None | Some(Value::Null) => {
            let msg = "spec.version is not set: OLM orders bundles by it";
            at.stricter(&CSV_VERSION, msg);
            return;
        }
        Some(other) => {
            let found = crate::json::type_name(other);
            at.error(
                &CSV_VERSION,
                format!("spec.version must be a string, found {found}"),
            );
            return;
        }
    };
    if let Some(nv) = name_version
        && *nv != version
    {
        at.warning(&CSV_VERSION, format!("spec.version {version} differs from the version in metadata.name ({nv}); OLM uses spec.version, people read the name"));
    }
}

/// The CSV name starts with the package name (a convention; stricter).
fn csv_package(ctx: &mut Ctx, f: Option<&str>, name: &str, operator: Option<&str>) {
    let Some(pkg) = ctx.bundle.package() else {
        return;
    };
    if let Some(op) = operator
        && op != pkg
        && package_of_csv_name(name) != pkg
    {
        ctx.at(f, Some("metadata.name")).warning(&CSV_PACKAGE, format!("CSV name {name:?} does not start with the package name {pkg:?}; the convention is <package>.v<version>"));
    }
}

/// `spec.replaces`: operator-framework/api `parseCSVNameFormat` (an error); its shape, a CSV
/// replacing itself and another operator's name are bundle-tool's own.
fn replaces(ctx: &mut Ctx, f: Option<&str>, name: &str, operator: &str) {
    let Some(r) = ctx.csv_view().replaces().filter(|s| !s.is_empty()) else {
        return;
    };
    if let Some(p) = csv_name_problem(r) {
        ctx.at(f, Some("spec.replaces")).error(
            &CSV_REPLACES,
            format!("spec.replaces {r:?} is invalid: {p}"),
        );
    }
    match parse_csv_name(r) {
        Err(e) => {
            ctx.at(f, Some("spec.replaces"))
                .stricter(&CSV_REPLACES, format!("spec.replaces {e}"));
        }
        Ok(_) => {
            if r == name {
                ctx.at(f, Some("spec.replaces"))
                    .stricter(&CSV_REPLACES, format!("the CSV replaces itself ({r})"));
            }
            if package_of_csv_name(r) != operator {
                ctx.at(f, Some("spec.replaces")).warning(&CSV_REPLACES, format!("spec.replaces {r:?} does not share this CSV's operator name {operator:?}; check it names a CSV of the same package")).hint(format!("usually {operator}.v<previous version>"));
            }
        }
    }
}

/// `spec.skips` entries are CSV names of this operator (bundle-tool's own; upstream does not
/// look at them).
fn skips(ctx: &mut Ctx, f: Option<&str>, operator: &str) {
    for (i, s) in arr_at(ctx.csv_obj(), "/spec/skips").iter().enumerate() {
        let path = format!("spec.skips[{i}]");
        match s.as_str() {
            None | Some("") => {
                ctx.at(f, Some(&path))
                    .stricter(&CSV_SKIPS, "skips entries must be non-empty CSV names");
            }
            Some(s) => {
                if parse_csv_name(s).is_err() {
                    ctx.at(f, Some(&path)).warning(
                        &CSV_SKIPS,
                        format!("{s:?} is not shaped <package>.v<semver>"),
                    );
                } else if package_of_csv_name(s) != operator {
                    ctx.at(f, Some(&path)).warning(&CSV_SKIPS, format!("{s:?} does not share this CSV's operator name {operator:?}; check it names a CSV of the same package"));
                }
            }
        }
    }
}

/// `olm.skipRange` parses as a blang/semver range (operator-sdk does not parse it; OLM and opm
/// refuse the bundle's upgrade edges: stricter).
fn skip_range(ctx: &mut Ctx, f: Option<&str>) {
    if let Some(r) = ctx.csv_view().skip_range()
        && let Err(e) = VersionRange::parse(r)
    {
        // operator-sdk does not parse it; OLM and opm refuse the bundle's upgrade edges.
        ctx.at(f, Some("metadata.annotations.olm.skipRange")).stricter(&CSV_SKIP_RANGE, format!("invalid skipRange {r:?}: {e}")).hint("OLM parses it with blang/semver: full versions joined by spaces and ||, e.g. '>=0.1.0 <0.2.0'");
    }
}

/// operator-framework/api `ValidateAnnotationNames`: OLM's case-sensitive annotation keys are
/// spelled right (an error); `olm.properties` is not used (a warning, as upstream).
fn annotations(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let Some(ann) = ctx.csv_view().annotations() else {
        ctx.at(f, Some("metadata.annotations"))
            .warning(&CSV_EXAMPLES, "annotations not found (no alm-examples)");
        return;
    };
    for key in ann.keys() {
        if let Some(want) = CASE_SENSITIVE
            .iter()
            .find(|k| k.eq_ignore_ascii_case(key) && **k != key)
        {
            ctx.at(f, Some(&format!("metadata.annotations.{key}")))
                .error(
                    &CSV_ANNOTATIONS,
                    format!(
                        "provided annotation {key} uses wrong case and should be {want} instead"
                    ),
                );
        }
        if key == "olm.properties" {
            ctx.at(f, Some("metadata.annotations.olm.properties")).warning(&CSV_ANNOTATIONS, "found olm.properties annotation, please define these properties in metadata/properties.yaml instead");
        }
    }
}

/// What operator-framework/api says when `spec.minKubeVersion` is empty (a warning).
pub(crate) const MIN_KUBE_NOT_INFORMED: &str = "csv.Spec.minKubeVersion is not informed. It is recommended you provide this information. Otherwise, it would mean that your operator project can be distributed and installed in any cluster version available, which is not necessarily the case for all projects.";

/// operator-framework/api `validateMinKubeVersion`: a warning when empty, an error when blang
/// `semver.Parse` (strict: `1.25` and `v1.25.0` fail) refuses it.
pub(crate) fn min_kube_findings(ctx: &mut Ctx, file: &str, rule: &Rule) {
    match ctx.csv_view().min_kube_version() {
        None => {
            ctx.at(Some(file), Some("spec.minKubeVersion"))
                .warning(rule, MIN_KUBE_NOT_INFORMED);
        }
        Some(v) if v.trim().is_empty() => {
            ctx.at(Some(file), Some("spec.minKubeVersion"))
                .warning(rule, MIN_KUBE_NOT_INFORMED);
        }
        Some(v) if semver::Version::parse(v).is_err() => {
            let fi = ctx.at(Some(file), Some("spec.minKubeVersion")).error(
                rule,
                format!("csv.Spec.MinKubeVersion has an invalid value: {v}"),
            );
            if parse_tolerant(v).is_some() {
                fi.hint("write all three parts, e.g. 1.25.0 (operator-sdk parses it strictly)");
            }
        }
        Some(_) => {}
    }
}

/// operator-framework/api `validateMinKubeVersion` ([`min_kube_findings`]).
fn min_kube(ctx: &mut Ctx, file: &str) {
    min_kube_findings(ctx, file, &CSV_MIN_KUBE_VERSION);
}

/// operator-framework/api `validateInstallModes`: install modes exist, one is supported, only
/// AllNamespaces with conversion CRDs (errors); duplicates and unknown types (upstream never
/// reports them: stricter).
fn install_modes(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let modes: Vec<_> = csv.install_modes().collect();
    if modes.is_empty() {
        ctx.at(f, Some("spec.installModes")).error(&CSV_INSTALL_MODES, "install modes not found").hint("list OwnNamespace, SingleNamespace, MultiNamespace and AllNamespaces with supported: true/false");
        return;
    }
    let mut seen = BTreeSet::new();
    let mut supported = BTreeSet::new();
    for m in &modes {
        let (i, t) = (m.index, m.mode_type().unwrap_or(""));
        // Upstream never reports duplicates (its set is never filled) nor unknown types.
        if !seen.insert(t) {
            ctx.at(f, Some(&format!("spec.installModes[{i}]")))
                .stricter(&CSV_INSTALL_MODES, format!("duplicate install mode {t}"));
        }
        if !INSTALL_MODES.contains(&t) {
            ctx.at(f, Some(&format!("spec.installModes[{i}].type")))
                .stricter(&CSV_INSTALL_MODES, format!("unknown install mode {t:?}"));
        }
        if m.supported() == Some(true) {
            supported.insert(t);
        }
    }
    if supported.is_empty() {
        ctx.at(f, Some("spec.installModes"))
            .error(&CSV_INSTALL_MODES, "none of InstallModeTypes are supported");
    }
    // Any conversionCRDs entry counts, strings or not (upstream checks the list's length).
    let has_conversion = csv
        .webhook_definitions()
        .any(|w| !arr_at(w.raw, "/conversionCRDs").is_empty());
    if has_conversion && supported.iter().any(|t| *t != "AllNamespaces") {
        ctx.at(f, Some("spec.installModes")).error(&CSV_INSTALL_MODES, "only AllNamespaces InstallModeType is supported when conversionCRDs is present").hint("a CRD is cluster-wide, so its conversion webhook must serve every namespace; set supported: false on the other modes");
    }
}

/// `(group, version, kind)` of the owned CRD entries.
fn owned_keys(csv: Csv<'_>) -> Vec<(usize, String, String, String)> {
    csv.owned_crds()
        .map(|o| {
            let name = o.name().unwrap_or("");
            let group = name
                .split_once('.')
                .map(|(_, g)| g)
                .unwrap_or(name)
                .to_string();
            (
                o.index,
                group,
                o.version().unwrap_or("").to_string(),
                o.kind().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// operator-framework/api `validateExamplesAnnotations`: the examples parse, and every example
/// is of an API the CSV provides (errors); every provided API has one (a warning).
fn examples(ctx: &mut Ctx, file: &str) {
    if let Some((path, list)) = example_list(ctx, file) {
        examples_of_provided_apis(ctx, file, &path, &list);
    }
}

/// The examples annotation (`alm-examples`, or `olm.examples`) parsed as a JSON list of
/// objects (`validateJSON`; empty is allowed), with its path.
fn example_list(ctx: &mut Ctx, file: &str) -> Option<(String, Vec<Value>)> {
    let f = Some(file);
    let ann = ctx.csv_view().annotations()?;
    let (text, key) = match (ann.get(ALM_EXAMPLES), ann.get("olm.examples")) {
        (Some(a), Some(_)) => {
            ctx.at(f, Some("metadata.annotations")).warning(
                &CSV_EXAMPLES,
                "both `alm-examples` and `olm.examples` are present. Checking only `alm-examples`",
            );
            (a, "alm-examples")
        }
        (Some(a), None) => (a, "alm-examples"),
        (None, Some(o)) => (o, "olm.examples"),
        (None, None) => {
            ctx.at(f, Some("metadata.annotations"))
                .warning(&CSV_EXAMPLES, "example annotations not found");
            return None;
        }
    };
    let path = format!("metadata.annotations.{key}");
    let Some(text) = text.as_str() else {
        ctx.at(f, Some(&path))
            .error(&CSV_EXAMPLES, "must be a string holding a JSON list");
        return None;
    };
    // operator-framework/api `validateExamplesAnnotations`: the text must be JSON
    // (`validateJSON`; empty is allowed) holding a list of objects.
    let parsed: Result<Value, String> = if text.is_empty() {
        Ok(Value::Array(Vec::new()))
    } else {
        serde_json::from_str(text).map_err(|e| {
            format!(
                "invalid example: invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            )
        })
    };
    let list =
        match parsed {
            Ok(Value::Array(a)) if a.iter().all(Value::is_object) => a,
            Ok(other) => {
                ctx.at(f, Some(&path)).error(&CSV_EXAMPLES, format!(
                    "error decoding example CustomResource: expected a list of objects, found {}",
                    crate::json::type_name(&other)
                ));
                return None;
            }
            Err(msg) => {
                ctx.at(f, Some(&path))
                    .error(&CSV_EXAMPLES, msg)
                    .hint("alm-examples must be a JSON list of custom resources");
                return None;
            }
        };
    Some((path, list))
}

/// Every example is of a provided API (an owned CRD version or APIService: an error); every
/// provided API has an example (a warning).
fn examples_of_provided_apis(ctx: &mut Ctx, file: &str, path: &str, list: &[Value]) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let mut provided: BTreeSet<(String, String, String)> = owned_keys(csv)
        .into_iter()
        .map(|(_, g, v, k)| (g, v, k))
        .collect();
    for api in csv.owned_api_services() {
        provided.insert((
            api.group().unwrap_or("").into(),
            api.version().unwrap_or("").into(),
            api.kind().unwrap_or("").into(),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, ex) in list.iter().enumerate() {
        let api = str_at(ex, "/apiVersion").unwrap_or("");
        let kind = str_at(ex, "/kind").unwrap_or("");
        let (g, v) = api.split_once('/').unwrap_or(("", api));
        let key = (g.to_string(), v.to_string(), kind.to_string());
        if !provided.contains(&key) {
            ctx.at(f, Some(&format!("{path}[{i}]"))).error(&CSV_EXAMPLES, format!("example {api} {kind} must have a provided API (an owned CRD version of the CSV)")).hint("add the CRD version to spec.customresourcedefinitions.owned or fix the example's apiVersion/kind");
        }
        seen.insert(key);
    }
    for (g, v, k) in provided {
        if !seen.contains(&(g.clone(), v.clone(), k.clone())) {
            ctx.at(f, Some(path)).warning(
                &CSV_EXAMPLES,
                format!("provided API {g}/{v} {k} should have an example annotation"),
            );
        }
    }
}

/// operator-framework/api `validateVersionKind` and `checkEmptyFields`: fields without
/// `omitempty` are set (errors); a blank display name or another strategy (stricter).
fn required(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    // operator-framework/api `validateVersionKind` (the view has no accessor for apiVersion).
    if str_at(csv.raw(), "/apiVersion").is_none_or(str::is_empty) {
        ctx.at(f, Some("apiVersion"))
            .error(&CSV_REQUIRED, "'apiVersion' is missing");
    }
    // operator-framework/api `checkEmptyFields`: fields without `omitempty` must not be zero.
    match csv.display_name() {
        None | Some("") => {
            ctx.at(f, Some("spec.displayName")).error(
                &CSV_REQUIRED,
                "required field missing: Spec.DisplayName (OperatorHub and the console show it)",
            );
        }
        Some(s) if s.trim().is_empty() => {
            ctx.at(f, Some("spec.displayName")).stricter(
                &CSV_REQUIRED,
                "spec.displayName is blank: OperatorHub and the console show it",
            );
        }
        Some(_) => {}
    }
    match csv.install_strategy() {
        Some("deployment") => {}
        None | Some("") => {
            ctx.at(f, Some("spec.install.strategy")).error(
                &CSV_REQUIRED,
                "required field missing: Spec.InstallStrategy.StrategyName (deployment)",
            );
        }
        Some(other) => {
            ctx.at(f, Some("spec.install.strategy")).stricter(&CSV_REQUIRED, format!("install strategy {other:?} is not supported; OLM installs the \"deployment\" strategy"));
        }
    }
    let install_spec = csv.install_spec().and_then(Value::as_object);
    let install_spec_set = install_spec.is_some_and(|m| m.values().any(|v| !v.is_null()));
    if install_spec_set
        && install_spec
            .and_then(|m| m.get("deployments"))
            .is_none_or(Value::is_null)
    {
        ctx.at(f, Some("spec.install.spec.deployments")).error(
            &CSV_REQUIRED,
            "required field missing: Spec.InstallStrategy.StrategySpec.DeploymentSpecs",
        );
    }
}

/// operator-framework/api `validateOwnedCRDs`: owned CRDs are shipped and shipped CRDs owned
/// (errors); an entry listed twice, a served version not listed (warnings).
fn owned_crds(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let crds = crd_facts(&ctx.bundle.manifests);
    // Every (group, version, kind) a shipped CRD defines.
    let mut shipped: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for crd in &crds {
        for (v, _, _) in &crd.versions {
            let key = (crd.group.to_string(), v.to_string(), crd.kind.to_string());
            if shipped.insert(key.clone(), 0).is_some() {
                ctx.at(Some(&crd.manifest.file), Some("spec.versions"))
                    .error(
                        &CSV_OWNED_CRDS,
                        format!("duplicate CRD {}/{} {} in bundle", key.0, key.1, key.2),
                    );
            }
        }
    }
    let owned = owned_keys(csv);
    let mut owned_set = BTreeSet::new();
    // Group/kinds of owned entries that matched a shipped CRD version (upstream `ownedGVSet`).
    let mut owned_found_kinds: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, g, v, k) in &owned {
        let path = format!("spec.customresourcedefinitions.owned[{i}]");
        let name = csv
            .owned_crds()
            .nth(*i)
            .and_then(|o| o.name())
            .unwrap_or("");
        if !name.contains('.') {
            ctx.at(f, Some(&format!("{path}.name"))).error(
                &CSV_OWNED_CRDS,
                format!("{name:?} is not a CRD name (<plural>.<group>)"),
            );
            continue;
        }
        if !owned_set.insert((g.clone(), v.clone(), k.clone())) {
            ctx.at(f, Some(&path)).warning(
                &CSV_OWNED_CRDS,
                format!("owned CRD {name} {v} {k} is listed twice"),
            );
        }
        if let Some(n) = shipped.get_mut(&(g.clone(), v.clone(), k.clone())) {
            *n += 1;
            owned_found_kinds.insert((g.clone(), k.clone()));
        } else {
            ctx.at(f, Some(&path))
                .error(
                    &CSV_OWNED_CRDS,
                    format!("owned CRD \"{g}/{v}, Kind={k}\" not found in bundle"),
                )
                .hint(
                    "ship the CRD (with that version and kind) in manifests/, or remove the entry",
                );
        }
    }
    // operator-framework/api `validateOwnedCRDs`: every version of a shipped CRD whose
    // group/kind no owned entry matched is an error (required CRDs do not count: OLM would
    // install the CRD without any CSV owning it).
    for crd in &crds {
        let gk = (crd.group.to_string(), crd.kind.to_string());
        if !owned_found_kinds.contains(&gk) {
            for (v, _, _) in &crd.versions {
                ctx.at(Some(&crd.manifest.file), None).error(&CSV_OWNED_CRDS, format!(
                        "CRD \"{}/{v}, Kind={}\" is present in bundle but not defined in CSV",
                        crd.group, crd.kind
                    )).hint("list it in spec.customresourcedefinitions.owned, or drop the CRD from the bundle");
            }
            continue;
        }
        for (v, served, _) in &crd.versions {
            if *served && !owned_set.contains(&(gk.0.clone(), v.to_string(), gk.1.clone())) {
                ctx.at(f, Some("spec.customresourcedefinitions.owned")).warning(&CSV_OWNED_CRDS, format!("served version {v} of CRD {} is not listed in owned CRDs; the console will not offer it", crd.name));
            }
        }
    }
}

/// `spec.webhookdefinitions`: what OLM checks when it installs webhooks (operator-sdk does not
/// look: stricter): unique names, an install deployment serving each, a port number, and per
/// type [`conversion_webhook`] and [`admission_webhook`].
fn webhooks(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let deployments: BTreeSet<&str> = csv.deployments().filter_map(|d| d.name()).collect();
    let crd_names: BTreeSet<String> = crd_facts(&ctx.bundle.manifests)
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    let owned_names: BTreeSet<&str> = csv.owned_crds().filter_map(|o| o.name()).collect();
    let mut names = BTreeMap::new();
    for def in csv.webhook_definitions() {
        let (i, w) = (def.index, def.raw);
        let base = format!("spec.webhookdefinitions[{i}]");
        let gname = def.generate_name().unwrap_or("");
        let wtype = def.webhook_type().unwrap_or("");
        if let Some(prev) = names.insert(gname.to_string(), i) {
            ctx.at(f, Some(&format!("{base}.generateName"))).stricter(
                &CSV_WEBHOOKS,
                format!("generateName {gname:?} is also used by webhookdefinitions[{prev}]"),
            );
        }
        let dep = def.deployment_name().unwrap_or("");
        if !deployments.contains(dep) {
            ctx.at(f, Some(&format!("{base}.deploymentName"))).stricter(&CSV_WEBHOOKS, format!("webhook {gname} is served by deployment {dep:?}, which is not one of the CSV's install deployments")).hint("OLM creates <deploymentName>-service and mounts the webhook certificate into that deployment");
        }
        if let Some(p) = def.container_port()
            && !(1..=65535).contains(&p)
        {
            ctx.at(f, Some(&format!("{base}.containerPort"))).stricter(
                &CSV_WEBHOOKS,
                format!("containerPort {p} is not a port number"),
            );
        }
        match wtype {
            "ConversionWebhook" => conversion_webhook(ctx, f, &base, w, &crd_names, &owned_names),
            "ValidatingAdmissionWebhook" | "MutatingAdmissionWebhook" => {
                admission_webhook(ctx, f, &base, gname, w)
            }
            _ => {}
        }
    }
}

/// A ConversionWebhook lists the CRDs it converts, each owned by the CSV and shipped (OLM only
/// wires conversion for those; stricter).
fn conversion_webhook(
    ctx: &mut Ctx,
    f: Option<&str>,
    base: &str,
    w: &Value,
    crd_names: &BTreeSet<String>,
    owned_names: &BTreeSet<&str>,
) {
    let conv = arr_at(w, "/conversionCRDs");
    if conv.is_empty() {
        ctx.at(f, Some(&format!("{base}.conversionCRDs"))).stricter(
            &CSV_WEBHOOKS,
            "a ConversionWebhook must list the CRDs it converts in conversionCRDs",
        );
    }
    for (j, c) in conv.iter().enumerate() {
        let c = c.as_str().unwrap_or("");
        if !crd_names.contains(c) || !owned_names.contains(c) {
            ctx.at(f, Some(&format!("{base}.conversionCRDs[{j}]"))).stricter(&CSV_WEBHOOKS, format!("conversion CRD {c:?} is not a CRD owned by the CSV and shipped in the bundle; OLM only wires conversion for owned CRDs"));
        }
    }
}

/// An admission webhook has sideEffects and admissionReviewVersions (the API server requires
/// them) and does not intercept OLM's own resources (OLM refuses it; stricter).
fn admission_webhook(ctx: &mut Ctx, f: Option<&str>, base: &str, gname: &str, w: &Value) {
    if w.get("sideEffects").is_none() {
        ctx.at(f, Some(&format!("{base}.sideEffects"))).stricter(
            &CSV_WEBHOOKS,
            "admission webhooks need sideEffects (None or NoneOnDryRun)",
        );
    }
    if arr_at(w, "/admissionReviewVersions").is_empty() {
        ctx.at(f, Some(&format!("{base}.admissionReviewVersions")))
            .stricter(
                &CSV_WEBHOOKS,
                "admission webhooks need admissionReviewVersions (e.g. [v1])",
            );
    }
    for (j, rule) in arr_at(w, "/rules").iter().enumerate() {
        let groups: Vec<&str> = arr_at(rule, "/apiGroups")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let resources: Vec<&str> = arr_at(rule, "/resources")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let olm_group = groups
            .iter()
            .any(|g| *g == "*" || *g == "operators.coreos.com");
        let all_resources = resources.iter().any(|r| *r == "*" || *r == "*/*");
        if olm_group && (groups.contains(&"operators.coreos.com") || all_resources) {
            ctx.at(f, Some(&format!("{base}.rules[{j}]"))).stricter(&CSV_WEBHOOKS, format!("webhook {gname} intercepts OLM's own resources (operators.coreos.com); OLM refuses such webhooks because they could block it")).hint("narrow apiGroups/resources to the operator's own API");
        }
    }
}

/// Runs the CSV checks (nothing when the bundle has no CSV; `csv-missing` reports that).
pub(crate) fn check(ctx: &mut Ctx) {
    let Some(file) = ctx.csv_file() else { return };
    for check in CHECKS {
        check(ctx, file);
    }
}

/// The CSV checks, each given the CSV file.
const CHECKS: &[fn(&mut Ctx, &str)] = &[
    schema,
    names,
    annotations,
    min_kube,
    install_modes,
    examples,
    required,
    owned_crds,
    webhooks,
];
