//! The base ClusterServiceVersion, `config/manifests/bases/<project>.clusterserviceversion.yaml`.
//!
//! `init` writes it; `create api` reads it as YAML and writes it back with the kind's owned CRD
//! entry (and, when a kind gains a conversion webhook, the install modes OLM then allows), as
//! operator-sdk's `generate kustomize manifests` does. Everything else in it is kept, but not
//! its comments. The install strategy is left empty: `bundle-tool generate bundle` fills it from
//! `config/default`, and derives the `webhookdefinitions` (with `conversionCRDs`) from the
//! CRDs' conversion stanzas and the webhook Service.

use serde_json::{Map, Value, json};

use crate::ScaffoldError;

/// The file, relative to the project root.
pub fn path(project: &str) -> String {
    format!("config/manifests/bases/{project}.clusterserviceversion.yaml")
}

/// The base CSV of a new project.
pub fn base(project: &str, title: &str, domain: &str, repo: &str, image_tag_base: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "annotations": {
                "alm-examples": "[]",
                "capabilities": "Basic Install",
                "containerImage": format!("{image_tag_base}:0.1.0"),
                "description": format!("The {title}."),
                "repository": format!("https://{repo}"),
            },
            "name": format!("{project}.v0.0.0"),
            "namespace": "placeholder",
        },
        "spec": {
            "apiservicedefinitions": {},
            "customresourcedefinitions": {},
            "description": format!(
                "The {title}.\n\nTODO(user): what it manages, how to use it, and an example.\n"
            ),
            "displayName": title,
            "icon": [{"base64data": "", "mediatype": ""}],
            "install": {"spec": {"deployments": null}, "strategy": ""},
            "installModes": install_modes(true),
            "keywords": [project],
            "links": [{"name": title, "url": format!("https://{repo}")}],
            "maintainers": [{"email": format!("maintainers@{domain}"), "name": "Maintainers"}],
            "maturity": "alpha",
            "minKubeVersion": "1.25.0",
            "provider": {"name": domain, "url": format!("https://{domain}")},
            "version": "0.0.0",
        },
    })
}

/// OLM's four install modes. The runtime watches one, several or all namespaces
/// (`WATCH_NAMESPACE`), but a conversion webhook serves the whole cluster, so OLM allows only
/// AllNamespaces for an operator that has one.
fn install_modes(namespace_scoped: bool) -> Value {
    json!([
        {"supported": namespace_scoped, "type": "OwnNamespace"},
        {"supported": namespace_scoped, "type": "SingleNamespace"},
        {"supported": namespace_scoped, "type": "MultiNamespace"},
        {"supported": true, "type": "AllNamespaces"},
    ])
}

/// An owned CRD entry of one version.
pub struct Owned<'a> {
    /// `<plural>.<group>`.
    pub name: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The version.
    pub version: &'a str,
    /// Display name.
    pub display_name: &'a str,
    /// Description.
    pub description: String,
    /// Resources the operator creates for it (`Deployment`).
    pub resources: &'a [&'a str],
    /// `specDescriptors` (path, display name, description, x-descriptors).
    pub spec: Vec<(&'a str, &'a str, &'a str, &'a [&'a str])>,
}

fn parse(file: &str, text: &str) -> Result<Value, ScaffoldError> {
    let value = olmkit_core::docs::parse_document(file, text.as_bytes()).map_err(|e| {
        ScaffoldError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        }
    })?;
    if value.get("kind").and_then(Value::as_str) != Some("ClusterServiceVersion") {
        return Err(ScaffoldError::Parse {
            file: file.to_string(),
            message: "not a ClusterServiceVersion".into(),
        });
    }
    Ok(value)
}

/// Renders the CSV.
pub fn render(value: &Value) -> Result<String, ScaffoldError> {
    olmkit_core::docs::to_yaml("the base CSV", value)
        .map_err(|e| ScaffoldError::Internal(e.to_string()))
}

fn object<'v>(
    file: &str,
    value: &'v mut Value,
    key: &str,
) -> Result<&'v mut Map<String, Value>, ScaffoldError> {
    let map = value.as_object_mut().ok_or_else(|| ScaffoldError::Parse {
        file: file.to_string(),
        message: format!("{key}'s parent is not a mapping"),
    })?;
    let entry = map.entry(key).or_insert_with(|| json!({}));
    if entry.is_null() {
        *entry = json!({});
    }
    entry.as_object_mut().ok_or_else(|| ScaffoldError::Parse {
        file: file.to_string(),
        message: format!("{key} is not a mapping"),
    })
}

