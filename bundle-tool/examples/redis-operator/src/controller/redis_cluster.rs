//! The RedisCluster controller (scaffolded by `bundle-tool create api`; yours to edit).
//!
//! For each RedisCluster it keeps, owned by the RedisCluster and named after it:
//!
//! - a headless Service (`clusterIP: None`, port 6379 `redis`), which gives every Redis node a
//!   stable DNS name (`<cluster>-<ordinal>.<cluster>.<namespace>.svc`) for clients and for
//!   `redis-cli --cluster create`;
//! - a StatefulSet of `spec.size` pods running `spec.image` in cluster mode ([`COMMAND`]),
//!   non-root, without privilege escalation or capabilities, under the RuntimeDefault seccomp
//!   profile.
//!
//! 1. Both are server-side applied with the operator's one field manager (an apply that changes
//!    nothing is no write); `Created` and `Updated` events say when they changed.
//! 2. `status.nodes` lists the cluster's running pods (from the pod cache, by the cluster's
//!    labels); `status.conditions` (`Available`, `Progressing`, `Degraded`) follow the
//!    StatefulSet's status and its pods; the status is patched through the status subresource
//!    only when it changes.
//! 3. A finalizer (kube-runtime's `finalizer` helper) records a `Deleting` event before the
//!    RedisCluster goes; the owner references let the garbage collector delete the rest.
//!
//! Failed reconciles are retried with the runtime's per-object exponential backoff and reported
//! as `ReconcileFailed` events. Reconciles wait until the StatefulSet, Service and pod caches have
//! their first list (`CachesReady`). Assigning the hash slots (`redis-cli --cluster create`)
//! is left to the user: the operator keeps the nodes, not the cluster's membership.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, Pod, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec,
    TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use olmkit_runtime::backoff::Backoff;
use olmkit_runtime::events::{self, publish};
use olmkit_runtime::futures::StreamExt;
use olmkit_runtime::manager::ControllerContext;
use olmkit_runtime::ready::{CachesReady, store_ready};
use olmkit_runtime::tokio_util::sync::CancellationToken;
use olmkit_runtime::tracing::{debug, info, warn};
use serde_json::json;

use redis_api::redis_cluster::{FINALIZER, RedisCluster, RedisClusterStatus};

/// The Redis client port, the Service's and the container's port named [`PORT_NAME`].
pub const PORT: i32 = 6379;
/// The name of [`PORT`].
pub const PORT_NAME: &str = "redis";
/// The cluster bus port: Redis Cluster nodes gossip on the client port + 10000.
pub const BUS_PORT: i32 = PORT + 10000;
/// Where the nodes keep `nodes.conf` and the append-only file.
pub const DATA_DIR: &str = "/data";
/// The container's command: `redis-server` in cluster mode, its cluster state (`nodes.conf`) and
/// append-only file in [`DATA_DIR`].
pub const COMMAND: &[&str] = &[
    "redis-server",
    "--port",
    "6379",
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--appendonly",
    "yes",
    "--dir",
    DATA_DIR,
];
/// The user and group the nodes run as: the official image's `redis` (its files are theirs, and
/// `runAsNonRoot` needs a numeric user to check).
pub const REDIS_USER: i64 = 999;
/// The label naming the application of the operator's objects.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// The label naming the RedisCluster an object or pod belongs to.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The label that tells the operator's objects from others (its value: the operator's name).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`NAME_LABEL`], and the container's name.
pub const APP: &str = "redis";
/// Container waiting reasons that mean a node will not start without a change.
const FAILING_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The headless Service could not be applied.
    #[error("cannot apply Service {name}: {source}")]
    ApplyService {
        /// Its name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The StatefulSet could not be applied.
    #[error("cannot apply StatefulSet {name}: {source}")]
    ApplyStatefulSet {
        /// Its name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The status could not be patched.
    #[error("cannot update the status of RedisCluster {name}: {source}")]
    PatchStatus {
        /// The RedisCluster's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed (or the work inside it).
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<Error>>),
}

impl Error {
    /// The failed action, the `reason` label of the reconcile-error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::ApplyService { .. } => "apply_service",
            Self::ApplyStatefulSet { .. } => "apply_statefulset",
            Self::PatchStatus { .. } => "patch_status",
            Self::Finalizer(e) => match &**e {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.reason(),
                finalizer::Error::AddFinalizer(_) => "add_finalizer",
                finalizer::Error::RemoveFinalizer(_) => "remove_finalizer",
                _ => "finalizer",
            },
        }
    }
}

