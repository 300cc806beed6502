//! Upgrade safety against the previous release's bundle (`--previous`).
//!
//! OLM refuses to upgrade a CRD when the new one drops a version that the cluster may have
//! stored objects in (`status.storedVersions`: at least the old storage version), and a
//! served version that disappears breaks every client using it. Those are errors. Schema
//! changes that can make existing objects invalid (a new required field, a tighter minimum,
//! maximum, length, item count, pattern or enum) are warnings: OLM's own check validates the
//! existing custom resources against the new schema, which only a cluster can do.

use super::crd::crd_facts;
use super::{Ctx, hint};
use crate::json::{arr_at, str_at};
use crate::model::Bundle;
use olmkit_core::version_range::VersionRange;
use serde_json::Value;
use std::collections::BTreeSet;

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// Compares two schema nodes; `path` is the field path inside the object.
fn compare(old: &Value, new: &Value, path: &str, out: &mut Vec<String>) {
    let at = |p: &str| {
        if p.is_empty() {
            "the object root".to_string()
        } else {
            p.to_string()
        }
    };
    let old_type = old.get("type");
    let new_type = new.get("type");
    if old_type.is_some() && new_type.is_some() && old_type != new_type {
        out.push(format!(
            "{}: type changes from {} to {}",
            at(path),
            old_type.map(Value::to_string).unwrap_or_default(),
            new_type.map(Value::to_string).unwrap_or_default()
        ));
        return;
    }
    let old_req: BTreeSet<&str> = arr_at(old, "/required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for r in arr_at(new, "/required").iter().filter_map(Value::as_str) {
        if !old_req.contains(r) {
            let field = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            out.push(format!("{field} becomes required"));
        }
    }
    // (keyword, true when a larger new value is tighter)
    for (key, larger_is_tighter) in [
        ("minimum", true),
        ("maximum", false),
        ("minLength", true),
        ("maxLength", false),
        ("minItems", true),
        ("maxItems", false),
        ("minProperties", true),
        ("maxProperties", false),
    ] {
        match (num(old, key), num(new, key)) {
            (None, Some(n)) => out.push(format!("{}: new bound {key} {n}", at(path))),
            (Some(o), Some(n)) if (larger_is_tighter && n > o) || (!larger_is_tighter && n < o) => {
                out.push(format!("{}: {key} tightens from {o} to {n}", at(path)));
            }
            _ => {}
        }
    }
    for key in ["exclusiveMinimum", "exclusiveMaximum"] {
        if new.get(key) == Some(&Value::Bool(true)) && old.get(key) != Some(&Value::Bool(true)) {
            out.push(format!("{}: {key} becomes true", at(path)));
        }
    }
    match (old.get("pattern"), new.get("pattern")) {
        (None, Some(p)) => out.push(format!("{}: new pattern {p}", at(path))),
        (Some(o), Some(p)) if o != p => {
            out.push(format!("{}: pattern changes from {o} to {p}", at(path)))
        }
        _ => {}
    }
    match (
        old.get("enum").and_then(Value::as_array),
        new.get("enum").and_then(Value::as_array),
    ) {
        (None, Some(_)) => out.push(format!("{}: values become restricted to an enum", at(path))),
        (Some(o), Some(n)) => {
            let removed: Vec<String> = o
                .iter()
                .filter(|v| !n.contains(v))
                .map(Value::to_string)
                .collect();
            if !removed.is_empty() {
                out.push(format!(
                    "{}: enum no longer allows {}",
                    at(path),
                    removed.join(", ")
                ));
            }
        }
        _ => {}
    }
    if let (Some(op), Some(np)) = (
        old.get("properties").and_then(Value::as_object),
        new.get("properties").and_then(Value::as_object),
    ) {
        for (k, ov) in op {
            if let Some(nv) = np.get(k) {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                compare(ov, nv, &p, out);
            }
        }
    }
    if let (Some(oi), Some(ni)) = (old.get("items"), new.get("items")) {
        compare(oi, ni, &format!("{path}[*]"), out);
    }
    if let (Some(oa @ Value::Object(_)), Some(na @ Value::Object(_))) = (
        old.get("additionalProperties"),
        new.get("additionalProperties"),
    ) {
        compare(oa, na, &format!("{path}.*"), out);
    }
}

fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    arr_at(crd, "/spec/versions")
        .iter()
        .find(|v| str_at(v, "/name") == Some(version))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
}

