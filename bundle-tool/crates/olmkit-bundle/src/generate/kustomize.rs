//! `generate kustomize manifests`: the base CSV in `config/manifests/bases` and the
//! `config/manifests/kustomization.yaml` that `generate bundle` builds from, as operator-sdk
//! v1.38 writes them.
//!
//! Mirrors operator-sdk's `internal/cmd/operator-sdk/generate/kustomize/manifests.go` (`run`)
//! and `internal/generate/clusterserviceversion/bases` (`ClusterServiceVersion.GetBase`):
//! - no base yet: operator-sdk's default base (`bases.New` + `setDefaults`:
//!   [`super::upstream::default_base`]);
//! - a base already there: it is read back and kept (every hand edit: display name,
//!   description, icon, maintainers, descriptors...), its `<package>.vX.Y.Z` name resolved to
//!   `<package>.v<spec.version>`;
//! - then the owned CRD descriptions of the project's APIs (`definitions.ApplyDefinitionsForKeysGo`
//!   over the `PROJECT` resources): `name` (`<plural>.<group>`), `version`, `kind`,
//!   `displayName` (`k8sutil.GetDisplayName(kind)`) and `description`. operator-sdk reads the
//!   description from the Go type's doc comment under `--apis-dir`; bundle-tool reads the same
//!   text from the CRD controller-gen generated from that type (its schema's `description`),
//!   and does not parse Go `+operator-sdk:csv:customresourcedefinitions` markers. Where the base
//!   already describes an API, its entry is kept as it is (operator-sdk regenerates it from the
//!   markers, which a project without Go types does not have: the base is where such a project
//!   keeps descriptors), a missing `displayName` or `description` filled in; new APIs are added
//!   after the existing entries in operator-sdk's order (name, kind, then version, newest
//!   first).
//!
//! The base is written as operator-sdk's typed `v1alpha1.ClusterServiceVersion` marshals
//! (`k8sutil.GetObjectBytes` then `sigs.k8s.io/yaml`): zero-valued fields present
//! (`apiservicedefinitions: {}`, `install: {spec: {deployments: null}, strategy: ""}`...),
//! every `status` and `creationTimestamp` removed, `cleanup` dropped, keys sorted, go-yaml's
//! emitter. The kustomization is written only when missing (kubebuilder's `SkipFile`), from
//! operator-sdk's `templates/config/manifests/kustomization.go`.

use super::upstream::{default_base, typed_csv};
use serde_json::{Map, Value, json};

/// One API the project serves, as `PROJECT` lists it (`QualifiedGroup`, version, kind).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Api {
    /// Fully qualified group (`cache.example.com`).
    pub group: String,
    /// Version (`v1alpha1`).
    pub version: String,
    /// Kind (`Memcached`).
    pub kind: String,
}

/// What the base is made from.
#[derive(Clone, Debug, Default)]
pub struct BaseInputs {
    /// The package (operator) name.
    pub package: String,
    /// The existing base CSV, when there is one.
    pub existing: Option<Value>,
    /// The project's APIs (`PROJECT` resources); when empty, every served version of `crds`.
    pub apis: Vec<Api>,
    /// The project's CRDs (for names and descriptions).
    pub crds: Vec<Value>,
}

/// The APIs of a kubebuilder `PROJECT` file (`resources[]`: `group` and `domain` make the
/// qualified group, as kubebuilder's `resource.QualifiedGroup`).
pub fn project_apis(project: &Value) -> Vec<Api> {
    let empty = Vec::new();
    project
        .get("resources")
        .and_then(Value::as_array)
        .unwrap_or(&empty)
        .iter()
        .filter_map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let (group, domain) = (s("group"), s("domain"));
            let qualified = match (group.is_empty(), domain.is_empty()) {
                (true, _) => domain,
                (false, true) => group,
                (false, false) => format!("{group}.{domain}"),
            };
            let kind = s("kind");
            (!kind.is_empty()).then(|| Api {
                group: qualified,
                version: s("version"),
                kind,
            })
        })
        .collect()
}

