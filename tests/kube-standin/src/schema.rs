//! CRD structural-schema handling: defaulting (`default`), pruning of unknown fields (unless
//! `x-kubernetes-preserve-unknown-fields`), and OpenAPI validation (type, enum, required,
//! bounds, lengths, pattern, item counts...) through the `jsonschema` crate after translating the
//! OpenAPI dialect (`nullable`, `x-kubernetes-int-or-string`) to JSON Schema. CEL rules
//! (`x-kubernetes-validations`) are not evaluated.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::error::FieldCause;

fn props(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// Applies `default`s (and drops nulls a non-nullable field may not hold first, as the API server
/// does) throughout `value`.
pub fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(p) = props(schema) {
                for (k, sub) in p {
                    if map.get(k).is_some_and(Value::is_null) && !nullable(sub) {
                        map.shift_remove(k);
                    }
                    if !map.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply_defaults(child, sub);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in map.values_mut() {
                    apply_defaults(child, ap);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = schema.get("items") {
                for child in items.iter_mut() {
                    apply_defaults(child, it);
                }
            }
        }
        _ => {}
    }
}

/// Removes fields the schema does not declare; returns their paths (`spec.foo`), which
/// `fieldValidation=Strict|Warn` report.
pub fn prune(value: &mut Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    prune_at(value, schema, "", true, &mut out);
    out
}

fn prune_at(value: &mut Value, schema: &Value, path: &str, root: bool, out: &mut Vec<String>) {
    let embedded = schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    match value {
        Value::Object(map) => {
            let p = props(schema);
            let ap = schema.get("additionalProperties");
            let keep_unknown = preserves_unknown(schema)
                || ap.is_some_and(|a| a.is_object() || a.as_bool() == Some(true));
            let mut unknown = Vec::new();
            for (k, child) in map.iter_mut() {
                let child_path = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if (root || embedded) && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match p.and_then(|p| p.get(k)) {
                    Some(sub) => prune_at(child, sub, &child_path, false, out),
                    None => match ap.filter(|a| a.is_object()) {
                        Some(sub) => prune_at(child, sub, &child_path, false, out),
                        None if keep_unknown => {}
                        None => unknown.push((k.clone(), child_path)),
                    },
                }
            }
            for (k, child_path) in unknown {
                map.shift_remove(&k);
                out.push(child_path);
            }
        }
        Value::Array(items) => {
            if let Some(it) = schema.get("items") {
                for (i, child) in items.iter_mut().enumerate() {
                    prune_at(child, it, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The JSON Schema equivalent of an OpenAPI v3 structural schema.
fn to_json_schema(s: &Value) -> Value {
    let Value::Object(m) = s else {
        return s.clone();
    };
    let mut out = Map::new();
    let int_or_string = m.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    for (k, v) in m {
        match k.as_str() {
            "properties" | "patternProperties" | "definitions" => {
                let mapped = v
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| (k.clone(), to_json_schema(v)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(mapped));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(k.clone(), to_json_schema(v));
            }
            "allOf" | "anyOf" | "oneOf" => {
                let mapped = v
                    .as_array()
                    .map(|a| a.iter().map(to_json_schema).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Array(mapped));
            }
            "type" if int_or_string => {}
            "nullable" | "default" | "example" | "externalDocs" | "format" => {}
            k if k.starts_with("x-") => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if int_or_string && !out.contains_key("anyOf") {
        out.insert(
            "anyOf".into(),
            serde_json::json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if nullable(s)
        && let Some(t) = out.get("type").cloned()
    {
        out.insert(
            "type".into(),
            Value::Array(vec![t, Value::String("null".into())]),
        );
        if let Some(Value::Array(e)) = out.get_mut("enum") {
            e.push(Value::Null);
        }
    }
    // A schema that keeps unknown fields says nothing about them; JSON Schema allows them anyway.
    Value::Object(out)
}

type Cache = Mutex<HashMap<String, Arc<jsonschema::Validator>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    if let Ok(c) = cache().lock()
        && let Some(v) = c.get(&key)
    {
        return Ok(v.clone());
    }
    let js = to_json_schema(schema);
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(false)
        .build(&js)
        .map_err(|e| e.to_string())?;
    let v = Arc::new(v);
    if let Ok(mut c) = cache().lock() {
        if c.len() > 256 {
            c.clear();
        }
        c.insert(key, v.clone());
    }
    Ok(v)
}

/// Every schema violation of `value`, as field causes for a 422.
pub fn validate(value: &Value, schema: &Value) -> Vec<FieldCause> {
    let v = match validator(schema) {
        Ok(v) => v,
        Err(e) => {
            return vec![FieldCause::invalid(
                "<schema>",
                &Value::Null,
                &format!("the CRD schema cannot be compiled: {e}"),
            )];
        }
    };
    let mut causes = Vec::new();
    for err in v.iter_errors(value) {
        let ptr = err.instance_path().to_string();
        let field = ptr.trim_start_matches('/').replace('/', ".");
        let field = if field.is_empty() {
            "<root>".to_string()
        } else {
            field
        };
        let got = value.pointer(&ptr).cloned().unwrap_or(Value::Null);
        causes.push(FieldCause::invalid(
            field.clone(),
            &got,
            &format!("{field} in body: {err}"),
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "image": {"type": "string", "nullable": true},
                "port": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}}
            }, "required": ["image"]}
        }})
    }

    #[test]
    fn defaults_and_prunes() {
        let mut o = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"image": null, "unknown": 1, "labels": {"k": "v"}, "free": {"any": {"x": 1}},
                "items": [{"b": 1}]}, "extra": true});
        apply_defaults(&mut o, &schema());
        let mut pruned = prune(&mut o, &schema());
        pruned.sort();
        assert_eq!(pruned, vec!["extra", "spec.items[0].b", "spec.unknown"]);
        assert_eq!(o["spec"]["replicas"], json!(1));
        assert_eq!(o["spec"]["items"][0]["a"], json!("x"));
        assert_eq!(o["spec"]["free"]["any"]["x"], json!(1));
        assert_eq!(o["spec"]["image"], Value::Null);
    }

    #[test]
    fn validation_reports_every_problem() {
        let o = json!({"spec": {"replicas": -1, "port": "http", "labels": {"a": 1}}});
        let causes = validate(&o, &schema());
        let fields: Vec<_> = causes.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"spec.replicas"), "{causes:?}");
        assert!(fields.contains(&"spec.labels.a"), "{causes:?}");
        assert!(fields.contains(&"spec"), "{causes:?}");
        assert!(validate(&json!({"spec": {"image": null, "port": 8}}), &schema()).is_empty());
    }
}
