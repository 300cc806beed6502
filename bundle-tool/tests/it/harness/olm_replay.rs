//! A fake OLM that replays a watch trace recorded from a real OLM v0
//! (`tests/fixtures/olm-traces/<scenario>.jsonl`) into the API-server stand-in.
//!
//! The trace holds every write seen in the scenario's namespace, the client's and OLM's. The
//! client's writes are not replayed: they are gates. The replay waits until the stand-in shows
//! the same change made by the command under test (or by the test, standing in for the user):
//! - an `ADDED` Subscription, CatalogSource or OperatorGroup: the object exists;
//! - an InstallPlan whose `spec.approved` turned true: the approval patch was made;
//! - a Subscription whose `spec.channel` changed: the channel switch was applied.
//!
//! Everything else is OLM's and is replayed in order, time-compressed by `speed`, into the
//! test's namespace (`olmtrace-<scenario>` is rewritten everywhere, messages included):
//! InstallPlans and CSVs are created and deleted as OLM did, and every status OLM wrote
//! (Subscription, InstallPlan, CSV, OperatorGroup, CatalogSource) replaces the object's status
//! through the status subresource. Objects the client created keep their metadata and spec;
//! only their status is OLM's. Requests carry the user agent `fake-olm`, so request-log
//! assertions can tell them apart from the CLI's.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::cluster_harness::{Env, fixtures};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, DynamicObject};
use olmkit_cluster::olm::{
    catalog_source_resource, csv_resource, install_plan_resource, operator_group_resource,
    subscription_resource,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// One event of a trace.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    /// Seconds since the scenario started.
    pub t: f64,
    /// ADDED, MODIFIED or DELETED.
    pub type_: String,
    /// The object's kind.
    pub kind: String,
    /// The object, in the test's namespace.
    pub object: Value,
}

/// Reads a trace and moves it into `namespace`, renaming objects as asked
/// (`(kind, trace name, test name)`).
pub fn load_trace(
    scenario: &str,
    namespace: &str,
    renames: &[(&str, &str, &str)],
) -> Vec<TraceEvent> {
    let path = fixtures()
        .join("olm-traces")
        .join(format!("{scenario}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(&format!("olmtrace-{scenario}"), namespace);
    text.lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            let kind = e["kind"].as_str().unwrap().to_string();
            let mut object = e["object"].take();
            for (k, from, to) in renames {
                if *k == kind && object["metadata"]["name"] == *from {
                    object["metadata"]["name"] = Value::from(*to);
                }
            }
            TraceEvent {
                t: e["t"].as_f64().unwrap(),
                type_: e["type"].as_str().unwrap().to_string(),
                kind,
                object,
            }
        })
        .collect()
}

fn resource(kind: &str) -> ApiResource {
    match kind {
        "Subscription" => subscription_resource(),
        "InstallPlan" => install_plan_resource(),
        "ClusterServiceVersion" => csv_resource(),
        "OperatorGroup" => operator_group_resource(),
        "CatalogSource" => catalog_source_resource(),
        other => panic!("unexpected kind {other} in a trace"),
    }
}

/// What the replay waits for before going on.
#[derive(Clone, Debug, PartialEq)]
enum Gate {
    /// The client created this object.
    Exists { kind: String, name: String },
    /// The client approved this InstallPlan.
    Approved { name: String },
    /// The client switched the Subscription to this channel.
    Channel { name: String, channel: String },
}

/// The gate of an event, if it is the client's (see the module docs).
fn gate_of(e: &TraceEvent, previous: Option<&Value>) -> Option<Gate> {
    let name = e.object["metadata"]["name"].as_str().unwrap().to_string();
    match (e.type_.as_str(), e.kind.as_str()) {
        ("ADDED", "Subscription" | "CatalogSource" | "OperatorGroup") => Some(Gate::Exists {
            kind: e.kind.clone(),
            name,
        }),
        ("MODIFIED", "InstallPlan")
            if e.object["spec"]["approved"] == true
                && previous.is_some_and(|p| p["spec"]["approved"] != true) =>
        {
            Some(Gate::Approved { name })
        }
        ("MODIFIED", "Subscription")
            if previous.is_some_and(|p| p["spec"]["channel"] != e.object["spec"]["channel"]) =>
        {
            Some(Gate::Channel {
                name,
                channel: e.object["spec"]["channel"].as_str().unwrap_or("").into(),
            })
        }
        _ => None,
    }
}

