//! The registry of kinds: which resources exist, in which versions, with which names, scope and
//! subresources. Built-in kinds are fixed; CustomResourceDefinitions add and remove kinds at run time.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::error::FieldCause;

/// The storage identity of a resource: the same objects whatever version they are read in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// One kind as the API serves it.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub group: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<VersionInfo>,
    pub storage_version: String,
    pub conversion: Conversion,
    /// The CRD's name for custom resources; `None` for built-in kinds.
    pub crd_name: Option<String>,
    /// A review API (TokenReview, SubjectAccessReview...): only `create`, answered by
    /// evaluating the request, nothing stored (`http::reviews`).
    pub create_only: bool,
}

/// One version of a kind.
#[derive(Clone, Debug, Default)]
pub struct VersionInfo {
    pub name: String,
    pub served: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    /// `openAPIV3Schema` of a CRD version; built-in kinds have none here.
    pub schema: Option<Value>,
    pub status: bool,
    pub scale: Option<ScaleInfo>,
    pub columns: Vec<PrinterColumn>,
}

/// Where a kind keeps what `/scale` reads and writes.
#[derive(Clone, Debug)]
pub struct ScaleInfo {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// An `additionalPrinterColumns` entry.
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// How objects are converted between versions.
#[derive(Clone, Debug, Default)]
pub enum Conversion {
    #[default]
    None,
    Webhook(WebhookConfig),
}

/// `spec.conversion.webhook` of a CRD.
#[derive(Clone, Debug, Default)]
pub struct WebhookConfig {
    pub url: Option<String>,
    pub service: Option<ServiceRef>,
    pub ca_bundle: Option<Vec<u8>>,
    pub review_versions: Vec<String>,
}

/// `clientConfig.service` of a webhook.
#[derive(Clone, Debug, Default)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub path: Option<String>,
    pub port: u16,
}

impl ResourceType {
    pub fn key(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    pub fn version(&self, name: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == name && v.served)
    }

    pub fn storage(&self) -> Option<&VersionInfo> {
        self.versions
            .iter()
            .find(|v| v.name == self.storage_version)
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn storage_api_version(&self) -> String {
        self.api_version(&self.storage_version)
    }

    pub fn has_status(&self) -> bool {
        self.storage().is_some_and(|v| v.status)
    }

    pub fn is_builtin(&self) -> bool {
        self.crd_name.is_none()
    }

    pub fn served_versions(&self) -> impl Iterator<Item = &VersionInfo> {
        self.versions.iter().filter(|v| v.served)
    }
}

/// All kinds currently served, indexed for O(log n) lookups by (group, resource).
#[derive(Clone, Debug, Default)]
pub struct Registry {
    types: BTreeMap<GroupResource, Arc<ResourceType>>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut r = Registry::default();
        for t in builtin_types() {
            r.types.insert(t.key(), Arc::new(t));
        }
        r
    }

    pub fn get(&self, key: &GroupResource) -> Option<&Arc<ResourceType>> {
        self.types.get(key)
    }

    /// The kind behind `/apis/{group}/{version}/{resource}`, if that version is served.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceType>> {
        let t = self.types.get(&GroupResource::new(group, resource))?;
        t.version(version)?;
        Some(t.clone())
    }

    pub fn insert(&mut self, t: ResourceType) {
        self.types.insert(t.key(), Arc::new(t));
    }

    pub fn remove(&mut self, key: &GroupResource) -> Option<Arc<ResourceType>> {
        self.types.remove(key)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Served groups with their versions, preferred version first (Kubernetes version priority).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.types.values() {
            let entry = groups.entry(t.group.clone()).or_default();
            for v in t.served_versions() {
                if !entry.contains(&v.name) {
                    entry.push(v.name.clone());
                }
            }
        }
        for versions in groups.values_mut() {
            versions.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
        }
        groups.retain(|_, v| !v.is_empty());
        groups
    }

    /// Kinds served in `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .values()
            .filter(|t| t.group == group && t.version(version).is_some())
            .cloned()
            .collect()
    }
}

