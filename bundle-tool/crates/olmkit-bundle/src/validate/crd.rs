//! CRD checks: the Kubernetes schema, version bookkeeping, conversion wiring, and the other
//! manifests against their Kubernetes schemas.
//!
//! operator-framework/api `validateInternalCRD` (`pkg/validation/internal/crd.go`) runs the API
//! server's own `ValidateCustomResourceDefinition` on the defaulted CRD and keeps every error
//! outside `openAPIV3Schema` and `status`: those are errors here too (name =
//! `<plural>.<group>`, exactly one storage version, unique versions, conversion review
//! versions, `preserveUnknownFields` not true, which v1beta1 defaults to). The strict
//! apiextensions/v1 JSON schema and the Kubernetes schemas of other kinds are bundle-tool's
//! own checks: Go drops unknown fields when it decodes, so they are warnings unless strict.

use super::rules::{CRD_CONVERSION, CRD_SCHEMA, CRD_VERSIONS, KUBE_SCHEMA};
use super::{Ctx, name_problem};
use crate::json::arr_at;
use crate::model::Manifest;
use crate::schemas;
use olmkit_core::Rule;
use olmkit_core::csv::str_at;
use olmkit_core::k8s_name;
use serde_json::Value;

/// What validation needs to know about a shipped CRD.
#[derive(Debug, Clone)]
pub(crate) struct CrdFacts<'a> {
    pub manifest: &'a Manifest,
    pub name: &'a str,
    pub group: &'a str,
    pub kind: &'a str,
    /// (name, served, storage)
    pub versions: Vec<(&'a str, bool, bool)>,
    pub conversion_webhook: bool,
}

/// (name, served, storage) of each version; a v1beta1 CRD with only `spec.version` has that
/// one version, served and stored (as apiextensions defaulting makes it).
fn crd_versions(o: &Value) -> Vec<(&str, bool, bool)> {
    let versions: Vec<(&str, bool, bool)> = arr_at(o, "/spec/versions")
        .iter()
        .map(|v| {
            (
                str_at(v, "/name").unwrap_or(""),
                v.get("served") == Some(&Value::Bool(true)),
                v.get("storage") == Some(&Value::Bool(true)),
            )
        })
        .collect();
    match str_at(o, "/spec/version") {
        Some(v) if versions.is_empty() && !v.is_empty() => vec![(v, true, true)],
        _ => versions,
    }
}

pub(crate) fn crd_facts(manifests: &[Manifest]) -> Vec<CrdFacts<'_>> {
    manifests
        .iter()
        .filter(|m| m.kind() == crate::kinds::CRD)
        .map(|m| {
            let o = &m.object;
            CrdFacts {
                manifest: m,
                name: m.name(),
                group: str_at(o, "/spec/group").unwrap_or(""),
                kind: str_at(o, "/spec/names/kind").unwrap_or(""),
                versions: crd_versions(o),
                conversion_webhook: str_at(o, "/spec/conversion/strategy") == Some("Webhook"),
            }
        })
        .collect()
}

/// `m` against its Kubernetes schema, as Go decodes it (`rule` is `crd-schema` or
/// `kube-schema`; operator-sdk does not check it: stricter).
fn schema_findings(ctx: &mut Ctx, m: &Manifest, rule: &Rule) {
    // Checked as Go decodes the object: `null`s are zero values; unknown fields (a leftover
    // v1beta1 `version` in a v1 CRD) are dropped, so they are warnings even when strict.
    if let Some(result) = schemas::validate_kube(&crate::json::without_nulls(&m.object)) {
        match result {
            Ok(violations) => {
                for v in violations {
                    let msg = format!("{} {}: {}", m.kind(), m.name(), v.message);
                    if crate::json::is_unknown_field(&v.message) {
                        let msg = format!("{msg} (ignored: Go drops unknown fields)");
                        ctx.at(Some(&m.file), Some(&v.path)).warning(rule, msg);
                    } else {
                        ctx.at(Some(&m.file), Some(&v.path)).stricter(rule, msg);
                    }
                }
            }
            Err(e) => {
                ctx.at(Some(&m.file), None).warning(
                    rule,
                    format!("cannot check against the {} schema: {e}", m.kind()),
                );
            }
        }
    }
}

/// apiextensions `ValidateCustomResourceDefinitionSpec` refuses `preserveUnknownFields: true`
/// ("set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"),
/// and v1beta1 defaulting sets it to true when it is not given.
fn preserve_unknown_fields(ctx: &mut Ctx, m: &Manifest, v1: bool) {
    let value = m.object.pointer("/spec/preserveUnknownFields");
    let is_true = match value {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => !v1,
        Some(_) => false,
    };
    if is_true {
        let defaulted = if value.is_none_or(Value::is_null) {
            " (the apiextensions.k8s.io/v1beta1 default)"
        } else {
            ""
        };
        ctx.at(Some(&m.file), Some("spec.preserveUnknownFields")).error(&CRD_VERSIONS, format!("CRD {}: spec.preserveUnknownFields: Invalid value: true{defaulted}: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead", m.name())).hint("set spec.preserveUnknownFields: false, or better migrate the CRD to apiextensions.k8s.io/v1");
    }
}

