//! The PulsarConsumer controller (scaffolded by `bundle-tool create api --image`; yours to edit).
//!
//! For each PulsarConsumer it keeps a Deployment of the same name running
//! `docker.io/apachepulsar/pulsar:3.3.0` (the manager's `PULSARCONSUMER_IMAGE`, set in
//! `config/manager/manager.yaml`, overrides it) with `spec.replicas` pods, owned by the
//! PulsarConsumer, each running the Pulsar CLI's consumer ([`COMMAND`]) on the spec's service
//! URL, topic and subscription, which it reads from its environment ([`env`]); a spec change
//! changes the pod template, so the Deployment rolls the pods:
//!
//! 1. the Deployment is server-side applied with the operator's one field manager (an apply
//!    that changes nothing is no write), and a `Created` or `Updated` event says when it changed;
//! 2. `status.conditions` (`Available`, `Progressing`, `Degraded`) follow the Deployment's
//!    status, `status.readyReplicas` is its ready count and `status.pods` the names of its
//!    running pods (from a cache of the consumer pods, whose changes trigger reconciles too), all
//!    patched through the status subresource only when they change;
//! 3. a finalizer (kube-runtime's `finalizer` helper) records a `Deleting` event before the
//!    PulsarConsumer goes; the owner reference lets the garbage collector delete the Deployment.
//!
//! Failed reconciles are retried with the runtime's per-object exponential backoff and reported
//! as `ReconcileFailed` events. Reconciles wait until the Deployment cache has its first list
//! (`CachesReady`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, Pod, PodSecurityContext, PodSpec, PodStatus, PodTemplateSpec,
    SeccompProfile, SecurityContext,
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

use pulsar_consumer_api::pulsar_consumer::{FINALIZER, PulsarConsumer, PulsarConsumerStatus};

/// The image the Deployments run, unless [`IMAGE_ENV`] is set.
pub const DEFAULT_IMAGE: &str = "docker.io/apachepulsar/pulsar:3.3.0";
/// The manager's environment variable that overrides [`DEFAULT_IMAGE`] (kubebuilder's
/// deploy-image convention; `config/manager/manager.yaml` sets it).
pub const IMAGE_ENV: &str = "PULSARCONSUMER_IMAGE";
/// The container's command and arguments (`--image-container-command`): `sh -c` runs the Pulsar
/// CLI's consumer (the image's working directory is `/pulsar`) on the broker, subscription and
/// topic of the environment ([`env`]), forever (`-n 0`), in a Shared subscription so that the
/// pods share the messages (Exclusive, the default, would refuse every consumer but the first).
/// `exec` makes the JVM the container's main process, so that it gets the kubelet's SIGTERM.
pub const COMMAND: &[&str] = &[
    "sh",
    "-c",
    "exec bin/pulsar-client --url \"$PULSAR_URL\" consume -s \"$PULSAR_SUBSCRIPTION\" -t Shared -n 0 \"$PULSAR_TOPIC\"",
];
/// The user the container runs as (`--run-as-user`).
pub const RUN_AS_USER: i64 = 10000;
/// The label that tells the operator's Deployments from others (its value: the operator's name).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The container's name.
const CONTAINER: &str = "pulsarconsumer";
/// The pod label naming the PulsarConsumer a pod belongs to (one of the Deployment's selector
/// labels, see [`labels`]).
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The environment variables of the container's command: the Pulsar service URL, the topic and
/// the subscription ([`env`]).
pub const URL_ENV: &str = "PULSAR_URL";
/// See [`URL_ENV`].
pub const TOPIC_ENV: &str = "PULSAR_TOPIC";
/// See [`URL_ENV`].
pub const SUBSCRIPTION_ENV: &str = "PULSAR_SUBSCRIPTION";

