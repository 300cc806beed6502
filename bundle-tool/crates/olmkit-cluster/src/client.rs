//! Talking to the cluster: kubeconfig loading, OLM presence checks, reads, server-side apply and
//! merge patches, with errors that say whether the user can fix them.
//!
//! Every write uses one field manager ([`FIELD_MANAGER`]) so a re-run of `install` is an
//! idempotent server-side apply that the API server can tell apart from other writers (OLM,
//! kubectl). Reads go through [`DynamicObject`] and the lenient read models of [`crate::olm`].

use crate::olm::{self, FIELD_MANAGER, from_dynamic};
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, DynamicObject};
use kube::{Client, Config};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use thiserror::Error;

/// Where the kubeconfig comes from (`--kubeconfig`, `--context`; otherwise `KUBECONFIG`,
/// `~/.kube/config` or the in-cluster service account, like kubectl).
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
}

/// No client could be built.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// The kubeconfig is missing or invalid.
    #[error("cannot load the kubeconfig{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig {
        /// The file, when one was named.
        path: Option<PathBuf>,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No configuration found at all.
    #[error(
        "no cluster configuration found (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account): {0}"
    )]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be created from the configuration.
    #[error("cannot create a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// A request to the API server failed.
#[derive(Debug, Error)]
pub enum ClusterError {
    /// The API server answered with an error status.
    #[error("{action}: {message} ({reason}, HTTP {code})")]
    Api {
        /// What we tried (`apply Subscription operators/memcached`).
        action: String,
        /// Status message.
        message: String,
        /// Status reason.
        reason: String,
        /// HTTP code.
        code: u16,
    },
    /// The API server could not be reached or answered garbage.
    #[error("{action}: {source}")]
    Transport {
        /// What we tried.
        action: String,
        /// Why.
        source: kube::Error,
    },
    /// An object did not have the shape we read it as.
    #[error("{action}: unexpected object: {source}")]
    Decode {
        /// What we tried.
        action: String,
        /// Why.
        source: serde_json::Error,
    },
    /// A manifest we were asked to apply lacks apiVersion, kind or name.
    #[error("cannot apply {0}: it has no apiVersion, kind or metadata.name")]
    BadManifest(String),
}

impl ClusterError {
    fn from_kube(action: impl Into<String>, e: kube::Error) -> Self {
        let action = action.into();
        match e {
            kube::Error::Api(status) => ClusterError::Api {
                action,
                message: status.message.clone(),
                reason: status.reason.clone(),
                code: status.code,
            },
            other => ClusterError::Transport {
                action,
                source: other,
            },
        }
    }
    /// True when the user can fix it (permissions, a missing object, an invalid value, a
    /// conflict); false for transport problems and surprises.
    pub fn is_user_error(&self) -> bool {
        match self {
            ClusterError::Api { code, .. } => matches!(code, 400 | 401 | 403 | 404 | 409 | 422),
            _ => false,
        }
    }
    /// HTTP code of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            ClusterError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
    /// A hint line for the user.
    pub fn hint(&self) -> Option<String> {
        match self {
            ClusterError::Api { code: 401, .. } => {
                Some("your credentials were rejected: refresh them (kubectl get ns should work)".into())
            }
            ClusterError::Api { code: 403, .. } => Some(
                "you lack RBAC permission for this: ask a cluster admin, or check with kubectl auth can-i".into(),
            ),
            ClusterError::Transport { .. } => Some(
                "check that the cluster is reachable with this kubeconfig and context (kubectl get ns)".into(),
            ),
            _ => None,
        }
    }
}

/// OLM's APIs are not served.
#[derive(Debug, Error)]
pub enum OlmMissingError {
    /// No `operators.coreos.com` kinds.
    #[error("OLM v0 is not installed on this cluster: the API server does not serve {0}")]
    V0(String),
    /// No `olm.operatorframework.io` kinds.
    #[error("OLM v1 is not installed on this cluster: the API server does not serve {0}")]
    V1(String),
    /// Discovery itself failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

impl OlmMissingError {
    /// A hint line for the user.
    pub fn hint(&self) -> String {
        match self {
            OlmMissingError::V0(_) => "install OLM first (operator-sdk olm install, or the install.sh of an OLM release), or use --print to get the manifests".into(),
            OlmMissingError::V1(_) => "install OLM v1 (operator-controller and catalogd) first, or use --print to get the manifests".into(),
            OlmMissingError::Cluster(e) => e.hint().unwrap_or_else(|| "check the cluster connection".into()),
        }
    }
}

/// A connected cluster.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    default_namespace: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("default_namespace", &self.default_namespace)
            .finish()
    }
}

