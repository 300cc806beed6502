//! Pure status computation: what `status` a Memcached should show, given what was observed.
//!
//! Inputs are the Memcached, its Deployment and pods as last observed, the spec problems found
//! by validation and the current time; the output is the whole [`MemcachedStatus`]. Conditions
//! follow the Kubernetes conventions (`metav1.Condition`): `lastTransitionTime` changes only when
//! a condition's status flips, `observedGeneration` is the generation the condition describes.

use k8s_openapi::api::apps::v1::DeploymentCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use memcached_api::v1::{Memcached, MemcachedStatus};
use memcached_api::validation::SpecProblem;

use super::cache::{CachedDeployment, CachedPod};
use super::desired::selector_string;

/// Condition type: memcached pods serve clients.
pub const AVAILABLE: &str = "Available";
/// Condition type: a rollout or scale is under way.
pub const PROGRESSING: &str = "Progressing";
/// Condition type: something needs a human (bad spec, failing pods, stuck rollout).
pub const DEGRADED: &str = "Degraded";

/// Container waiting reasons that mean the pod will not become ready without a change.
const FAILING_WAITING_REASONS: [&str; 8] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "ErrImageNeverPull",
];

/// A problem the operator found outside the spec, reported like a spec problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyProblem {
    /// CamelCase reason, e.g. `DeploymentRejected`.
    pub reason: &'static str,
    /// Human-readable explanation.
    pub message: String,
}

/// What the reconciler observed about a Memcached's children.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// Its Deployment, if it exists.
    pub deployment: Option<&'a CachedDeployment>,
    /// Pods carrying its selector labels, in any order.
    pub pods: Vec<&'a CachedPod>,
}

fn is_terminating(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_finished(pod: &CachedPod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    )
}

/// Names of the pods that run or will run memcached, sorted.
pub fn node_names(pods: &[&CachedPod]) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| !is_terminating(p) && !is_finished(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Pods stuck in a state they will not leave without a change, as `pod: reason (message)`,
/// sorted by pod name.
pub fn failing_pods(pods: &[&CachedPod]) -> Vec<String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for pod in pods.iter().filter(|p| !is_terminating(p)) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(status) = pod.status.as_ref() else {
            continue;
        };
        let waiting = status
            .container_statuses
            .iter()
            .chain(status.init_container_statuses.iter())
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref().map(|w| (c, w)))
            .find(|(_, w)| {
                w.reason
                    .as_deref()
                    .is_some_and(|r| FAILING_WAITING_REASONS.contains(&r))
            });
        if let Some((c, w)) = waiting {
            let reason = w.reason.clone().unwrap_or_default();
            let detail = match w.message.as_deref() {
                Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                _ => reason,
            };
            out.push((name, format!("container {} {detail}", c.name)));
            continue;
        }
        let unschedulable = status.conditions.iter().find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
        if let Some(c) = unschedulable {
            out.push((
                name,
                format!("Unschedulable: {}", c.message.clone().unwrap_or_default()),
            ));
        }
    }
    out.sort();
    out.into_iter().map(|(n, d)| format!("{n}: {d}")).collect()
}

fn deployment_condition<'a>(
    d: &'a CachedDeployment,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

/// One condition as it should be, before `lastTransitionTime` bookkeeping.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Want {
    type_: &'static str,
    status: bool,
    reason: String,
    message: String,
}

