//! operator-sdk's behaviour where bundle-tool's default differs: what
//! [`super::Settings::upstream_compat`] and turned-off [`super::Improvement`]s use.
//!
//! Two kinds of things live here. Rules operator-sdk (v1.38.0) applies that bundle-tool
//! improves on: owned CRD entries with only name, version and kind
//! (`applyCustomResourceDefinitions`), related images from `RELATED_IMAGE_*` variables only
//! (`genutil.FindRelatedImages`), the default base CSV (`bases.New`). And the shapes its typed
//! Go objects give the YAML it writes: `creationTimestamp: null` and an empty `status` on the
//! RBAC, Service and CRD manifests (`genutil.WriteObjectsToFiles` marshals the typed objects),
//! zero-valued structs in the CSV's Deployments (`strategy: {}`, `resources: {}`), the scorecard
//! configuration's `storage`, and `alm-examples` with Go's HTML escaping (`json.MarshalIndent`).

use super::collect::{Collected, Crd};
use crate::json::as_obj_mut;
use olmkit_core::csv::{Container, Csv, DeploymentSpec};
use serde_json::{Map, Value, json};

/// operator-sdk's `k8sutil.GetDisplayName` for a package name: words split at `.`, `-`, `_`
/// and spaces, each capitalized (`memcached-operator` → `Memcached Operator`).
pub fn display_name(package: &str) -> String {
    package
        .split(['.', '-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(f) => f.to_uppercase().chain(cs).collect::<String>(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The base CSV operator-sdk starts from when none is given (`bases.New` with
/// `setDefaults`): placeholder description, provider, maintainer and link, AllNamespaces only.
pub fn default_base(package: &str) -> Value {
    let display = display_name(package);
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "annotations": {"alm-examples": "[]", "capabilities": "Basic Install"},
            "name": format!("{package}.v0.0.0"),
            "namespace": "placeholder",
        },
        "spec": {
            "apiservicedefinitions": {},
            "customresourcedefinitions": {},
            "description": format!("{display} description. TODO."),
            "displayName": display,
            "icon": [{"base64data": "", "mediatype": ""}],
            "installModes": [
                {"supported": false, "type": "OwnNamespace"},
                {"supported": false, "type": "SingleNamespace"},
                {"supported": false, "type": "MultiNamespace"},
                {"supported": true, "type": "AllNamespaces"},
            ],
            "keywords": [package],
            "links": [{"name": display, "url": format!("https://{package}.domain")}],
            "maintainers": [{"email": "your@email.com", "name": "Maintainer Name"}],
            "maturity": "alpha",
            "provider": {"name": "Provider Name", "url": "https://your.domain"},
        },
    })
}

/// `spec.customresourcedefinitions.owned` as operator-sdk's `applyCustomResourceDefinitions`
/// writes it: per served version, the base's entry with the same name, version and kind, or
/// an entry with just those three.
pub fn owned_crds(crds: &[Crd], base: &Value) -> Value {
    let base = Csv::new(base);
    let mut owned = Vec::new();
    for crd in crds {
        for v in crd.versions.iter().filter(|v| v.served) {
            let exact = base.owned_crds().find(|e| {
                e.name() == Some(&crd.name)
                    && e.version() == Some(&v.name)
                    && e.kind() == Some(&crd.kind)
            });
            owned.push(exact.map_or_else(
                || json!({"kind": crd.kind, "name": crd.name, "version": v.name}),
                |e| e.raw.clone(),
            ));
        }
    }
    Value::Array(owned)
}

/// `RELATED_IMAGE_<NAME>` → `<name>` with `_` as `-`, lowercased.
fn related_image_name(var: &str) -> Option<String> {
    var.strip_prefix("RELATED_IMAGE_")
        .map(|rest| rest.replace('_', "-").to_lowercase())
}

