//! Workload simulation (option `simulate_workloads`): the Deployment controller and kubelet in
//! one loop. Each Deployment gets `spec.replicas` Pods named `<deployment>-<template-hash>-<n>`,
//! owned directly by the Deployment (no ReplicaSet objects), Running and Ready at once; the
//! Deployment's status (observedGeneration, replicas, updated/ready/available counts, Available
//! and Progressing conditions) follows. A Deployment whose containers use an image containing
//! `fail`, or that carries the annotation `standin.test/fail-pods: "true"` (on itself or its pod
//! template), gets pods stuck in CrashLoopBackOff and `Available=False`,
//! `Progressing=False/ProgressDeadlineExceeded` (the deadline is considered passed at once).
//!
//! StatefulSets likewise (the StatefulSet controller): `spec.replicas` Pods named
//! `<statefulset>-<ordinal>` with the labels `statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index` and `controller-revision-hash`, owned by the StatefulSet; a
//! template change replaces them under the same names; the status (observedGeneration,
//! replicas, ready/current/updated/available counts, current and update revisions) follows.
//! Failing pods (same rule) are not ready.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::meta;
use crate::registry::GroupResource;
use crate::store::{DeleteOpts, State, Store, Sub, WriteCtx};

pub const FAIL_ANNOTATION: &str = "standin.test/fail-pods";

fn deployments() -> GroupResource {
    GroupResource::new("apps", "deployments")
}

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn statefulsets() -> GroupResource {
    GroupResource::new("apps", "statefulsets")
}

/// Starts the simulation loop.
pub fn spawn(store: Arc<Store>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let (deps, sets, pods_rx) = {
            let st = store.read();
            (
                st.subscribe(&deployments()),
                st.subscribe(&statefulsets()),
                st.subscribe(&pods()),
            )
        };
        let (Some(mut deps), Some(mut sets), Some(mut pods_rx)) = (deps, sets, pods_rx) else {
            return;
        };
        reconcile_all(&store);
        loop {
            tokio::select! {
                ev = deps.recv() => match ev {
                    Ok(ev) => reconcile(&mut store.write(), meta::namespace(&ev.object), meta::name(&ev.object)),
                    Err(RecvError::Lagged(_)) => reconcile_all(&store),
                    Err(RecvError::Closed) => return,
                },
                ev = sets.recv() => match ev {
                    Ok(ev) => reconcile_statefulset(&mut store.write(), meta::namespace(&ev.object), meta::name(&ev.object)),
                    Err(RecvError::Lagged(_)) => reconcile_all(&store),
                    Err(RecvError::Closed) => return,
                },
                ev = pods_rx.recv() => match ev {
                    Ok(ev) => {
                        let ns = meta::namespace(&ev.object);
                        if let Some(owner) = controller_owner(&ev.object, "Deployment") {
                            reconcile(&mut store.write(), ns, &owner);
                        } else if let Some(owner) = controller_owner(&ev.object, "StatefulSet") {
                            reconcile_statefulset(&mut store.write(), ns, &owner);
                        }
                    }
                    Err(RecvError::Lagged(_)) => reconcile_all(&store),
                    Err(RecvError::Closed) => return,
                },
            }
        }
    })
}

/// The name of the `kind` that controls `pod`, if one does.
fn controller_owner(pod: &Value, kind: &str) -> Option<String> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| {
            o.get("kind").and_then(Value::as_str) == Some(kind)
                && o.get("controller").and_then(Value::as_bool) == Some(true)
        })
        .and_then(|o| o.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn reconcile_all(store: &Store) {
    let mut st = store.write();
    let list = |st: &State, key: &GroupResource| {
        st.list(
            key,
            None,
            &Default::default(),
            &Default::default(),
            None,
            None,
        )
        .map(|p| p.items)
        .unwrap_or_default()
    };
    for d in list(&st, &deployments()) {
        reconcile(&mut st, meta::namespace(&d), meta::name(&d));
    }
    for s in list(&st, &statefulsets()) {
        reconcile_statefulset(&mut st, meta::namespace(&s), meta::name(&s));
    }
}

fn is_failing(dep: &Value) -> bool {
    let ann = |p: &str| {
        dep.pointer(p)
            .and_then(|a| a.get(FAIL_ANNOTATION))
            .and_then(Value::as_str)
            == Some("true")
    };
    let bad_image = dep
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("image")
                    .and_then(Value::as_str)
                    .is_some_and(|i| i.contains("fail"))
            })
        });
    ann("/metadata/annotations") || ann("/spec/template/metadata/annotations") || bad_image
}

fn ctx(manager: &str, sub: Sub) -> WriteCtx {
    let mut c = WriteCtx::new(manager, "v1");
    c.sub = sub;
    c
}