/// operator-sdk's `k8sutil.GetDisplayName`: words split at `.`, `-`, `_` and spaces, a space
/// before each capital that follows a non-capital, each word's first letter capitalized
/// (`MemcachedBackup` → `Memcached Backup`).
pub fn get_display_name(name: &str) -> String {
    let words: Vec<String> = name
        .split(['.', '-', '_', ' '])
        .filter(|w| !w.trim().is_empty())
        .map(|w| {
            let w = w.trim();
            let mut out = String::new();
            let mut prev_upper = true;
            for (j, c) in w.chars().enumerate() {
                if c.is_uppercase() && j > 0 && !prev_upper {
                    out.push(' ');
                }
                prev_upper = c.is_uppercase();
                out.push(c);
            }
            out
        })
        .collect();
    words
        .join(" ")
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(f) => f.to_uppercase().chain(cs).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// `inflect.Pluralize` for the common cases (a CRD, when there is one, names the plural).
fn pluralize(word: &str) -> String {
    let vowel = |c: char| "aeiou".contains(c);
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|s| word.ends_with(s))
    {
        format!("{word}es")
    } else if let Some(stem) = word.strip_suffix('y')
        && stem.chars().last().is_some_and(|c| !vowel(c))
    {
        format!("{stem}ies")
    } else {
        format!("{word}s")
    }
}

use olmkit_core::csv::str_at;
use olmkit_core::csv::{CrdDescription, Csv};

/// The CRD of `api`, and its version's schema description.
fn crd_of<'a>(crds: &'a [Value], api: &Api) -> Option<(&'a Value, Option<&'a str>)> {
    let crd = crds.iter().find(|c| {
        str_at(c, "/spec/group") == Some(api.group.as_str())
            && str_at(c, "/spec/names/kind") == Some(api.kind.as_str())
    })?;
    let description = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| str_at(v, "/name") == Some(api.version.as_str()))
        })
        .and_then(|v| str_at(v, "/schema/openAPIV3Schema/description"));
    Some((crd, description))
}

/// The APIs to describe: the project's, else every served version of the CRDs.
fn apis_of(inputs: &BaseInputs) -> Vec<Api> {
    if !inputs.apis.is_empty() {
        return inputs.apis.clone();
    }
    let mut out = Vec::new();
    for c in &inputs.crds {
        let (Some(group), Some(kind)) = (str_at(c, "/spec/group"), str_at(c, "/spec/names/kind"))
        else {
            continue;
        };
        for v in c
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if v.get("served").and_then(Value::as_bool) != Some(false)
                && let Some(name) = str_at(v, "/name")
            {
                out.push(Api {
                    group: group.to_string(),
                    version: name.to_string(),
                    kind: kind.to_string(),
                });
            }
        }
    }
    out
}

/// One owned entry as `buildCRDDescriptionFromType` makes it (without markers).
fn described(api: &Api, crds: &[Value], notes: &mut Vec<String>) -> Value {
    let mut e = Map::new();
    let (name, description) = match crd_of(crds, api) {
        Some((crd, d)) => (
            str_at(crd, "/metadata/name")
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!("{}.{}", pluralize(&api.kind.to_lowercase()), api.group)
                }),
            d,
        ),
        None => {
            notes.push(format!(
                "no CRD for {}/{} {}: its owned entry has no description",
                api.group, api.version, api.kind
            ));
            (
                format!("{}.{}", pluralize(&api.kind.to_lowercase()), api.group),
                None,
            )
        }
    };
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        e.insert("description".into(), Value::from(d));
    }
    e.insert(
        "displayName".into(),
        Value::from(get_display_name(&api.kind)),
    );
    e.insert("kind".into(), Value::from(api.kind.clone()));
    e.insert("name".into(), Value::from(name));
    e.insert("version".into(), Value::from(api.version.clone()));
    Value::Object(e)
}

/// Kubernetes' version order (`CompareKubeAwareVersionStrings`): GA above beta above alpha,
/// higher numbers first; anything else after, lexically.
fn kube_version_key(v: &str) -> (u8, u64, u8, u64, String) {
    let parse = |s: &str| -> Option<(u64, u8, u64)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 3, 0));
        }
        let (level, n) = if let Some(n) = tail.strip_prefix("beta") {
            (2, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (1, n)
        } else {
            return None;
        };
        Some((major, level, n.parse().ok()?))
    };
    match parse(v) {
        // Reverse order for "newest first" under an ascending sort.
        Some((major, level, n)) => (0, u64::MAX - major, 3 - level, u64::MAX - n, String::new()),
        None => (1, 0, 0, 0, v.to_string()),
    }
}

fn gvk_of_entry(e: &CrdDescription<'_>) -> Option<Api> {
    let name = e.name()?;
    // `MakeFullGroupFromName`: what follows the first dot.
    let group = name.split_once('.').map_or(name, |(_, g)| g);
    Some(Api {
        group: group.to_string(),
        version: e.version()?.to_string(),
        kind: e.kind()?.to_string(),
    })
}

