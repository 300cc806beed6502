//! The Memcached controller: watches, caches and the reconcile I/O shell.
//!
//! The decisions live in pure submodules ([`desired`], [`status`], [`drift`], [`notes`],
//! [`backoff`]); this module only moves data between them and the API server:
//!
//! 1. a deleted Memcached goes through [`cleanup`]: its Deployment and Service are deleted
//!    (foreground) and waited for before the finalizer is removed;
//! 2. otherwise the finalizer is added if missing, the spec validated, the Deployment and Service
//!    server-side applied under the one field manager [`FIELD_MANAGER`] — only when the observed
//!    object differs from the desired one — and the status patched through the status
//!    subresource only when it changed;
//! 3. events are emitted for changes only, so a reconcile of an unchanged object writes nothing.
//!
//! A valid object is requeued after the resync period; an invalid one waits for a change
//! (no retry loop); a failed reconcile is retried with per-object exponential backoff.
//!
//! Why a finalizer when owner references already garbage-collect the children: deleting a
//! Memcached must mean its cache is gone. With `kubectl delete --cascade=orphan`, or a cluster
//! whose garbage collector lags, the pods would otherwise keep running (and keep their memory)
//! after the Memcached disappeared, and a Memcached re-created under the same name right away
//! would collide with the still-terminating Deployment of the old one. The finalizer deletes the
//! children explicitly with foreground propagation, waits until they are gone, records events,
//! and only then lets the Memcached go, so `kubectl delete memcached x` returning means the pods
//! are gone.