/// What every reconcile of one watch scope shares.
struct Context {
    ctx: ControllerContext,
    statefulsets: Store<StatefulSet>,
    services: Store<Service>,
    pods: Store<Pod>,
    ready: CachesReady,
    backoff: Backoff<ObjectRef<RedisCluster>>,
}

/// An API of `K` in the watch scope (`None`: all namespaces).
fn scoped<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The RedisCluster whose node `pod` is (by its [`INSTANCE_LABEL`]): pods are owned by the
/// StatefulSet, not by the RedisCluster, so owner references cannot map them.
fn pod_cluster(pod: Pod) -> Option<ObjectRef<RedisCluster>> {
    let cluster = pod.labels().get(INSTANCE_LABEL)?;
    Some(ObjectRef::new(cluster).within(&pod.namespace()?))
}

/// Runs the RedisCluster controller for one watch scope (`None`: all namespaces) until `stop` is
/// cancelled, then lets in-flight reconciles finish.
pub async fn run(ctx: ControllerContext, namespace: Option<String>, stop: CancellationToken) {
    let client = &ctx.client;
    let ns = namespace.as_deref();
    // Only the operator's own objects: the caches stay small in a busy namespace.
    let owned = watcher::Config::default().labels(&format!(
        "{NAME_LABEL}={APP},{MANAGED_BY_LABEL}={}",
        ctx.field_manager
    ));
    let (statefulsets, sts_writer) = reflector::store();
    let sts_stream = watcher(scoped::<StatefulSet>(client, ns), owned.clone())
        .default_backoff()
        .modify(|s: &mut StatefulSet| s.metadata.managed_fields = None)
        .reflect(sts_writer)
        .touched_objects();
    let (services, svc_writer) = reflector::store();
    let svc_stream = watcher(scoped::<Service>(client, ns), owned.clone())
        .default_backoff()
        .modify(|s: &mut Service| s.metadata.managed_fields = None)
        .reflect(svc_writer)
        .touched_objects();
    let (pods, pod_writer) = reflector::store();
    // The status needs the pods' names, labels, phase and container states only.
    let pod_stream = watcher(scoped::<Pod>(client, ns), owned)
        .default_backoff()
        .modify(|p: &mut Pod| {
            p.metadata.managed_fields = None;
            p.spec = None;
        })
        .reflect(pod_writer)
        .touched_objects();
    let cx = Arc::new(Context {
        ready: CachesReady::all(vec![
            store_ready(&statefulsets),
            store_ready(&services),
            store_ready(&pods),
        ]),
        statefulsets,
        services,
        pods,
        backoff: Backoff::new(ctx.backoff_base, ctx.backoff_max),
        ctx: ctx.clone(),
    });
    let scope = namespace.clone().unwrap_or_else(|| "<all>".into());
    info!(scope = %scope, "starting the RedisCluster controller");
    Controller::new(
        scoped::<RedisCluster>(client, ns),
        watcher::Config::default(),
    )
    .owns_stream(sts_stream)
    .owns_stream(svc_stream)
    .watches_stream(pod_stream, pod_cluster)
    .with_config(controller::Config::default().concurrency(ctx.concurrency))
    .graceful_shutdown_on(stop.cancelled_owned())
    .run(reconcile, error_policy, cx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => debug!(object = %object, "reconciled"),
            // Logged with the object in `reconcile`.
            Err(controller::Error::ReconcilerFailed(..)) => {}
            Err(e) => warn!(error = %e, "RedisCluster controller error"),
        }
    })
    .await;
    info!(scope = %scope, "the RedisCluster controller stopped");
}