/// The base CSV (`GetBase`), with notes on what could not be described.
pub fn base_csv(inputs: &BaseInputs) -> (Value, Vec<String>) {
    let mut notes = Vec::new();
    let mut csv = match &inputs.existing {
        Some(b) => {
            let mut b = b.clone();
            let placeholder = format!("{}.vX.Y.Z", inputs.package);
            let view = Csv::new(&b);
            if view.name() == Some(placeholder.as_str()) {
                let version = view.version().unwrap_or("0.0.0").to_string();
                b["metadata"]["name"] = Value::from(format!("{}.v{version}", inputs.package));
            }
            b
        }
        None => default_base(&inputs.package),
    };
    let apis = apis_of(inputs);
    if !apis.is_empty() {
        let existing: Vec<Value> = Csv::new(&csv).owned_crds().map(|e| e.raw.clone()).collect();
        let mut kept = existing.clone();
        let mut added = Vec::new();
        for api in &apis {
            let generated = described(api, &inputs.crds, &mut notes);
            match existing.iter().position(|raw| {
                gvk_of_entry(&CrdDescription { index: 0, raw }).as_ref() == Some(api)
            }) {
                Some(i) => {
                    if let Some(e) = kept.get_mut(i).and_then(Value::as_object_mut) {
                        for k in ["displayName", "description"] {
                            if !e.contains_key(k)
                                && let Some(v) = generated.get(k)
                            {
                                e.insert(k.into(), v.clone());
                            }
                        }
                    }
                }
                None => added.push(generated),
            }
        }
        added.sort_by(|a, b| {
            let key = |raw: &Value| {
                let e = CrdDescription { index: 0, raw };
                (
                    e.name().unwrap_or("").to_string(),
                    e.kind().unwrap_or("").to_string(),
                    kube_version_key(e.version().unwrap_or("")),
                )
            };
            key(a).cmp(&key(b))
        });
        kept.extend(added);
        let spec = csv
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| json!({})));
        if let Some(spec) = spec.and_then(Value::as_object_mut) {
            let crds = spec
                .entry("customresourcedefinitions")
                .or_insert_with(|| json!({}));
            if let Some(o) = crds.as_object_mut() {
                o.insert("owned".into(), Value::Array(kept));
            }
        }
    }
    (csv, notes)
}

/// `k8sutil.GetObjectBytes`'s `deleteKeyFromUnstructured`: the key at this level, else at
/// every level below.
fn delete_key(v: &mut Value, key: &str) {
    match v {
        Value::Object(m) => {
            if m.remove(key).is_some() {
                return;
            }
            for child in m.values_mut() {
                delete_key(child, key);
            }
        }
        Value::Array(a) => {
            for child in a.iter_mut().filter(|c| c.is_object()) {
                delete_key(child, key);
            }
        }
        _ => {}
    }
}

/// The base as operator-sdk writes it (see the module documentation).
pub fn render_base(csv: &Value) -> Result<String, olmkit_core::goyaml::GoYamlError> {
    let mut csv = csv.clone();
    typed_csv(&mut csv);
    if let Some(spec) = csv.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("apiservicedefinitions")
            .or_insert_with(|| json!({}));
        spec.entry("version").or_insert_with(|| json!("0.0.0"));
        spec.remove("cleanup");
        let install = spec.entry("install").or_insert_with(|| json!({}));
        if let Some(i) = install.as_object_mut() {
            i.entry("strategy").or_insert_with(|| json!(""));
            let s = i.entry("spec").or_insert_with(|| json!({}));
            if let Some(s) = s.as_object_mut() {
                s.entry("deployments").or_insert(Value::Null);
            }
        }
    }
    if let Some(meta) = csv.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("annotations").or_insert_with(|| json!({}));
    }
    for k in ["status", "creationTimestamp"] {
        delete_key(&mut csv, k);
    }
    olmkit_core::goyaml::to_yaml(&olmkit_core::gojson::sorted_keys(csv))
}

/// `config/manifests/kustomization.yaml` from operator-sdk's template (`Kustomization`):
/// `webhooks` for Go projects (`SupportsWebhooks`), `kustomize_v4` for the go/v4 and
/// kustomize/v2 plugin chains (`HasSupportForKustomizeV4`).
pub fn kustomization_yaml(package: &str, webhooks: bool, kustomize_v4: bool) -> String {
    let mut s = format!(
        "# These resources constitute the fully configured set of manifests\n# used to generate the 'manifests/' directory in a bundle.\nresources:\n- bases/{package}.clusterserviceversion.yaml\n- ../default\n- ../samples\n- ../scorecard\n"
    );
    if webhooks {
        s.push_str(
            "\n# [WEBHOOK] To enable webhooks, uncomment all the sections with [WEBHOOK] prefix.\n# Do NOT uncomment sections with prefix [CERTMANAGER], as OLM does not support cert-manager.\n# These patches remove the unnecessary \"cert\" volume and its manager container volumeMount.\n#patches:\n#- target:\n#    group: apps\n#    version: v1\n#    kind: Deployment\n#    name: controller-manager\n#    namespace: system\n#  patch: |-\n#    # Remove the manager container's \"cert\" volumeMount, since OLM will create and mount a set of certs.\n#    # Update the indices in this path if adding or removing containers/volumeMounts in the manager's Deployment.\n#    - op: remove\n",
        );
        if kustomize_v4 {
            s.push_str("\n#      path: /spec/template/spec/containers/0/volumeMounts/0\n");
        } else {
            s.push_str("#      path: /spec/template/spec/containers/1/volumeMounts/0\n");
        }
        s.push_str("#    # Remove the \"cert\" volume, since OLM will create and mount a set of certs.\n#    # Update the indices in this path if adding or removing volumes in the manager's Deployment.\n#    - op: remove\n#      path: /spec/template/spec/volumes/0\n");
    }
    s
}