/// How far the replay got.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Events done (replayed or passed as gates).
    pub done: usize,
    /// Trace time of the last event done.
    pub t: f64,
    /// The gate it waits at, if any.
    pub waiting_for: Option<String>,
    /// A write that failed.
    pub error: Option<String>,
    /// Every event done.
    pub finished: bool,
}

/// A running replay.
pub struct Replay {
    pub progress: Arc<Mutex<Progress>>,
    pub events: usize,
    /// Set by [`Replay::release`] to let a replay started with [`Replay::start_held`] go on.
    released: Arc<std::sync::atomic::AtomicBool>,
    handle: JoinHandle<()>,
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

async fn olm_client(env: &Env) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&env.standin.kubeconfig_yaml("default")).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static("fake-olm"),
    ));
    kube::Client::try_from(config).unwrap()
}

impl Replay {
    /// Starts replaying `scenario` into `namespace`; `speed` scales the trace's time (0.1: ten
    /// times faster than real OLM).
    pub async fn start(
        env: &Env,
        scenario: &str,
        namespace: &str,
        renames: &[(&str, &str, &str)],
        speed: f64,
    ) -> Replay {
        Self::start_inner(env, scenario, namespace, renames, speed, None).await
    }

    /// Like [`Replay::start`], but the replay stops before the first event at or after trace
    /// time `hold_before` until [`Replay::release`] is called: the test stands in for a change
    /// OLM reacted to there that the trace does not show as a write (a catalog that gained a
    /// bundle).
    pub async fn start_held(
        env: &Env,
        scenario: &str,
        namespace: &str,
        renames: &[(&str, &str, &str)],
        speed: f64,
        hold_before: f64,
    ) -> Replay {
        Self::start_inner(env, scenario, namespace, renames, speed, Some(hold_before)).await
    }

    /// Lets a held replay go on.
    pub fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn start_inner(
        env: &Env,
        scenario: &str,
        namespace: &str,
        renames: &[(&str, &str, &str)],
        speed: f64,
        hold_before: Option<f64>,
    ) -> Replay {
        let events = load_trace(scenario, namespace, renames);
        let n = events.len();
        let client = olm_client(env).await;
        let progress = Arc::new(Mutex::new(Progress::default()));
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let p2 = progress.clone();
        let hold = hold_before.map(|t| (t, released.clone()));
        let ns = namespace.to_string();
        let handle = tokio::spawn(async move {
            let r = run(&client, &ns, events, speed, &p2, hold).await;
            let mut p = p2.lock().unwrap();
            match r {
                Ok(()) => p.finished = true,
                Err(e) => p.error = Some(e),
            }
        });
        Replay {
            progress,
            events: n,
            released,
            handle,
        }
    }

    /// The progress now.
    pub fn now(&self) -> Progress {
        self.progress.lock().unwrap().clone()
    }

