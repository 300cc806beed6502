//! Small helpers for reading and building `serde_json::Value` objects.
//!
//! Bundle content is handled as JSON values so any operator's manifests round-trip, including
//! fields this tool does not model. These helpers keep the accessors short and panic-free.

use serde_json::{Map, Value};

/// The array at `pointer`, or an empty slice.
pub fn arr_at<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The object at `pointer`, if there is one.
pub fn obj_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a Map<String, Value>> {
    v.pointer(pointer).and_then(Value::as_object)
}

/// The object under `key` of `map`, created (or replaced, if it is not an object) when needed.
pub fn child_obj<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        // Unreachable: replaced by an object just above.
        _ => unreachable!("slot was made an object"),
    }
}

/// `v` as a mutable object, turning it into an empty object first if it is not one.
pub fn as_obj_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("value was made an object"),
    }
}

/// String-valued entries of the object at `pointer` (labels, selectors), non-strings skipped.
pub fn string_map(v: &Value, pointer: &str) -> Vec<(String, String)> {
    obj_at(v, pointer)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A short description of a JSON type, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// `v` without its `null` values: what Go's decoding into typed structs keeps (a `null`
/// becomes the zero value, which encoding leaves out or writes as the empty value). Schema
/// checks run on this view so that `resources: null` is not "null is not of type object".
pub fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// True for a schema violation about a field the schema does not know: Go's decoder drops
/// such fields, so the object the API server stores does not have them.
pub fn is_unknown_field(message: &str) -> bool {
    message.starts_with("Additional properties are not allowed")
}
