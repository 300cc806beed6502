//! Waiting for OLM: poll the Subscription and what it points at until [`crate::assess`] says
//! done, failed, or needs approval, or until the deadline.
//!
//! Polling (a handful of GETs and two namespace lists per interval) rather than watching keeps
//! the load on the API server low and works the same on every API server. Each object's
//! progress line is reported only when it changes, so the user sees a short log of state
//! transitions, not a wall of repeats.
//!
//! Real OLM is not monotonic (recorded in `tests/fixtures/olm-traces/`): a CSV that reached
//! `Succeeded` often goes back to `Pending` (`NeedsReinstall`, `NeedsCertRotation`) within a
//! second, and `ResolutionFailed ErrorPreventedResolution` clears once a catalog becomes
//! reachable. So a success must hold for [`WaitSpec::settle`] before the wait ends, and a
//! [`Verdict::Blocked`] becomes a failure only after [`WaitSpec::resolution_grace`].

use crate::assess::{Baseline, Failure, Goal, Snapshot, Verdict, assess, describe};
use crate::client::{Cluster, ClusterError};
use crate::olm::{
    CatalogSource, Csv, InstallPlan, OperatorGroup, Subscription, catalog_source_resource,
    csv_resource, install_plan_resource, operator_group_resource, subscription_resource,
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
    /// How long a success must hold before the wait ends (zero: at once).
    pub settle: Duration,
    /// How long OLM may stay blocked (`ErrorPreventedResolution`) before it is a failure.
    pub resolution_grace: Duration,
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
    let csvs: Vec<Csv> = cluster.list(&csv_resource(), Some(namespace)).await?;
    let operator_groups: Vec<OperatorGroup> = cluster
        .list(&operator_group_resource(), Some(namespace))
        .await?;
    Ok(Snapshot {
        subscription: Some(sub),
        install_plan,
        csv,
        installed_csv,
        catalog_source,
        csvs: csvs.into_iter().filter(|c| !c.is_copy()).collect(),
        operator_groups: Some(operator_groups),
    })
}

/// Transport errors tolerated in a row before giving up (an API server restart, a blip).
const MAX_CONSECUTIVE_ERRORS: u32 = 5;

/// Tracks how long a verdict has held, to tell a settled state from a passing one.
#[derive(Debug, Default)]
struct Streak {
    /// What was seen (see [`Streak::key`]) and since when, in a row.
    current: Option<(String, Instant)>,
}

impl Streak {
    /// What must stay the same: the whole verdict, except that a block stays a block while
    /// its details (the catalog's connection state, OLM's message) change.
    fn key(v: &Verdict) -> String {
        match v {
            Verdict::Blocked(_) => "blocked".into(),
            other => format!("{other:?}"),
        }
    }

    /// Records `v` seen at `now`; returns how long the same verdict has held.
    fn observe(&mut self, v: &Verdict, now: Instant) -> Duration {
        let key = Self::key(v);
        match &self.current {
            Some((seen, since)) if *seen == key => now - *since,
            _ => {
                self.current = Some((key, now));
                Duration::ZERO
            }
        }
    }
}

fn persisted(f: Failure, held: Duration) -> Verdict {
    let mut f = f;
    f.details.push(format!(
        "(unchanged for {:.0}s while waiting; OLM retries, but nothing changed)",
        held.as_secs_f64()
    ));
    Verdict::Failed(f)
}

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
    let mut streak = Streak::default();
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
                let held = streak.observe(&verdict, Instant::now());
                match verdict {
                    Verdict::Pending => {}
                    Verdict::Succeeded { .. } | Verdict::NoChange { .. } => {
                        if held >= spec.settle {
                            return Ok(WaitOutcome::Done(verdict, Box::new(snap)));
                        }
                    }
                    Verdict::Blocked(f) => {
                        if held >= spec.resolution_grace {
                            return Ok(WaitOutcome::Done(persisted(f, held), Box::new(snap)));
                        }
                    }
                    other => return Ok(WaitOutcome::Done(other, Box::new(snap))),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(detail: &str) -> Verdict {
        Verdict::Blocked(Failure {
            summary: "OLM cannot reach the catalog".into(),
            details: vec![detail.into()],
            hints: vec![],
        })
    }

    #[test]
    fn a_block_persists_while_its_details_change_and_ends_when_it_clears() {
        let t0 = Instant::now();
        let mut s = Streak::default();
        s.observe(&blocked("connection IDLE"), t0);
        // The catalog went from IDLE to TRANSIENT_FAILURE (catalog-unreachable trace): still
        // the same block.
        assert_eq!(
            s.observe(
                &blocked("connection TRANSIENT_FAILURE"),
                t0 + Duration::from_secs(3)
            ),
            Duration::from_secs(3)
        );
        // OLM resolved once the catalog answered: the block is over, a later one starts anew.
        s.observe(&Verdict::Pending, t0 + Duration::from_secs(4));
        assert_eq!(
            s.observe(&blocked("x"), t0 + Duration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_streak_measures_how_long_the_same_verdict_held() {
        let t0 = Instant::now();
        let mut s = Streak::default();
        let ok = Verdict::Succeeded { csv: "a".into() };
        assert_eq!(s.observe(&ok, t0), Duration::ZERO);
        assert_eq!(
            s.observe(&ok, t0 + Duration::from_secs(2)),
            Duration::from_secs(2)
        );
        // A regression (the CSV went back to Pending) restarts the clock.
        s.observe(&Verdict::Pending, t0 + Duration::from_secs(3));
        assert_eq!(s.observe(&ok, t0 + Duration::from_secs(4)), Duration::ZERO);
        assert_eq!(
            s.observe(&ok, t0 + Duration::from_secs(5)),
            Duration::from_secs(1)
        );
    }
}