/// Adds an owned CRD entry (unless that name and version are listed) and returns the new text.
pub fn add_owned(file: &str, text: &str, owned: &Owned<'_>) -> Result<String, ScaffoldError> {
    let mut csv = parse(file, text)?;
    let spec = object(file, &mut csv, "spec")?;
    let crds = spec
        .entry("customresourcedefinitions")
        .or_insert_with(|| json!({}));
    if crds.is_null() {
        *crds = json!({});
    }
    let crds = crds.as_object_mut().ok_or_else(|| ScaffoldError::Parse {
        file: file.to_string(),
        message: "spec.customresourcedefinitions is not a mapping".into(),
    })?;
    let list = crds.entry("owned").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let list = list.as_array_mut().ok_or_else(|| ScaffoldError::Parse {
        file: file.to_string(),
        message: "spec.customresourcedefinitions.owned is not a list".into(),
    })?;
    let listed = list.iter().any(|e| {
        e.get("name").and_then(Value::as_str) == Some(owned.name)
            && e.get("version").and_then(Value::as_str) == Some(owned.version)
    });
    if !listed {
        let mut entry = json!({
            "description": owned.description,
            "displayName": owned.display_name,
            "kind": owned.kind,
            "name": owned.name,
            "version": owned.version,
        });
        if !owned.resources.is_empty() {
            entry["resources"] = owned
                .resources
                .iter()
                .map(|k| json!({"kind": k, "name": "", "version": "v1"}))
                .collect();
        }
        if !owned.spec.is_empty() {
            entry["specDescriptors"] = owned
                .spec
                .iter()
                .map(|(path, name, description, x)| {
                    json!({"description": description, "displayName": name, "path": path, "x-descriptors": x})
                })
                .collect();
        }
        entry["statusDescriptors"] = json!([{
            "description": "The state of the resource, as Kubernetes conditions.",
            "displayName": "Conditions",
            "path": "conditions",
            "x-descriptors": ["urn:alm:descriptor:io.kubernetes.conditions"],
        }]);
        list.push(entry);
        // Sorted by name, then version, as operator-sdk writes them.
        list.sort_by(|a, b| {
            let key = |v: &Value| {
                (
                    v.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    v.get("version")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
    }
    render(&csv)
}

/// Restricts the install modes to AllNamespaces (the operator now serves a conversion webhook).
pub fn all_namespaces_only(file: &str, text: &str) -> Result<String, ScaffoldError> {
    let mut csv = parse(file, text)?;
    let spec = object(file, &mut csv, "spec")?;
    spec.insert("installModes".into(), install_modes(false));
    render(&csv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_entries_are_added_once_and_sorted() {
        let base = render(&base(
            "w-operator",
            "W Operator",
            "example.com",
            "example.com/w",
            "example.com/w-operator",
        ))
        .unwrap();
        let entry = |version| Owned {
            name: "whalesays.demo.example.com",
            kind: "Whalesay",
            version,
            display_name: "Whalesay",
            description: "A Whalesay.".into(),
            resources: &["Deployment"],
            spec: vec![(
                "size",
                "Size",
                "Pods.",
                &["urn:alm:descriptor:com.tectonic.ui:podCount"],
            )],
        };
        let once = add_owned("csv", &base, &entry("v1alpha1")).unwrap();
        assert_eq!(add_owned("csv", &once, &entry("v1alpha1")).unwrap(), once);
        let twice = add_owned("csv", &once, &entry("v1")).unwrap();
        let v = olmkit_core::docs::parse_document("csv", twice.as_bytes()).unwrap();
        let versions: Vec<&str> = v["spec"]["customresourcedefinitions"]["owned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["v1", "v1alpha1"]);
        let all = all_namespaces_only("csv", &twice).unwrap();
        assert!(all.contains("supported: false"), "{all}");
    }

    #[test]
    fn other_documents_are_refused() {
        let e = add_owned(
            "x.yaml",
            "kind: Deployment\n",
            &Owned {
                name: "a",
                kind: "A",
                version: "v1",
                display_name: "A",
                description: String::new(),
                resources: &[],
                spec: vec![],
            },
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "x.yaml: not a ClusterServiceVersion");
    }
}