pub mod cache;
pub mod desired;
pub mod drift;
pub mod notes;
pub mod status;
#[cfg(test)]
pub(crate) mod testutil;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use memcached_api::v1::{Memcached, MemcachedStatus};
use memcached_api::validation::{validate_name, validate_spec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use thiserror::Error;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::gauges::{CacheGauges, ScopeStores};
use cache::{CachedDeployment, CachedPod, CachedService, Comparable};
use desired::{BuildDesiredError, MANAGED_BY, MANAGED_BY_LABEL, MANAGED_SELECTOR};
use notes::{Note, Severity};
use olmkit_runtime::backoff::Backoff;
use olmkit_runtime::manager::ControllerContext;
use olmkit_runtime::metrics::Metrics;
use olmkit_runtime::ready::{self, CachesReady};
use status::{ApplyProblem, Observed};

/// The one field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "memcached-operator";
/// `reportingController` of the operator's events.
pub const REPORTER: &str = "memcached-operator";
/// How often a cleanup that waits for children to disappear looks again, in case the watch
/// event that normally triggers it is missed.
const CLEANUP_POLL: Duration = Duration::from_secs(5);

/// Why a reconcile failed. Each variant names the action that failed.
#[derive(Debug, Error)]
pub enum ReconcileError {
    /// The desired objects could not be built.
    #[error("cannot build the desired objects: {0}")]
    BuildDesired(#[from] BuildDesiredError),
    /// Adding the finalizer failed.
    #[error("cannot add finalizer to Memcached {name}: {source}")]
    AddFinalizer {
        /// Memcached name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// Removing the finalizer failed.
    #[error("cannot remove finalizer from Memcached {name}: {source}")]
    RemoveFinalizer {
        /// Memcached name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// Reading a child object failed.
    #[error("cannot read {kind} {name}: {source}")]
    ReadChild {
        /// Kind of the child.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// Applying a child object failed.
    #[error("cannot apply {kind} {name}: {source}")]
    ApplyChild {
        /// Kind of the child.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a child object failed.
    #[error("cannot delete {kind} {name}: {source}")]
    DeleteChild {
        /// Kind of the child.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// Patching the status failed.
    #[error("cannot update status of Memcached {name}: {source}")]
    PatchStatus {
        /// Memcached name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError {
    /// Short snake_case name of the failed action, the `reason` label of the error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BuildDesired(_) => "build_desired",
            Self::AddFinalizer { .. } => "add_finalizer",
            Self::RemoveFinalizer { .. } => "remove_finalizer",
            Self::ReadChild {
                kind: "Deployment", ..
            } => "read_deployment",
            Self::ReadChild { .. } => "read_service",
            Self::ApplyChild {
                kind: "Deployment", ..
            } => "apply_deployment",
            Self::ApplyChild { .. } => "apply_service",
            Self::DeleteChild {
                kind: "Deployment", ..
            } => "delete_deployment",
            Self::DeleteChild { .. } => "delete_service",
            Self::PatchStatus { .. } => "patch_status",
        }
    }
}

/// What every scope's controller shares in one leadership term.
pub struct Shared {
    /// API client.
    pub client: Client,
    /// Event publisher.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Failure counts for the error policy.
    pub backoff: Backoff<ObjectRef<Memcached>>,
    /// Requeue period of a valid, converged object.
    pub resync: Duration,
}

impl Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("resync", &self.resync)
            .finish_non_exhaustive()
    }
}

/// The context handed to each reconcile: shared state plus the caches of its scope.
#[derive(Debug)]
pub struct Context {
    shared: Arc<Shared>,
    stores: ScopeStores,
    /// The child caches' first lists, awaited by every reconcile (see
    /// `olmkit_runtime::ready`: kube-runtime's own wait wakes only one waiter).
    children_ready: CachesReady,
}

/// Drops what the controller never reads from cached objects: managedFields and the
/// client-side-apply annotation are often larger than the rest of the object.
fn strip_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Pods are matched to their Memcached by label; their annotations and owners are never read.
fn strip_pod(pod: &mut CachedPod) {
    strip_metadata(pod);
    pod.metadata.annotations = None;
    pod.metadata.owner_references = None;
}

fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The Memcached controllers of one leadership term, one per watched namespace (or one for all
/// namespaces), until `token` is cancelled; every term starts from fresh watches, caches and
/// failure counts. The scopes' caches are published to `gauges` while they run.
pub async fn run(ctx: ControllerContext, token: CancellationToken, gauges: CacheGauges) {
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        recorder: ctx.recorder.clone(),
        metrics: ctx.metrics.clone(),
        backoff: Backoff::new(ctx.backoff_base, ctx.backoff_max),
        resync: ctx.resync,
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let scopes = ctx.scope.watches();
    let expected = scopes.len();
    let controllers = futures::future::join_all(scopes.into_iter().map(|ns| {
        run_scope(
            shared.clone(),
            ns,
            ctx.concurrency,
            token.clone(),
            tx.clone(),
        )
    }));
    drop(tx);
    let publish = {
        let gauges = gauges.clone();
        async move {
            let mut all = Vec::with_capacity(expected);
            while let Some(s) = rx.recv().await {
                all.push(s);
                if all.len() == expected {
                    gauges.set_scopes(all.clone());
                }
            }
        }
    };
    let (_, ()) = tokio::join!(controllers, publish);
    gauges.set_scopes(Vec::new());
}

/// Runs the controller for one watch scope (`None` = all namespaces) until `shutdown` is
/// cancelled, then lets in-flight reconciles finish.
pub async fn run_scope(
    shared: Arc<Shared>,
    namespace: Option<String>,
    concurrency: u16,
    shutdown: CancellationToken,
    stores_out: tokio::sync::mpsc::UnboundedSender<ScopeStores>,
) {
    let client = shared.client.clone();
    let ns = namespace.as_deref();
    let owned = watcher::Config::default().labels(MANAGED_SELECTOR);

    let (mc_reader, mc_writer) = reflector::store();
    let memcacheds = watcher(
        scoped_api::<Memcached>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(strip_metadata)
    .reflect(mc_writer)
    .applied_objects();

    let (dep_reader, dep_writer) = reflector::store();
    let deployments = watcher(scoped_api::<CachedDeployment>(&client, ns), owned.clone())
        .default_backoff()
        .modify(strip_metadata)
        .reflect(dep_writer)
        .touched_objects();

    let (svc_reader, svc_writer) = reflector::store();
    let services = watcher(scoped_api::<CachedService>(&client, ns), owned.clone())
        .default_backoff()
        .modify(strip_metadata)
        .reflect(svc_writer)
        .touched_objects();

    let (pod_reader, pod_writer) = reflector::store();
    let pods = watcher(scoped_api::<CachedPod>(&client, ns), owned)
        .default_backoff()
        .modify(strip_pod)
        .reflect(pod_writer)
        .touched_objects();

    let stores = ScopeStores {
        memcacheds: mc_reader.clone(),
        deployments: dep_reader,
        services: svc_reader,
        pods: pod_reader,
    };
    let _ = stores_out.send(stores.clone());
    let children_ready = CachesReady::all(vec![
        ready::store_ready(&stores.deployments),
        ready::store_ready(&stores.services),
        ready::store_ready(&stores.pods),
    ]);
    let ctx = Arc::new(Context {
        shared,
        stores,
        children_ready,
    });
    let scope = namespace.clone().unwrap_or_else(|| "<all>".to_string());
    info!(scope = %scope, "starting controller");

    Controller::for_stream(memcacheds, mc_reader)
        .owns_stream(deployments)
        .owns_stream(services)
        .watches_stream(pods, |pod| pod_owner(&pod))
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
                // Reconcile errors are logged (with the object) in `reconcile`; these are the
                // controller's own queue and watch errors.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => warn!(error = %e, "controller error"),
            }
        })
        .await;
    info!(scope = %scope, "controller stopped");
}

/// Maps a pod to the Memcached named by its instance label.
fn pod_owner(pod: &CachedPod) -> Option<ObjectRef<Memcached>> {
    let labels = pod.metadata.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY) {
        return None;
    }
    let name = labels.get(desired::INSTANCE_LABEL)?;
    Some(ObjectRef::new(name).within(pod.metadata.namespace.as_deref()?))
}

/// Retry policy of a failed reconcile: per-object exponential backoff.
fn error_policy(mc: Arc<Memcached>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*mc);
    let delay = ctx.shared.backoff.next_delay(&key);
    debug!(object = %key, error = %error, retry_in = ?delay, "reconcile failed; backing off");
    Action::requeue(delay)
}

/// One reconcile of `mc`, with metrics, logging and the failure event around [`reconcile_inner`].
async fn reconcile(mc: Arc<Memcached>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    // Decisions below read the child caches; before their first list completes they would
    // claim that nothing exists and cause needless applies. Every reconcile started before
    // then waits here, and all of them wake (kube-runtime's own wait wakes only one).
    if !ctx.children_ready.wait().await {
        // A cache's writer is gone: the controller is stopping. Nothing was done.
        return Ok(Action::await_change());
    }
    let key = ObjectRef::from_obj(&*mc);
    let result = reconcile_inner(&mc, &ctx).await;
    ctx.shared
        .metrics
        .reconciled(started.elapsed(), result.as_ref().err().map(|e| e.reason()));
    match &result {
        Ok(action) => {
            ctx.shared.backoff.reset(&key);
            debug!(object = %key, ?action, elapsed = ?started.elapsed(), "reconcile done");
        }
        Err(e) => {
            let failures = ctx.shared.backoff.failures(&key) + 1;
            warn!(object = %key, error = %e, reason = e.reason(), failures, "reconcile failed");
            publish(
                &ctx,
                &mc,
                Note {
                    severity: Severity::Warning,
                    reason: "ReconcileFailed".into(),
                    action: "Reconcile",
                    message: e.to_string(),
                },
            )
            .await;
        }
    }
    result
}

fn has_finalizer(mc: &Memcached) -> bool {
    mc.finalizers()
        .iter()
        .any(|f| f == memcached_api::FINALIZER)
}

async fn publish(ctx: &Context, mc: &Memcached, note: Note) {
    let event = Event {
        type_: match note.severity {
            Severity::Normal => EventType::Normal,
            Severity::Warning => EventType::Warning,
        },
        reason: note.reason,
        note: Some(olmkit_runtime::events::truncate(
            note.message,
            olmkit_runtime::events::MAX_NOTE,
        )),
        action: note.action.to_string(),
        secondary: None,
    };
    match ctx
        .shared
        .recorder
        .publish(&event, &mc.object_ref(&()))
        .await
    {
        Ok(()) => ctx.shared.metrics.wrote("events", "create"),
        // An event is best effort: failing the reconcile for it would retry the real work.
        Err(e) => warn!(object = %ObjectRef::from_obj(mc), error = %e, "cannot publish event"),
    }
}

async fn reconcile_inner(mc: &Arc<Memcached>, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = mc.name_any();
    let Some(ns) = mc.namespace() else {
        return Err(BuildDesiredError::MissingMetadata("namespace").into());
    };
    if mc.metadata.deletion_timestamp.is_some() {
        return cleanup(mc, ctx, &ns).await;
    }
    let client = &ctx.shared.client;
    let api: Api<Memcached> = Api::namespaced(client.clone(), &ns);

    let mc: Arc<Memcached> = if has_finalizer(mc) {
        mc.clone()
    } else {
        let patch = add_finalizer_patch(mc);
        let updated = api
            .patch(&name, &json_patch_params(), &patch)
            .await
            .map_err(|source| ReconcileError::AddFinalizer {
                name: name.clone(),
                source,
            })?;
        ctx.shared.metrics.wrote("memcacheds", "patch");
        Arc::new(updated)
    };

    let mut problems = validate_name(&name);
    problems.extend(validate_spec(&mc.spec));
    let mut notes: Vec<Note> = Vec::new();
    let mut apply_problem: Option<ApplyProblem> = None;
    let dep_key = ObjectRef::new(&name).within(&ns);
    let mut deployment: Option<Arc<CachedDeployment>> = ctx.stores.deployments.get(&dep_key);

    if problems.is_empty() {
        let mut created: Vec<String> = Vec::new();
        let desired = desired::deployment(&mc)?;
        match ensure_child(
            ctx,
            &mc,
            &ns,
            &desired,
            &ctx.stores.deployments,
            "Deployment",
            "deployments",
        )
        .await?
        {
            Child::Current(d) => deployment = Some(d),
            Child::Applied { old, new } => {
                match &old {
                    None => created.push(format!("Deployment {name}")),
                    Some(old) => notes.push(Note {
                        severity: Severity::Normal,
                        reason: "DeploymentUpdated".into(),
                        action: "Update",
                        message: format!(
                            "updated Deployment {name}: {}",
                            notes::describe_deployment_change(old, &new)
                        ),
                    }),
                }
                deployment = Some(new);
            }
            Child::Problem(p, observed) => {
                deployment = observed;
                apply_problem = Some(p);
            }
        }
        if apply_problem.is_none() {
            let desired = desired::service(&mc)?;
            match ensure_child(
                ctx,
                &mc,
                &ns,
                &desired,
                &ctx.stores.services,
                "Service",
                "services",
            )
            .await?
            {
                Child::Current(_) => {}
                Child::Applied { old: None, .. } => created.push(format!("Service {name}")),
                Child::Applied { old: Some(_), .. } => notes.push(Note {
                    severity: Severity::Normal,
                    reason: "ServiceUpdated".into(),
                    action: "Update",
                    message: format!("updated Service {name}"),
                }),
                Child::Problem(p, _) => apply_problem = Some(p),
            }
        }
        if !created.is_empty() {
            // One event for what one reconcile created: events are cached by the recorder, and
            // `kubectl describe` reads better.
            notes.insert(
                0,
                Note {
                    severity: Severity::Normal,
                    reason: "Created".into(),
                    action: "Create",
                    message: format!("created {}", created.join(" and ")),
                },
            );
        }
    }

    let pods = ctx.stores.pods.state();
    let own_pods: Vec<&CachedPod> = pods
        .iter()
        .map(|p| &**p)
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns.as_str())
                && pod_owner(p).is_some_and(|r| r.name == name)
        })
        .collect();
    let observed = Observed {
        deployment: deployment.as_deref(),
        pods: own_pods,
    };
    let new_status = status::desired_status(
        &mc,
        &observed,
        &problems,
        apply_problem.as_ref(),
        Timestamp::now(),
    );
    if !status::is_current(mc.status.as_ref(), &new_status) {
        patch_status(&api, &name, &ns, &new_status).await?;
        ctx.shared.metrics.wrote("memcacheds/status", "patch");
        notes.extend(notes::condition_notes(mc.status.as_ref(), &new_status));
    }
    for note in notes {
        publish(ctx, &mc, note).await;
    }
    if problems.is_empty() && apply_problem.is_none() {
        Ok(Action::requeue(ctx.shared.resync))
    } else {
        // Nothing will change until the spec (or the conflicting object) does; the watches
        // trigger the next reconcile then. Retrying on a timer would only repeat the verdict.
        Ok(Action::await_change())
    }
}

