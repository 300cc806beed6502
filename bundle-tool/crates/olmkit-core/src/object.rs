//! The few fields every Kubernetes object is read by (`kind`, `apiVersion`, `metadata.name`),
//! read off an untyped JSON value in one place, so that bundle manifests, input documents and
//! catalog objects agree on what a missing or non-string field means: the empty string.

use serde_json::Value;

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    crate::csv::str_at(object, pointer).unwrap_or("")
}

/// `kind`, or "" when missing or not a string.
pub fn kind(object: &Value) -> &str {
    str_at(object, "/kind")
}

/// `apiVersion`, or "" when missing or not a string.
pub fn api_version(object: &Value) -> &str {
    str_at(object, "/apiVersion")
}

/// `metadata.name`, or "" when missing or not a string.
pub fn name(object: &Value) -> &str {
    str_at(object, "/metadata/name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_or_empty() {
        let o = json!({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "m"}});
        assert_eq!(
            (kind(&o), api_version(&o), name(&o)),
            ("Deployment", "apps/v1", "m")
        );
        let bad = json!({"kind": 3, "metadata": "x"});
        assert_eq!((kind(&bad), api_version(&bad), name(&bad)), ("", "", ""));
        assert_eq!(kind(&json!([1])), "");
    }
}