/// Retries a failed reconcile with per-object exponential backoff.
fn error_policy(object: Arc<RedisCluster>, error: &Error, cx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*object);
    let delay = cx.backoff.next_delay(&key);
    debug!(object = %key, error = %error, retry_in = ?delay, "reconcile failed; backing off");
    Action::requeue(delay)
}

/// One reconcile: the finalizer, then [`apply`] or [`cleanup`]; metrics, logs and the failure
/// event around them.
async fn reconcile(object: Arc<RedisCluster>, cx: Arc<Context>) -> Result<Action, Error> {
    // Before the caches have their first list, every child would look missing.
    if !cx.ready.wait().await {
        // The controller is stopping.
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let key = ObjectRef::from_obj(&*object);
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<RedisCluster> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let shared = &*cx;
    let result = finalizer(&api, FINALIZER, object.clone(), |event| async move {
        match event {
            finalizer::Event::Apply(object) => apply(&object, shared).await,
            finalizer::Event::Cleanup(object) => cleanup(&object, shared).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    cx.ctx
        .metrics
        .reconciled(started.elapsed(), result.as_ref().err().map(Error::reason));
    match &result {
        Ok(_) => cx.backoff.reset(&key),
        Err(e) => {
            warn!(object = %key, error = %e, reason = e.reason(), "reconcile failed");
            let note = events::Note::warning("ReconcileFailed", "Reconcile", e.to_string());
            publish(&cx.ctx.recorder, &object.object_ref(&()), note).await;
        }
    }
    result
}

/// What a server-side apply of a child gave: the object as the server has it, or why the
/// server refused it (then the cached one, if any).
struct Applied<K> {
    object: Option<K>,
    refused: Option<String>,
}

/// Server-side applies `desired` (named `name`) with the operator's field manager. A 400 or 422
/// is the server refusing the object itself: retrying cannot help until the RedisCluster
/// changes, so it is returned as `refused` for the status instead of as an error.
async fn apply_child<K>(
    api: Api<K>,
    desired: &K,
    cached: Option<Arc<K>>,
    cx: &Context,
    resource: &'static str,
    error: impl FnOnce(kube::Error) -> Error,
) -> Result<Applied<K>, Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = desired.meta().name.clone().unwrap_or_default();
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    match api.patch(&name, &params, &Patch::Apply(desired)).await {
        Ok(applied) => {
            cx.ctx.metrics.wrote(resource, "patch");
            Ok(Applied {
                object: Some(applied),
                refused: None,
            })
        }
        Err(kube::Error::Api(e)) if e.code == 400 || e.code == 422 => Ok(Applied {
            object: cached.as_deref().cloned(),
            refused: Some(e.message),
        }),
        Err(source) => Err(error(source)),
    }
}

/// Makes the headless Service and the StatefulSet match the RedisCluster and reports their
/// state in the status.
async fn apply(object: &RedisCluster, cx: &Context) -> Result<Action, Error> {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let manager = &cx.ctx.field_manager;
    let client = &cx.ctx.client;

    let service_before = cx.services.get(&ObjectRef::new(&name).within(&namespace));
    let service = apply_child(
        Api::namespaced(client.clone(), &namespace),
        &service(object, manager),
        service_before.clone(),
        cx,
        "services",
        |source| Error::ApplyService {
            name: name.clone(),
            source,
        },
    )
    .await?;
    if service_before.is_none() && service.object.is_some() {
        let message = format!("created headless Service {name}");
        normal(object, cx, "Created", "Create", message).await;
    }

    let before = cx
        .statefulsets
        .get(&ObjectRef::new(&name).within(&namespace));
    let set = apply_child(
        Api::namespaced(client.clone(), &namespace),
        &statefulset(object, manager),
        before.clone(),
        cx,
        "statefulsets",
        |source| Error::ApplyStatefulSet {
            name: name.clone(),
            source,
        },
    )
    .await?;
    let spec = &object.spec;
    let what = format!(
        "StatefulSet {name} (size {}, image {})",
        spec.size, spec.image
    );
    match (&before, &set.object) {
        (None, Some(_)) => normal(object, cx, "Created", "Create", format!("created {what}")).await,
        // A new generation: the apply changed the StatefulSet's spec.
        (Some(before), Some(after)) if before.metadata.generation != after.metadata.generation => {
            normal(object, cx, "Updated", "Update", format!("updated {what}")).await
        }
        _ => {}
    }

    let problems: Vec<String> = [service.refused, set.refused]
        .into_iter()
        .flatten()
        .collect();
    let pods = cx.pods.state();
    let observed = Observed {
        statefulset: set.object.as_ref(),
        pods: own_pods(&pods, &namespace, &name),
        refused: (!problems.is_empty()).then(|| problems.join("; ")),
    };
    let refused = observed.refused.is_some();
    let status = status(object, &observed, Time(Timestamp::now()));
    patch_status_if_changed(object, status, cx).await?;
    Ok(match refused {
        true => Action::await_change(),
        false => Action::requeue(cx.ctx.resync),
    })
}

/// Publishes a normal event on the RedisCluster.
async fn normal(object: &RedisCluster, cx: &Context, reason: &str, action: &str, message: String) {
    let note = events::Note::normal(reason, action, message);
    publish(&cx.ctx.recorder, &object.object_ref(&()), note).await;
}

/// The RedisCluster is being deleted: the finalizer holds it until this returns Ok.
async fn cleanup(object: &RedisCluster, cx: &Context) -> Result<Action, Error> {
    let message = format!(
        "RedisCluster {} is being deleted from the namespace {}",
        object.name_any(),
        object.namespace().unwrap_or_default()
    );
    normal(object, cx, "Deleting", "Delete", message).await;
    // The owner references let the garbage collector delete the Service and the StatefulSet
    // (and the StatefulSet's pods with it). TODO(user): release what they do not cover (backups,
    // external DNS entries...); return an error to retry.
    Ok(Action::await_change())
}

/// Patches the status (server-side apply on the status subresource) when it changed.
async fn patch_status_if_changed(
    object: &RedisCluster,
    new_status: RedisClusterStatus,
    cx: &Context,
) -> Result<(), Error> {
    if object.status.as_ref() == Some(&new_status) {
        return Ok(());
    }
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<RedisCluster> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let patch = json!({
        "apiVersion": RedisCluster::api_version(&()),
        "kind": RedisCluster::kind(&()),
        "status": new_status,
    });
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    api.patch_status(&name, &params, &Patch::Apply(&patch))
        .await
        .map_err(|source| Error::PatchStatus { name, source })?;
    cx.ctx.metrics.wrote("redisclusters/status", "patch");
    Ok(())
}

/// The controller reference to a RedisCluster, with `blockOwnerDeletion` as kubebuilder's
/// `SetControllerReference` sets it (a foreground deletion of the RedisCluster waits for its
/// children; the API server checks `update` on `redisclusters/finalizers` for it).
fn owner_reference(object: &RedisCluster) -> OwnerReference {
    OwnerReference {
        api_version: RedisCluster::api_version(&()).into_owned(),
        kind: RedisCluster::kind(&()).into_owned(),
        name: object.name_any(),
        uid: object.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The labels that select a RedisCluster's pods (the StatefulSet's selector, which cannot
/// change once created, and the Service's).
pub fn selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), APP.to_string()),
        (INSTANCE_LABEL.to_string(), name.to_string()),
    ])
}

