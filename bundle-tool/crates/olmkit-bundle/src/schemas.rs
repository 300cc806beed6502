//! Embedded JSON schemas and the validators built from them.
//!
//! The ClusterServiceVersion schema is OLM's own CSV CRD schema (draft-4 semantics); the other
//! kinds use Kubernetes v1.36 strict schemas (draft 2020-12). `build.rs` embeds them in compact
//! form; validators are compiled lazily, once per process, and only for the kinds a run
//! actually meets, which keeps `bundle-tool validate` fast.

use jsonschema::{Draft, Validator};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

const CSV_SCHEMA: &str = include_str!(concat!(
    env!("OUT_DIR"),
    "/clusterserviceversion.schema.json"
));
const KUBE_SCHEMAS: &str = include_str!(concat!(env!("OUT_DIR"), "/kube.schemas.json"));

/// One place where a document does not match its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Field path in the document, dotted (`spec.install.spec.deployments[0].name`), empty for
    /// the root.
    pub path: String,
    /// What the schema says, without echoing the (possibly huge) offending value.
    pub message: String,
}

/// Kinds that have an embedded Kubernetes schema, keyed by `apiVersion`/`kind`.
const KIND_SCHEMAS: &[(&str, &str, &str)] = &[
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinition-apiextensions-v1",
    ),
    ("apps/v1", "Deployment", "deployment-apps-v1"),
    ("v1", "Service", "service-v1"),
    ("v1", "ServiceAccount", "serviceaccount-v1"),
    ("v1", "ConfigMap", "configmap-v1"),
    ("rbac.authorization.k8s.io/v1", "Role", "role-rbac-v1"),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebinding-rbac-v1",
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterrole-rbac-v1",
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebinding-rbac-v1",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfiguration-admissionregistration-v1",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfiguration-admissionregistration-v1",
    ),
];

type Compiled = Result<Validator, String>;

fn compile(schema: &Value, draft: Draft) -> Compiled {
    jsonschema::options()
        .with_draft(draft)
        // Kubernetes does not reject unknown formats and Python's Draft4Validator checks none
        // unless asked; format checks would only add disagreement with both.
        .should_validate_formats(false)
        .build(schema)
        .map_err(|e| e.to_string())
}

fn csv_validator() -> &'static Compiled {
    static V: OnceLock<Compiled> = OnceLock::new();
    V.get_or_init(|| {
        serde_json::from_str::<Value>(CSV_SCHEMA)
            .map_err(|e| e.to_string())
            .and_then(|s| compile(&s, Draft::Draft4))
    })
}

fn kube_index() -> &'static HashMap<String, Value> {
    static I: OnceLock<HashMap<String, Value>> = OnceLock::new();
    I.get_or_init(|| serde_json::from_str(KUBE_SCHEMAS).unwrap_or_default())
}

fn kube_validator(file: &'static str) -> &'static Compiled {
    static V: OnceLock<HashMap<&'static str, OnceLock<Compiled>>> = OnceLock::new();
    let cells = V.get_or_init(|| {
        KIND_SCHEMAS
            .iter()
            .map(|(_, _, f)| (*f, OnceLock::new()))
            .collect()
    });
    static MISSING: OnceLock<Compiled> = OnceLock::new();
    match cells.get(file) {
        Some(cell) => cell.get_or_init(|| match kube_index().get(file) {
            Some(schema) => compile(schema, Draft::Draft202012),
            None => Err(format!("schema {file} is not embedded")),
        }),
        None => MISSING.get_or_init(|| Err(format!("schema {file} is not embedded"))),
    }
}

/// Starts compiling the CSV and Deployment validators on background threads, so the work
/// (about 5 ms and 8 ms optimized) overlaps with reading and parsing the input. Later
/// validation calls wait for the compiled validators instead of compiling them again.
pub fn prewarm() {
    let _ = std::thread::Builder::new()
        .name("csv-schema".into())
        .spawn(|| {
            let _ = csv_validator();
        });
    let _ = std::thread::Builder::new()
        .name("deployment-schema".into())
        .spawn(|| {
            let _ = kube_validator("deployment-apps-v1");
        });
}

/// Turns a JSON pointer into the dotted path style findings use.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn run(validator: &Validator, instance: &Value) -> Vec<SchemaViolation> {
    let mut out: Vec<SchemaViolation> = validator
        .iter_errors(instance)
        .map(|e| SchemaViolation {
            path: pointer_to_path(e.instance_path().as_str()),
            message: truncate(e.masked().to_string(), 240),
        })
        .collect();
    out.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
    out.dedup();
    out
}