/// `spec.scope` after apiextensions defaulting, as operator-framework/api
/// `validateV1Beta1CRD`/`validateV1CRD` apply it (`SetObjectDefaults_CustomResourceDefinition`)
/// before validating: apiextensions/v1beta1 `SetDefaults_CustomResourceDefinitionSpec` sets an
/// empty or missing scope to `Namespaced`; apiextensions/v1 leaves it as written. The CRD
/// upgrade checks compare the defaulted scope too.
pub(crate) fn defaulted_scope(crd: &Value) -> &str {
    let v1beta1 = str_at(crd, "/apiVersion") == Some("apiextensions.k8s.io/v1beta1");
    match str_at(crd, "/spec/scope").unwrap_or("") {
        "" if v1beta1 => "Namespaced",
        s => s,
    }
}

/// apiextensions `ValidateCustomResourceDefinitionSpec` and `...Names`, as operator-framework/api
/// `validateInternalCRD` runs them on the defaulted CRD (`SetDefaults_CustomResourceDefinitionSpec`
/// of v1beta1 and v1: [`defaulted_scope`], `singular` = lower-cased kind, `listKind` =
/// kind + `List`): the group is a DNS subdomain with a dot, the scope is Cluster or
/// Namespaced, plural/kind are set, names, short names, categories and version names are
/// DNS-1035 labels (kinds compared lower-cased).
fn spec_names(ctx: &mut Ctx, m: &Manifest) {
    let o = &m.object;
    let file = Some(m.file.as_str());
    let mut problems: Vec<(String, String)> = Vec::new();
    match str_at(o, "/spec/group").unwrap_or("") {
        "" => problems.push(("spec.group".into(), "Required value".into())),
        g => {
            if let Some(p) = name_problem(k8s_name::dns1123_subdomain_errors(g)) {
                problems.push(("spec.group".into(), p));
            } else if !g.contains('.') {
                problems.push((
                    "spec.group".into(),
                    "should be a domain with at least one dot".into(),
                ));
            }
        }
    }
    let scope = defaulted_scope(o);
    if scope != "Cluster" && scope != "Namespaced" {
        problems.push((
            "spec.scope".into(),
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let kind = str_at(o, "/spec/names/kind").unwrap_or("");
    let defaults = [
        ("singular", kind.to_lowercase()),
        ("listKind", format!("{kind}List")),
    ];
    for (key, required, lower) in [
        ("plural", true, false),
        ("singular", false, false),
        ("kind", true, true),
        ("listKind", false, true),
    ] {
        let written = str_at(o, &format!("/spec/names/{key}")).unwrap_or("");
        let default = defaults
            .iter()
            .find(|(k, _)| *k == key && written.is_empty() && !kind.is_empty())
            .map(|(_, d)| d.as_str());
        match default.unwrap_or(written) {
            "" if required => problems.push((format!("spec.names.{key}"), "Required value".into())),
            "" => {}
            v => {
                let v = if lower {
                    v.to_lowercase()
                } else {
                    v.to_string()
                };
                if let Some(p) = name_problem(k8s_name::dns1035_label_errors(&v)) {
                    problems.push((format!("spec.names.{key}"), p));
                }
            }
        }
    }
    for key in ["shortNames", "categories"] {
        for (i, v) in arr_at(o, &format!("/spec/names/{key}")).iter().enumerate() {
            if let Some(p) = name_problem(k8s_name::dns1035_label_errors(v.as_str().unwrap_or("")))
            {
                problems.push((format!("spec.names.{key}[{i}]"), p));
            }
        }
    }
    for (i, v) in arr_at(o, "/spec/versions").iter().enumerate() {
        if let Some(p) = name_problem(k8s_name::dns1035_label_errors(
            str_at(v, "/name").unwrap_or(""),
        )) {
            problems.push((format!("spec.versions[{i}].name"), p));
        }
    }
    for (path, p) in problems {
        ctx.at(file, Some(&path))
            .error(&CRD_VERSIONS, format!("CRD {}: {path}: {p}", m.name()));
    }
}

/// Runs the CRD and Kubernetes schema checks.
pub(crate) fn check(ctx: &mut Ctx) {
    let b = ctx.bundle;
    for m in &b.manifests {
        match m.kind() {
            crate::kinds::CRD | crate::kinds::CSV => {}
            _ => schema_findings(ctx, m, &KUBE_SCHEMA),
        }
    }
    let webhook_crds: Vec<String> = ctx
        .csv_view()
        .webhook_definitions()
        .filter(|w| w.webhook_type() == Some("ConversionWebhook"))
        .flat_map(|w| w.conversion_crds().map(str::to_string).collect::<Vec<_>>())
        .collect();
    for crd in &crd_facts(&b.manifests) {
        let m = crd.manifest;
        let v1 = m.api_version() == "apiextensions.k8s.io/v1";
        if !v1 && m.api_version() != "apiextensions.k8s.io/v1beta1" {
            // operator-framework/api `loadBundle`: "unsupported CRD version".
            ctx.at(Some(&m.file), Some("apiVersion")).error(
                &CRD_VERSIONS,
                format!("unsupported CRD version {:?}", m.api_version()),
            );
            continue;
        }
        if v1 {
            schema_findings(ctx, m, &CRD_SCHEMA);
        }
        preserve_unknown_fields(ctx, m, v1);
        spec_names(ctx, m);
        crd_name(ctx, crd);
        if crd.versions.is_empty() {
            ctx.at(Some(&m.file), Some("spec.versions"))
                .error(&CRD_VERSIONS, format!("CRD {} lists no versions", crd.name));
            continue;
        }
        crd_version_list(ctx, crd);
        conversion(ctx, crd, v1, &webhook_crds);
    }
}

/// apiextensions `ValidateCustomResourceDefinition` (via operator-framework/api
/// `validateInternalCRD`): the CRD is named `<plural>.<group>`.
fn crd_name(ctx: &mut Ctx, crd: &CrdFacts<'_>) {
    let m = crd.manifest;
    let file = Some(m.file.as_str());
    if !crd.group.is_empty() {
        let plural = str_at(&m.object, "/spec/names/plural").unwrap_or("");
        let want = format!("{plural}.{}", crd.group);
        if crd.name != want {
            ctx.at(file, Some("metadata.name")).error(
                &CRD_VERSIONS,
                format!(
                    "CRD name {:?} must be <plural>.<group> = {want:?}",
                    crd.name
                ),
            );
        }
    }
}

/// apiextensions `ValidateCustomResourceDefinition` (via operator-framework/api
/// `validateInternalCRD`): exactly one storage version, at least one served, none twice.
fn crd_version_list(ctx: &mut Ctx, crd: &CrdFacts<'_>) {
    let file = Some(crd.manifest.file.as_str());
    let storage: Vec<&str> = crd.versions.iter().filter(|v| v.2).map(|v| v.0).collect();
    match storage.len() {
        1 => {}
        0 => {
            ctx.at(file, Some("spec.versions")).error(&CRD_VERSIONS, format!("CRD {} has no storage version; exactly one version must have storage: true", crd.name)).hint("mark the hub version with storage: true (kubebuilder: +kubebuilder:storageversion)");
        }
        _ => {
            ctx.at(file, Some("spec.versions")).error(
                &CRD_VERSIONS,
                format!(
                    "CRD {} has {} storage versions ({}); exactly one is allowed",
                    crd.name,
                    storage.len(),
                    storage.join(", ")
                ),
            );
        }
    }
    if !crd.versions.iter().any(|v| v.1) {
        ctx.at(file, Some("spec.versions"))
            .error(&CRD_VERSIONS, format!("CRD {} serves no version", crd.name));
    }
    for (i, v) in crd.versions.iter().enumerate() {
        if crd.versions[..i].iter().any(|w| w.0 == v.0) {
            ctx.at(file, Some(&format!("spec.versions[{i}].name")))
                .error(&CRD_VERSIONS, format!("version {} is listed twice", v.0));
        }
    }
}

/// A CRD converting with a webhook is wired to a ConversionWebhook definition of the CSV
/// (operator-sdk accepts it, OLM installs the CRD with a webhook nobody serves: stricter), and
/// a v1 one lists conversionReviewVersions (apiextensions `ValidateCustomResourceDefinition`).
fn conversion(ctx: &mut Ctx, crd: &CrdFacts<'_>, v1: bool, webhook_crds: &[String]) {
    let m = crd.manifest;
    let file = Some(m.file.as_str());
    if crd.conversion_webhook && !webhook_crds.iter().any(|n| n == crd.name) {
        // operator-sdk accepts it; OLM installs the CRD with a webhook nobody serves.
        ctx.at(file, Some("spec.conversion.strategy")).stricter(&CRD_CONVERSION, format!("CRD {} converts with a webhook, but no ConversionWebhook in the CSV's webhookdefinitions lists it in conversionCRDs; OLM would install it with a webhook nobody serves", crd.name)).hint("regenerate the bundle with `bundle-tool generate bundle` (it derives the webhook definition from the CRD and its Service)");
    }
    if crd.conversion_webhook
        && v1
        && arr_at(
            &m.object,
            "/spec/conversion/webhook/conversionReviewVersions",
        )
        .is_empty()
    {
        ctx.at(
            file,
            Some("spec.conversion.webhook.conversionReviewVersions"),
        )
        .error(
            &CRD_CONVERSION,
            "a webhook conversion needs conversionReviewVersions (e.g. [v1])",
        );
    }
}
