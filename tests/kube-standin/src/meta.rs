//! Object metadata helpers: reading and writing the well-known `metadata` fields, timestamps, uid
//! and generated-name creation, and name validation as the API server does it.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Now, in the RFC 3339 seconds form Kubernetes uses for `metav1.Time`.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Now, in the `metav1.MicroTime` form.
pub fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

fn unique_bytes() -> [u8; 32] {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = jiff::Timestamp::now().as_nanosecond();
    let mut h = Sha256::new();
    h.update(n.to_le_bytes());
    h.update(t.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.finalize().into()
}

/// A random-looking, unique RFC 4122 version-4 uid.
pub fn new_uid() -> String {
    let mut b = unique_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(&b[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The 5-character suffix appended to `generateName`.
pub fn name_suffix() -> String {
    unique_bytes()[..5]
        .iter()
        .map(|b| ALPHANUMS[(*b as usize) % ALPHANUMS.len()] as char)
        .collect()
}

/// A stable short hash in Kubernetes' "safe" alphabet (like `pod-template-hash`).
pub fn safe_hash(data: &[u8], len: usize) -> String {
    Sha256::digest(data)
        .iter()
        .take(len)
        .map(|b| ALPHANUMS[(*b as usize) % ALPHANUMS.len()] as char)
        .collect()
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata`, created when absent or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("just made an object")
    };
    let m = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    match m {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").parse().unwrap_or(0)
}

pub fn generation(obj: &Value) -> i64 {
    meta(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub fn is_terminating(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, fins: &[String]) {
    let m = meta_mut(obj);
    if fins.is_empty() {
        m.shift_remove("finalizers");
    } else {
        m.insert(
            "finalizers".into(),
            Value::Array(fins.iter().map(|f| Value::String(f.clone())).collect()),
        );
    }
}

/// The uids of `metadata.ownerReferences`.
pub fn owner_uids(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|o| o.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Why `name` is not a valid object name (DNS-1123 label for namespaces, subdomain otherwise):
/// apimachinery's `IsDNS1123Label` / `IsDNS1123Subdomain` from their one home in olmkit-core,
/// problems joined as the API server's field error does.
pub fn invalid_name(name: &str, label_only: bool) -> Option<String> {
    let errs = if label_only {
        olmkit_core::k8s_name::dns1123_label_errors(name)
    } else {
        olmkit_core::k8s_name::dns1123_subdomain_errors(name)
    };
    (!errs.is_empty()).then(|| errs.join(", "))
}

/// Why `name` is not a valid RBAC object name: RBAC names only need to be valid path segments
/// (`ValidateRBACName` = `path.IsValidPathSegmentName`), so `system:discovery` is fine.
pub fn invalid_path_segment_name(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    ["/", "%"]
        .iter()
        .find(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_unique_and_well_formed() {
        let a = new_uid();
        let b = new_uid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
    }

    #[test]
    fn names() {
        assert!(invalid_name("my-app.example", false).is_none());
        assert!(invalid_name("My_App", false).is_some());
        assert!(invalid_name("a.b", true).is_some());
        assert!(invalid_name("-a", true).is_some());
        assert!(invalid_path_segment_name("system:discovery").is_none());
        assert!(invalid_path_segment_name("a/b").is_some());
    }
}
