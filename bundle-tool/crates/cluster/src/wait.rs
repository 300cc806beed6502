//! Waiting for OLM: poll the Subscription and what it points at until [`crate::assess`] says
//! done, failed, or needs approval, or until the deadline.
//!
//! Polling by name (a handful of GETs per interval) rather than watching whole namespaces keeps
//! the load on the API server independent of how busy the namespace is and works the same on
//! every API server. Each object's progress line is reported only when it changes, so the user
//! sees a short log of state transitions, not a wall of repeats.

use crate::assess::{Baseline, Goal, Snapshot, Verdict, assess, describe};
use crate::client::{Cluster, ClusterError};
use crate::olm::{
    CatalogSource, Csv, InstallPlan, Subscription, catalog_source_resource, csv_resource,
    install_plan_resource, subscription_resource,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// What to wait for.
#[derive(Clone, Debug)]
pub struct WaitSpec {
    /// Namespace of the Subscription.
    pub namespace: String,
    /// Subscription name.
    pub subscription: String,
    /// The goal.
    pub goal: Goal,
    /// What was there before the command acted.
    pub baseline: Baseline,
    /// Stop when an InstallPlan awaits approval (Manual approval).
    pub stop_at_approval: bool,
    /// Give up after this long.
    pub timeout: Duration,
    /// Time between polls.
    pub poll_interval: Duration,
}

/// How the wait ended.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitOutcome {
    /// A terminal verdict (never [`Verdict::Pending`]).
    Done(Verdict, Box<Snapshot>),
    /// The deadline passed; the last snapshot says what was seen.
    TimedOut(Box<Snapshot>),
}

/// Reads the Subscription and the InstallPlan, CSV and CatalogSource it points at.
pub async fn snapshot(
    cluster: &Cluster,
    namespace: &str,
    subscription: &str,
) -> Result<Snapshot, ClusterError> {
    let sub: Option<Subscription> = cluster
        .get(&subscription_resource(), Some(namespace), subscription)
        .await?;
    let Some(sub) = sub else {
        return Ok(Snapshot::default());
    };
    let install_plan: Option<InstallPlan> = match sub.status.install_plan_name() {
        Some(name) => {
            cluster
                .get(&install_plan_resource(), Some(namespace), name)
                .await?
        }
        None => None,
    };
    let csv_name = if sub.status.current_csv.is_empty() {
        sub.status.installed_csv.as_str()
    } else {
        sub.status.current_csv.as_str()
    };
    let csv: Option<Csv> = if csv_name.is_empty() {
        None
    } else {
        cluster
            .get(&csv_resource(), Some(namespace), csv_name)
            .await?
    };
    let installed_csv: Option<Csv> =
        if !sub.status.installed_csv.is_empty() && sub.status.installed_csv != csv_name {
            cluster
                .get(&csv_resource(), Some(namespace), &sub.status.installed_csv)
                .await?
        } else {
            None
        };
    let catalog_source: Option<CatalogSource> = if sub.spec.source.is_empty() {
        None
    } else {
        let ns = if sub.spec.source_namespace.is_empty() {
            namespace
        } else {
            sub.spec.source_namespace.as_str()
        };
        cluster
            .get(&catalog_source_resource(), Some(ns), &sub.spec.source)
            .await?
    };
    Ok(Snapshot {
        subscription: Some(sub),
        install_plan,
        csv,
        installed_csv,
        catalog_source,
    })
}

/// Transport errors tolerated in a row before giving up (an API server restart, a blip).
const MAX_CONSECUTIVE_ERRORS: u32 = 5;

/// Polls until the goal is reached, fails, needs approval, or times out. `on_line` receives
/// one line per change of an object's state, prefixed with the elapsed time.
pub async fn wait(
    cluster: &Cluster,
    spec: &WaitSpec,
    on_line: &mut dyn FnMut(&str),
) -> Result<WaitOutcome, ClusterError> {
    let start = Instant::now();
    let deadline = start + spec.timeout;
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut last = Snapshot::default();
    let mut errors = 0u32;
    loop {
        match snapshot(cluster, &spec.namespace, &spec.subscription).await {
            Ok(snap) => {
                errors = 0;
                for (key, line) in describe(&snap) {
                    if seen.get(&key) != Some(&line) {
                        let elapsed = start.elapsed().as_secs_f64();
                        on_line(&format!("[{elapsed:6.1}s] {line}"));
                        seen.insert(key, line);
                    }
                }
                let verdict = assess(&spec.goal, &spec.baseline, &snap, spec.stop_at_approval);
                if verdict != Verdict::Pending {
                    return Ok(WaitOutcome::Done(verdict, Box::new(snap)));
                }
                last = snap;
            }
            Err(e) if !e.is_user_error() && errors < MAX_CONSECUTIVE_ERRORS => {
                errors += 1;
                on_line(&format!("(retrying after an error: {e})"));
            }
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(WaitOutcome::TimedOut(Box::new(last)));
        }
        tokio::time::sleep(spec.poll_interval.min(deadline - now)).await;
    }
}