/// Sort key of Kubernetes version priority: GA before beta before alpha, higher numbers first, and
/// names that are not Kubernetes-like versions last.
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (stage, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match num.parse::<u64>() {
        Ok(minor) => (stage, major, minor),
        Err(_) => (0, 0, 0),
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    create_only: bool,
}

/// A cluster-scoped review kind: create only, never stored.
const fn review(group: &'static str, kind: &'static str, plural: &'static str) -> Builtin {
    Builtin {
        group,
        create_only: true,
        ..b("", kind, plural, false, &[], &[], false, false)
    }
}

const BUILTINS: &[Builtin] = &[
    b(
        "",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        &[],
        true,
        false,
    ),
    b("", "Pod", "pods", true, &["po"], &["all"], true, false),
    b(
        "",
        "Service",
        "services",
        true,
        &["svc"],
        &["all"],
        true,
        false,
    ),
    b(
        "",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        &[],
        false,
        false,
    ),
    b("", "Secret", "secrets", true, &[], &[], false, false),
    b(
        "",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        &[],
        false,
        false,
    ),
    b("", "Event", "events", true, &["ev"], &[], false, false),
    b(
        "",
        "Endpoints",
        "endpoints",
        true,
        &["ep"],
        &[],
        false,
        false,
    ),
    Builtin {
        group: "events.k8s.io",
        ..b("", "Event", "events", true, &["ev"], &[], false, false)
    },
    Builtin {
        group: "apps",
        ..b(
            "",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            &["all"],
            true,
            true,
        )
    },
    Builtin {
        group: "apps",
        ..b(
            "",
            "ReplicaSet",
            "replicasets",
            true,
            &["rs"],
            &["all"],
            true,
            true,
        )
    },
    Builtin {
        group: "apps",
        ..b(
            "",
            "StatefulSet",
            "statefulsets",
            true,
            &["sts"],
            &["all"],
            true,
            true,
        )
    },
    Builtin {
        group: "coordination.k8s.io",
        ..b("", "Lease", "leases", true, &[], &[], false, false)
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        ..b("", "Role", "roles", true, &[], &[], false, false)
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        ..b(
            "",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            &[],
            false,
            false,
        )
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        ..b(
            "",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            &[],
            false,
            false,
        )
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        ..b(
            "",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            &[],
            false,
            false,
        )
    },
    Builtin {
        group: "apiextensions.k8s.io",
        ..b(
            "",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &["api-extensions"],
            true,
            false,
        )
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        ..b(
            "",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &[],
            &["api-extensions"],
            false,
            false,
        )
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        ..b(
            "",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            &[],
            &["api-extensions"],
            false,
            false,
        )
    },
    review("authentication.k8s.io", "TokenReview", "tokenreviews"),
    review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
    ),
];

#[allow(clippy::too_many_arguments)]
const fn b(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
) -> Builtin {
    Builtin {
        group,
        version: "v1",
        kind,
        plural,
        namespaced,
        short,
        categories,
        status,
        scale,
        create_only: false,
    }
}

fn builtin_types() -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .map(|bi| ResourceType {
            group: bi.group.to_string(),
            kind: bi.kind.to_string(),
            list_kind: format!("{}List", bi.kind),
            plural: bi.plural.to_string(),
            singular: bi.kind.to_lowercase(),
            short_names: bi.short.iter().map(|s| s.to_string()).collect(),
            categories: bi.categories.iter().map(|s| s.to_string()).collect(),
            namespaced: bi.namespaced,
            versions: vec![VersionInfo {
                name: bi.version.to_string(),
                served: true,
                status: bi.status,
                scale: bi.scale.then(|| ScaleInfo {
                    spec_replicas_path: ".spec.replicas".into(),
                    status_replicas_path: ".status.replicas".into(),
                    label_selector_path: None,
                }),
                ..VersionInfo::default()
            }],
            storage_version: bi.version.to_string(),
            conversion: Conversion::None,
            crd_name: None,
            create_only: bi.create_only,
        })
        .collect()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a CustomResourceDefinition into the kind it defines, reporting every problem found.