/// Parameters of the operator's JSON patches: attributed to the one field manager too.
fn json_patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

fn add_finalizer_patch(mc: &Memcached) -> Patch<()> {
    // JSON Patch with a `test`: the add fails with a conflict instead of overwriting a
    // finalizer list another client changed since our cached copy (same as kube's helper).
    let ops = match mc.metadata.finalizers.as_ref() {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [memcached_api::FINALIZER]},
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": memcached_api::FINALIZER},
        ]),
    };
    Patch::Json(serde_json::from_value(ops).unwrap_or_default())
}

fn remove_finalizer_patch(mc: &Memcached) -> Option<Patch<()>> {
    let index = mc
        .finalizers()
        .iter()
        .position(|f| f == memcached_api::FINALIZER)?;
    let path = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": path, "value": memcached_api::FINALIZER},
        {"op": "remove", "path": path},
    ]);
    Some(Patch::Json(serde_json::from_value(ops).unwrap_or_default()))
}

async fn patch_status(
    api: &Api<Memcached>,
    name: &str,
    ns: &str,
    status: &MemcachedStatus,
) -> Result<(), ReconcileError> {
    let mut body = serde_json::to_value(status).unwrap_or_default();
    // An empty list is omitted by serde; apply it explicitly so a stale list is cleared.
    if let Some(obj) = body.as_object_mut() {
        obj.entry("nodes").or_insert_with(|| json!([]));
    }
    let patch = json!({
        "apiVersion": "cache.example.com/v1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": ns},
        "status": body,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
    .map_err(|source| ReconcileError::PatchStatus {
        name: name.to_string(),
        source,
    })
}

/// Outcome of making one child object match its desired state.
enum Child<K> {
    /// It already matched.
    Current(Arc<K>),
    /// It was created (`old` = None) or updated.
    Applied {
        /// The object before.
        old: Option<Arc<K>>,
        /// The object the API server returned.
        new: Arc<K>,
    },
    /// It cannot be made to match until something changes; the observed object, if any.
    Problem(ApplyProblem, Option<Arc<K>>),
}

/// Whether `child` is controlled by `mc`, or is an orphan the operator made (adoptable).
fn controlled_by(child: &impl Resource, mc: &Memcached) -> Option<bool> {
    let uid = mc.metadata.uid.as_deref()?;
    let meta = child.meta();
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    Some(match controller {
        Some(o) => o.uid == uid,
        None => {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_BY_LABEL))
                .map(String::as_str)
                == Some(MANAGED_BY)
        }
    })
}