/// The container's environment: what [`COMMAND`] consumes, from the PulsarConsumer's spec.
/// Environment variables rather than arguments, so that the shell quotes them (no value can
/// inject words into the command line).
pub fn env(object: &PulsarConsumer) -> Vec<EnvVar> {
    let spec = &object.spec;
    [
        (URL_ENV, &spec.service_url),
        (TOPIC_ENV, &spec.topic),
        (SUBSCRIPTION_ENV, &spec.subscription_name),
    ]
    .into_iter()
    .map(|(name, value)| EnvVar {
        name: name.to_string(),
        value: Some(value.clone()),
        ..Default::default()
    })
    .collect()
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
    #[error("cannot update the status of PulsarConsumer {name}: {source}")]
    PatchStatus {
        /// The PulsarConsumer's name.
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
    /// The consumer pods (labelled like the Deployments), for `status.pods`.
    pods: Store<Pod>,
    ready: CachesReady,
    backoff: Backoff<ObjectRef<PulsarConsumer>>,
    image: String,
}

/// Runs the PulsarConsumer controller for one watch scope (`None`: all namespaces) until `stop` is
/// cancelled, then lets in-flight reconciles finish.
pub async fn run(ctx: ControllerContext, namespace: Option<String>, stop: CancellationToken) {
    let client = ctx.client.clone();
    let (objects, deployments, pods): (Api<PulsarConsumer>, Api<Deployment>, Api<Pod>) =
        match &namespace {
            Some(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client, ns),
            ),
            None => (
                Api::all(client.clone()),
                Api::all(client.clone()),
                Api::all(client),
            ),
        };
    // The pod template carries the Deployment's labels, so one selector picks both.
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
    let (pod_reader, pod_writer) = reflector::store();
    let pods = watcher(pods, watcher::Config::default().labels(&selector))
        .default_backoff()
        .modify(strip_pod)
        .reflect(pod_writer)
        .touched_objects();
    let cx = Arc::new(Context {
        ready: CachesReady::all(vec![store_ready(&reader), store_ready(&pod_reader)]),
        deployments: reader,
        pods: pod_reader,
        backoff: Backoff::new(ctx.backoff_base, ctx.backoff_max),
        image: image(),
        ctx: ctx.clone(),
    });
    let scope = namespace.unwrap_or_else(|| "<all>".into());
    info!(scope = %scope, image = %cx.image, "starting the PulsarConsumer controller");
    Controller::new(objects, watcher::Config::default())
        .owns_stream(owned)
        // Pods belong to the Deployment's ReplicaSets, not to the PulsarConsumer: their
        // instance label says whose they are.
        .watches_stream(pods, |pod| pod_owner(&pod))
        .with_config(controller::Config::default().concurrency(ctx.concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, cx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => debug!(object = %object, "reconciled"),
                // Logged with the object in `reconcile`.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => warn!(error = %e, "PulsarConsumer controller error"),
            }
        })
        .await;
    info!(scope = %scope, "the PulsarConsumer controller stopped");
}

/// Keeps of a cached pod what `status.pods` reads (name, namespace, labels, deletion, phase):
/// a full pod is several kilobytes, mostly its spec.
fn strip_pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
    pod.spec = None;
    let phase = pod.status.take().and_then(|s| s.phase);
    pod.status = Some(PodStatus {
        phase,
        ..Default::default()
    });
}

/// The PulsarConsumer a consumer pod belongs to: the one its instance label names.
fn pod_owner(pod: &Pod) -> Option<ObjectRef<PulsarConsumer>> {
    let name = pod.metadata.labels.as_ref()?.get(INSTANCE_LABEL)?;
    Some(ObjectRef::new(name).within(pod.metadata.namespace.as_deref()?))
}

/// Retries a failed reconcile with per-object exponential backoff.
fn error_policy(object: Arc<PulsarConsumer>, error: &Error, cx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*object);
    let delay = cx.backoff.next_delay(&key);
    debug!(object = %key, error = %error, retry_in = ?delay, "reconcile failed; backing off");
    Action::requeue(delay)
}

