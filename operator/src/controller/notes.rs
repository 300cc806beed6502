//! Pure decisions about which Kubernetes events to emit.
//!
//! Events are writes too, so they are emitted on changes only: a child object created or
//! updated, a condition that flipped (or Degraded changing its reason), cleanup steps. A
//! reconcile that changes nothing emits nothing.

use memcached_api::v1::MemcachedStatus;

use super::cache::CachedDeployment;
use super::status::{AVAILABLE, DEGRADED, find};

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Routine.
    Normal,
    /// Needs attention.
    Warning,
}

/// One event to emit about a Memcached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Normal or Warning.
    pub severity: Severity,
    /// CamelCase reason (`kubectl describe` shows it).
    pub reason: String,
    /// What the operator did, CamelCase.
    pub action: &'static str,
    /// Human-readable message.
    pub message: String,
}

fn note(severity: Severity, reason: &str, action: &'static str, message: String) -> Note {
    Note {
        severity,
        reason: reason.to_string(),
        action,
        message,
    }
}

/// Events for the condition changes between `old` and `new`.
pub fn condition_notes(old: Option<&MemcachedStatus>, new: &MemcachedStatus) -> Vec<Note> {
    let mut out = Vec::new();
    let new_degraded = find(Some(new), DEGRADED);
    let old_degraded = find(old, DEGRADED);
    match (old_degraded, new_degraded) {
        (o, Some(n)) if n.status == "True" => {
            let same = o.is_some_and(|o| o.status == "True" && o.reason == n.reason);
            if !same {
                out.push(note(
                    Severity::Warning,
                    &n.reason,
                    "Reconcile",
                    n.message.clone(),
                ));
            }
        }
        (Some(o), Some(n)) if o.status == "True" && n.status != "True" => {
            out.push(note(
                Severity::Normal,
                "Recovered",
                "Reconcile",
                format!("no longer degraded (was {})", o.reason),
            ));
        }
        _ => {}
    }
    let old_available = find(old, AVAILABLE).map(|c| c.status.as_str());
    if let Some(n) = find(Some(new), AVAILABLE) {
        match (old_available, n.status.as_str()) {
            (Some("True"), "True") | (Some("False") | None, "False") => {}
            (_, "True") => out.push(note(
                Severity::Normal,
                "Available",
                "Reconcile",
                n.message.clone(),
            )),
            (Some("True"), _) if n.reason == "ScaledToZero" => out.push(note(
                Severity::Normal,
                "ScaledToZero",
                "Reconcile",
                n.message.clone(),
            )),
            (Some("True"), _) => out.push(note(
                Severity::Warning,
                "Unavailable",
                "Reconcile",
                n.message.clone(),
            )),
            _ => {}
        }
    }
    out
}

/// What changed between two Deployments, for the `DeploymentUpdated` message.
pub fn describe_deployment_change(old: &CachedDeployment, new: &CachedDeployment) -> String {
    let mut parts = Vec::new();
    if let (Some(a), Some(b)) = (old.replicas(), new.replicas())
        && a != b
    {
        parts.push(format!("scaled from {a} to {b} replicas"));
    }
    if let (Some(a), Some(b)) = (old.image(), new.image())
        && a != b
    {
        parts.push(format!("image {a} -> {b}"));
    }
    if parts.is_empty() {
        "pod template or settings changed".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn status(avail: (&str, &str), degraded: (&str, &str)) -> MemcachedStatus {
        let c = |t: &str, (s, r): (&str, &str)| Condition {
            type_: t.into(),
            status: s.into(),
            reason: r.into(),
            message: format!("{t} {r}"),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        MemcachedStatus {
            conditions: vec![c(AVAILABLE, avail), c(DEGRADED, degraded)],
            ..Default::default()
        }
    }

    fn reasons(v: &[Note]) -> Vec<&str> {
        v.iter().map(|n| n.reason.as_str()).collect()
    }

    #[test]
    fn unchanged_status_emits_nothing() {
        let s = status(("True", "AllReplicasAvailable"), ("False", "AsExpected"));
        assert!(condition_notes(Some(&s), &s).is_empty());
        let s = status(("False", "InvalidSpec"), ("True", "MemoryTooSmall"));
        assert!(condition_notes(Some(&s), &s).is_empty());
    }

    #[test]
    fn first_status() {
        let s = status(("False", "DeploymentNotFound"), ("False", "AsExpected"));
        assert!(condition_notes(None, &s).is_empty());
        let s = status(("False", "InvalidSpec"), ("True", "MemoryTooSmall"));
        let n = condition_notes(None, &s);
        assert_eq!(reasons(&n), ["MemoryTooSmall"]);
        assert_eq!(n[0].severity, Severity::Warning);
    }

    #[test]
    fn flips() {
        let ok = status(("True", "AllReplicasAvailable"), ("False", "AsExpected"));
        let bad = status(("False", "NoReplicasAvailable"), ("True", "PodsFailing"));
        assert_eq!(
            reasons(&condition_notes(Some(&ok), &bad)),
            ["PodsFailing", "Unavailable"]
        );
        assert_eq!(
            reasons(&condition_notes(Some(&bad), &ok)),
            ["Recovered", "Available"]
        );
        let other = status(
            ("False", "NoReplicasAvailable"),
            ("True", "ProgressDeadlineExceeded"),
        );
        assert_eq!(
            reasons(&condition_notes(Some(&bad), &other)),
            ["ProgressDeadlineExceeded"]
        );
        let zero = status(("False", "ScaledToZero"), ("False", "AsExpected"));
        assert_eq!(
            reasons(&condition_notes(Some(&ok), &zero)),
            ["ScaledToZero"]
        );
    }
}