/// Brings one Deployment's pods and status to what the controller and kubelet would make.
pub fn reconcile(st: &mut State, ns: &str, name: &str) {
    let Some(dep) = st.get_opt(&deployments(), ns, name) else {
        return;
    };
    if meta::is_terminating(&dep) {
        return;
    }
    let uid = meta::uid(&dep).to_string();
    let replicas = dep
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let template = dep.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = meta::safe_hash(template.to_string().as_bytes(), 10);
    let failing = is_failing(&dep);
    let wanted: Vec<String> = (0..replicas)
        .map(|i| format!("{name}-{hash}-{i}"))
        .collect();
    let owned: Vec<String> = st
        .dependents_of(&uid)
        .into_iter()
        .filter(|(r, _)| r.key == pods())
        .map(|(r, _)| r.name)
        .collect();
    for p in owned.iter().filter(|p| !wanted.contains(p)) {
        let _ = st.delete(&pods(), ns, p, &DeleteOpts::default());
    }
    let mut ready = 0i64;
    let containers = template
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let owner = Owner {
        kind: "Deployment",
        name,
        uid: &uid,
    };
    for (i, pod_name) in wanted.iter().enumerate() {
        let labels = [("pod-template-hash", hash.as_str())];
        ensure_pod(
            st,
            ns,
            pod_name,
            i,
            &template,
            &containers,
            &owner,
            &labels,
            failing,
        );
        if !failing {
            ready += 1;
        }
    }
    let status = deployment_status(&dep, replicas, ready, failing, &format!("{name}-{hash}"));
    if dep.get("status") != Some(&status) {
        let mut n = (*dep).clone();
        n["status"] = status;
        let _ = st.update(
            &deployments(),
            ns,
            name,
            n,
            &ctx("kube-controller-manager", Sub::Status),
            None,
        );
    }
}

/// The controller of a simulated pod.
struct Owner<'a> {
    kind: &'static str,
    name: &'a str,
    uid: &'a str,
}

/// Creates the pod `pod_name` from `template` (plus `extra_labels`), owned by `owner`, or brings
/// an existing one's status up to date, as the workload controller and the kubelet would.
#[allow(clippy::too_many_arguments)]
fn ensure_pod(
    st: &mut State,
    ns: &str,
    pod_name: &str,
    index: usize,
    template: &Value,
    containers: &[Value],
    owner: &Owner<'_>,
    extra_labels: &[(&str, &str)],
    failing: bool,
) {
    let existing = st.get_opt(&pods(), ns, pod_name);
    let created_at = existing
        .as_ref()
        .map(|p| meta::meta_str(p, "creationTimestamp").to_string())
        .unwrap_or_else(meta::now);
    let status = pod_status(pod_name, containers, failing, &created_at, index);
    match existing {
        Some(p) => {
            if meta::is_terminating(&p) || p.get("status") == Some(&status) {
                return;
            }
            let mut n = (*p).clone();
            n["status"] = status;
            let _ = st.update(&pods(), ns, pod_name, n, &ctx("kubelet", Sub::Status), None);
        }
        None => {
            let mut labels = template
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (k, v) in extra_labels {
                labels.insert((*k).into(), json!(v));
            }
            let mut md = Map::new();
            md.insert("name".into(), json!(pod_name));
            md.insert("namespace".into(), json!(ns));
            md.insert("labels".into(), Value::Object(labels));
            if let Some(a) = template.pointer("/metadata/annotations") {
                md.insert("annotations".into(), a.clone());
            }
            md.insert(
                "ownerReferences".into(),
                json!([{"apiVersion": "apps/v1", "kind": owner.kind, "name": owner.name, "uid": owner.uid,
                    "controller": true, "blockOwnerDeletion": true}]),
            );
            let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
            spec["nodeName"] = json!("standin-node");
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status});
            let mut c = ctx("kube-controller-manager", Sub::Main);
            c.keep_status = true;
            if let Err(e) = st.create(&pods(), ns, pod, &c) {
                tracing::warn!(pod = %pod_name, error = %e, "simulation could not create a pod");
            }
        }
    }
}

