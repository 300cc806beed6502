//! The WhaleSay controller (scaffolded by `bundle-tool create api --image`; yours to edit).
//!
//! For each WhaleSay it keeps a Deployment of the same name running `docker.io/docker/whalesay:latest` (the manager's
//! `WHALESAY_IMAGE`, set in `config/manager/manager.yaml`, overrides it) with `spec.size`
//! pods, owned by the WhaleSay, whose container says `spec.message` (its argument, see
//! [`COMMAND`]); a new message rolls the pods:
//!
//! 1. the Deployment is server-side applied with the operator's one field manager (an apply
//!    that changes nothing is no write), and a `Created` or `Updated` event says when it changed;
//! 2. `status.conditions` (`Available`, `Progressing`, `Degraded`) follow the Deployment's
//!    status, patched through the status subresource only when they change;
//! 3. a finalizer (kube-runtime's `finalizer` helper) records a `Deleting` event before the
//!    WhaleSay goes; the owner reference lets the garbage collector delete the Deployment.
//!
//! Failed reconciles are retried with the runtime's per-object exponential backoff and reported
//! as `ReconcileFailed` events. Reconciles wait until the Deployment cache has its first list
//! (`CachesReady`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, ObjectMeta, OwnerReference, Time,
};
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

use whalesay_api::whale_say::{FINALIZER, WhaleSay, WhaleSayStatus};

/// The image the Deployments run, unless [`IMAGE_ENV`] is set.
pub const DEFAULT_IMAGE: &str = "docker.io/docker/whalesay:latest";
/// The manager's environment variable that overrides [`DEFAULT_IMAGE`] (kubebuilder's
/// deploy-image convention; `config/manager/manager.yaml` sets it).
pub const IMAGE_ENV: &str = "WHALESAY_IMAGE";
/// The container's command (`--image-container-command`): `sh -c` runs `cowsay` on the first
/// argument after the script (`$0`, the WhaleSay's `spec.message`, see [`args`]), then keeps the
/// container up so that the Deployment stays available.
pub const COMMAND: &[&str] = &["sh", "-c", "cowsay \"$0\" && exec sleep infinity"];
/// The user the container runs as (`--run-as-user`).
pub const RUN_AS_USER: i64 = 1001;
/// The label that tells the operator's Deployments from others (its value: the operator's name).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The container's name.
const CONTAINER: &str = "whalesay";

/// The container's arguments: the message, which the [`COMMAND`] script reads as `$0`.
pub fn args(object: &WhaleSay) -> Vec<String> {
    vec![object.spec.message.clone()]
}