fn want(type_: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Want {
    Want {
        type_,
        status,
        reason: reason.to_string(),
        message: message.into(),
    }
}

/// What the Deployment's status says about the rollout, read once for the three conditions.
struct Rollout<'a> {
    name: &'a str,
    desired: i32,
    /// The Deployment exists.
    exists: bool,
    available: i32,
    updated: i32,
    current: i32,
    /// `metadata.generation` and `status.observedGeneration`: the controller has not seen the
    /// latest spec while the second is behind.
    generation: i64,
    observed_generation: i64,
    deadline_exceeded: Option<&'a DeploymentCondition>,
    replica_failure: Option<&'a DeploymentCondition>,
    failing: Vec<String>,
    /// What stops the operator from rolling the spec out: (reason, message).
    blocked: Option<(&'a str, String)>,
}

impl<'a> Rollout<'a> {
    fn of(
        mc: &'a Memcached,
        observed: &'a Observed<'_>,
        spec_problems: &[SpecProblem],
        apply_problem: Option<&'a ApplyProblem>,
    ) -> Self {
        let dep = observed.deployment;
        let st = dep.and_then(|d| d.status.as_ref());
        // What stops the operator from rolling the spec out: a bad spec, or an object it may
        // not or cannot apply.
        let blocked: Option<(&str, String)> = if !spec_problems.is_empty() {
            Some((
                "InvalidSpec",
                "changes are not rolled out until the spec is fixed".to_string(),
            ))
        } else {
            apply_problem.map(|p| {
                (
                    p.reason,
                    format!("changes are not rolled out: {}", p.message),
                )
            })
        };
        Self {
            name: mc.metadata.name.as_deref().unwrap_or_default(),
            desired: mc.spec.replicas,
            exists: dep.is_some(),
            available: st
                .and_then(|s| s.available_replicas.or(s.ready_replicas))
                .unwrap_or(0),
            updated: st.and_then(|s| s.updated_replicas).unwrap_or(0),
            current: st.and_then(|s| s.replicas).unwrap_or(0),
            generation: dep.and_then(|d| d.metadata.generation).unwrap_or(0),
            observed_generation: st.and_then(|s| s.observed_generation).unwrap_or(0),
            deadline_exceeded: dep
                .and_then(|d| deployment_condition(d, "Progressing"))
                .filter(|c| {
                    c.status.as_deref() == Some("False")
                        && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                }),
            replica_failure: dep
                .and_then(|d| deployment_condition(d, "ReplicaFailure"))
                .filter(|c| c.status.as_deref() == Some("True")),
            failing: failing_pods(&observed.pods),
            blocked,
        }
    }
}

/// The three conditions, ignoring time.
fn wanted_conditions(
    mc: &Memcached,
    observed: &Observed<'_>,
    spec_problems: &[SpecProblem],
    apply_problem: Option<&ApplyProblem>,
) -> [Want; 3] {
    let r = Rollout::of(mc, observed, spec_problems, apply_problem);
    [
        available_condition(&r),
        progressing_condition(&r),
        degraded_condition(&r, spec_problems, apply_problem),
    ]
}

/// `Available`: enough memcached pods serve.
fn available_condition(r: &Rollout<'_>) -> Want {
    let Rollout {
        name,
        desired,
        available,
        ..
    } = *r;
    match r.exists {
        false if r.blocked.is_some() => {
            let (reason, message) = r.blocked.clone().unwrap_or_default();
            want(
                AVAILABLE,
                false,
                reason,
                format!("Deployment {name} does not run: {message}"),
            )
        }
        false => want(
            AVAILABLE,
            false,
            "DeploymentNotFound",
            format!("Deployment {name} does not exist yet"),
        ),
        true if desired == 0 => want(
            AVAILABLE,
            false,
            "ScaledToZero",
            "spec.replicas is 0, no memcached pod runs",
        ),
        true if available >= desired => want(
            AVAILABLE,
            true,
            "AllReplicasAvailable",
            format!("{available}/{desired} memcached pods are available"),
        ),
        true if available > 0 => want(
            AVAILABLE,
            true,
            "PartiallyAvailable",
            format!("{available}/{desired} memcached pods are available"),
        ),
        true => want(
            AVAILABLE,
            false,
            "NoReplicasAvailable",
            format!("0/{desired} memcached pods are available"),
        ),
    }
}

/// `Progressing`: the spec is being rolled out (or cannot be).
fn progressing_condition(r: &Rollout<'_>) -> Want {
    let Rollout {
        name,
        desired,
        available,
        updated,
        current,
        ..
    } = *r;
    if let Some((reason, message)) = r.blocked.clone() {
        want(PROGRESSING, false, reason, message)
    } else if let Some(c) = r.deadline_exceeded {
        want(
            PROGRESSING,
            false,
            "ProgressDeadlineExceeded",
            c.message.clone().unwrap_or_default(),
        )
    } else if !r.exists {
        want(
            PROGRESSING,
            true,
            "Creating",
            format!("creating Deployment {name}"),
        )
    } else if r.observed_generation < r.generation
        || updated < desired
        || current != desired
        || available < desired
    {
        want(
            PROGRESSING,
            true,
            "RollingOut",
            format!(
                "Deployment {name}: {updated}/{desired} pods updated, {available}/{desired} available"
            ),
        )
    } else {
        want(
            PROGRESSING,
            false,
            "RolloutComplete",
            format!("Deployment {name} runs {desired} up-to-date pods"),
        )
    }
}

/// `Degraded`: something is wrong, the most telling problem first.
fn degraded_condition(
    r: &Rollout<'_>,
    spec_problems: &[SpecProblem],
    apply_problem: Option<&ApplyProblem>,
) -> Want {
    if let Some(first) = spec_problems.first() {
        let message = spec_problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect::<Vec<_>>()
            .join("; ");
        want(DEGRADED, true, first.reason, message)
    } else if let Some(p) = apply_problem {
        want(DEGRADED, true, p.reason, p.message.clone())
    } else if !r.failing.is_empty() {
        let shown: Vec<_> = r.failing.iter().take(3).cloned().collect();
        let more = r.failing.len().saturating_sub(shown.len());
        let mut message = shown.join("; ");
        if more > 0 {
            message.push_str(&format!("; and {more} more"));
        }
        want(DEGRADED, true, "PodsFailing", message)
    } else if let Some(c) = r.deadline_exceeded {
        // After failing pods: the pod reason (CrashLoopBackOff...) says more than the deadline.
        want(
            DEGRADED,
            true,
            "ProgressDeadlineExceeded",
            c.message.clone().unwrap_or_default(),
        )
    } else if let Some(c) = r.replica_failure {
        want(
            DEGRADED,
            true,
            "ReplicaFailure",
            c.message.clone().unwrap_or_default(),
        )
    } else {
        want(DEGRADED, false, "AsExpected", "no problem found")
    }
}

fn to_condition(w: Want, generation: Option<i64>, previous: &[Condition], now: &Time) -> Condition {
    let status = if w.status { "True" } else { "False" };
    // Keep the previous transition time unless the status flipped.
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == w.type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Condition {
        type_: w.type_.to_string(),
        status: status.to_string(),
        reason: w.reason,
        message: w.message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Truncates to whole seconds: `metav1.Time` serialises seconds only, and a sub-second value
/// would make every computed status differ from the stored one.
pub fn whole_seconds(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// The status `mc` should have.
pub fn desired_status(
    mc: &Memcached,
    observed: &Observed<'_>,
    spec_problems: &[SpecProblem],
    apply_problem: Option<&ApplyProblem>,
    now: Timestamp,
) -> MemcachedStatus {
    let now = whole_seconds(now);
    let previous = mc
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let generation = mc.metadata.generation;
    let st = observed.deployment.and_then(|d| d.status.as_ref());
    MemcachedStatus {
        observed_generation: generation,
        replicas: Some(st.and_then(|s| s.replicas).unwrap_or(0)),
        ready_replicas: Some(st.and_then(|s| s.ready_replicas).unwrap_or(0)),
        nodes: node_names(&observed.pods),
        selector: Some(selector_string(
            mc.metadata.name.as_deref().unwrap_or_default(),
        )),
        conditions: wanted_conditions(mc, observed, spec_problems, apply_problem)
            .into_iter()
            .map(|w| to_condition(w, generation, previous, &now))
            .collect(),
    }
}

/// True when `observed` already shows `desired`: the status patch can be skipped.
///
/// Conditions are compared by type, and only the types the operator manages: another
/// controller may add its own condition types (server-side apply keeps them), and the API server
/// may return the list in another order.
pub fn is_current(observed: Option<&MemcachedStatus>, desired: &MemcachedStatus) -> bool {
    let Some(observed) = observed else {
        return false;
    };
    let same_scalars = observed.observed_generation == desired.observed_generation
        && observed.replicas == desired.replicas
        && observed.ready_replicas == desired.ready_replicas
        && observed.nodes == desired.nodes
        && observed.selector == desired.selector;
    same_scalars
        && desired.conditions.iter().all(|want| {
            observed
                .conditions
                .iter()
                .find(|c| c.type_ == want.type_)
                .is_some_and(|c| c == want)
        })
}

/// The condition of `type_` in `status`, if any.
pub fn find<'a>(status: Option<&'a MemcachedStatus>, type_: &str) -> Option<&'a Condition> {
    status?.conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testutil::{deployment_with_status, pod, sample};
    use memcached_api::v1::MemcachedSpec;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn cond<'a>(s: &'a MemcachedStatus, type_: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn no_deployment_yet() {
        let mc = sample("c", MemcachedSpec::default());
        let s = desired_status(&mc, &Observed::default(), &[], None, t(0));
        assert_eq!(s.observed_generation, Some(1));
        assert_eq!(s.replicas, Some(0));
        assert_eq!(
            s.selector.as_deref(),
            Some("app.kubernetes.io/instance=c,app.kubernetes.io/name=memcached")
        );
        assert_eq!(cond(&s, AVAILABLE).reason, "DeploymentNotFound");
        assert_eq!(cond(&s, PROGRESSING).status, "True");
        assert_eq!(cond(&s, DEGRADED).status, "False");
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(1))
        );
    }

    #[test]
    fn healthy_rollout_complete_snapshot() {
        let mc = sample(
            "c",
            MemcachedSpec {
                replicas: 2,
                ..Default::default()
            },
        );
        let d = deployment_with_status(1, 1, 2, 2, 2, 2);
        let p1 = pod("c-abc-1", None);
        let p0 = pod("c-abc-0", None);
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![&p1, &p0],
        };
        let s = desired_status(&mc, &obs, &[], None, t(0));
        insta::assert_yaml_snapshot!(s);
    }

    #[test]
    fn transition_time_changes_only_on_status_flip() {
        let mut mc = sample(
            "c",
            MemcachedSpec {
                replicas: 2,
                ..Default::default()
            },
        );
        let d = deployment_with_status(1, 1, 2, 2, 1, 1);
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![],
        };
        let s1 = desired_status(&mc, &obs, &[], None, t(0));
        assert_eq!(cond(&s1, AVAILABLE).reason, "PartiallyAvailable");
        mc.status = Some(s1.clone());

        // Same status, later: nothing changes, so the whole status is equal.
        let s2 = desired_status(&mc, &obs, &[], None, t(100));
        assert_eq!(s1, s2);

        // Both pods available: Available stays True (reason changes, time kept), Progressing flips.
        let d = deployment_with_status(1, 1, 2, 2, 2, 2);
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![],
        };
        let s3 = desired_status(&mc, &obs, &[], None, t(200));
        assert_eq!(cond(&s3, AVAILABLE).reason, "AllReplicasAvailable");
        assert_eq!(
            cond(&s3, AVAILABLE).last_transition_time,
            cond(&s1, AVAILABLE).last_transition_time
        );
        assert_eq!(cond(&s3, PROGRESSING).status, "False");
        assert_eq!(cond(&s3, PROGRESSING).last_transition_time, Time(t(200)));
    }

    #[test]
    fn spec_problems_degrade_with_first_reason_and_all_messages() {
        let mc = sample("c", MemcachedSpec::default());
        let problems = vec![
            SpecProblem {
                field: "spec.memcached.memoryLimitMiB".into(),
                reason: "MemoryTooSmall",
                message: "too small".into(),
            },
            SpecProblem {
                field: "spec.image".into(),
                reason: "InvalidImage",
                message: "bad".into(),
            },
        ];
        let s = desired_status(&mc, &Observed::default(), &problems, None, t(0));
        let d = cond(&s, DEGRADED);
        assert_eq!(d.status, "True");
        assert_eq!(d.reason, "MemoryTooSmall");
        assert_eq!(
            d.message,
            "spec.memcached.memoryLimitMiB: too small; spec.image: bad"
        );
        assert_eq!(cond(&s, PROGRESSING).reason, "InvalidSpec");
        assert_eq!(cond(&s, AVAILABLE).reason, "InvalidSpec");
    }

    #[test]
    fn apply_problems_name_their_reason() {
        let mc = sample("c", MemcachedSpec::default());
        let p = ApplyProblem {
            reason: "ResourceConflict",
            message: "Deployment c already exists and is not controlled by this Memcached".into(),
        };
        let s = desired_status(&mc, &Observed::default(), &[], Some(&p), t(0));
        for type_ in [AVAILABLE, PROGRESSING, DEGRADED] {
            assert_eq!(cond(&s, type_).reason, "ResourceConflict", "{type_}");
        }
        assert!(
            cond(&s, AVAILABLE)
                .message
                .contains("not controlled by this Memcached")
        );
    }

    #[test]
    fn failing_pods_degrade() {
        let mc = sample("c", MemcachedSpec::default());
        let d = deployment_with_status(1, 1, 1, 1, 0, 0);
        let bad = pod("c-x-0", Some(("CrashLoopBackOff", "back-off 10s")));
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![&bad],
        };
        let s = desired_status(&mc, &obs, &[], None, t(0));
        let c = cond(&s, DEGRADED);
        assert_eq!(c.reason, "PodsFailing");
        assert_eq!(
            c.message,
            "c-x-0: container memcached CrashLoopBackOff: back-off 10s"
        );
        assert_eq!(cond(&s, AVAILABLE).reason, "NoReplicasAvailable");
    }

    #[test]
    fn nodes_skip_terminating_and_finished_pods() {
        let a = pod("b", None);
        let mut gone = pod("a", None);
        gone.metadata.deletion_timestamp = Some(Time(t(0)));
        let mut done = pod("c", None);
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let z = pod("0", None);
        assert_eq!(node_names(&[&a, &gone, &done, &z]), ["0", "b"]);
    }

    #[test]
    fn scaled_to_zero_is_not_available_nor_degraded() {
        let mc = sample(
            "c",
            MemcachedSpec {
                replicas: 0,
                ..Default::default()
            },
        );
        let d = deployment_with_status(2, 2, 0, 0, 0, 0);
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![],
        };
        let s = desired_status(&mc, &obs, &[], None, t(0));
        assert_eq!(cond(&s, AVAILABLE).reason, "ScaledToZero");
        assert_eq!(cond(&s, PROGRESSING).reason, "RolloutComplete");
        assert_eq!(cond(&s, DEGRADED).status, "False");
    }

    #[test]
    fn current_status_ignores_foreign_conditions_and_order() {
        let mc = sample("c", MemcachedSpec::default());
        let d = deployment_with_status(1, 1, 1, 1, 1, 1);
        let obs = Observed {
            deployment: Some(&d),
            pods: vec![],
        };
        let want = desired_status(&mc, &obs, &[], None, t(0));
        assert!(!is_current(None, &want));
        let mut seen = want.clone();
        seen.conditions.reverse();
        seen.conditions.push(Condition {
            type_: "Backup".into(),
            ..want.conditions[0].clone()
        });
        assert!(is_current(Some(&seen), &want));
        seen.ready_replicas = Some(0);
        assert!(!is_current(Some(&seen), &want));
    }

    #[test]
    fn sub_second_time_is_truncated() {
        let ts = Timestamp::from_millisecond(1_700_000_000_999).unwrap();
        assert_eq!(
            whole_seconds(ts),
            Time(Timestamp::from_second(1_700_000_000).unwrap())
        );
    }
}
