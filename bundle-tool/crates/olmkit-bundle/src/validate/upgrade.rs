//! Upgrade safety against the previous release's bundle (`--previous`).
//!
//! CRDs: what OLM v1's CRD upgrade safety preflight refuses is an error, rule by rule
//! ([`super::crd_upgrade`]: scope, stored versions, removed fields, and every change of a
//! field it cannot prove safe: narrowed or new enums, new required fields, new or tighter
//! bounds, defaults, types, patterns, nullability), each naming the upstream validation. A
//! served version that disappears breaks every client using it (an error, bundle-tool's own,
//! as before); a CRD the new bundle no longer ships stays on the cluster unowned with its
//! objects (a warning: nothing is refused, but that data is left behind).

use super::Ctx;
use super::crd::crd_facts;
use super::crd_upgrade::{
    CRD_RULES, CrdView, Refusal, same_version_changes, served_version_changes,
};
use super::rules::{CRD_UPGRADE, UPGRADE_EDGE};
use crate::json::arr_at;
use crate::model::Bundle;
use olmkit_core::csv::str_at;
use olmkit_core::version_range::VersionRange;

/// Where a refusal points in the new CRD: the version's schema, or the CRD field.
fn refusal_path(crd: &serde_json::Value, r: &Refusal) -> String {
    match r.validation {
        "scope" => "spec.scope".into(),
        "storedVersionRemoval" => "spec.versions".into(),
        _ => {
            // A version, or a pair `older -> newer` of served versions: the newer one.
            let version = r.version.rsplit(" -> ").next().unwrap_or("");
            match arr_at(crd, "/spec/versions")
                .iter()
                .position(|x| str_at(x, "/name") == Some(version))
            {
                Some(i) => format!("spec.versions[{i}].schema.openAPIV3Schema"),
                None => "spec.validation.openAPIV3Schema".into(),
            }
        }
    }
}

/// operator-controller crdupgradesafety (each refusal an error), served versions kept (an
/// error, bundle-tool's own) and CRDs still shipped (a warning).
fn crds(ctx: &mut Ctx, prev: &Bundle) {
    let new = crd_facts(&ctx.bundle.manifests);
    for old in crd_facts(&prev.manifests) {
        let Some(cur) = new.iter().find(|c| c.name == old.name) else {
            ctx.at(Some(&old.manifest.file), None).warning(&CRD_UPGRADE, format!("CRD {} of the previous bundle is not shipped any more; OLM leaves it (and its objects) on the cluster, unowned", old.name));
            continue;
        };
        let file = cur.manifest.file.clone();
        let f = Some(file.as_str());
        let (old_view, new_view) = (
            CrdView::new(&old.manifest.object),
            CrdView::new(&cur.manifest.object),
        );
        let mut refusals: Vec<Refusal> = CRD_RULES
            .iter()
            .flat_map(|(_, rule)| rule(&old_view, &new_view))
            .collect();
        refusals.extend(same_version_changes(&old_view, &new_view));
        refusals.extend(served_version_changes(&old_view, &new_view));
        for r in &refusals {
            let path = refusal_path(&cur.manifest.object, r);
            let fi = ctx.at(f, Some(&path)).error(
                &CRD_UPGRADE,
                format!(
                    "CRD {}: {}; OLM v1 refuses the upgrade (CRD upgrade safety)",
                    old.name,
                    r.message()
                ),
            );
            let h = match r.validation {
                "storedVersionRemoval" => "keep every stored version (served: false is allowed) until every object is migrated and storedVersions no longer lists it".to_string(),
                "existingFieldRemoval" => "keep the field (deprecate it in its description) in every version that had it".to_string(),
                "scope" => "a CRD cannot change scope: keep it, or ship the resource under a new name".to_string(),
                _ => "existing objects may not be valid under the new schema: make the change in a new API version, converted by a webhook".to_string(),
            };
            fi.hint(h);
        }
        for (v, _, _) in old.versions.iter().filter(|v| v.1) {
            match cur.versions.iter().find(|n| n.0 == *v) {
                None => {
                    ctx.at(f, Some("spec.versions")).error(&CRD_UPGRADE, format!("CRD {} removes served version {v}; clients and stored manifests using it break", old.name));
                }
                Some((_, false, _)) => {
                    ctx.at(f, Some("spec.versions")).error(
                        &CRD_UPGRADE,
                        format!(
                            "CRD {} stops serving version {v}; clients using it break",
                            old.name
                        ),
                    );
                }
                Some(_) => {}
            }
        }
    }
}

/// The new CSV's version is greater and it replaces, skips or skipRanges the previous one
/// (bundle-tool's own: what OLM needs to upgrade installs).
fn edge(ctx: &mut Ctx, prev: &Bundle) {
    let (Some(file), Some(prev_name)) = (ctx.csv_file(), prev.csv_name()) else {
        return;
    };
    let f = Some(file);
    let prev_version = prev.version().and_then(|v| semver::Version::parse(v).ok());
    let cur_version = ctx
        .bundle
        .version()
        .and_then(|v| semver::Version::parse(v).ok());
    if let (Some(p), Some(c)) = (&prev_version, &cur_version)
        && c <= p
    {
        ctx.at(f, Some("spec.version")).error(
            &UPGRADE_EDGE,
            format!("spec.version {c} is not greater than the previous bundle's {p}"),
        );
    }
    let replaces = ctx.bundle.replaces() == Some(prev_name);
    let skips = ctx.bundle.skips().iter().any(|s| s == prev_name);
    let in_range = match (
        ctx.bundle
            .skip_range()
            .and_then(|r| VersionRange::parse(r).ok()),
        &prev_version,
    ) {
        (Some(r), Some(v)) => r.contains(v),
        _ => false,
    };
    if !(replaces || skips || in_range) {
        ctx.at(f, Some("spec.replaces")).warning(&UPGRADE_EDGE, format!("the CSV neither replaces nor skips {prev_name}, and its skipRange does not include it: OLM will not upgrade installs of the previous bundle to this one")).hint(format!(
                "set spec.replaces: {prev_name} (bundle-tool generate bundle --replaces {prev_name})"
            ));
    }
}

/// Runs the upgrade checks against `prev`.
pub(crate) fn check(ctx: &mut Ctx, prev: &Bundle) {
    crds(ctx, prev);
    edge(ctx, prev);
}