/// The image to run: [`IMAGE_ENV`] when set, else [`DEFAULT_IMAGE`].
pub fn image() -> String {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|i| !i.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Deployment could not be applied.
    #[error("cannot apply Deployment {name}: {source}")]
    ApplyDeployment {
        /// Its name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The status could not be patched.
    #[error("cannot update the status of WhaleSay {name}: {source}")]
    PatchStatus {
        /// The WhaleSay's name.
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
            Self::ApplyDeployment { .. } => "apply_deployment",
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
    deployments: Store<Deployment>,
    ready: CachesReady,
    backoff: Backoff<ObjectRef<WhaleSay>>,
    image: String,
}

/// Runs the WhaleSay controller for one watch scope (`None`: all namespaces) until `stop` is
/// cancelled, then lets in-flight reconciles finish.
pub async fn run(ctx: ControllerContext, namespace: Option<String>, stop: CancellationToken) {
    let client = ctx.client.clone();
    let (objects, deployments): (Api<WhaleSay>, Api<Deployment>) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    let selector = format!(
        "app.kubernetes.io/name={},{MANAGED_BY_LABEL}={}",
        CONTAINER, ctx.field_manager
    );
    let (reader, writer) = reflector::store();
    let owned = watcher(deployments, watcher::Config::default().labels(&selector))
        .default_backoff()
        .modify(|d: &mut Deployment| d.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects();
    let cx = Arc::new(Context {
        ready: CachesReady::all(vec![store_ready(&reader)]),
        deployments: reader,
        backoff: Backoff::new(ctx.backoff_base, ctx.backoff_max),
        image: image(),
        ctx: ctx.clone(),
    });
    let scope = namespace.unwrap_or_else(|| "<all>".into());
    info!(scope = %scope, image = %cx.image, "starting the WhaleSay controller");
    Controller::new(objects, watcher::Config::default())
        .owns_stream(owned)
        .with_config(controller::Config::default().concurrency(ctx.concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, cx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => debug!(object = %object, "reconciled"),
                // Logged with the object in `reconcile`.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => warn!(error = %e, "WhaleSay controller error"),
            }
        })
        .await;
    info!(scope = %scope, "the WhaleSay controller stopped");
}

/// Retries a failed reconcile with per-object exponential backoff.
fn error_policy(object: Arc<WhaleSay>, error: &Error, cx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*object);
    let delay = cx.backoff.next_delay(&key);
    debug!(object = %key, error = %error, retry_in = ?delay, "reconcile failed; backing off");
    Action::requeue(delay)
}

/// One reconcile: the finalizer, then [`apply`] or [`cleanup`]; metrics, logs and the failure
/// event around them.
async fn reconcile(object: Arc<WhaleSay>, cx: Arc<Context>) -> Result<Action, Error> {
    // Before the Deployment cache has its first list, every Deployment would look missing.
    if !cx.ready.wait().await {
        // The controller is stopping.
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let key = ObjectRef::from_obj(&*object);
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<WhaleSay> = Api::namespaced(cx.ctx.client.clone(), &namespace);
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

/// Makes the Deployment match the WhaleSay and reports its state in the status.
async fn apply(object: &WhaleSay, cx: &Context) -> Result<Action, Error> {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let desired = deployment(object, &cx.image, &cx.ctx.field_manager);
    let before = cx
        .deployments
        .get(&ObjectRef::new(&name).within(&namespace));
    let api: Api<Deployment> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    // TODO(user): more objects for a WhaleSay (a Service, a ConfigMap...) go here, applied the
    // same way, with a row for each in src/rbac.rs.
    let (deployment, problem) = match api.patch(&name, &params, &Patch::Apply(&desired)).await {
        Ok(applied) => {
            cx.ctx.metrics.wrote("deployments", "patch");
            (Some(applied), None)
        }
        // The API server refused the Deployment itself: retrying cannot help until the spec
        // changes, so say so in the status and wait for a change.
        Err(kube::Error::Api(e)) if e.code == 400 || e.code == 422 => {
            (before.as_deref().cloned(), Some(e.message))
        }
        Err(source) => return Err(Error::ApplyDeployment { name, source }),
    };
    if let (None, Some(_)) = (&before, &deployment) {
        let message = format!("created Deployment {name}");
        let note = events::Note::normal("Created", "Create", message);
        publish(&cx.ctx.recorder, &object.object_ref(&()), note).await;
    } else if let (Some(before), Some(after)) = (&before, &deployment)
        && before.metadata.generation != after.metadata.generation
    {
        let message = format!("updated Deployment {name} (size {})", object.spec.size);
        let note = events::Note::normal("Updated", "Update", message);
        publish(&cx.ctx.recorder, &object.object_ref(&()), note).await;
    }
    let now = Time(Timestamp::now());
    let status = status(object, deployment.as_ref(), problem.as_deref(), now);
    patch_status_if_changed(object, status, cx).await?;
    Ok(match problem {
        Some(_) => Action::await_change(),
        None => Action::requeue(cx.ctx.resync),
    })
}

/// The WhaleSay is being deleted: the finalizer holds it until this returns Ok.
async fn cleanup(object: &WhaleSay, cx: &Context) -> Result<Action, Error> {
    let message = format!(
        "WhaleSay {} is being deleted from the namespace {}",
        object.name_any(),
        object.namespace().unwrap_or_default()
    );
    publish(
        &cx.ctx.recorder,
        &object.object_ref(&()),
        events::Note::normal("Deleting", "Delete", message),
    )
    .await;
    // TODO(user): release what the owner reference does not cover (the garbage collector deletes
    // the Deployment): external resources, DNS entries, backups... Return an error to retry.
    Ok(Action::await_change())
}

/// Patches the status (server-side apply on the status subresource) when it changed.
async fn patch_status_if_changed(
    object: &WhaleSay,
    new_status: WhaleSayStatus,
    cx: &Context,
) -> Result<(), Error> {
    if object.status.as_ref() == Some(&new_status) {
        return Ok(());
    }
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<WhaleSay> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let patch = json!({
        "apiVersion": WhaleSay::api_version(&()),
        "kind": WhaleSay::kind(&()),
        "status": new_status,
    });
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    api.patch_status(&name, &params, &Patch::Apply(&patch))
        .await
        .map_err(|source| Error::PatchStatus { name, source })?;
    cx.ctx.metrics.wrote("whalesays/status", "patch");
    Ok(())
}

/// The controller reference to a WhaleSay, with `blockOwnerDeletion` as kubebuilder's
/// `SetControllerReference` sets it (a foreground deletion of the WhaleSay waits for the
/// Deployment; the API server checks `update` on `whalesays/finalizers` for it).
fn owner_reference(object: &WhaleSay) -> OwnerReference {
    OwnerReference {
        api_version: WhaleSay::api_version(&()).into_owned(),
        kind: WhaleSay::kind(&()).into_owned(),
        name: object.name_any(),
        uid: object.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The labels of the Deployment and its pods.
fn labels(name: &str, manager: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), CONTAINER.to_string()),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
        (MANAGED_BY_LABEL.to_string(), manager.to_string()),
    ])
}

/// The Deployment a WhaleSay wants: `spec.size` pods running `image`, non-root, owned by it.
pub fn deployment(object: &WhaleSay, image: &str, manager: &str) -> Deployment {
    let name = object.name_any();
    let labels = labels(&name, manager);
    let selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), CONTAINER.to_string()),
        ("app.kubernetes.io/instance".to_string(), name.clone()),
    ]);
    let container = Container {
        name: CONTAINER.to_string(),
        image: Some(image.to_string()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(COMMAND.iter().map(|s| s.to_string()).collect()),
        args: Some(args(object)),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS_USER),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: object.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_reference(object)]),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(object.spec.size),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".to_string(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
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