    /// Waits until the replay passed trace time `t` (or finished); panics after `timeout`.
    pub async fn wait_for(&self, t: f64, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let p = self.now();
            if let Some(e) = &p.error {
                panic!("replay failed: {e}");
            }
            if p.finished || p.t >= t {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replay did not reach t={t} (at t={}, waiting for {:?})",
                p.t,
                p.waiting_for
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every event was replayed.
    pub async fn wait_finished(&self, timeout: Duration) {
        self.wait_for(f64::INFINITY, timeout).await;
        assert!(self.now().finished);
    }
}

fn api(client: &kube::Client, kind: &str, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(kind))
}

async fn get(client: &kube::Client, kind: &str, ns: &str, name: &str) -> Option<Value> {
    api(client, kind, ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|o| serde_json::to_value(o).unwrap())
}

async fn gate_open(client: &kube::Client, ns: &str, gate: &Gate) -> bool {
    match gate {
        Gate::Exists { kind, name } => get(client, kind, ns, name).await.is_some(),
        Gate::Approved { name } => get(client, "InstallPlan", ns, name)
            .await
            .is_some_and(|ip| ip["spec"]["approved"] == true),
        Gate::Channel { name, channel } => get(client, "Subscription", ns, name)
            .await
            .is_some_and(|s| s["spec"]["channel"] == channel.as_str()),
    }
}

async fn run(
    client: &kube::Client,
    ns: &str,
    events: Vec<TraceEvent>,
    speed: f64,
    progress: &Mutex<Progress>,
    hold: Option<(f64, Arc<std::sync::atomic::AtomicBool>)>,
) -> Result<(), String> {
    // The last version of each object in the trace, to see what an event changed.
    let mut last: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut clock = 0.0f64;
    for (i, e) in events.into_iter().enumerate() {
        if let Some((t, released)) = &hold
            && e.t >= *t
            && !released.load(std::sync::atomic::Ordering::SeqCst)
        {
            progress.lock().unwrap().waiting_for = Some(format!("held before t={t}"));
            while !released.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            progress.lock().unwrap().waiting_for = None;
            // Trace time restarts from the hold: what follows keeps its spacing.
            clock = clock.max(e.t);
        }
        let name = e.object["metadata"]["name"].as_str().unwrap().to_string();
        let key = (e.kind.clone(), name.clone());
        let previous = last.get(&key).cloned();
        if let Some(gate) = gate_of(&e, previous.as_ref()) {
            progress.lock().unwrap().waiting_for = Some(format!("{gate:?}"));
            while !gate_open(client, ns, &gate).await {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            progress.lock().unwrap().waiting_for = None;
        } else {
            let wait = ((e.t - clock) * speed).max(0.0);
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        clock = e.t;
        apply(client, ns, &e, previous.as_ref())
            .await
            .map_err(|err| {
                format!(
                    "event {i} (t={}, {} {} {name}): {err}",
                    e.t, e.type_, e.kind
                )
            })?;
        if e.type_ == "DELETED" {
            last.remove(&key);
        } else {
            last.insert(key, e.object.clone());
        }
        let mut p = progress.lock().unwrap();
        p.done = i + 1;
        p.t = e.t;
    }
    Ok(())
}

/// Replays OLM's part of one event: creation of what OLM creates, deletion, status.
async fn apply(
    client: &kube::Client,
    ns: &str,
    e: &TraceEvent,
    previous: Option<&Value>,
) -> Result<(), kube::Error> {
    let name = e.object["metadata"]["name"].as_str().unwrap();
    let olm_owned = matches!(e.kind.as_str(), "InstallPlan" | "ClusterServiceVersion");
    match e.type_.as_str() {
        "DELETED" if olm_owned => {
            let _ = api(client, &e.kind, ns)
                .delete(name, &DeleteParams::default())
                .await?;
            return Ok(());
        }
        "DELETED" => return Ok(()),
        "ADDED" if olm_owned => create(client, ns, e).await?,
        _ => {}
    }
    let status = &e.object["status"];
    let before = previous.map(|p| &p["status"]).unwrap_or(&Value::Null);
    if status.is_null() || (status == before && e.type_ != "ADDED") {
        return Ok(());
    }
    write_status(client, ns, &e.kind, name, status).await
}

/// Creates an object OLM created, as OLM wrote it, owner references pointing at the
/// stand-in's objects.
async fn create(client: &kube::Client, ns: &str, e: &TraceEvent) -> Result<(), kube::Error> {
    let mut obj = e.object.clone();
    let meta = obj["metadata"].as_object_mut().unwrap();
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "finalizers",
        "deletionTimestamp",
    ] {
        meta.remove(f);
    }
    if let Some(owners) = meta.remove("ownerReferences") {
        let mut kept = Vec::new();
        for mut o in owners.as_array().cloned().unwrap_or_default() {
            let kind = o["kind"].as_str().unwrap_or("").to_string();
            let oname = o["name"].as_str().unwrap_or("").to_string();
            let known = matches!(
                kind.as_str(),
                "Subscription"
                    | "InstallPlan"
                    | "ClusterServiceVersion"
                    | "OperatorGroup"
                    | "CatalogSource"
            );
            if known && let Some(owner) = get(client, &kind, ns, &oname).await {
                o["uid"] = owner["metadata"]["uid"].clone();
                kept.push(o);
            }
        }
        if !kept.is_empty() {
            obj["metadata"]["ownerReferences"] = Value::Array(kept);
        }
    }
    obj.as_object_mut().unwrap().remove("status");
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    api(client, &e.kind, ns)
        .create(&PostParams::default(), &o)
        .await?;
    Ok(())
}

/// Replaces an object's status with what OLM wrote (a status update, like OLM's
/// `UpdateStatus`), keeping the stand-in's metadata and spec. Retries on a conflict.
async fn write_status(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    name: &str,
    status: &Value,
) -> Result<(), kube::Error> {
    let api = api(client, kind, ns);
    for attempt in 0.. {
        let Some(mut current) = get(client, kind, ns, name).await else {
            // The client has not created it (a test that skips a step): nothing to update.
            return Ok(());
        };
        current["status"] = status.clone();
        let o: DynamicObject = serde_json::from_value(current).unwrap();
        match api.replace_status(name, &PostParams::default(), &o).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 20 => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