async fn ensure_child<D, K>(
    ctx: &Context,
    mc: &Memcached,
    ns: &str,
    desired: &D,
    store: &Store<K>,
    kind: &'static str,
    resource: &'static str,
) -> Result<Child<K>, ReconcileError>
where
    D: Resource + Serialize + Debug,
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Comparable
        + Clone
        + Debug
        + DeserializeOwned,
{
    let name = desired.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.shared.client.clone(), ns);
    let observed: Option<Arc<K>> = match store.get(&ObjectRef::new(&name).within(ns)) {
        Some(o) => Some(o),
        // Not in the cache: it does not exist, or it lost the label the cache selects on (or
        // was just created and the watch lags). Only a read can tell.
        None => api
            .get_opt(&name)
            .await
            .map_err(|source| ReconcileError::ReadChild {
                kind,
                name: name.clone(),
                source,
            })?
            .map(Arc::new),
    };
    if let Some(o) = &observed
        && controlled_by(&**o, mc) == Some(false)
    {
        return Ok(Child::Problem(
            ApplyProblem {
                reason: "ResourceConflict",
                message: format!(
                    "{kind} {name} already exists and is not controlled by this Memcached; delete or rename it"
                ),
            },
            None,
        ));
    }
    if let Some(o) = &observed
        && !drift::needs_apply(desired, Some(&o.comparable()))
    {
        ctx.shared.metrics.skipped_apply(resource);
        return Ok(Child::Current(o.clone()));
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(&name, &params, &Patch::Apply(desired)).await {
        Ok(mut new) => {
            ctx.shared.metrics.wrote(resource, "patch");
            strip_metadata(&mut new);
            info!(kind, namespace = ns, name = %name, created = observed.is_none(), "applied");
            Ok(Child::Applied {
                old: observed,
                new: Arc::new(new),
            })
        }
        // The API server refused the object itself (a value it validates that the operator
        // did not foresee): retrying cannot help until the spec changes.
        Err(kube::Error::Api(ae)) if ae.code == 422 || ae.code == 400 => Ok(Child::Problem(
            ApplyProblem {
                reason: if kind == "Deployment" {
                    "DeploymentRejected"
                } else {
                    "ServiceRejected"
                },
                message: format!("the API server rejected {kind} {name}: {}", ae.message),
            },
            observed,
        )),
        Err(source) => Err(ReconcileError::ApplyChild { kind, name, source }),
    }
}