/// The status a WhaleSay should have, given its Deployment (as the API server returned it) and
/// the reason the Deployment was refused, if it was.
pub fn status(
    object: &WhaleSay,
    deployment: Option<&Deployment>,
    problem: Option<&str>,
    now: Time,
) -> WhaleSayStatus {
    let generation = object.metadata.generation;
    let previous = object
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let size = object.spec.size;
    let observed = deployment
        .and_then(|d| d.status.clone())
        .unwrap_or_default();
    let current = deployment.is_some_and(|d| {
        observed.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
    });
    let available = observed.available_replicas.unwrap_or(0);
    let updated = observed.updated_replicas.unwrap_or(0);
    // The Deployment controller gave up (progressDeadlineSeconds passed without progress).
    let stalled = observed.conditions.iter().flatten().find(|c| {
        c.type_.as_deref() == Some("Progressing") && c.status.as_deref() == Some("False")
    });
    let c = |type_: &str, status: bool, reason: &str, message: String| {
        condition(previous, type_, status, reason, message, generation, &now)
    };
    let pods = format!("{available}/{size} pods available");
    let available = match available >= size {
        true => c("Available", true, "DeploymentAvailable", pods),
        false => c("Available", false, "DeploymentUnavailable", pods),
    };
    let conditions = match (problem, stalled) {
        (Some(problem), _) => {
            let reason = "DeploymentRejected";
            vec![
                available,
                c("Progressing", false, reason, problem.to_string()),
                c("Degraded", true, reason, problem.to_string()),
            ]
        }
        (None, Some(stalled)) => {
            let reason = stalled
                .reason
                .as_deref()
                .unwrap_or("ProgressDeadlineExceeded");
            let message = stalled.message.clone().unwrap_or_default();
            vec![
                available,
                c("Progressing", false, reason, message.clone()),
                c("Degraded", true, reason, message),
            ]
        }
        (None, None) => {
            let progress = format!("{updated}/{size} pods updated");
            let progressing = match current && updated >= size && available.status == "True" {
                true => c("Progressing", false, "RolloutComplete", progress),
                false => c("Progressing", true, "RollingOut", progress),
            };
            let normal = "the Deployment is progressing normally".to_string();
            let degraded = c("Degraded", false, "AsExpected", normal);
            vec![available, progressing, degraded]
        }
    };
    WhaleSayStatus {
        conditions,
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};

    use whalesay_api::whale_say::WhaleSaySpec;

    fn object(size: i32) -> WhaleSay {
        let spec = WhaleSaySpec {
            message: "moo".into(),
            size,
        };
        let mut object = WhaleSay::new("sample", spec);
        object.metadata.namespace = Some("default".into());
        object.metadata.uid = Some("0000-1111".into());
        object.metadata.generation = Some(1);
        object
    }

    fn observed(available: i32, updated: i32) -> Deployment {
        let mut d = deployment(&object(2), DEFAULT_IMAGE, "test");
        d.metadata.generation = Some(1);
        d.status = Some(DeploymentStatus {
            observed_generation: Some(1),
            available_replicas: Some(available),
            updated_replicas: Some(updated),
            ..Default::default()
        });
        d
    }

    fn get<'a>(status: &'a WhaleSayStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn the_deployment_runs_the_image_as_asked() {
        let d = deployment(&object(3), "example.com/image:1", "whalesay-operator");
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(3));
        let owner = &d.metadata.owner_references.unwrap()[0];
        assert_eq!(owner.kind, "WhaleSay");
        assert_eq!(owner.controller, Some(true));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some("example.com/image:1"));
        assert_eq!(container.command.as_deref().unwrap(), COMMAND);
        let security = container.security_context.as_ref().unwrap();
        assert_eq!(security.run_as_user, Some(RUN_AS_USER));
    }

    #[test]
    fn conditions_follow_the_deployment() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let rolling = status(&object(2), Some(&observed(1, 2)), None, now.clone());
        assert_eq!(get(&rolling, "Available").status, "False");
        assert_eq!(get(&rolling, "Progressing").status, "True");
        assert_eq!(rolling.observed_generation, Some(1));
        let done = status(&object(2), Some(&observed(2, 2)), None, now.clone());
        assert_eq!(get(&done, "Available").status, "True");
        assert_eq!(get(&done, "Progressing").reason, "RolloutComplete");
        assert_eq!(get(&done, "Degraded").status, "False");
        let mut stuck = observed(0, 2);
        stuck.status.as_mut().unwrap().conditions = Some(vec![DeploymentCondition {
            type_: Some("Progressing".into()),
            status: Some("False".into()),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        }]);
        let stalled = status(&object(2), Some(&stuck), None, now.clone());
        assert_eq!(get(&stalled, "Degraded").reason, "ProgressDeadlineExceeded");
        let refused = status(&object(2), None, Some("bad"), now);
        assert_eq!(get(&refused, "Degraded").message, "bad");
    }

    #[test]
    fn transition_times_stay_while_the_status_does() {
        let mut o = object(2);
        let first = status(&o, Some(&observed(2, 2)), None, Time(Timestamp::UNIX_EPOCH));
        o.status = Some(first.clone());
        let later = Time(Timestamp::from_second(60).unwrap());
        assert_eq!(status(&o, Some(&observed(2, 2)), None, later), first);
    }
}