/// `spec.relatedImages` as operator-sdk's `genutil.FindRelatedImages` computes it: the
/// `RELATED_IMAGE_*` variables of the Deployments' containers then init containers; a name
/// used for two images is prefixed with `<deployment>` (one container) or
/// `<deployment>-<container>`; an image listed under two names appears once, unnamed. A
/// variable set with `valueFrom` is left out with a note (operator-sdk fails on it).
pub fn related_images(c: &Collected, notes: &mut Vec<String>) -> Value {
    // (name, image, container reference)
    let mut found: Vec<(String, String, String)> = Vec::new();
    for d in &c.deployments {
        let containers: Vec<Container<'_>> = DeploymentSpec::of_object(&d.object)
            .pod_spec()
            .all_containers()
            .collect();
        let single = containers.len() == 1;
        for ctr in &containers {
            let cref = if single {
                d.name().to_string()
            } else {
                format!("{}-{}", d.name(), ctr.name().unwrap_or(""))
            };
            for (var, value) in ctr.env() {
                let Some(name) = var.and_then(related_image_name) else {
                    continue;
                };
                let Some(image) = value else {
                    notes.push(format!(
                        "Deployment {}: {} has no value (valueFrom is not supported for related images); left out of relatedImages",
                        d.name(),
                        var.unwrap_or("")
                    ));
                    continue;
                };
                if !found.iter().any(|(n, i, _)| *n == name && i == image) {
                    found.push((name, image.to_string(), cref.clone()));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (name, image, cref) in &found {
        let same_name = found.iter().filter(|(n, _, _)| n == name).count();
        let same_image: Vec<&(String, String, String)> =
            found.iter().filter(|(_, i, _)| i == image).collect();
        let mut shown = if same_name > 1 {
            format!("{cref}-{name}")
        } else {
            name.clone()
        };
        if same_image.len() > 1 {
            if same_image.first().is_some_and(|f| f.0 != *name) {
                continue;
            }
            notes.push(format!(
                "related image {image} is listed under several names; listed once with an empty name"
            ));
            shown = String::new();
        }
        out.push(json!({"image": image, "name": shown}));
    }
    Value::Array(out)
}

fn insert_missing(m: &mut Map<String, Value>, key: &str, v: Value) {
    if !m.contains_key(key) {
        m.insert(key.to_string(), v);
    }
}

/// The zero values operator-sdk's typed `ClusterServiceVersion` adds when serialized:
/// `spec.displayName`, `provider` and `customresourcedefinitions` always present, and in each
/// install Deployment `strategy: {}`, `template.metadata: {}` and `resources: {}` per container.
pub fn typed_csv(csv: &mut Value) {
    let Some(spec) = csv.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    insert_missing(spec, "displayName", Value::from(""));
    insert_missing(spec, "provider", json!({}));
    insert_missing(spec, "customresourcedefinitions", json!({}));
    let Some(deps) = spec
        .get_mut("install")
        .and_then(|i| i.pointer_mut("/spec/deployments"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for d in deps {
        let Some(ds) = d.get_mut("spec").and_then(Value::as_object_mut) else {
            continue;
        };
        insert_missing(ds, "strategy", json!({}));
        let template = ds.entry("template").or_insert_with(|| json!({}));
        let t = as_obj_mut(template);
        insert_missing(t, "metadata", json!({}));
        let pod = as_obj_mut(t.entry("spec").or_insert_with(|| json!({})));
        for list in ["containers", "initContainers"] {
            if let Some(cs) = pod.get_mut(list).and_then(Value::as_array_mut) {
                for ctr in cs.iter_mut().filter_map(Value::as_object_mut) {
                    insert_missing(ctr, "resources", json!({}));
                }
            }
        }
    }
}

/// The fields operator-sdk's typed Go objects add to a bundle manifest of `kind` when it
/// writes them (`genutil.WriteObjectsToFiles` marshals CRDs, Services and the RBAC objects as
/// typed structs; other kinds pass through unstructured, unchanged).
pub fn typed_object(object: &mut Value) {
    let kind = olmkit_core::object::kind(object).to_string();
    let typed = matches!(
        kind.as_str(),
        "CustomResourceDefinition"
            | "Service"
            | "ServiceAccount"
            | "Role"
            | "ClusterRole"
            | "RoleBinding"
            | "ClusterRoleBinding"
    );
    if !typed {
        return;
    }
    let root = as_obj_mut(object);
    let meta = as_obj_mut(root.entry("metadata").or_insert_with(|| json!({})));
    insert_missing(meta, "creationTimestamp", Value::Null);
    match kind.as_str() {
        "Service" => insert_missing(root, "status", json!({"loadBalancer": {}})),
        "CustomResourceDefinition" => insert_missing(
            root,
            "status",
            json!({
                "acceptedNames": {"kind": "", "plural": ""},
                "conditions": null,
                "storedVersions": null,
            }),
        ),
        "Role" | "ClusterRole" => insert_missing(root, "rules", Value::Null),
        _ => {}
    }
}

/// The scorecard configuration as operator-sdk's typed `v1alpha3.Configuration` writes it:
/// `storage.spec.mountPath: {}` at the top and in every test.
pub fn typed_scorecard(config: &mut Value) {
    let storage = || json!({"spec": {"mountPath": {}}});
    let root = as_obj_mut(config);
    insert_missing(root, "storage", storage());
    if let Some(stages) = root.get_mut("stages").and_then(Value::as_array_mut) {
        for stage in stages {
            if let Some(tests) = stage.get_mut("tests").and_then(Value::as_array_mut) {
                for t in tests.iter_mut().filter_map(Value::as_object_mut) {
                    insert_missing(t, "storage", storage());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names() {
        assert_eq!(display_name("memcached-operator"), "Memcached Operator");
        assert_eq!(display_name("a.b_c"), "A B C");
    }

    #[test]
    fn typed_service_and_crd() {
        let mut s = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}});
        typed_object(&mut s);
        assert_eq!(s["metadata"]["creationTimestamp"], Value::Null);
        assert!(
            s["metadata"]
                .as_object()
                .unwrap()
                .contains_key("creationTimestamp")
        );
        assert_eq!(s["status"], json!({"loadBalancer": {}}));
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        typed_object(&mut cm);
        assert!(
            !cm["metadata"]
                .as_object()
                .unwrap()
                .contains_key("creationTimestamp")
        );
    }
}