pub fn parse_crd(crd: &Value) -> Result<ResourceType, Vec<FieldCause>> {
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group").unwrap_or_default().to_string();
    if group.is_empty() {
        causes.push(FieldCause::required("spec.group", ""));
    }
    let plural = str_at(crd, "/spec/names/plural")
        .unwrap_or_default()
        .to_string();
    if plural.is_empty() {
        causes.push(FieldCause::required("spec.names.plural", ""));
    }
    let kind = str_at(crd, "/spec/names/kind")
        .unwrap_or_default()
        .to_string();
    if kind.is_empty() {
        causes.push(FieldCause::required("spec.names.kind", ""));
    }
    let name = str_at(crd, "/metadata/name").unwrap_or_default();
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(FieldCause::invalid(
            "metadata.name",
            &Value::String(name.to_string()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = str_at(crd, "/spec/scope").unwrap_or_default();
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            causes.push(FieldCause::invalid(
                "spec.scope",
                &Value::String(other.to_string()),
                "supported values: \"Cluster\", \"Namespaced\"",
            ));
            true
        }
    };
    let mut versions = Vec::new();
    let mut storage_version = String::new();
    let raw_versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if raw_versions.is_empty() {
        causes.push(FieldCause::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in raw_versions.iter().enumerate() {
        let vname = str_at(v, "/name").unwrap_or_default().to_string();
        if vname.is_empty() {
            causes.push(FieldCause::required(format!("spec.versions[{i}].name"), ""));
        }
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            if !storage_version.is_empty() {
                causes.push(FieldCause::invalid(
                    "spec.versions",
                    &Value::Null,
                    "must have exactly one version marked as storage version",
                ));
            }
            storage_version = vname.clone();
        }
        let scale = v.pointer("/subresources/scale").map(|s| ScaleInfo {
            spec_replicas_path: str_at(s, "/specReplicasPath")
                .unwrap_or(".spec.replicas")
                .to_string(),
            status_replicas_path: str_at(s, "/statusReplicasPath")
                .unwrap_or(".status.replicas")
                .to_string(),
            label_selector_path: str_at(s, "/labelSelectorPath").map(str::to_string),
        });
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: str_at(c, "/name").unwrap_or_default().to_string(),
                        type_: str_at(c, "/type").unwrap_or("string").to_string(),
                        format: str_at(c, "/format").unwrap_or_default().to_string(),
                        description: str_at(c, "/description").unwrap_or_default().to_string(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: str_at(c, "/jsonPath").unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        versions.push(VersionInfo {
            name: vname,
            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
            deprecated: v
                .get("deprecated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            deprecation_warning: str_at(v, "/deprecationWarning").map(str::to_string),
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            status: v.pointer("/subresources/status").is_some(),
            scale,
            columns,
        });
    }
    if storage_version.is_empty() && !raw_versions.is_empty() {
        causes.push(FieldCause::invalid(
            "spec.versions",
            &Value::Null,
            "must have exactly one version marked as storage version",
        ));
    }
    let conversion = match str_at(crd, "/spec/conversion/strategy").unwrap_or("None") {
        "None" => Conversion::None,
        "Webhook" => {
            let cc = crd
                .pointer("/spec/conversion/webhook/clientConfig")
                .cloned()
                .unwrap_or(Value::Null);
            let ca_bundle = match str_at(&cc, "/caBundle") {
                Some(b) => match base64::engine::general_purpose::STANDARD.decode(b) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        causes.push(FieldCause::invalid(
                            "spec.conversion.webhook.clientConfig.caBundle",
                            &Value::String("<bytes>".into()),
                            &format!("not base64: {e}"),
                        ));
                        None
                    }
                },
                None => None,
            };
            let service = cc.get("service").map(|s| ServiceRef {
                namespace: str_at(s, "/namespace").unwrap_or_default().to_string(),
                name: str_at(s, "/name").unwrap_or_default().to_string(),
                path: str_at(s, "/path").map(str::to_string),
                port: s
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            });
            let url = str_at(&cc, "/url").map(str::to_string);
            if url.is_none() && service.is_none() {
                causes.push(FieldCause::required(
                    "spec.conversion.webhook.clientConfig",
                    "exactly one of url or service is required",
                ));
            }
            Conversion::Webhook(WebhookConfig {
                url,
                service,
                ca_bundle,
                review_versions: strings_at(
                    crd,
                    "/spec/conversion/webhook/conversionReviewVersions",
                ),
            })
        }
        other => {
            causes.push(FieldCause::invalid(
                "spec.conversion.strategy",
                &Value::String(other.to_string()),
                "supported values: \"None\", \"Webhook\"",
            ));
            Conversion::None
        }
    };
    if !causes.is_empty() {
        return Err(causes);
    }
    let singular = str_at(crd, "/spec/names/singular")
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(crd, "/spec/names/listKind")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    Ok(ResourceType {
        group,
        kind,
        list_kind,
        plural,
        singular,
        short_names: strings_at(crd, "/spec/names/shortNames"),
        categories: strings_at(crd, "/spec/names/categories"),
        namespaced,
        versions,
        storage_version,
        conversion,
        crd_name: Some(name.to_string()),
        create_only: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut v = vec![
            "v1alpha1",
            "v1",
            "v1beta1",
            "v2",
            "foo",
            "v1beta2",
            "v10alpha3",
        ];
        v.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
        assert_eq!(
            v,
            vec![
                "v2",
                "v1",
                "v1beta2",
                "v1beta1",
                "v10alpha3",
                "v1alpha1",
                "foo"
            ]
        );
    }

    #[test]
    fn crd_problems_are_all_reported() {
        let crd = serde_json::json!({"metadata": {"name": "x"}, "spec": {"scope": "Weird"}});
        let causes = parse_crd(&crd).err().unwrap_or_default();
        let fields: Vec<_> = causes.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"spec.group"));
        assert!(fields.contains(&"spec.names.plural"));
        assert!(fields.contains(&"spec.scope"));
        assert!(fields.contains(&"spec.versions"));
    }
}
