//! What Go's `encoding/json` refuses when it decodes a value into a typed Kubernetes struct.
//!
//! operator-framework/api's bundle loader (`pkg/manifests/bundleloader.go`) decodes the CSV
//! into the typed `ClusterServiceVersion` (YAML to JSON, then `encoding/json`), and OLM does the
//! same before it creates the Deployments of the install strategy. A value Go cannot decode
//! into its field fails the whole bundle there: a string where an integer belongs, `1e23` or
//! `-3000000000` in an `int32`, `1.5` in an integer. JSON Schema cannot say this (draft
//! `integer` accepts `1e23`, and `format: int32` is only a hint), so this walks the value
//! alongside the Kubernetes OpenAPI schema of the type and reports what Go would refuse.
//! `null` is always accepted (Go's zero value), unknown fields too (Go drops them).

use serde_json::Value;

/// A value Go's decoder refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeProblem {
    /// Dotted path below the decoded root (`template.spec.containers[0].ports[0].containerPort`).
    pub path: String,
    /// Why, worded like Go's `json: cannot unmarshal ...`.
    pub message: String,
}

/// The problems of decoding `value` into the type `schema` describes; `root` is the schema
/// document holding the `$defs` that `$ref`s point into.
pub fn decode_problems(root: &Value, schema: &Value, value: &Value) -> Vec<DecodeProblem> {
    let mut out = Vec::new();
    walk(root, schema, value, String::new(), &mut out, 0);
    out
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut s = schema;
    for _ in 0..32 {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix("#/$defs/") {
                Some(name) => match root.get("$defs").and_then(|d| d.get(name)) {
                    Some(next) => s = next,
                    None => return s,
                },
                None => return s,
            },
            None => return s,
        }
    }
    s
}

/// The JSON types a schema allows, `null` left out (Go accepts it everywhere).
fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    }
}

/// The integer range of a Go integer field by its OpenAPI format.
fn range(format: Option<&str>) -> (&'static str, i128, i128) {
    match format {
        Some("int32") => ("int32", i128::from(i32::MIN), i128::from(i32::MAX)),
        _ => ("int64", i128::from(i64::MIN), i128::from(i64::MAX)),
    }
}

/// Why `v` does not decode as a value of JSON type `t`, if it does not.
fn type_problem(schema: &Value, t: &str, v: &Value) -> Option<String> {
    let kind = match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => return None,
    };
    match (t, v) {
        ("integer", Value::Number(n)) => {
            let (go, lo, hi) = range(schema.get("format").and_then(Value::as_str));
            let whole = n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 1e38)
                        .map(|f| f as i128)
                });
            match whole {
                Some(w) if (lo..=hi).contains(&w) => None,
                _ => Some(format!(
                    "cannot unmarshal number {n} into a value of type {go}"
                )),
            }
        }
        ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => None,
        (t, _) => {
            let go = match t {
                "integer" => "an integer",
                "number" => "a number",
                "string" => "a string",
                "boolean" => "a bool",
                "array" => "a list",
                _ => "an object",
            };
            Some(format!("cannot unmarshal {kind} into {go}"))
        }
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(
    root: &Value,
    schema: &Value,
    v: &Value,
    path: String,
    out: &mut Vec<DecodeProblem>,
    depth: usize,
) {
    if v.is_null() || depth > 64 {
        return;
    }
    let schema = resolve(root, schema);
    // int-or-string and friends: decodable when any alternative is.
    for key in ["oneOf", "anyOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let mut first = None;
            for alt in alts {
                let mut probs = Vec::new();
                walk(root, alt, v, path.clone(), &mut probs, depth + 1);
                if probs.is_empty() {
                    return;
                }
                first.get_or_insert(probs);
            }
            out.extend(first.unwrap_or_default());
            return;
        }
    }
    let ts = types(schema);
    if !ts.is_empty() {
        let problems: Vec<String> = ts
            .iter()
            .filter_map(|t| type_problem(schema, t, v))
            .collect();
        if problems.len() == ts.len() {
            out.push(DecodeProblem {
                path,
                message: problems.into_iter().next().unwrap_or_default(),
            });
            return;
        }
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, val) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => walk(root, sub, val, child(&path, k), out, depth + 1),
                    None => {
                        if let Some(sub) = extra {
                            walk(root, sub, val, child(&path, k), out, depth + 1);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(root, sub, item, format!("{path}[{i}]"), out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "$defs": {
                "Spec": {"type": ["object", "null"], "properties": {
                    "replicas": {"type": ["integer", "null"], "format": "int32"},
                    "paused": {"type": ["boolean", "null"]},
                    "surge": {"$ref": "#/$defs/IntOrString"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ports": {"type": "array", "items": {"type": "object", "properties": {
                        "port": {"type": "integer", "format": "int32"}}}}
                }},
                "IntOrString": {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]}
            },
            "$ref": "#/$defs/Spec"
        })
    }

    fn problems(v: Value) -> Vec<(String, String)> {
        let s = schema();
        decode_problems(&s, &s, &v)
            .into_iter()
            .map(|p| (p.path, p.message))
            .collect()
    }

    #[test]
    fn what_go_decodes_passes() {
        assert!(
            problems(
                json!({"replicas": 3, "paused": null, "surge": "25%", "labels": {"a": "b"},
            "ports": [{"port": 8080}], "unknown": [1, 2]})
            )
            .is_empty()
        );
        assert!(problems(json!({"replicas": 1.0, "surge": 1})).is_empty());
        assert!(
            problems(json!({"replicas": -5})).is_empty(),
            "a range, not a decoding matter"
        );
    }

    #[test]
    fn what_go_refuses_is_reported_with_its_path() {
        assert_eq!(
            problems(json!({"replicas": 1e23})),
            vec![(
                "replicas".into(),
                "cannot unmarshal number 1e+23 into a value of type int32".into()
            )]
        );
        assert_eq!(
            problems(json!({"replicas": 2147483648u64}))[0].0,
            "replicas"
        );
        assert_eq!(problems(json!({"replicas": 1.5}))[0].0, "replicas");
        assert_eq!(
            problems(json!({"replicas": "3"})),
            vec![(
                "replicas".into(),
                "cannot unmarshal string into an integer".into()
            )]
        );
        assert_eq!(
            problems(json!({"ports": [{"port": "http"}]}))[0].0,
            "ports[0].port"
        );
        assert_eq!(problems(json!({"labels": {"a": 1}}))[0].0, "labels.a");
        assert_eq!(problems(json!({"surge": true}))[0].0, "surge");
        assert_eq!(problems(json!({"paused": "yes"}))[0].0, "paused");
    }
}