fn crds(ctx: &mut Ctx, prev: &Bundle) {
    let new = crd_facts(&ctx.bundle.manifests);
    for old in crd_facts(&prev.manifests) {
        let Some(cur) = new.iter().find(|c| c.name == old.name) else {
            ctx.warning(
                "crd-upgrade",
                Some(&old.manifest.file),
                None,
                format!("CRD {} of the previous bundle is not shipped any more; OLM leaves it (and its objects) on the cluster, unowned", old.name),
            );
            continue;
        };
        let file = cur.manifest.file.clone();
        let f = Some(file.as_str());
        let (old_scope, new_scope) = (
            str_at(&old.manifest.object, "/spec/scope"),
            str_at(&cur.manifest.object, "/spec/scope"),
        );
        if old_scope != new_scope {
            ctx.error(
                "crd-upgrade",
                f,
                Some("spec.scope"),
                format!(
                    "CRD {} changes scope from {} to {}; Kubernetes does not allow that",
                    old.name,
                    old_scope.unwrap_or("?"),
                    new_scope.unwrap_or("?")
                ),
            );
        }
        let mut stored: BTreeSet<&str> = old.versions.iter().filter(|v| v.2).map(|v| v.0).collect();
        stored.extend(
            arr_at(&old.manifest.object, "/status/storedVersions")
                .iter()
                .filter_map(Value::as_str),
        );
        for s in stored {
            if !cur.versions.iter().any(|v| v.0 == s) {
                let fi = ctx.error(
                    "crd-upgrade",
                    f,
                    Some("spec.versions"),
                    format!("CRD {} drops version {s}, which the previous bundle stored objects in (status.storedVersions); OLM refuses the upgrade to avoid data loss", old.name),
                );
                hint(
                    fi,
                    format!(
                        "keep {s} (served: false is allowed) until every object is migrated and storedVersions no longer lists it"
                    ),
                );
            }
        }
        for (v, served, _) in old.versions.iter().filter(|v| v.1) {
            match cur.versions.iter().find(|n| n.0 == *v) {
                None => {
                    ctx.error("crd-upgrade", f, Some("spec.versions"), format!("CRD {} removes served version {v}; clients and stored manifests using it break", old.name));
                }
                Some((_, false, _)) => {
                    ctx.error(
                        "crd-upgrade",
                        f,
                        Some("spec.versions"),
                        format!(
                            "CRD {} stops serving version {v}; clients using it break",
                            old.name
                        ),
                    );
                }
                Some(_) => {
                    let _ = served;
                    if let (Some(os), Some(ns)) = (
                        version_schema(&old.manifest.object, v),
                        version_schema(&cur.manifest.object, v),
                    ) {
                        let mut changes = Vec::new();
                        compare(os, ns, "", &mut changes);
                        let idx = arr_at(&cur.manifest.object, "/spec/versions")
                            .iter()
                            .position(|x| str_at(x, "/name") == Some(v))
                            .unwrap_or(0);
                        for c in changes {
                            ctx.warning(
                                "crd-upgrade",
                                f,
                                Some(&format!("spec.versions[{idx}].schema.openAPIV3Schema")),
                                format!(
                                    "CRD {} {v}: {c}; existing objects may no longer validate",
                                    old.name
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}

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
        ctx.error(
            "upgrade-edge",
            f,
            Some("spec.version"),
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
        let fi = ctx.warning(
            "upgrade-edge",
            f,
            Some("spec.replaces"),
            format!("the CSV neither replaces nor skips {prev_name}, and its skipRange does not include it: OLM will not upgrade installs of the previous bundle to this one"),
        );
        hint(
            fi,
            format!(
                "set spec.replaces: {prev_name} (bundle-tool generate bundle --replaces {prev_name})"
            ),
        );
    }
}

/// Runs the upgrade checks against `prev`.
pub(crate) fn check(ctx: &mut Ctx, prev: &Bundle) {
    crds(ctx, prev);
    edge(ctx, prev);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn detects_tightening() {
        let old = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "maximum": 10}, "mode": {"type": "string", "enum": ["a", "b"]}}}}});
        let new = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["mode"], "properties": {"replicas": {"type": "integer", "maximum": 5, "minimum": 1}, "mode": {"type": "string", "enum": ["a"]}, "extra": {"type": "string", "maxLength": 3}}}}});
        let mut out = Vec::new();
        compare(&old, &new, "", &mut out);
        assert!(
            out.iter().any(|c| c == "spec.mode becomes required"),
            "{out:?}"
        );
        assert!(
            out.iter()
                .any(|c| c.contains("maximum tightens from 10 to 5")),
            "{out:?}"
        );
        assert!(
            out.iter().any(|c| c.contains("new bound minimum 1")),
            "{out:?}"
        );
        assert!(
            out.iter()
                .any(|c| c.contains("enum no longer allows \"b\"")),
            "{out:?}"
        );
        // A new optional field with bounds is not a tightening of existing data.
        assert!(!out.iter().any(|c| c.contains("extra")), "{out:?}");
        let mut none = Vec::new();
        compare(&old, &old, "", &mut none);
        assert!(none.is_empty());
    }
}
