//! `kube-standin`: an in-memory Kubernetes API server stand-in for end-to-end tests, serving the
//! Kubernetes REST API over plain HTTP on 127.0.0.1 so that kube-rs (client, watcher,
//! Controller, finalizer helper, events), kube-lease-manager and kubectl work against it.
//!
//! What it does: built-in kinds (namespaces, pods, services, configmaps, secrets, service
//! accounts, events, endpoints, deployments, replicasets, statefulsets, leases, RBAC, CRDs, webhook
//! configurations) and any CRD's kinds; discovery; get/list/watch/create/update/patch (merge,
//! JSON, strategic, server-side apply)/delete/deletecollection with resourceVersion, generation,
//! managedFields, finalizers, owner-reference garbage collection and namespace deletion; status
//! and scale subresources; conversion (None and Webhook); CRD schema defaulting, pruning and
//! validation; server-side Table printing; optional Deployment/Pod simulation; a request log.
//!
//! Authentication (an admin token in the stand-in's own kubeconfig, ServiceAccount tokens from
//! the TokenRequest API, anonymous requests) and, with `AuthorizationMode::Rbac`, RBAC
//! authorization over the stored roles and bindings plus the OwnerReferencesPermissionEnforcement
//! admission plugin, with every decision in the request log (`auth`).
//!
//! Limits (see README.md for the precise list): no impersonation, webhook authorization or
//! RBAC escalation checks, no admission webhooks (webhook configurations are only stored), no CEL validation, no schema
//! validation of built-in kinds, strategic merge patch and server-side apply are approximations
//! of structured-merge-diff, garbage collection runs synchronously at the end of the write that
//! triggers it, paginated lists are served from the current state rather than a snapshot, and
//! core/v1 and events.k8s.io/v1 events are stored separately.
//!
//! Module map: `auth` (authentication, RBAC, bootstrap roles, owner-reference admission),
//! `registry` (kinds), `store` (objects, write semantics, GC), `watch` (history and
//! fan-out), `selectors`, `patch`, `managed` (field ownership, SSA), `lists` (merge keys),
//! `schema` (defaulting/pruning/validation), `builtin` (built-in defaults), `conversion`,
//! `table`, `simulate`, `requests` (request log), `http` (routing, verbs, watch streams).

pub mod auth;
pub mod builtin;
pub mod conversion;
pub mod error;
mod http;
pub mod lists;
pub mod managed;
pub mod meta;
pub mod patch;
pub mod registry;
pub mod requests;
pub mod schema;
pub mod selectors;
pub mod simulate;
pub mod store;
pub mod table;
pub mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use auth::{AuthorizationMode, AuthzCheck, UserInfo};
pub use error::ApiError;
pub use requests::RecordedRequest;

use store::{Store, WriteCtx, crd_key, namespace_key};

/// How to start a stand-in.
#[derive(Clone, Debug, Default)]
pub struct StandInOptions {
    /// 0 = any free port.
    pub port: u16,
    /// Run the Deployment controller + kubelet simulation (see `simulate`).
    pub simulate_workloads: bool,
    /// CRDs created before the server accepts requests.
    pub crds: Vec<Value>,
    /// Conversion-webhook services: `"namespace/name"` → base URL such as `https://127.0.0.1:9443`.
    pub service_endpoints: BTreeMap<String, String>,
    /// Namespaces created at start (besides default, kube-system, kube-public, kube-node-lease).
    pub namespaces: Vec<String>,
    /// Watch events kept per resource for resuming watches; 0 = 10,000.
    pub watch_history: usize,
    /// How often watches that allow bookmarks get one; None = 5 s.
    pub bookmark_interval: Option<Duration>,
    /// `AlwaysAllow` (the default: every request allowed, decisions still recorded) or `Rbac`
    /// (kube-apiserver's `--authorization-mode=RBAC`, with its default cluster roles).
    pub authorization: AuthorizationMode,
    /// The OwnerReferencesPermissionEnforcement admission plugin; None = on exactly when
    /// `authorization` is `Rbac` (upstream it is opt-in; OpenShift enables it).
    pub owner_references_permission_enforcement: Option<bool>,
}

/// Why a stand-in did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartStandInError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("preloaded CRD {name:?} was rejected: {message}")]
    Crd { name: String, message: String },
    #[error("namespace {name:?} could not be created: {message}")]
    Namespace { name: String, message: String },
    #[error("default RBAC object {name:?} could not be created: {message}")]
    Bootstrap { name: String, message: String },
}