/// The labels of a RedisCluster's Service, StatefulSet and pods: the [`selector`] and the
/// operator's [`MANAGED_BY_LABEL`], which its watches filter on.
fn labels(name: &str, manager: &str) -> BTreeMap<String, String> {
    let mut labels = selector(name);
    labels.insert(MANAGED_BY_LABEL.to_string(), manager.to_string());
    labels
}

/// The metadata of a child of `object`: its name, namespace, labels and owner.
fn child_meta(object: &RedisCluster, manager: &str) -> ObjectMeta {
    let name = object.name_any();
    ObjectMeta {
        labels: Some(labels(&name, manager)),
        name: Some(name),
        namespace: object.namespace(),
        owner_references: Some(vec![owner_reference(object)]),
        ..Default::default()
    }
}

/// The headless Service a RedisCluster wants: DNS names for its nodes, no virtual IP (clients
/// of a Redis cluster talk to the node that holds a key's slot, not to any node).
pub fn service(object: &RedisCluster, manager: &str) -> Service {
    Service {
        metadata: child_meta(object, manager),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(selector(&object.name_any())),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_string()),
                port: PORT,
                target_port: Some(IntOrString::String(PORT_NAME.to_string())),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            // DNS names for nodes that are not ready yet too: starting nodes (and the
            // `redis-cli --cluster create` that joins them) must reach each other before then.
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        status: None,
    }
}