/// The embedded CSV schema as compact JSON (draft 4), for peers such as Python's
/// `jsonschema.Draft4Validator` that benchmarks compare against.
pub fn csv_schema_json() -> &'static str {
    CSV_SCHEMA
}

/// Validates a CSV against OLM's ClusterServiceVersion CRD schema (v1alpha1).
pub fn validate_csv(csv: &Value) -> Result<Vec<SchemaViolation>, String> {
    match csv_validator() {
        Ok(v) => Ok(run(v, csv)),
        Err(e) => Err(e.clone()),
    }
}

/// Validates an object against the Kubernetes schema of its `apiVersion`/`kind`. `None` when no
/// schema is embedded for that kind.
pub fn validate_kube(object: &Value) -> Option<Result<Vec<SchemaViolation>, String>> {
    let api_version = object.get("apiVersion").and_then(Value::as_str)?;
    let kind = object.get("kind").and_then(Value::as_str)?;
    let file = KIND_SCHEMAS
        .iter()
        .find(|(a, k, _)| *a == api_version && *k == kind)
        .map(|(_, _, f)| *f)?;
    Some(match kube_validator(file) {
        Ok(v) => Ok(run(v, object)),
        Err(e) => Err(e.clone()),
    })
}

/// What Go's decoder would refuse in a Deployment spec of a CSV install strategy (types and
/// integer ranges: see [`crate::godecode`]). Empty when the schema is not embedded.
pub fn deployment_spec_decode_problems(spec: &Value) -> Vec<crate::godecode::DecodeProblem> {
    let Some(root) = kube_index().get("deployment-apps-v1") else {
        return Vec::new();
    };
    let Some(schema) = root
        .get("$defs")
        .and_then(|d| d.get("io.k8s.api.apps.v1.DeploymentSpec"))
    else {
        return Vec::new();
    };
    crate::godecode::decode_problems(root, schema, spec)
}

/// Validates a Deployment spec (as found in a CSV install strategy) by wrapping it into an
/// `apps/v1` Deployment named `name`. Paths in the result are relative to the spec.
pub fn validate_deployment_spec(name: &str, spec: &Value) -> Result<Vec<SchemaViolation>, String> {
    let wrapped = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": spec,
    });
    let v = match kube_validator("deployment-apps-v1") {
        Ok(v) => v,
        Err(e) => return Err(e.clone()),
    };
    Ok(run(v, &wrapped)
        .into_iter()
        .filter_map(|mut s| {
            // Keep only what concerns the spec; the wrapper itself is always valid.
            let rest = s.path.strip_prefix("spec")?;
            s.path = rest.trim_start_matches('.').to_string();
            Some(s)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers() {
        assert_eq!(
            pointer_to_path("/spec/install/spec/deployments/0/name"),
            "spec.install.spec.deployments[0].name"
        );
        assert_eq!(pointer_to_path(""), "");
        assert_eq!(
            pointer_to_path("/metadata/annotations/a~1b"),
            "metadata.annotations.a/b"
        );
    }

    #[test]
    fn csv_schema_rejects_wrong_types() {
        let csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "x.v1.0.0"},
            "spec": {"displayName": 3, "install": {"strategy": "deployment"}}
        });
        let v = validate_csv(&csv).unwrap();
        assert!(v.iter().any(|s| s.path == "spec.displayName"), "{v:?}");
    }

    #[test]
    fn kube_schema_rejects_unknown_fields() {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"portz": []}});
        let v = validate_kube(&svc).unwrap().unwrap();
        assert!(!v.is_empty());
        let ok = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 443, "targetPort": 9443}]}});
        assert_eq!(validate_kube(&ok).unwrap().unwrap(), vec![]);
        assert!(validate_kube(&json!({"apiVersion": "v1", "kind": "Secret"})).is_none());
    }

    #[test]
    fn deployment_spec_paths_are_relative() {
        let v = validate_deployment_spec(
            "d",
            &json!({"selector": {}, "template": {"spec": {"containers": [{"name": 1}]}}}),
        )
        .unwrap();
        assert!(
            v.iter()
                .any(|s| s.path.starts_with("template.spec.containers[0]")),
            "{v:?}"
        );
    }
}