/// Brings one StatefulSet's pods and status to what the StatefulSet controller and kubelet
/// would make: pods `<name>-0` .. `<name>-<replicas - 1>`, replaced under the same name when
/// the template changes.
pub fn reconcile_statefulset(st: &mut State, ns: &str, name: &str) {
    let Some(set) = st.get_opt(&statefulsets(), ns, name) else {
        return;
    };
    if meta::is_terminating(&set) {
        return;
    }
    let uid = meta::uid(&set).to_string();
    let replicas = set
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let template = set.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let revision = format!(
        "{name}-{}",
        meta::safe_hash(template.to_string().as_bytes(), 10)
    );
    let failing = is_failing(&set);
    let wanted: Vec<String> = (0..replicas).map(|i| format!("{name}-{i}")).collect();
    let owned: Vec<(String, Arc<Value>)> = st
        .dependents_of(&uid)
        .into_iter()
        .filter(|(r, _)| r.key == pods())
        .map(|(r, v)| (r.name, v))
        .collect();
    for (p, pod) in &owned {
        let outdated = pod
            .pointer("/metadata/labels/controller-revision-hash")
            .and_then(Value::as_str)
            != Some(revision.as_str());
        if !wanted.contains(p) || outdated {
            let _ = st.delete(&pods(), ns, p, &DeleteOpts::default());
        }
    }
    let containers = template
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let owner = Owner {
        kind: "StatefulSet",
        name,
        uid: &uid,
    };
    let mut ready = 0i64;
    for (i, pod_name) in wanted.iter().enumerate() {
        let index = i.to_string();
        let labels = [
            ("controller-revision-hash", revision.as_str()),
            ("statefulset.kubernetes.io/pod-name", pod_name.as_str()),
            ("apps.kubernetes.io/pod-index", index.as_str()),
        ];
        ensure_pod(
            st,
            ns,
            pod_name,
            i,
            &template,
            &containers,
            &owner,
            &labels,
            failing,
        );
        if !failing {
            ready += 1;
        }
    }
    let mut s = Map::new();
    s.insert("observedGeneration".into(), json!(meta::generation(&set)));
    s.insert("replicas".into(), json!(replicas));
    s.insert("readyReplicas".into(), json!(ready));
    s.insert("availableReplicas".into(), json!(ready));
    s.insert("currentReplicas".into(), json!(replicas));
    s.insert("updatedReplicas".into(), json!(replicas));
    s.insert("currentRevision".into(), json!(revision));
    s.insert("updateRevision".into(), json!(revision));
    s.insert("collisionCount".into(), json!(0));
    let status = Value::Object(s);
    if set.get("status") != Some(&status) {
        let mut n = (*set).clone();
        n["status"] = status;
        let _ = st.update(
            &statefulsets(),
            ns,
            name,
            n,
            &ctx("kube-controller-manager", Sub::Status),
            None,
        );
    }
}

fn pod_status(pod: &str, containers: &[Value], failing: bool, since: &str, index: usize) -> Value {
    let ip_seed = meta::safe_hash(pod.as_bytes(), 2)
        .bytes()
        .fold(0u32, |a, b| a * 31 + u32::from(b));
    let ip = format!("10.244.{}.{}", (ip_seed % 250) + 1, (index % 250) + 2);
    let t = |ty: &str, ok: bool| {
        let mut c = json!({"type": ty, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": since});
        if !ok {
            c["reason"] = json!("ContainersNotReady");
            let names: Vec<&str> = containers
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect();
            c["message"] = json!(format!(
                "containers with unready status: [{}]",
                names.join(" ")
            ));
        }
        c
    };
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let cname = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let digest = hex::encode(&meta::safe_hash(image.as_bytes(), 32).as_bytes()[..32]);
            let mut s = json!({
                "name": cname, "image": image, "imageID": format!("{image}@sha256:{digest}"),
                "containerID": format!("containerd://{}", hex::encode(meta::safe_hash(format!("{pod}/{cname}").as_bytes(), 32))),
                "ready": !failing, "started": !failing, "restartCount": if failing { 5 } else { 0 },
            });
            if failing {
                s["state"] = json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": format!("back-off 5m0s restarting failed container={cname} pod={pod}")}});
                s["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": since, "finishedAt": since}});
            } else {
                s["state"] = json!({"running": {"startedAt": since}});
            }
            s
        })
        .collect();
    json!({
        "phase": "Running",
        "conditions": [t("PodReadyToStartContainers", true), t("Initialized", true), t("Ready", !failing),
            t("ContainersReady", !failing), t("PodScheduled", true)],
        "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": since, "qosClass": "BestEffort",
        "containerStatuses": statuses,
    })
}

fn condition(old: &Value, ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = meta::now();
    let prev = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        });
    let same = prev.is_some_and(|p| {
        p.get("status").and_then(Value::as_str) == Some(status)
            && p.get("reason").and_then(Value::as_str) == Some(reason)
            && p.get("message").and_then(Value::as_str) == Some(message)
    });
    let keep = |k: &str| {
        prev.filter(|_| same)
            .and_then(|p| p.get(k).cloned())
            .unwrap_or_else(|| json!(now))
    };
    json!({"type": ty, "status": status, "lastUpdateTime": keep("lastUpdateTime"),
        "lastTransitionTime": keep("lastTransitionTime"), "reason": reason, "message": message})
}

fn deployment_status(
    dep: &Value,
    replicas: i64,
    ready: i64,
    failing: bool,
    rs_name: &str,
) -> Value {
    let mut s = Map::new();
    s.insert("observedGeneration".into(), json!(meta::generation(dep)));
    if replicas > 0 {
        s.insert("replicas".into(), json!(replicas));
        s.insert("updatedReplicas".into(), json!(replicas));
    }
    if ready > 0 {
        s.insert("readyReplicas".into(), json!(ready));
        s.insert("availableReplicas".into(), json!(ready));
    }
    if replicas - ready > 0 {
        s.insert("unavailableReplicas".into(), json!(replicas - ready));
    }
    let conditions = if failing && replicas > 0 {
        vec![
            condition(
                dep,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            ),
            condition(
                dep,
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                &format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
            ),
        ]
    } else {
        vec![
            condition(
                dep,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            ),
            condition(
                dep,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
            ),
        ]
    };
    s.insert("conditions".into(), Value::Array(conditions));
    Value::Object(s)
}
