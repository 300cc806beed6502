//! Embeds the schemas bundle validation checks against, in compact form.
//!
//! - The ClusterServiceVersion schema is `spec.versions[v1alpha1].schema.openAPIV3Schema` of
//!   OLM's real CSV CRD (tests/fixtures/olm-crds), converted from YAML to JSON. OpenAPI
//!   `nullable: true` becomes a `null` type alternative (JSON Schema has no `nullable`), and the
//!   `x-kubernetes-*` extensions are dropped: validation then has draft-4 semantics, as
//!   OLM's own tests and Python's `Draft4Validator` use.
//! - The Kubernetes kinds' strict schemas (tests/fixtures/kube-schemas) are copied as they are,
//!   minus descriptions.
//!
//! Descriptions are removed from both: they do not affect validation, and without them the
//! schemas parse several times faster at startup (`bundle-tool validate` must stay well under
//! 50 ms end to end).

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

const KUBE_SCHEMAS: &[&str] = &[
    "customresourcedefinition-apiextensions-v1",
    "deployment-apps-v1",
    "service-v1",
    "serviceaccount-v1",
    "configmap-v1",
    "role-rbac-v1",
    "rolebinding-rbac-v1",
    "clusterrole-rbac-v1",
    "clusterrolebinding-rbac-v1",
    "validatingwebhookconfiguration-admissionregistration-v1",
    "mutatingwebhookconfiguration-admissionregistration-v1",
];

/// Keywords whose value is a map from names to schemas (the keys are not keywords).
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is data, not a schema: never rewritten.
const DATA_KEYWORDS: &[&str] = &[
    "enum", "default", "example", "examples", "const", "required",
];

fn strip(schema: &mut Value, openapi: bool) {
    match schema {
        Value::Object(map) => {
            map.remove("description");
            if openapi {
                map.retain(|k, _| !k.starts_with("x-kubernetes-"));
                if map.remove("nullable") == Some(Value::Bool(true))
                    && let Some(Value::String(t)) = map.get("type").cloned()
                {
                    map.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
                }
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if DATA_KEYWORDS.contains(&k.as_str()) {
                    continue;
                }
                let Some(v) = map.get_mut(&k) else { continue };
                if SCHEMA_MAPS.contains(&k.as_str()) {
                    if let Value::Object(named) = v {
                        for (_, s) in named.iter_mut() {
                            strip(s, openapi);
                        }
                    }
                } else {
                    strip(v, openapi);
                }
            }
        }
        Value::Array(items) => {
            for i in items {
                strip(i, openapi);
            }
        }
        _ => {}
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures")
}

fn csv_schema() -> Value {
    let path = fixtures().join("olm-crds/operators.coreos.com_clusterserviceversions.yaml");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let crd: Value = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{}: no spec.versions", path.display()));
    let mut schema = versions
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some("v1alpha1"))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .cloned()
        .unwrap_or_else(|| panic!("{}: no v1alpha1 openAPIV3Schema", path.display()));
    strip(&mut schema, true);
    if let Value::Object(m) = &mut schema {
        m.insert(
            "$schema".into(),
            Value::String("http://json-schema.org/draft-04/schema#".into()),
        );
    }
    schema
}

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let write = |name: &str, v: &Value| {
        let p = out.join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    };
    write("clusterserviceversion.schema.json", &csv_schema());
    let mut index = Map::new();
    for name in KUBE_SCHEMAS {
        let path = fixtures().join(format!(
            "kube-schemas/v1.36.0-standalone-strict/{name}.json"
        ));
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut schema: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
        strip(&mut schema, false);
        index.insert((*name).to_string(), schema);
    }
    write("kube.schemas.json", &Value::Object(index));
    println!("cargo:rerun-if-changed=build.rs");
}
