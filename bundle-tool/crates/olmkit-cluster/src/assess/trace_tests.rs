//! [`assess`](super::assess) against every state of the watch traces recorded from a real OLM v0
//! (`tests/fixtures/olm-traces/`): the objects are folded event by event into what a poll
//! would have read at that moment, and the verdict of each moment is checked against what OLM
//! really did next. The timing side (a success must hold, a block must persist) is the wait
//! loop's and is covered by the replay tests in `tests/e2e/cluster_olm_traces.rs`.

use super::*;
use crate::olm::{CatalogSource, Csv, InstallPlan, OperatorGroup, Subscription};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn trace(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures/olm-traces")
        .join(format!("{name}.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What a poll reads after each event: (time, event, snapshot).
fn states(name: &str) -> Vec<(f64, Value, Snapshot)> {
    let mut objects: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut out = Vec::new();
    for e in trace(name) {
        let kind = e["kind"].as_str().unwrap().to_string();
        let obj = e["object"].clone();
        let key = (kind, obj["metadata"]["name"].as_str().unwrap().to_string());
        if e["type"] == "DELETED" {
            objects.remove(&key);
        } else {
            objects.insert(key, obj);
        }
        out.push((e["t"].as_f64().unwrap(), e.clone(), fold(&objects)));
    }
    out
}

fn of_kind<T: serde::de::DeserializeOwned>(
    objects: &BTreeMap<(String, String), Value>,
    kind: &str,
) -> Vec<T> {
    objects
        .iter()
        .filter(|((k, _), _)| k == kind)
        .map(|(_, v)| serde_json::from_value(v.clone()).unwrap())
        .collect()
}

fn fold(objects: &BTreeMap<(String, String), Value>) -> Snapshot {
    let sub: Option<Subscription> = of_kind(objects, "Subscription").into_iter().next();
    let csvs: Vec<Csv> = of_kind(objects, "ClusterServiceVersion");
    let ips: Vec<InstallPlan> = of_kind(objects, "InstallPlan");
    let find = |name: &str| csvs.iter().find(|c| c.metadata.name == name).cloned();
    let (install_plan, csv, installed_csv) = match &sub {
        Some(s) => {
            let current = if s.status.current_csv.is_empty() {
                s.status.installed_csv.clone()
            } else {
                s.status.current_csv.clone()
            };
            (
                s.status
                    .install_plan_name()
                    .and_then(|n| ips.iter().find(|i| i.metadata.name == n).cloned()),
                find(&current),
                (s.status.installed_csv != current)
                    .then(|| find(&s.status.installed_csv))
                    .flatten(),
            )
        }
        None => (None, None, None),
    };
    Snapshot {
        subscription: sub,
        install_plan,
        csv,
        installed_csv,
        catalog_source: of_kind::<CatalogSource>(objects, "CatalogSource")
            .into_iter()
            .next(),
        csvs,
        operator_groups: Some(of_kind::<OperatorGroup>(objects, "OperatorGroup")),
    }
}

const V1: &str = "memcached-operator.v0.1.0";
const V2: &str = "memcached-operator.v0.2.0";
const V3: &str = "memcached-operator.v0.3.0";

fn verdicts(name: &str, goal: &Goal, stop_at_approval: bool, from_t: f64) -> Vec<(f64, Verdict)> {
    states(name)
        .into_iter()
        .filter(|(t, _, _)| *t >= from_t)
        .map(|(t, _, s)| (t, assess(goal, &Baseline::default(), &s, stop_at_approval)))
        .collect()
}

fn never_failed(v: &[(f64, Verdict)]) {
    for (t, v) in v {
        assert!(
            !matches!(v, Verdict::Failed(_) | Verdict::Blocked(_)),
            "t={t}: {v:?}"
        );
    }
}

/// A success verdict at time `t` must be the state OLM ended in, unless the CSV regressed
/// within `window` seconds (what the wait loop's settle period absorbs).
fn successes_are_final_or_regress_quickly(v: &[(f64, Verdict)], csv: &str, window: f64) {
    let ok = Verdict::Succeeded { csv: csv.into() };
    assert_eq!(v.last().unwrap().1, ok, "the trace ends installed at {csv}");
    for (i, (t, verdict)) in v.iter().enumerate() {
        if *verdict == ok
            && let Some((t2, _)) = v[i..].iter().find(|(_, w)| *w != ok)
        {
            assert!(t2 - t < window, "success at t={t} regressed only at t={t2}");
        }
    }
}

#[test]
fn install_automatic_ends_at_the_head_and_at_latest_known_is_not_done() {
    let states = states("install-automatic");
    let v = verdicts(
        "install-automatic",
        &Goal::Install { passes: vec![] },
        false,
        0.0,
    );
    never_failed(&v);
    successes_are_final_or_regress_quickly(&v, V3, 1.0);
    // AtLatestKnown (t=10.60) comes 3 s before the CSV succeeds (t=13.68).
    let at_latest = states
        .iter()
        .position(|(_, _, s)| {
            s.subscription
                .as_ref()
                .is_some_and(|s| s.status.state == "AtLatestKnown")
        })
        .unwrap();
    assert_eq!(v[at_latest].1, Verdict::Pending);
    let first_ok = v.iter().find(|(_, v)| *v != Verdict::Pending).unwrap();
    assert!(first_ok.0 > 13.6, "{first_ok:?}");
}

#[test]
fn automatic_upgrade_from_a_starting_csv_is_not_done_at_the_starting_csv() {
    let goal = Goal::Install {
        passes: vec![V1.into()],
    };
    let v = verdicts("automatic-upgrade-from-starting-csv", &goal, false, 0.0);
    never_failed(&v);
    assert!(
        !v.iter()
            .any(|(_, v)| *v == Verdict::Succeeded { csv: V1.into() }),
        "stopped at the starting CSV"
    );
    // The transient ResolutionFailed (t=21.22..25.40) and the regression after the old CSV
    // was deleted (NeedsReinstall at 24.26, 0.46 s after) are absorbed.
    successes_are_final_or_regress_quickly(&v, V3, 1.0);
    // Without the catalog's knowledge of the path, the old version looks done for a while.
    let naive = verdicts(
        "automatic-upgrade-from-starting-csv",
        &Goal::Install { passes: vec![] },
        false,
        0.0,
    );
    assert!(
        naive
            .iter()
            .any(|(_, v)| *v == Verdict::Succeeded { csv: V1.into() })
    );
}

#[test]
fn manual_install_stops_at_each_approval_and_the_lingering_condition_is_no_failure() {
    let all = states("install-manual-then-approve");
    // install --approval Manual: the first plan.
    let install = Goal::Install { passes: vec![] };
    let first = all
        .iter()
        .map(|(_, _, s)| assess(&install, &Baseline::default(), s, true))
        .find(|v| *v != Verdict::Pending)
        .unwrap();
    assert_eq!(
        first,
        Verdict::NeedsApproval {
            install_plan: "install-00001".into(),
            csvs: vec![V1.into()]
        }
    );
    // approve install-00001 (sent at t=12.86): v0.1.0, without waiting for the next hop.
    let hop1 = Goal::Reach {
        from: None,
        target: Some(V1.into()),
        settle: false,
    };
    let v = verdicts("install-manual-then-approve", &hop1, false, 12.86);
    never_failed(&v);
    assert!(
        v.iter()
            .any(|(t, v)| *t > 16.6 && *v == Verdict::Succeeded { csv: V1.into() })
    );
    assert!(!v.iter().any(|(t, v)| *t < 16.6 && *v != Verdict::Pending));
    // approve install-00002 (t=21.95): ResolutionFailed ConstraintsNotSatisfiable from 25.26
    // to the end is not a failure; v0.3.0 Succeeded at 28.15 while v0.1.0 is still being
    // replaced is not done; NeedsCertRotation at 28.71 follows the deletion by 0.11 s.
    let hop2 = Goal::Reach {
        from: Some(V1.into()),
        target: Some(V3.into()),
        settle: false,
    };
    let v = verdicts("install-manual-then-approve", &hop2, false, 21.95);
    never_failed(&v);
    successes_are_final_or_regress_quickly(&v, V3, 0.5);
    let at_28_15 = v.iter().find(|(t, _)| *t > 28.1).unwrap();
    assert_eq!(at_28_15.1, Verdict::Pending, "v0.1.0 is still Replacing");
    // The last Subscription still carries the condition, and describe says it is harmless.
    let (_, _, last) = all.last().unwrap();
    let sub = last.subscription.as_ref().unwrap();
    let c = condition(&sub.status.conditions, "ResolutionFailed").unwrap();
    assert_eq!(c.reason, "ConstraintsNotSatisfiable");
    assert_eq!(replacement_leftover(c, last).as_deref(), Some(V1));
    let lines: Vec<String> = describe(last).into_iter().map(|(_, l)| l).collect();
    assert!(
        lines.iter().any(|l| l.contains("not a failure")),
        "{lines:?}"
    );
}

#[test]
fn channel_switch_keeps_the_pending_plan_and_reaches_the_head() {
    let all = states("channel-switch");
    // upgrade --channel stable at t=24.83 on a Manual Subscription: install-00002 (created
    // from alpha at 18.81) is the plan that waits, OLM makes no new one.
    let switch = Goal::Reach {
        from: Some(V2.into()),
        target: Some(V3.into()),
        settle: true,
    };
    let (_, _, at_switch) = all.iter().find(|(t, _, _)| *t > 24.9).unwrap();
    assert_eq!(
        assess(&switch, &Baseline::default(), at_switch, true),
        Verdict::NeedsApproval {
            install_plan: "install-00002".into(),
            csvs: vec![V3.into()]
        }
    );
    // approve install-00002 (t=32.52).
    let approve = Goal::Reach {
        from: Some(V2.into()),
        target: Some(V3.into()),
        settle: false,
    };
    let v = verdicts("channel-switch", &approve, false, 32.52);
    never_failed(&v);
    successes_are_final_or_regress_quickly(&v, V3, 0.5);
}

#[test]
fn two_operator_groups_fail_with_the_fix_although_the_subscription_is_silent() {
    let (_, _, last) = states("two-operatorgroups").pop().unwrap();
    let sub = last.subscription.as_ref().unwrap();
    assert!(sub.status.state.is_empty());
    let Verdict::Failed(f) = assess(
        &Goal::Install { passes: vec![] },
        &Baseline::default(),
        &last,
        false,
    ) else {
        panic!("expected a failure")
    };
    assert!(f.summary.contains("more than one OperatorGroup"), "{f:?}");
    assert!(
        f.details
            .iter()
            .any(|d| d.contains("MultipleOperatorGroupsFound")),
        "{f:?}"
    );
    assert!(f.hints[0].contains("delete operatorgroup og-2"), "{f:?}");
}

#[test]
fn an_unreachable_catalog_blocks_with_what_was_seen() {
    let (_, _, last) = states("catalog-unreachable").pop().unwrap();
    let Verdict::Blocked(f) = assess(
        &Goal::Install { passes: vec![] },
        &Baseline::default(),
        &last,
        false,
    ) else {
        panic!("expected a block")
    };
    assert!(f.summary.contains("cannot reach the catalog"), "{f:?}");
    assert!(f.details[0].contains("connection refused"), "{f:?}");
    assert!(
        f.details.iter().any(|d| d.contains("TRANSIENT_FAILURE")),
        "{f:?}"
    );
    assert!(
        f.details
            .iter()
            .any(|d| d.contains("catalogHealth says healthy"))
    );
    assert!(f.hints[0].contains("127.0.0.1:50599"), "{f:?}");
}

#[test]
fn unreferenced_csvs_are_read_from_olms_message() {
    let msg = "constraints not satisfiable: @existing/ns//memcached-operator.v0.1.0 and @existing/ns//memcached-operator.v0.3.0 provide Memcached (cache.example.com/v1), clusterserviceversion memcached-operator.v0.1.0 exists and is not referenced by a subscription, subscription memcached-operator exists";
    assert_eq!(unreferenced_csvs(msg), vec![V1.to_string()]);
    assert!(unreferenced_csvs("no operators found in channel beta").is_empty());
}