/// Deletes the children of a deleted Memcached, waits for them to be gone, then removes the
/// finalizer.
async fn cleanup(mc: &Memcached, ctx: &Context, ns: &str) -> Result<Action, ReconcileError> {
    if !has_finalizer(mc) {
        return Ok(Action::await_change());
    }
    let name = mc.name_any();
    let mut remaining: Vec<String> = Vec::new();
    let mut deleted_now: Vec<String> = Vec::new();
    let dep = delete_child::<CachedDeployment>(
        ctx,
        mc,
        ns,
        &name,
        &ctx.stores.deployments,
        "Deployment",
        "deployments",
    )
    .await?;
    let svc = delete_child::<CachedService>(
        ctx,
        mc,
        ns,
        &name,
        &ctx.stores.services,
        "Service",
        "services",
    )
    .await?;
    for (kind, state) in [("Deployment", dep), ("Service", svc)] {
        match state {
            ChildDeletion::Gone => {}
            ChildDeletion::Deleting => remaining.push(format!("{kind} {name}")),
            ChildDeletion::DeleteRequested => {
                remaining.push(format!("{kind} {name}"));
                deleted_now.push(format!("{kind} {name}"));
            }
        }
    }
    if !deleted_now.is_empty() {
        publish(
            ctx,
            mc,
            Note {
                severity: Severity::Normal,
                reason: "Deleting".into(),
                action: "Delete",
                message: format!(
                    "deleting {} before releasing the Memcached",
                    deleted_now.join(" and ")
                ),
            },
        )
        .await;
    }
    if !remaining.is_empty() {
        debug!(namespace = ns, name = %name, waiting_for = ?remaining, "waiting for children to go");
        return Ok(Action::requeue(CLEANUP_POLL));
    }
    publish(
        ctx,
        mc,
        Note {
            severity: Severity::Normal,
            reason: "CleanedUp".into(),
            action: "Finalize",
            message: "Deployment and Service are gone; removing the finalizer".into(),
        },
    )
    .await;
    if let Some(patch) = remove_finalizer_patch(mc) {
        let api: Api<Memcached> = Api::namespaced(ctx.shared.client.clone(), ns);
        match api.patch(&name, &json_patch_params(), &patch).await {
            Ok(_) => ctx.shared.metrics.wrote("memcacheds", "patch"),
            // Already gone: someone else removed the last finalizer.
            Err(kube::Error::Api(ae)) if ae.code == 404 => {}
            Err(source) => return Err(ReconcileError::RemoveFinalizer { name, source }),
        }
    }
    info!(namespace = ns, name = %name, "cleaned up");
    ctx.shared.backoff.reset(&ObjectRef::from_obj(mc));
    Ok(Action::await_change())
}