/// Whether a plugin chain (`PROJECT`'s `layout`) scaffolds Go (`SupportsWebhooks`) and
/// kustomize v4 (`manifestsv2.HasSupportForKustomizeV4`).
pub fn layout_support(layout: &str) -> (bool, bool) {
    let go = layout.contains("go.kubebuilder.io") || layout.contains("go.sdk.operatorframework.io");
    let v4 = layout.contains("go.kubebuilder.io/v4")
        || layout.contains("kustomize.common.kubebuilder.io/v2");
    (go, v4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_as_operator_sdk() {
        assert_eq!(get_display_name("Memcached"), "Memcached");
        assert_eq!(get_display_name("MemcachedBackup"), "Memcached Backup");
        assert_eq!(get_display_name("HTTPRoute"), "HTTPRoute");
        assert_eq!(get_display_name("memcached-operator"), "Memcached Operator");
    }

    #[test]
    fn plurals_and_versions() {
        assert_eq!(pluralize("memcached"), "memcacheds");
        assert_eq!(pluralize("policy"), "policies");
        assert_eq!(pluralize("gateway"), "gateways");
        assert_eq!(pluralize("box"), "boxes");
        let mut v = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "vfoo"];
        v.sort_by_key(|s| kube_version_key(s));
        assert_eq!(v, ["v2beta1", "v1", "v1beta2", "v1alpha1", "vfoo"]);
    }

    #[test]
    fn project_resources_make_qualified_groups() {
        let p = json!({"resources": [
            {"group": "cache", "domain": "example.com", "version": "v1alpha1", "kind": "Memcached"},
            {"group": "", "domain": "example.com", "version": "v1", "kind": "Core"},
        ]});
        let apis = project_apis(&p);
        assert_eq!(apis[0].group, "cache.example.com");
        assert_eq!(apis[1].group, "example.com");
    }

    #[test]
    fn existing_entries_are_kept_and_new_apis_added() {
        let existing = json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.vX.Y.Z", "annotations": {"capabilities": "Seamless Upgrades"}},
            "spec": {"version": "1.2.3", "displayName": "My Op",
                "customresourcedefinitions": {"owned": [{"name": "memcacheds.cache.example.com",
                    "version": "v1alpha1", "kind": "Memcached",
                    "specDescriptors": [{"path": "size", "displayName": "Size"}]}]}}});
        let crd = json!({"metadata": {"name": "memcacheds.cache.example.com"},
            "spec": {"group": "cache.example.com", "names": {"kind": "Memcached"},
                "versions": [
                    {"name": "v1alpha1", "served": true,
                        "schema": {"openAPIV3Schema": {"description": "Old."}}},
                    {"name": "v1", "served": true,
                        "schema": {"openAPIV3Schema": {"description": "Memcached is a cache."}}}]}});
        let (csv, notes) = base_csv(&BaseInputs {
            package: "op".into(),
            existing: Some(existing),
            apis: Vec::new(),
            crds: vec![crd],
        });
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(csv["metadata"]["name"], "op.v1.2.3");
        let owned = csv["spec"]["customresourcedefinitions"]["owned"]
            .as_array()
            .unwrap();
        assert_eq!(owned.len(), 2);
        assert_eq!(owned[0]["specDescriptors"][0]["path"], "size");
        assert_eq!(owned[0]["description"], "Old.");
        assert_eq!(owned[1]["version"], "v1");
        assert_eq!(owned[1]["description"], "Memcached is a cache.");
        let yaml = render_base(&csv).unwrap();
        assert!(yaml.contains("capabilities: Seamless Upgrades"), "{yaml}");
        assert!(
            yaml.contains("  install:\n    spec:\n      deployments: null\n    strategy: \"\"\n"),
            "{yaml}"
        );
    }
}
