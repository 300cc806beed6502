//! Patch engines: JSON merge patch (RFC 7386) and JSON patch (RFC 6902) through the `json-patch`
//! crate, and an approximation of Kubernetes' strategic merge patch.
//!
//! Strategic merge patch here is a merge patch in which lists with a known merge key (see
//! `lists`: containers/env/volumes/imagePullSecrets by `name`, ports by `containerPort` or `port`,
//! volumeMounts by `mountPath`, conditions by `type`, ownerReferences by `uid`) merge element by
//! element and `finalizers` merge as a set; other lists are replaced. The directives `$patch:
//! replace|delete` (on maps and list elements), `$deleteFromPrimitiveList/<field>` and
//! `$retainKeys` are honoured and `$setElementOrder/<field>` is accepted and ignored.

use serde_json::Value;

use crate::lists::{Hints, ListKind, same_key};

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyPatchError {
    #[error("the patch is not valid JSON: {0}")]
    Syntax(String),
    #[error("{0}")]
    Failed(String),
}

pub fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), ApplyPatchError> {
    if !patch.is_object() {
        return Err(ApplyPatchError::Syntax(
            "a merge patch must be a JSON object".into(),
        ));
    }
    json_patch::merge(target, patch);
    Ok(())
}

/// RFC 6902, all-or-nothing. Like the API server's implementation, a `test` of `null` succeeds
/// on a path that does not exist (kube's finalizer helper relies on this).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApplyPatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApplyPatchError::Syntax(e.to_string()))?;
    let mut doc = target.clone();
    for op in ops.0 {
        if let json_patch::PatchOperation::Test(t) = &op
            && t.value.is_null()
            && doc.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut doc, std::slice::from_ref(&op))
            .map_err(|e| ApplyPatchError::Failed(e.to_string()))?;
    }
    *target = doc;
    Ok(())
}

pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), ApplyPatchError> {
    if !patch.is_object() {
        return Err(ApplyPatchError::Syntax(
            "a strategic merge patch must be a JSON object".into(),
        ));
    }
    if smp_map(target, patch, Hints::root(None, true)) {
        *target = Value::Object(serde_json::Map::new());
    }
    Ok(())
}

/// Strips directive keys from a value that is inserted whole.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| e.get("$patch").is_none())
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Merges `patch` into the map `target`; returns true when the map itself is to be deleted.
fn smp_map(target: &mut Value, patch: &Value, hints: Hints) -> bool {
    let Some(p) = patch.as_object() else {
        *target = clean(patch);
        return false;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => return true,
        Some("replace") => {
            *target = clean(patch);
            return false;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let retain: Option<Vec<String>> = p.get("$retainKeys").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    });
    let Some(t) = target.as_object_mut() else {
        return false;
    };
    for (k, pv) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                t.get_mut(field).and_then(Value::as_array_mut),
                pv.as_array(),
            ) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            t.shift_remove(k);
            continue;
        }
        let h = hints.field(k);
        let delete = match t.get_mut(k) {
            Some(tv) if tv.is_object() && pv.is_object() => smp_map(tv, pv, h),
            Some(tv) if tv.is_array() && pv.is_array() => {
                smp_list(tv, pv, h, k);
                false
            }
            _ => {
                if pv.get("$patch").and_then(Value::as_str) == Some("delete") {
                    true
                } else {
                    t.insert(k.clone(), clean(pv));
                    false
                }
            }
        };
        if delete {
            t.shift_remove(k);
        }
    }
    if let Some(keep) = retain {
        t.retain(|k, _| keep.contains(k));
    }
    false
}

fn smp_list(target: &mut Value, patch: &Value, hints: Hints, name: &str) {
    let Some(pa) = patch.as_array() else {
        return;
    };
    if pa
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = clean(patch);
        return;
    }
    let Some(ta) = target.as_array_mut() else {
        return;
    };
    let real: Vec<Value> = pa
        .iter()
        .filter(|e| e.get("$patch").is_none() || e.is_object())
        .cloned()
        .collect();
    match hints.list_kind(name, &real) {
        ListKind::Map(keys) => {
            for pe in &real {
                let delete = pe.get("$patch").and_then(Value::as_str) == Some("delete");
                if delete {
                    ta.retain(|te| !same_key(te, pe, &keys));
                    continue;
                }
                match ta.iter_mut().find(|te| same_key(te, pe, &keys)) {
                    Some(te) => {
                        smp_map(te, pe, hints.items());
                    }
                    None => ta.push(clean(pe)),
                }
            }
        }
        ListKind::Set => {
            for pe in &real {
                if !ta.contains(pe) {
                    ta.push(pe.clone());
                }
            }
        }
        ListKind::Atomic => *target = clean(patch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}}, "replicas": 1}, "metadata": {"finalizers": ["x"]}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"},
            {"name": "c", "image": "c:1"}
        ], "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}]}}, "replicas": null},
            "metadata": {"finalizers": ["y"]}});
        assert!(strategic_merge_patch(&mut d, &patch).is_ok());
        assert_eq!(
            d,
            json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "c", "image": "c:1"}
        ]}}}, "metadata": {"finalizers": ["x", "y"]}})
        );
    }

    #[test]
    fn strategic_directives() {
        let mut d = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}}, "data": {"k": "v"}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"],
            "labels": {"$patch": "replace", "z": "3"}}, "data": {"$patch": "delete"}});
        assert!(strategic_merge_patch(&mut d, &patch).is_ok());
        assert_eq!(
            d,
            json!({"metadata": {"finalizers": ["b"], "labels": {"z": "3"}}})
        );
    }

    #[test]
    fn json_patch_test_op_failure_is_reported() {
        let mut d = json!({"metadata": {"finalizers": ["a"]}});
        let p = json!([{"op": "test", "path": "/metadata/finalizers", "value": ["b"]},
            {"op": "remove", "path": "/metadata/finalizers/0"}]);
        assert!(matches!(
            json_patch(&mut d, &p),
            Err(ApplyPatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&mut d, &json!({"op": 1})),
            Err(ApplyPatchError::Syntax(_))
        ));
    }
}