enum ChildDeletion {
    Gone,
    Deleting,
    DeleteRequested,
}

async fn delete_child<K>(
    ctx: &Context,
    mc: &Memcached,
    ns: &str,
    name: &str,
    store: &Store<K>,
    kind: &'static str,
    resource: &'static str,
) -> Result<ChildDeletion, ReconcileError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(ctx.shared.client.clone(), ns);
    let observed = match store.get(&ObjectRef::new(name).within(ns)) {
        Some(o) => Some((*o).clone()),
        None => api
            .get_opt(name)
            .await
            .map_err(|source| ReconcileError::ReadChild {
                kind,
                name: name.to_string(),
                source,
            })?,
    };
    let Some(obj) = observed else {
        return Ok(ChildDeletion::Gone);
    };
    // Never delete what this Memcached does not control.
    if controlled_by(&obj, mc) != Some(true) {
        return Ok(ChildDeletion::Gone);
    }
    if obj.meta().deletion_timestamp.is_some() {
        return Ok(ChildDeletion::Deleting);
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: obj.meta().uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            ctx.shared.metrics.wrote(resource, "delete");
            Ok(ChildDeletion::DeleteRequested)
        }
        Err(kube::Error::Api(ae)) if ae.code == 404 => Ok(ChildDeletion::Gone),
        // The uid precondition failed: a new object took the name; it is not ours to delete.
        Err(kube::Error::Api(ae)) if ae.code == 409 => Ok(ChildDeletion::Gone),
        Err(source) => Err(ReconcileError::DeleteChild {
            kind,
            name: name.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testutil::sample;

    #[test]
    fn finalizer_patches_test_before_writing() {
        let mut mc = sample("a", Default::default());
        let p = serde_json::to_value(match add_finalizer_patch(&mc) {
            Patch::Json(p) => p,
            _ => unreachable!(),
        })
        .unwrap();
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["cache.example.com/finalizer"]},
            ])
        );
        mc.metadata.finalizers = Some(vec!["other".into(), memcached_api::FINALIZER.into()]);
        let p = serde_json::to_value(match remove_finalizer_patch(&mc) {
            Some(Patch::Json(p)) => p,
            _ => unreachable!(),
        })
        .unwrap();
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": "cache.example.com/finalizer"},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
    }

    #[test]
    fn children_of_others_are_not_ours() {
        let mc = sample("a", Default::default());
        let mine = desired::deployment(&mc).unwrap();
        assert_eq!(controlled_by(&mine, &mc), Some(true));
        let mut foreign = mine.clone();
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "other".into();
        assert_eq!(controlled_by(&foreign, &mc), Some(false));
        // An orphan the operator made (managed-by label, no controller) is adopted...
        let mut orphan = mine.clone();
        orphan.metadata.owner_references = None;
        assert_eq!(controlled_by(&orphan, &mc), Some(true));
        // ...a user's unlabelled object of the same name is not.
        orphan.metadata.labels = None;
        assert_eq!(controlled_by(&orphan, &mc), Some(false));
    }

    #[test]
    fn pods_map_to_their_memcached() {
        let mut p = testutil::pod("a-1", None);
        assert_eq!(pod_owner(&p), None);
        p.metadata.labels = Some(desired::object_labels("a"));
        assert_eq!(pod_owner(&p), Some(ObjectRef::new("a").within("cache")));
    }

    #[test]
    fn stripped_pod_keeps_what_status_reads() {
        let mut p = testutil::pod("a-1", Some(("CrashLoopBackOff", "x")));
        p.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        strip_pod(&mut p);
        assert!(p.metadata.annotations.is_none());
        assert_eq!(status::failing_pods(&[&p]).len(), 1);
    }

    #[test]
    fn error_reasons_name_the_action() {
        let e = ReconcileError::ApplyChild {
            kind: "Service",
            name: "a".into(),
            source: kube::Error::Api(kube::core::Status::failure("x", "y").with_code(500).boxed()),
        };
        assert_eq!(e.reason(), "apply_service");
        assert!(e.to_string().starts_with("cannot apply Service a: "));
    }
}
