//! The {{kind}} controller (scaffolded by `bundle-tool create api`; yours to edit).
//!
//! It reconciles every {{kind}} and reports the outcome in `status.conditions` (`Available`)
//! and `status.observedGeneration`, patched through the status subresource only when they
//! change. Your logic goes into [`reconcile_inner`] (marked `TODO(user)`); a new API call needs
//! a row in `src/rbac.rs`. Failed reconciles are retried with the runtime's per-object
//! exponential backoff and reported as `ReconcileFailed` events.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use olmkit_runtime::backoff::Backoff;
use olmkit_runtime::events::{self, publish};
use olmkit_runtime::futures::StreamExt;
use olmkit_runtime::manager::ControllerContext;
use olmkit_runtime::tokio_util::sync::CancellationToken;
use olmkit_runtime::tracing::{debug, info, warn};
use serde_json::json;

use {{api_crate}}::{{kind_snake}}::{{{kind}}, {{kind}}Status};

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The status could not be patched.
    #[error("cannot update the status of {{kind}} {name}: {source}")]
    PatchStatus {
        /// The {{kind}}'s name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The failed action, the `reason` label of the reconcile-error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::PatchStatus { .. } => "patch_status",
        }
    }
}

/// What every reconcile of one watch scope shares.
struct Context {
    ctx: ControllerContext,
    backoff: Backoff<ObjectRef<{{kind}}>>,
}

/// Runs the {{kind}} controller for one watch scope (`None`: all namespaces) until `stop` is
/// cancelled, then lets in-flight reconciles finish.
pub async fn run(ctx: ControllerContext, namespace: Option<String>, stop: CancellationToken) {
{{#if namespaced}}
    let objects: Api<{{kind}}> = match &namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
{{else}}
    // {{kind}} is cluster-scoped: one controller (namespace `None`) watches them all.
    let objects: Api<{{kind}}> = Api::all(ctx.client.clone());
{{/if}}
    let cx = Arc::new(Context {
        backoff: Backoff::new(ctx.backoff_base, ctx.backoff_max),
        ctx: ctx.clone(),
    });
    let scope = namespace.unwrap_or_else(|| "<all>".into());
    info!(scope = %scope, "starting the {{kind}} controller");
    Controller::new(objects, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(ctx.concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, cx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => debug!(object = %object, "reconciled"),
                // Logged with the object in `reconcile`.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => warn!(error = %e, "{{kind}} controller error"),
            }
        })
        .await;
    info!(scope = %scope, "the {{kind}} controller stopped");
}

/// Retries a failed reconcile with per-object exponential backoff.
fn error_policy(object: Arc<{{kind}}>, error: &Error, cx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*object);
    let delay = cx.backoff.next_delay(&key);
    debug!(object = %key, error = %error, retry_in = ?delay, "reconcile failed; backing off");
    Action::requeue(delay)
}

/// One reconcile, with metrics, logs and the failure event around [`reconcile_inner`].
async fn reconcile(object: Arc<{{kind}}>, cx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let key = ObjectRef::from_obj(&*object);
    let result = reconcile_inner(&object, &cx).await;
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

async fn reconcile_inner(object: &{{kind}}, cx: &Context) -> Result<Action, Error> {
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // TODO(user): make the cluster match `object.spec` here: read what exists, apply what is
    // missing (server-side apply with `cx.ctx.field_manager`, as the deploy-image controllers
    // do), and say how it went in the status below.
    let status = status(object, Time(Timestamp::now()));
    patch_status_if_changed(object, status, cx).await?;
    Ok(Action::requeue(cx.ctx.resync))
}

/// The status a reconciled {{kind}} has.
pub fn status(object: &{{kind}}, now: Time) -> {{kind}}Status {
    let generation = object.metadata.generation;
    let previous = object.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Available" && c.status == "True")
    });
    let available = Condition {
        type_: "Available".to_string(),
        status: "True".to_string(),
        reason: "Reconciled".to_string(),
        message: format!("generation {} reconciled", generation.unwrap_or(0)),
        observed_generation: generation,
        last_transition_time: previous.map_or(now, |c| c.last_transition_time.clone()),
    };
    {{kind}}Status {
        conditions: vec![available],
        observed_generation: generation,
    }
}

/// Patches the status (server-side apply on the status subresource) when it changed.
async fn patch_status_if_changed(
    object: &{{kind}},
    new_status: {{kind}}Status,
    cx: &Context,
) -> Result<(), Error> {
    if object.status.as_ref() == Some(&new_status) {
        return Ok(());
    }
    let name = object.name_any();
{{#if namespaced}}
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<{{kind}}> = Api::namespaced(cx.ctx.client.clone(), &namespace);
{{else}}
    let api: Api<{{kind}}> = Api::all(cx.ctx.client.clone());
{{/if}}
    let patch = json!({
        "apiVersion": {{kind}}::api_version(&()),
        "kind": {{kind}}::kind(&()),
        "status": new_status,
    });
    let params = PatchParams::apply(&cx.ctx.field_manager).force();
    api.patch_status(&name, &params, &Patch::Apply(&patch))
        .await
        .map_err(|source| Error::PatchStatus { name, source })?;
    cx.ctx.metrics.wrote("{{plural}}/status", "patch");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use {{api_crate}}::{{kind_snake}}::{{kind}}Spec;

    #[test]
    fn the_status_names_the_reconciled_generation() {
        let mut object = {{kind}}::new("sample", {{kind}}Spec::default());
        object.metadata.generation = Some(3);
        let first = status(&object, Time(Timestamp::UNIX_EPOCH));
        assert_eq!(first.observed_generation, Some(3));
        assert_eq!(first.conditions[0].status, "True");
        object.status = Some(first.clone());
        let later = status(&object, Time(Timestamp::from_second(60).unwrap()));
        assert_eq!(later, first, "the transition time stays");
    }
}