/// Where a kind lives, for the kinds this crate writes.
fn known_resource(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let namespaced = match (group, kind) {
        ("", "Namespace") => false,
        ("", "ServiceAccount" | "ConfigMap" | "Pod") => true,
        ("rbac.authorization.k8s.io", "ClusterRole" | "ClusterRoleBinding") => false,
        ("rbac.authorization.k8s.io", "Role" | "RoleBinding") => true,
        (olm::OLM_V0_GROUP, "CatalogSource" | "Subscription" | "OperatorGroup") => true,
        (olm::OLM_V1_GROUP, "ClusterCatalog" | "ClusterExtension") => false,
        _ => return None,
    };
    let plural = match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "ConfigMap" => "configmaps",
        "Pod" => "pods",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "CatalogSource" => "catalogsources",
        "Subscription" => "subscriptions",
        "OperatorGroup" => "operatorgroups",
        "ClusterCatalog" => "clustercatalogs",
        "ClusterExtension" => "clusterextensions",
        _ => return None,
    };
    Some((
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        },
        namespaced,
    ))
}

impl Cluster {
    /// Connects with the kubeconfig the options name, or the usual places.
    pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, ConnectError> {
        let kc_opts = KubeConfigOptions {
            context: opts.context.clone(),
            cluster: None,
            user: None,
        };
        let config = match (&opts.kubeconfig, &opts.context) {
            (Some(path), _) => {
                let kc =
                    Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
                        path: Some(path.clone()),
                        source,
                    })?;
                Config::from_custom_kubeconfig(kc, &kc_opts)
                    .await
                    .map_err(|source| ConnectError::Kubeconfig {
                        path: Some(path.clone()),
                        source,
                    })?
            }
            (None, Some(_)) => Config::from_kubeconfig(&kc_opts)
                .await
                .map_err(|source| ConnectError::Kubeconfig { path: None, source })?,
            (None, None) => Config::infer().await?,
        };
        let default_namespace = config.default_namespace.clone();
        let client = Client::try_from(config).map_err(ConnectError::Client)?;
        Ok(Cluster {
            client,
            default_namespace,
        })
    }

    /// Wraps an existing client (tests).
    pub fn from_client(client: Client, default_namespace: &str) -> Cluster {
        Cluster {
            client,
            default_namespace: default_namespace.into(),
        }
    }

    /// The kubeconfig context's namespace (`default` when it names none).
    pub fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api(&self, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    async fn check_served(
        &self,
        group_version: &str,
        kinds: &[&str],
    ) -> Result<Vec<String>, ClusterError> {
        match self.client.list_api_group_resources(group_version).await {
            Ok(list) => Ok(kinds
                .iter()
                .filter(|k| !list.resources.iter().any(|r| r.kind == **k))
                .map(|k| format!("{group_version} {k}"))
                .collect()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(kinds
                .iter()
                .map(|k| format!("{group_version} {k}"))
                .collect()),
            Err(e) => Err(ClusterError::from_kube(
                format!("discover {group_version}"),
                e,
            )),
        }
    }

    /// Checks that OLM v0's APIs are served.
    pub async fn check_olm_v0(&self) -> Result<(), OlmMissingError> {
        let mut missing = self
            .check_served(
                "operators.coreos.com/v1alpha1",
                &[
                    "Subscription",
                    "CatalogSource",
                    "InstallPlan",
                    "ClusterServiceVersion",
                ],
            )
            .await?;
        missing.extend(
            self.check_served("operators.coreos.com/v1", &["OperatorGroup"])
                .await?,
        );
        if missing.is_empty() {
            Ok(())
        } else {
            Err(OlmMissingError::V0(missing.join(", ")))
        }
    }

    /// Checks that OLM v1's APIs are served.
    pub async fn check_olm_v1(&self) -> Result<(), OlmMissingError> {
        let missing = self
            .check_served(
                "olm.operatorframework.io/v1",
                &["ClusterCatalog", "ClusterExtension"],
            )
            .await?;
        if missing.is_empty() {
            Ok(())
        } else {
            Err(OlmMissingError::V1(missing.join(", ")))
        }
    }

    /// Reads one object; `None` when it does not exist.
    pub async fn get<T: DeserializeOwned>(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<T>, ClusterError> {
        let action = match namespace {
            Some(ns) => format!("get {} {ns}/{name}", ar.kind),
            None => format!("get {} {name}", ar.kind),
        };
        match self.api(ar, namespace).get_opt(name).await {
            Ok(Some(obj)) => from_dynamic(&obj)
                .map(Some)
                .map_err(|source| ClusterError::Decode { action, source }),
            Ok(None) => Ok(None),
            Err(e) => Err(ClusterError::from_kube(action, e)),
        }
    }

    /// Lists objects of a kind in a namespace, or in all namespaces with `None`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
    ) -> Result<Vec<T>, ClusterError> {
        let action = match namespace {
            Some(ns) => format!("list {} in namespace {ns}", ar.plural),
            None => format!("list {} in all namespaces", ar.plural),
        };
        let list = self
            .api(ar, namespace)
            .list(&Default::default())
            .await
            .map_err(|e| ClusterError::from_kube(action.clone(), e))?;
        list.items
            .iter()
            .map(|o| {
                from_dynamic(o).map_err(|source| ClusterError::Decode {
                    action: action.clone(),
                    source,
                })
            })
            .collect()
    }

    /// Server-side applies one manifest with the tool's field manager. `force` takes ownership
    /// of fields another manager set (used when the user asked for exactly that change).
    pub async fn apply(&self, manifest: &Value, force: bool) -> Result<(), ClusterError> {
        self.apply_object(manifest, force).await.map(|_| ())
    }

    /// [`Cluster::apply`], returning the object as the API server stored it (with its uid).
    pub async fn apply_object(&self, manifest: &Value, force: bool) -> Result<Value, ClusterError> {
        let what = crate::manifests::describe(manifest);
        let api_version = manifest.get("apiVersion").and_then(Value::as_str);
        let kind = manifest.get("kind").and_then(Value::as_str);
        let meta = manifest.get("metadata");
        let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
        let namespace = meta
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        let (Some(api_version), Some(kind), Some(name)) = (api_version, kind, name) else {
            return Err(ClusterError::BadManifest(what));
        };
        let ar = match known_resource(api_version, kind) {
            Some((ar, namespaced)) => {
                if namespaced != namespace.is_some() {
                    return Err(ClusterError::BadManifest(what));
                }
                ar
            }
            None => {
                let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
                let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
                let (ar, _caps) = kube::discovery::pinned_kind(&self.client, &gvk)
                    .await
                    .map_err(|e| ClusterError::from_kube(format!("discover {kind}"), e))?;
                ar
            }
        };
        let mut params = PatchParams::apply(FIELD_MANAGER);
        params.force = force;
        let stored = self
            .api(&ar, namespace)
            .patch(name, &params, &Patch::Apply(manifest))
            .await
            .map_err(|e| ClusterError::from_kube(format!("apply {what}"), e))?;
        serde_json::to_value(stored).map_err(|source| ClusterError::Decode {
            action: format!("apply {what}"),
            source,
        })
    }

    /// Lists objects of a kind that match a label selector (`key=value`, `key`), in a
    /// namespace or, with `None`, in all namespaces.
    pub async fn list_selected<T: DeserializeOwned>(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<T>, ClusterError> {
        let action = match namespace {
            Some(ns) => format!("list {} ({label_selector}) in namespace {ns}", ar.plural),
            None => format!("list {} ({label_selector}) in all namespaces", ar.plural),
        };
        let list = self
            .api(ar, namespace)
            .list(&kube::api::ListParams::default().labels(label_selector))
            .await
            .map_err(|e| ClusterError::from_kube(action.clone(), e))?;
        list.items
            .iter()
            .map(|o| {
                from_dynamic(o).map_err(|source| ClusterError::Decode {
                    action: action.clone(),
                    source,
                })
            })
            .collect()
    }

    /// Deletes one object (background propagation: the garbage collector removes what it
    /// owns). Returns false when it did not exist.
    pub async fn delete(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bool, ClusterError> {
        match self
            .api(ar, namespace)
            .delete(name, &kube::api::DeleteParams::background())
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(ClusterError::from_kube(
                format!(
                    "delete {} {}{name}",
                    ar.kind,
                    namespace.map(|n| format!("{n}/")).unwrap_or_default()
                ),
                e,
            )),
        }
    }

    /// Applies a JSON merge patch (`kubectl patch --type merge`) with the tool's field manager.
    pub async fn merge_patch(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<(), ClusterError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        self.api(ar, namespace)
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                ClusterError::from_kube(
                    format!(
                        "patch {} {}{name}",
                        ar.kind,
                        namespace.map(|n| format!("{n}/")).unwrap_or_default()
                    ),
                    e,
                )
            })
    }

    /// True when the namespace exists.
    pub async fn namespace_exists(&self, name: &str) -> Result<bool, ClusterError> {
        let ar = ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
        };
        Ok(self
            .get::<serde_json::Value>(&ar, None, name)
            .await?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_resources_have_the_right_scope() {
        let (ar, ns) = known_resource("operators.coreos.com/v1alpha1", "Subscription").unwrap();
        assert_eq!(ar.plural, "subscriptions");
        assert!(ns);
        let (ar, ns) = known_resource("olm.operatorframework.io/v1", "ClusterExtension").unwrap();
        assert_eq!(ar.group, "olm.operatorframework.io");
        assert!(!ns);
        let (ar, ns) = known_resource("v1", "Namespace").unwrap();
        assert_eq!(ar.group, "");
        assert!(!ns);
        assert!(known_resource("apps/v1", "Deployment").is_none());
    }

    #[test]
    fn api_errors_are_classified() {
        let e = ClusterError::Api {
            action: "apply".into(),
            message: "forbidden".into(),
            reason: "Forbidden".into(),
            code: 403,
        };
        assert!(e.is_user_error());
        assert!(e.hint().unwrap().contains("RBAC"));
        let e = ClusterError::Api {
            action: "apply".into(),
            message: "boom".into(),
            reason: "InternalError".into(),
            code: 500,
        };
        assert!(!e.is_user_error());
    }
}