/// The Redis container: cluster mode, its data in [`DATA_DIR`], non-root with nothing extra.
fn container(image: &str) -> Container {
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        protocol: Some("TCP".to_string()),
        ..Default::default()
    };
    Container {
        name: APP.to_string(),
        image: Some(image.to_string()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(COMMAND.iter().map(|s| s.to_string()).collect()),
        ports: Some(vec![port(PORT_NAME, PORT), port("cluster-bus", BUS_PORT)]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String(PORT_NAME.to_string()),
                ..Default::default()
            }),
            period_seconds: Some(5),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "data".to_string(),
            mount_path: DATA_DIR.to_string(),
            ..Default::default()
        }]),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            allow_privilege_escalation: Some(false),
            // redis-server writes only to DATA_DIR.
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The StatefulSet a RedisCluster wants: `spec.size` Redis nodes with stable names
/// (`<cluster>-<ordinal>`) behind its headless Service, owned by it.
pub fn statefulset(object: &RedisCluster, manager: &str) -> StatefulSet {
    let name = object.name_any();
    let pod = PodSpec {
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(REDIS_USER),
            run_as_group: Some(REDIS_USER),
            // The data volume is writable by the redis group.
            fs_group: Some(REDIS_USER),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        containers: vec![container(&object.spec.image)],
        // An emptyDir lives as long as the pod: nodes.conf and the append-only file survive
        // container restarts. TODO(user): volumeClaimTemplates for data that outlives the pod.
        volumes: Some(vec![Volume {
            name: "data".to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    StatefulSet {
        metadata: child_meta(object, manager),
        spec: StatefulSetSpec {
            service_name: Some(name.clone()),
            replicas: Some(object.spec.size),
            // Redis Cluster nodes need no start-up order: start and stop them all at once.
            pod_management_policy: Some("Parallel".to_string()),
            selector: LabelSelector {
                match_labels: Some(selector(&name)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&name, manager)),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        },
        status: None,
    }
}

/// The pods of the RedisCluster `name` in `namespace` among `pods`: those its [`selector`]
/// matches (what a list by that selector returns, read from the cache).
fn own_pods<'a>(pods: &'a [Arc<Pod>], namespace: &str, name: &str) -> Vec<&'a Pod> {
    let selector = selector(name);
    pods.iter()
        .map(|p| &**p)
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| {
            let labels = p.labels();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .collect()
}

/// The names of the running `pods` (not being deleted), sorted: the cluster's nodes.
pub fn node_names(pods: &[&Pod]) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

/// The `pods` whose containers wait for a reason that needs a change ([`FAILING_REASONS`]), as
/// `<pod>: <reason>`, sorted.
pub fn failing_pods(pods: &[&Pod]) -> Vec<String> {
    let mut failing: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
            let reason = statuses.iter().find_map(|c| {
                let reason = c.state.as_ref()?.waiting.as_ref()?.reason.as_deref()?;
                FAILING_REASONS.contains(&reason).then_some(reason)
            })?;
            Some(format!("{}: {reason}", p.name_any()))
        })
        .collect();
    failing.sort();
    failing
}

/// What a reconcile saw of a RedisCluster's children.
pub struct Observed<'a> {
    /// The StatefulSet, as the API server returned it.
    pub statefulset: Option<&'a StatefulSet>,
    /// The cluster's pods.
    pub pods: Vec<&'a Pod>,
    /// Why the API server refused the Service or the StatefulSet, if it did.
    pub refused: Option<String>,
}