/// Why a ServiceAccount kubeconfig could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ServiceAccountKubeconfigError {
    #[error("service account {namespace}/{name} could not be created: {message}")]
    Create {
        namespace: String,
        name: String,
        message: String,
    },
}

/// Why CRD files could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadCrdError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: document {index} is a {kind:?}, not a CustomResourceDefinition")]
    NotACrd {
        path: PathBuf,
        index: usize,
        kind: String,
    },
}

/// A running stand-in.
pub struct StandIn {
    addr: SocketAddr,
    store: Arc<Store>,
    app: Arc<http::App>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    simulation: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn").field("addr", &self.addr).finish()
    }
}

impl StandIn {
    pub async fn start(opts: StandInOptions) -> Result<StandIn, StartStandInError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let history = if opts.watch_history == 0 {
            10_000
        } else {
            opts.watch_history
        };
        let store = Arc::new(Store::new(history));
        {
            let mut st = store.write();
            for ns in &opts.namespaces {
                if st.get_opt(&namespace_key(), "", ns).is_some() {
                    continue;
                }
                st.create(
                    &namespace_key(),
                    "",
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    &WriteCtx::new("kube-standin", "v1"),
                )
                .map_err(|e| StartStandInError::Namespace {
                    name: ns.clone(),
                    message: e.message,
                })?;
            }
            if opts.authorization == AuthorizationMode::Rbac {
                bootstrap_rbac(&mut st)?;
            }
            for crd in &opts.crds {
                let name = meta::name(crd).to_string();
                let mut c = crd.clone();
                if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
                    for k in [
                        "resourceVersion",
                        "uid",
                        "creationTimestamp",
                        "generation",
                        "managedFields",
                    ] {
                        m.shift_remove(k);
                    }
                }
                st.create(
                    &crd_key(),
                    "",
                    c,
                    &WriteCtx::new("kube-standin", "apiextensions.k8s.io/v1"),
                )
                .map_err(|e| StartStandInError::Crd {
                    name,
                    message: e.message,
                })?;
            }
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port))
            .await
            .map_err(|source| StartStandInError::Bind {
                port: opts.port,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| StartStandInError::Bind {
                port: opts.port,
                source,
            })?;
        let app = Arc::new(http::App {
            store: store.clone(),
            converter: conversion::Converter::new(opts.service_endpoints.clone()),
            log: requests::RequestLog::default(),
            port: addr.port(),
            bookmark_interval: opts.bookmark_interval.unwrap_or(Duration::from_secs(5)),
            auth: http::AuthConfig {
                mode: opts.authorization,
                owner_references_permission_enforcement: opts
                    .owner_references_permission_enforcement
                    .unwrap_or(opts.authorization == AuthorizationMode::Rbac),
                tokens: auth::Authenticator::new(),
            },
        });
        let (tx, rx) = oneshot::channel::<()>();
        let router = http::router(app.clone());
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "stand-in server failed");
            }
        });
        let simulation = opts
            .simulate_workloads
            .then(|| simulate::spawn(store.clone()));
        Ok(StandIn {
            addr,
            store,
            app,
            shutdown: Some(tx),
            server: Some(server),
            simulation,
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A kubeconfig whose current context points at this stand-in with `namespace`, as a
    /// cluster admin (a token of a `system:masters` user, allowed everything under RBAC too).
    pub fn kubeconfig_yaml(&self, namespace: &str) -> String {
        self.kubeconfig_with_token(namespace, self.admin_token())
    }

    /// The bearer token of the admin user of [`StandIn::kubeconfig_yaml`].
    pub fn admin_token(&self) -> &str {
        self.app.auth.tokens.admin_token()
    }

    fn kubeconfig_with_token(&self, namespace: &str, token: &str) -> String {
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {url}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n    namespace: {ns}\ncurrent-context: standin\nusers:\n- name: standin\n  user:\n    token: {token}\npreferences: {{}}\n",
            url = self.url(),
            ns = quote(namespace),
            token = quote(token),
        )
    }

    /// A kubeconfig that authenticates as the ServiceAccount `namespace/name` (created, with
    /// its namespace, when missing) through a token issued like the TokenRequest API's, valid
    /// for 24 hours or until the ServiceAccount is deleted. Context namespace: `namespace`.
    pub fn kubeconfig_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, ServiceAccountKubeconfigError> {
        let token = self.service_account_token(namespace, name)?;
        Ok(self.kubeconfig_with_token(namespace, &token))
    }

    /// A bearer token of the ServiceAccount `namespace/name` (created, with its namespace, when
    /// missing), as [`StandIn::kubeconfig_for_service_account`] puts in its kubeconfig: what a
    /// pod of that ServiceAccount presents (e.g. Prometheus scraping a secure metrics endpoint).
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, ServiceAccountKubeconfigError> {
        let err = |message: String| ServiceAccountKubeconfigError::Create {
            namespace: namespace.to_string(),
            name: name.to_string(),
            message,
        };
        let sa_key = registry::GroupResource::new("", "serviceaccounts");
        let uid = {
            let mut st = self.store.write();
            let ctx = WriteCtx::new("kube-standin", "v1");
            if st.get_opt(&namespace_key(), "", namespace).is_none() {
                st.create(
                    &namespace_key(),
                    "",
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
                    &ctx,
                )
                .map_err(|e| err(e.message))?;
            }
            let sa = match st.get_opt(&sa_key, namespace, name) {
                Some(sa) => sa,
                None => st
                    .create(
                        &sa_key,
                        namespace,
                        json!({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": name, "namespace": namespace}}),
                        &ctx,
                    )
                    .map_err(|e| err(e.message))?,
            };
            meta::uid(&sa).to_string()
        };
        let token = self.app.auth.tokens.issue_service_account_token(
            auth::authn::BoundServiceAccount {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid,
            },
            24 * 3600,
            Vec::new(),
        );
        Ok(token)
    }

    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml(namespace))
    }

    /// Every request served so far (since the last `clear_requests`).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.app.log.snapshot()
    }

    pub fn clear_requests(&self) {
        self.app.log.clear();
    }

    /// Forgets watch history, so watches from an older resourceVersion get 410 Gone.
    pub fn compact_watch_history(&self) {
        self.store.write().compact();
    }

    /// Closes every open watch stream (clients reconnect from their last resourceVersion).
    pub fn disconnect_watches(&self) {
        self.store.disconnect_watches();
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.read().rv()
    }

    /// An object as stored (storage version), for assertions that bypass HTTP.
    pub fn object(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        self.store
            .read()
            .get_opt(
                &registry::GroupResource::new(group, resource),
                namespace,
                name,
            )
            .map(|o| (*o).clone())
    }

    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            match tokio::time::timeout(Duration::from_secs(5), server).await {
                Ok(_) => {}
                Err(_) => tracing::warn!("stand-in server did not stop within 5 s"),
            }
        }
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.store.disconnect_watches();
        if let Some(sim) = self.simulation.take() {
            sim.abort();
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// Creates kube-apiserver's default ClusterRoles and ClusterRoleBindings (see `auth::bootstrap`).
fn bootstrap_rbac(st: &mut store::State) -> Result<(), StartStandInError> {
    let objects = auth::bootstrap::cluster_roles()
        .into_iter()
        .map(|o| ("clusterroles", o))
        .chain(
            auth::bootstrap::cluster_role_bindings()
                .into_iter()
                .map(|o| ("clusterrolebindings", o)),
        );
    for (resource, obj) in objects {
        let name = meta::name(&obj).to_string();
        st.create(
            &registry::GroupResource::new("rbac.authorization.k8s.io", resource),
            "",
            obj,
            &WriteCtx::new("kube-apiserver", "rbac.authorization.k8s.io/v1"),
        )
        .map_err(|e| StartStandInError::Bootstrap {
            name,
            message: e.message,
        })?;
    }
    Ok(())
}

/// Reads CRDs from YAML or JSON files (multi-document streams allowed; empty documents skipped).
pub fn load_crd_files(paths: &[PathBuf]) -> Result<Vec<Value>, LoadCrdError> {
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| LoadCrdError::Read {
            path: path.clone(),
            source,
        })?;
        let docs: Vec<Value> = match serde_json::from_str::<Value>(&text) {
            Ok(v) => vec![v],
            Err(_) => {
                serde_saphyr::from_multiple::<Value>(&text).map_err(|e| LoadCrdError::Parse {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
        };
        for (index, doc) in docs.into_iter().enumerate() {
            if doc.is_null() {
                continue;
            }
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind != "CustomResourceDefinition" {
                return Err(LoadCrdError::NotACrd {
                    path: path.clone(),
                    index,
                    kind: kind.to_string(),
                });
            }
            out.push(doc);
        }
    }
    Ok(out)
}
