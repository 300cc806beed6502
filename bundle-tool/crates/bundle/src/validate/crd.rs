//! CRD checks: the Kubernetes schema, version bookkeeping, conversion wiring, and the other
//! manifests against their Kubernetes schemas.
//!
//! operator-framework/api validates CRDs with the API server's own validation
//! (`ValidateCustomResourceDefinition`); here the equivalent structural rules are the strict
//! apiextensions/v1 JSON schema plus the invariants the schema cannot express (exactly one
//! storage version, name = `<plural>.<group>`, unique version names).

use super::{Ctx, hint};
use crate::json::{arr_at, str_at};
use crate::model::Manifest;
use crate::schemas;
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
                versions: arr_at(o, "/spec/versions")
                    .iter()
                    .map(|v| {
                        (
                            str_at(v, "/name").unwrap_or(""),
                            v.get("served") == Some(&Value::Bool(true)),
                            v.get("storage") == Some(&Value::Bool(true)),
                        )
                    })
                    .collect(),
                conversion_webhook: str_at(o, "/spec/conversion/strategy") == Some("Webhook"),
            }
        })
        .collect()
}

fn schema_findings(ctx: &mut Ctx, m: &Manifest, rule: &str) {
    if let Some(result) = schemas::validate_kube(&m.object) {
        match result {
            Ok(violations) => {
                for v in violations {
                    ctx.error(
                        rule,
                        Some(&m.file),
                        Some(&v.path),
                        format!("{} {}: {}", m.kind(), m.name(), v.message),
                    );
                }
            }
            Err(e) => {
                ctx.error(
                    rule,
                    Some(&m.file),
                    None,
                    format!("cannot check against the {} schema: {e}", m.kind()),
                );
            }
        }
    }
}

/// Runs the CRD and Kubernetes schema checks.
pub(crate) fn check(ctx: &mut Ctx) {
    let b = ctx.bundle;
    for m in &b.manifests {
        match m.kind() {
            crate::kinds::CRD | crate::kinds::CSV => {}
            _ => schema_findings(ctx, m, "kube-schema"),
        }
    }
    let crds = crd_facts(&b.manifests);
    let webhook_crds: Vec<String> = arr_at(ctx.csv_obj(), "/spec/webhookdefinitions")
        .iter()
        .filter(|w| str_at(w, "/type") == Some("ConversionWebhook"))
        .flat_map(|w| {
            arr_at(w, "/conversionCRDs")
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    for crd in &crds {
        let m = crd.manifest;
        let file = Some(m.file.as_str());
        if m.api_version() != "apiextensions.k8s.io/v1" {
            // Reported by `deprecated-api` for v1beta1; anything else is unknown to OLM.
            if m.api_version() != "apiextensions.k8s.io/v1beta1" {
                ctx.error(
                    "crd-versions",
                    file,
                    Some("apiVersion"),
                    format!("unsupported CRD apiVersion {:?}", m.api_version()),
                );
            }
            continue;
        }
        schema_findings(ctx, m, "crd-schema");
        if !crd.group.is_empty() {
            let plural = str_at(&m.object, "/spec/names/plural").unwrap_or("");
            let want = format!("{plural}.{}", crd.group);
            if crd.name != want {
                ctx.error(
                    "crd-versions",
                    file,
                    Some("metadata.name"),
                    format!(
                        "CRD name {:?} must be <plural>.<group> = {want:?}",
                        crd.name
                    ),
                );
            }
        }
        if crd.versions.is_empty() {
            ctx.error(
                "crd-versions",
                file,
                Some("spec.versions"),
                format!("CRD {} lists no versions", crd.name),
            );
            continue;
        }
        let storage: Vec<&str> = crd.versions.iter().filter(|v| v.2).map(|v| v.0).collect();
        match storage.len() {
            1 => {}
            0 => {
                let f = ctx.error("crd-versions", file, Some("spec.versions"), format!("CRD {} has no storage version; exactly one version must have storage: true", crd.name));
                hint(
                    f,
                    "mark the hub version with storage: true (kubebuilder: +kubebuilder:storageversion)",
                );
            }
            _ => {
                ctx.error(
                    "crd-versions",
                    file,
                    Some("spec.versions"),
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
            ctx.error(
                "crd-versions",
                file,
                Some("spec.versions"),
                format!("CRD {} serves no version", crd.name),
            );
        }
        for (i, v) in crd.versions.iter().enumerate() {
            if crd.versions[..i].iter().any(|w| w.0 == v.0) {
                ctx.error(
                    "crd-versions",
                    file,
                    Some(&format!("spec.versions[{i}].name")),
                    format!("version {} is listed twice", v.0),
                );
            }
        }
        if crd.conversion_webhook && !webhook_crds.iter().any(|n| n == crd.name) {
            let f = ctx.error(
                "crd-conversion",
                file,
                Some("spec.conversion.strategy"),
                format!("CRD {} converts with a webhook, but no ConversionWebhook in the CSV's webhookdefinitions lists it in conversionCRDs; OLM would install it with a webhook nobody serves", crd.name),
            );
            hint(
                f,
                "regenerate the bundle with `bundle-tool generate bundle` (it derives the webhook definition from the CRD and its Service)",
            );
        }
        if crd.conversion_webhook
            && arr_at(
                &m.object,
                "/spec/conversion/webhook/conversionReviewVersions",
            )
            .is_empty()
        {
            ctx.error(
                "crd-conversion",
                file,
                Some("spec.conversion.webhook.conversionReviewVersions"),
                "a webhook conversion needs conversionReviewVersions (e.g. [v1])",
            );
        }
    }
}