/// One reconcile: the finalizer, then [`apply`] or [`cleanup`]; metrics, logs and the failure
/// event around them.
async fn reconcile(object: Arc<PulsarConsumer>, cx: Arc<Context>) -> Result<Action, Error> {
    // Before the Deployment cache has its first list, every Deployment would look missing.
    if !cx.ready.wait().await {
        // The controller is stopping.
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let key = ObjectRef::from_obj(&*object);
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<PulsarConsumer> = Api::namespaced(cx.ctx.client.clone(), &namespace);
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

/// Makes the Deployment match the PulsarConsumer and reports its state in the status.
async fn apply(object: &PulsarConsumer, cx: &Context) -> Result<Action, Error> {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let desired = deployment(object, &cx.image, &cx.ctx.field_manager);
    let before = cx
        .deployments
        .get(&ObjectRef::new(&name).within(&namespace));
    let api: Api<Deployment> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    // TODO(user): more objects for a PulsarConsumer (a Service, a ConfigMap...) go here, applied the
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
        let replicas = object.spec.replicas;
        let message = format!("updated Deployment {name} (replicas {replicas})");
        let note = events::Note::normal("Updated", "Update", message);
        publish(&cx.ctx.recorder, &object.object_ref(&()), note).await;
    }
    let pods = running_pods(deployment.as_ref(), &cx.pods.state());
    let now = Time(Timestamp::now());
    let status = status(object, deployment.as_ref(), pods, problem.as_deref(), now);
    patch_status_if_changed(object, status, cx).await?;
    Ok(match problem {
        Some(_) => Action::await_change(),
        None => Action::requeue(cx.ctx.resync),
    })
}

/// The PulsarConsumer is being deleted: the finalizer holds it until this returns Ok.
async fn cleanup(object: &PulsarConsumer, cx: &Context) -> Result<Action, Error> {
    let message = format!(
        "PulsarConsumer {} is being deleted from the namespace {}",
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
    object: &PulsarConsumer,
    new_status: PulsarConsumerStatus,
    cx: &Context,
) -> Result<(), Error> {
    if object.status.as_ref() == Some(&new_status) {
        return Ok(());
    }
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<PulsarConsumer> = Api::namespaced(cx.ctx.client.clone(), &namespace);
    let patch = json!({
        "apiVersion": PulsarConsumer::api_version(&()),
        "kind": PulsarConsumer::kind(&()),
        "status": new_status,
    });
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    api.patch_status(&name, &params, &Patch::Apply(&patch))
        .await
        .map_err(|source| Error::PatchStatus { name, source })?;
    cx.ctx.metrics.wrote("pulsarconsumers/status", "patch");
    Ok(())
}

/// The controller reference to a PulsarConsumer, with `blockOwnerDeletion` as kubebuilder's
/// `SetControllerReference` sets it (a foreground deletion of the PulsarConsumer waits for the
/// Deployment; the API server checks `update` on `pulsarconsumers/finalizers` for it).
fn owner_reference(object: &PulsarConsumer) -> OwnerReference {
    OwnerReference {
        api_version: PulsarConsumer::api_version(&()).into_owned(),
        kind: PulsarConsumer::kind(&()).into_owned(),
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
        (INSTANCE_LABEL.to_string(), name.to_string()),
        (MANAGED_BY_LABEL.to_string(), manager.to_string()),
    ])
}

/// The Deployment a PulsarConsumer wants: `spec.replicas` pods running `image` with the spec in
/// their environment, non-root, owned by it.
pub fn deployment(object: &PulsarConsumer, image: &str, manager: &str) -> Deployment {
    let name = object.name_any();
    let labels = labels(&name, manager);
    let selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), CONTAINER.to_string()),
        (INSTANCE_LABEL.to_string(), name.clone()),
    ]);
    let container = Container {
        name: CONTAINER.to_string(),
        image: Some(image.to_string()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(COMMAND.iter().map(|s| s.to_string()).collect()),
        env: Some(env(object)),
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
            replicas: Some(object.spec.replicas),
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

/// The sorted names of the running pods of `deployment`: those of its namespace that its
/// selector's labels select, in phase `Running` and not being deleted (a pod the Deployment is
/// replacing keeps running until it stops, but it is on its way out).
pub fn running_pods(deployment: Option<&Deployment>, pods: &[Arc<Pod>]) -> Vec<String> {
    let Some(deployment) = deployment else {
        return Vec::new();
    };
    let namespace = deployment.metadata.namespace.as_deref();
    // An empty selector would select every pod; the operator's Deployments never have one.
    let Some(selector) = deployment
        .spec
        .selector
        .match_labels
        .as_ref()
        .filter(|s| !s.is_empty())
    else {
        return Vec::new();
    };
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == namespace)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// The status a PulsarConsumer should have, given its Deployment (as the API server returned it),
/// the names of its running pods ([`running_pods`]) and the reason the Deployment was refused, if
/// it was.
pub fn status(
    object: &PulsarConsumer,
    deployment: Option<&Deployment>,
    pods: Vec<String>,
    problem: Option<&str>,
    now: Time,
) -> PulsarConsumerStatus {
    let generation = object.metadata.generation;
    let previous = object
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let replicas = object.spec.replicas;
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
    let counts = format!("{available}/{replicas} pods available");
    let available = match available >= replicas {
        true => c("Available", true, "DeploymentAvailable", counts),
        false => c("Available", false, "DeploymentUnavailable", counts),
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
            let progress = format!("{updated}/{replicas} pods updated");
            let progressing = match current && updated >= replicas && available.status == "True" {
                true => c("Progressing", false, "RolloutComplete", progress),
                false => c("Progressing", true, "RollingOut", progress),
            };
            let normal = "the Deployment is progressing normally".to_string();
            let degraded = c("Degraded", false, "AsExpected", normal);
            vec![available, progressing, degraded]
        }
    };
    PulsarConsumerStatus {
        conditions,
        pods,
        ready_replicas: observed.ready_replicas.unwrap_or(0),
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};

    use pulsar_consumer_api::pulsar_consumer::PulsarConsumerSpec;

    fn object(replicas: i32) -> PulsarConsumer {
        let spec = PulsarConsumerSpec {
            service_url: "pulsar://pulsar.pulsar.svc:6650".into(),
            topic: "persistent://public/default/orders".into(),
            subscription_name: "billing".into(),
            replicas,
        };
        let mut object = PulsarConsumer::new("sample", spec);
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
            ready_replicas: Some(available),
            updated_replicas: Some(updated),
            ..Default::default()
        });
        d
    }

    /// A pod with `labels` in `phase`, stripped as the cache holds it.
    fn pod(name: &str, labels: &BTreeMap<String, String>, phase: &str) -> Arc<Pod> {
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some(labels.clone()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        };
        strip_pod(&mut pod);
        Arc::new(pod)
    }

    fn get<'a>(status: &'a PulsarConsumerStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn the_deployment_runs_the_image_as_asked() {
        let d = deployment(
            &object(3),
            "example.com/image:1",
            "pulsar-consumer-operator",
        );
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(3));
        let owner = &d.metadata.owner_references.unwrap()[0];
        assert_eq!(owner.kind, "PulsarConsumer");
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
    fn the_consumer_reads_the_spec_from_its_environment() {
        let d = deployment(&object(1), DEFAULT_IMAGE, "test");
        let pod = d.spec.template.spec.unwrap();
        let env: Vec<(String, String)> = pod.containers[0]
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap()))
            .collect();
        let expected = [
            (URL_ENV, "pulsar://pulsar.pulsar.svc:6650"),
            (TOPIC_ENV, "persistent://public/default/orders"),
            (SUBSCRIPTION_ENV, "billing"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(env, expected);
        // The command names exactly these variables, quoted.
        for name in [URL_ENV, TOPIC_ENV, SUBSCRIPTION_ENV] {
            assert!(COMMAND[2].contains(&format!("\"${name}\"")), "{name}");
        }
    }

    #[test]
    fn a_new_topic_changes_the_pod_template() {
        let before = deployment(&object(1), DEFAULT_IMAGE, "test");
        let mut moved = object(1);
        moved.spec.topic = "payments".into();
        let after = deployment(&moved, DEFAULT_IMAGE, "test");
        assert_ne!(before.spec.template, after.spec.template);
        assert_eq!(before.spec.selector, after.spec.selector);
    }

    #[test]
    fn running_pods_are_the_deployments_running_ones_sorted() {
        let d = deployment(&object(2), DEFAULT_IMAGE, "test");
        let own = d.spec.template.metadata.clone().unwrap().labels.unwrap();
        let mut other = own.clone();
        other.insert(INSTANCE_LABEL.into(), "another".into());
        let mut elsewhere = (*pod("sample-x-4", &own, "Running")).clone();
        elsewhere.metadata.namespace = Some("other".into());
        let mut leaving = (*pod("sample-x-5", &own, "Running")).clone();
        leaving.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pods = vec![
            pod("sample-x-2", &own, "Running"),
            pod("sample-x-1", &own, "Running"),
            pod("sample-x-3", &own, "Pending"),
            pod("another-x-1", &other, "Running"),
            Arc::new(elsewhere),
            Arc::new(leaving),
        ];
        assert_eq!(running_pods(Some(&d), &pods), ["sample-x-1", "sample-x-2"]);
        assert!(running_pods(None, &pods).is_empty());
    }

    #[test]
    fn cached_pods_keep_what_the_status_reads_and_map_to_their_consumer() {
        let labels = BTreeMap::from([(INSTANCE_LABEL.to_string(), "sample".to_string())]);
        let p = pod("sample-x-1", &labels, "Running");
        assert!(p.spec.is_none());
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        let owner = pod_owner(&p).unwrap();
        assert_eq!(owner.name, "sample");
        assert_eq!(owner.namespace.as_deref(), Some("default"));
        assert!(pod_owner(&pod("stray", &BTreeMap::new(), "Running")).is_none());
    }

    #[test]
    fn the_status_lists_the_running_pods_and_the_ready_count() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let pods = vec!["sample-x-1".to_string(), "sample-x-2".to_string()];
        let s = status(&object(2), Some(&observed(2, 2)), pods.clone(), None, now);
        assert_eq!(s.pods, pods);
        assert_eq!(s.ready_replicas, 2);
        let refused = status(
            &object(2),
            None,
            Vec::new(),
            Some("bad"),
            Time(Timestamp::UNIX_EPOCH),
        );
        assert_eq!(refused.ready_replicas, 0);
        assert!(refused.pods.is_empty());
    }

    #[test]
    fn conditions_follow_the_deployment() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let none = Vec::new;
        let rolling = status(&object(2), Some(&observed(1, 2)), none(), None, now.clone());
        assert_eq!(get(&rolling, "Available").status, "False");
        assert_eq!(get(&rolling, "Progressing").status, "True");
        assert_eq!(rolling.observed_generation, Some(1));
        let done = status(&object(2), Some(&observed(2, 2)), none(), None, now.clone());
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
        let stalled = status(&object(2), Some(&stuck), none(), None, now.clone());
        assert_eq!(get(&stalled, "Degraded").reason, "ProgressDeadlineExceeded");
        let refused = status(&object(2), None, none(), Some("bad"), now);
        assert_eq!(get(&refused, "Degraded").message, "bad");
    }

    #[test]
    fn transition_times_stay_while_the_status_does() {
        let mut o = object(2);
        let pods = || vec!["sample-x-1".to_string(), "sample-x-2".to_string()];
        let epoch = Time(Timestamp::UNIX_EPOCH);
        let first = status(&o, Some(&observed(2, 2)), pods(), None, epoch);
        o.status = Some(first.clone());
        let later = Time(Timestamp::from_second(60).unwrap());
        assert_eq!(
            status(&o, Some(&observed(2, 2)), pods(), None, later),
            first
        );
    }
}