/// A condition, keeping the previous transition time when its status did not change.
fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// The status a RedisCluster should have, given what was `observed` of its children.
pub fn status(object: &RedisCluster, observed: &Observed<'_>, now: Time) -> RedisClusterStatus {
    let generation = object.metadata.generation;
    let previous = object
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let c = |type_: &str, status: bool, reason: &str, message: String| {
        condition(previous, type_, status, reason, message, generation, &now)
    };
    let size = object.spec.size;
    let set = observed.statefulset;
    let counts = set.and_then(|s| s.status.clone()).unwrap_or_default();
    // The StatefulSet controller has seen the latest spec (else its counts are of the old one).
    let current = set.is_some_and(|s| {
        counts.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0)
    });
    let ready = counts.ready_replicas.unwrap_or(0);
    let updated = counts.updated_replicas.unwrap_or(0);
    let nodes = format!("{ready}/{size} nodes ready");
    let available = match ready >= size {
        true => c("Available", true, "NodesReady", nodes),
        false => c("Available", false, "NodesNotReady", nodes),
    };
    let rolled_out = current && counts.replicas == size && updated >= size && ready >= size;
    let progress = format!("{updated}/{size} nodes updated");
    let progressing = match (&observed.refused, rolled_out) {
        (Some(refused), _) => c("Progressing", false, "Rejected", refused.clone()),
        (None, true) => c("Progressing", false, "RolloutComplete", progress),
        (None, false) => c("Progressing", true, "RollingOut", progress),
    };
    let failing = failing_pods(&observed.pods);
    let degraded = match (&observed.refused, failing.is_empty()) {
        (Some(refused), _) => c("Degraded", true, "Rejected", refused.clone()),
        (None, false) => c("Degraded", true, "NodesFailing", failing.join(", ")),
        (None, true) => c("Degraded", false, "AsExpected", "every node starts".into()),
    };
    RedisClusterStatus {
        nodes: node_names(&observed.pods),
        conditions: vec![available, progressing, degraded],
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetStatus;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus};

    use redis_api::redis_cluster::RedisClusterSpec;

    fn object(size: i32) -> RedisCluster {
        let spec = RedisClusterSpec {
            size,
            ..Default::default()
        };
        let mut object = RedisCluster::new("sample", spec);
        object.metadata.namespace = Some("default".into());
        object.metadata.uid = Some("0000-1111".into());
        object.metadata.generation = Some(1);
        object
    }

    fn observed_set(size: i32, ready: i32) -> StatefulSet {
        let mut s = statefulset(&object(size), "test");
        s.metadata.generation = Some(1);
        s.status = Some(StatefulSetStatus {
            observed_generation: Some(1),
            replicas: size,
            ready_replicas: Some(ready),
            updated_replicas: Some(size),
            ..Default::default()
        });
        s
    }

    fn pod(name: &str, phase: &str, waiting: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("default".into());
        pod.metadata.labels = Some(labels("sample", "test"));
        let state = waiting.map(|reason| ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(vec![ContainerStatus {
                name: APP.into(),
                state,
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod
    }

    fn get<'a>(status: &'a RedisClusterStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn the_service_is_headless_and_selects_the_nodes() {
        let s = service(&object(3), "redis-operator");
        let spec = s.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.selector.unwrap(), selector("sample"));
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some(PORT_NAME), PORT));
        let owner = &s.metadata.owner_references.unwrap()[0];
        assert_eq!(owner.kind, "RedisCluster");
        assert_eq!(owner.controller, Some(true));
    }

    #[test]
    fn the_statefulset_runs_redis_in_cluster_mode_restricted() {
        let s = statefulset(&object(3), "redis-operator");
        let spec = s.spec;
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("sample"));
        assert_eq!(spec.selector.match_labels.unwrap(), selector("sample"));
        let pod = spec.template.spec.unwrap();
        let security = pod.security_context.unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("docker.io/library/redis:7.2")
        );
        assert_eq!(container.command.as_deref().unwrap(), COMMAND);
        let ports = container.ports.as_ref().unwrap();
        assert_eq!(ports[0].container_port, PORT);
        let security = container.security_context.as_ref().unwrap();
        assert_eq!(security.allow_privilege_escalation, Some(false));
        let drop = security.capabilities.as_ref().unwrap().drop.as_ref();
        assert_eq!(drop.unwrap(), &["ALL".to_string()]);
        let labels = spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[MANAGED_BY_LABEL], "redis-operator");
    }

    #[test]
    fn nodes_are_the_running_pods_sorted() {
        let mut terminating = pod("sample-3", "Running", None);
        terminating.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pods = [
            pod("sample-2", "Running", None),
            pod("sample-0", "Running", None),
            pod("sample-1", "Pending", None),
            terminating,
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(node_names(&refs), ["sample-0", "sample-2"]);
    }

    #[test]
    fn own_pods_are_selected_by_the_cluster_labels() {
        let mut other = pod("other-0", "Running", None);
        other.metadata.labels = Some(labels("other", "test"));
        let mut elsewhere = pod("sample-0", "Running", None);
        elsewhere.metadata.namespace = Some("elsewhere".into());
        let pods: Vec<Arc<Pod>> = [pod("sample-0", "Running", None), other, elsewhere]
            .into_iter()
            .map(Arc::new)
            .collect();
        let own = own_pods(&pods, "default", "sample");
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn conditions_follow_the_statefulset_and_its_pods() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let set = observed_set(3, 1);
        let observed = |set, pods, refused: Option<&str>| Observed {
            statefulset: set,
            pods,
            refused: refused.map(str::to_string),
        };
        let starting = status(&object(3), &observed(Some(&set), vec![], None), now.clone());
        assert_eq!(get(&starting, "Available").status, "False");
        assert_eq!(get(&starting, "Progressing").status, "True");
        assert_eq!(starting.observed_generation, Some(1));
        let set = observed_set(3, 3);
        let pods = [pod("sample-0", "Running", None)];
        let done = status(
            &object(3),
            &observed(Some(&set), pods.iter().collect(), None),
            now.clone(),
        );
        assert_eq!(get(&done, "Available").status, "True");
        assert_eq!(get(&done, "Progressing").reason, "RolloutComplete");
        assert_eq!(get(&done, "Degraded").status, "False");
        assert_eq!(done.nodes, ["sample-0"]);
        let crashing = [pod("sample-0", "Running", Some("CrashLoopBackOff"))];
        let failing = observed(Some(&set), crashing.iter().collect(), None);
        let failing = status(&object(3), &failing, now.clone());
        assert_eq!(
            get(&failing, "Degraded").message,
            "sample-0: CrashLoopBackOff"
        );
        let refused = status(&object(3), &observed(None, vec![], Some("bad")), now);
        assert_eq!(get(&refused, "Degraded").message, "bad");
        assert_eq!(get(&refused, "Progressing").status, "False");
    }

    #[test]
    fn transition_times_stay_while_the_status_does() {
        let mut o = object(3);
        let set = observed_set(3, 3);
        let observed = Observed {
            statefulset: Some(&set),
            pods: vec![],
            refused: None,
        };
        let first = status(&o, &observed, Time(Timestamp::UNIX_EPOCH));
        o.status = Some(first.clone());
        let later = Time(Timestamp::from_second(60).unwrap());
        assert_eq!(status(&o, &observed, later), first);
    }
}
