//! Pure comparison of a desired object with the observed one: "would applying change anything?"
//!
//! Server-side apply of an unchanged configuration is a no-op on the server, but it is still a
//! write request (RBAC, audit log, API-server load, a round trip per object on every resync).
//! The reconciler therefore applies only when [`needs_apply`] says so. The rule:
//! - every field of the desired object must be present in the observed one with an equal value
//!   (the API server adds defaults and status, so the observed object is a superset), and
//! - the observed object must carry the same desired-hash annotation, which changes when we stop
//!   setting a field (a removal that the superset rule alone cannot see).
//!
//! Quantities under `limits`/`requests` compare by value, because the API server canonicalises
//! them (`1024Mi` is stored as `1Gi`). Empty maps and lists in the desired object impose nothing,
//! because the API server drops them.

use memcached_api::validation::parse_quantity_millis;
use serde_json::Value;

/// True when `observed` differs from `desired` in a field the operator sets.
pub fn needs_apply<T: serde::Serialize>(desired: &T, observed: Option<&Value>) -> bool {
    let Some(observed) = observed else {
        return true;
    };
    match serde_json::to_value(desired) {
        Ok(d) => !is_subset(&d, observed, false),
        // Cannot happen for k8s-openapi types; applying is the safe answer.
        Err(_) => true,
    }
}

/// True when every field of `desired` is present in `observed` with an equal value.
/// `quantity_map` says the two values are a `limits`/`requests`-style map of quantities.
pub fn is_subset(desired: &Value, observed: &Value, quantity_map: bool) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => d.iter().all(|(k, dv)| match (o.get(k), dv) {
            (Some(Value::String(ov)), Value::String(dv)) if quantity_map => {
                dv == ov || quantities_equal(dv, ov)
            }
            (Some(ov), _) => is_subset(dv, ov, is_quantity_key(k)),
            (None, _) => is_empty(dv),
        }),
        (Value::Object(d), Value::Null) => d.is_empty(),
        (Value::Array(d), Value::Array(o)) => {
            d.len() == o.len() && d.iter().zip(o).all(|(dv, ov)| is_subset(dv, ov, false))
        }
        (Value::Array(d), Value::Null) => d.is_empty(),
        (Value::Null, _) => true,
        (d, o) => d == o,
    }
}

fn is_quantity_key(k: &str) -> bool {
    matches!(k, "limits" | "requests" | "overhead")
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Compares two Kubernetes quantities by value (`1Gi` == `1024Mi`, `0.5` == `500m`).
pub fn quantities_equal(a: &str, b: &str) -> bool {
    match (parse_quantity_millis(a), parse_quantity_millis(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn superset_with_defaults_needs_nothing() {
        let d = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}}});
        let o = json!({"spec": {"replicas": 1, "progressDeadlineSeconds": 600,
            "template": {"spec": {"containers": [{"name": "m", "image": "x", "imagePullPolicy": "IfNotPresent"}],
            "dnsPolicy": "ClusterFirst"}}}, "status": {"replicas": 1}});
        assert!(is_subset(&d, &o, false));
    }

    #[test]
    fn changed_scalar_or_list_length_needs_apply() {
        let d = json!({"spec": {"replicas": 2}});
        let o = json!({"spec": {"replicas": 1}});
        assert!(!is_subset(&d, &o, false));
        let d = json!({"args": ["-p", "1"]});
        let o = json!({"args": ["-p", "1", "-vv"]});
        assert!(!is_subset(&d, &o, false));
    }

    #[test]
    fn missing_field_needs_apply_unless_empty() {
        assert!(!is_subset(&json!({"a": 1}), &json!({}), false));
        assert!(is_subset(
            &json!({"a": {}, "b": [], "c": null}),
            &json!({}),
            false
        ));
    }

    #[test]
    fn quantities_compare_by_value_only_under_resources() {
        let d = json!({"resources": {"limits": {"memory": "1024Mi", "cpu": "0.5"}}});
        let o = json!({"resources": {"limits": {"memory": "1Gi", "cpu": "500m"}}});
        assert!(is_subset(&d, &o, false));
        // Outside resources a string is a string: image tags "1" and "1.0" differ.
        assert!(!is_subset(
            &json!({"tag": "1"}),
            &json!({"tag": "1.0"}),
            false
        ));
    }

    #[test]
    fn quantity_equality() {
        assert!(quantities_equal("128Mi", "134217728"));
        assert!(quantities_equal("1", "1000m"));
        assert!(!quantities_equal("128Mi", "128M"));
        assert!(!quantities_equal("x", "x"));
    }

    #[test]
    fn absent_observed_needs_apply() {
        assert!(needs_apply(&json!({"a": 1}), None));
        assert!(!needs_apply(
            &json!({"a": 1}),
            Some(&json!({"a": 1, "b": 2}))
        ));
    }
}
