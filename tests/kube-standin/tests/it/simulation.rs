//! Workload simulation: Deployments get Running, Ready pods and an up-to-date status; scaling
//! and template changes replace pods; failing pods make the Deployment unavailable; deleting
//! the Deployment collects its pods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_standin::StandInOptions;
use serde_json::json;

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": name, "generation": 5},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}}}}))
    .expect("deployment")
}

fn condition(d: &Deployment, ty: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(ty))
        .map(|c| {
            (
                c.status.clone().unwrap_or_default(),
                c.reason.clone().unwrap_or_default(),
            )
        })
}

async fn pods_of(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("pods")
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_get_pods_and_status() {
    let (standin, client) = start(StandInOptions {
        simulate_workloads: true,
        namespaces: vec!["test".into()],
        ..Default::default()
    })
    .await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "test");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "test");
    deploys
        .create(&PostParams::default(), &deployment("web", 3, "nginx:1.25"))
        .await
        .expect("create");

    let d = eventually(10, || {
        let deploys = deploys.clone();
        async move {
            let d = deploys.get("web").await.ok()?;
            let s = d.status.clone()?;
            (s.ready_replicas == Some(3)
                && s.available_replicas == Some(3)
                && s.updated_replicas == Some(3))
            .then_some(d)
        }
    })
    .await;
    assert_eq!(
        d.status.as_ref().and_then(|s| s.observed_generation),
        d.metadata.generation
    );
    assert_eq!(
        condition(&d, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    assert_eq!(
        condition(&d, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    let list = pods_of(&pods, "web").await;
    assert_eq!(list.len(), 3);
    let hash = list[0]
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .cloned()
        .expect("hash");
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(
        names,
        (0..3)
            .map(|i| format!("web-{hash}-{i}"))
            .collect::<Vec<_>>()
    );
    for p in &list {
        let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Deployment", "web", Some(true))
        );
        let st = p.status.as_ref().expect("status");
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert!(
            st.conditions
                .as_ref()
                .expect("conds")
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        );
    }

    // A deleted pod comes back; scaling down removes pods.
    pods.delete(&names[1], &DeleteParams::default())
        .await
        .expect("delete pod");
    eventually(10, || {
        let pods = pods.clone();
        let n = names[1].clone();
        async move { pods.get_opt(&n).await.ok()?.map(|_| ()) }
    })
    .await;
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale");
    eventually(10, || {
        let pods = pods.clone();
        async move { (pods_of(&pods, "web").await.len() == 1).then_some(()) }
    })
    .await;

    // A template change rolls the pods to a new hash.
    deploys
        .patch("web", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.26"}]}}}})))
        .await
        .expect("new image");
    eventually(10, || {
        let pods = pods.clone();
        let old = hash.clone();
        async move {
            let l = pods_of(&pods, "web").await;
            (l.len() == 1 && l[0].metadata.labels.as_ref()?.get("pod-template-hash")? != &old)
                .then_some(())
        }
    })
    .await;

    // Failing pods: CrashLoopBackOff and Available=False.
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"standin.test/fail-pods": "true"}}})),
        )
        .await
        .expect("fail");
    let d = eventually(10, || {
        let deploys = deploys.clone();
        async move {
            let d = deploys.get("web").await.ok()?;
            (condition(&d, "Available")?
                == (
                    "False".to_string(),
                    "MinimumReplicasUnavailable".to_string(),
                ))
                .then_some(d)
        }
    })
    .await;
    assert_eq!(d.status.as_ref().and_then(|s| s.ready_replicas), None);
    assert_eq!(
        d.status.as_ref().and_then(|s| s.unavailable_replicas),
        Some(1)
    );
    let p = &pods_of(&pods, "web").await[0];
    let waiting = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c[0].state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.clone());
    assert_eq!(waiting.as_deref(), Some("CrashLoopBackOff"));
    // A failing image works too.
    deploys
        .create(
            &PostParams::default(),
            &deployment("broken", 2, "example.com/fail:1"),
        )
        .await
        .expect("create broken");
    eventually(10, || {
        let deploys = deploys.clone();
        async move {
            let d = deploys.get("broken").await.ok()?;
            (condition(&d, "Progressing")?.1 == "ProgressDeadlineExceeded").then_some(())
        }
    })
    .await;

    // Deleting the Deployment collects its pods.
    deploys
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(10, || {
        let pods = pods.clone();
        async move { pods_of(&pods, "web").await.is_empty().then_some(()) }
    })
    .await;
    // The simulation's own writes are not requests.
    assert!(
        standin
            .requests()
            .iter()
            .all(|r| r.user_agent.is_empty() || !r.user_agent.starts_with("kube-controller"))
    );
    standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulsets_get_ordinal_pods_and_status() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let (standin, client) = start(StandInOptions {
        simulate_workloads: true,
        namespaces: vec!["test".into()],
        ..Default::default()
    })
    .await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "test");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "test");
    let set: StatefulSet = serde_json::from_value(json!({"metadata": {"name": "redis"},
        "spec": {"replicas": 3, "serviceName": "redis", "selector": {"matchLabels": {"app": "redis"}},
            "template": {"metadata": {"labels": {"app": "redis"}},
                "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}}}))
    .expect("statefulset");
    let created = sets
        .create(&PostParams::default(), &set)
        .await
        .expect("create");
    // The API server's defaults and a generation.
    let spec = created.spec.clone();
    assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
    assert_eq!(created.metadata.generation, Some(1));

    let s = eventually(10, || {
        let sets = sets.clone();
        async move {
            let s = sets.get("redis").await.ok()?;
            let st = s.status.clone()?;
            (st.ready_replicas == Some(3) && st.available_replicas == Some(3)).then_some(s)
        }
    })
    .await;
    let status = s.status.clone().expect("status");
    assert_eq!(status.observed_generation, s.metadata.generation);
    assert_eq!(status.current_revision, status.update_revision);
    let mut names: Vec<String> = pods_of(&pods, "redis")
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["redis-0", "redis-1", "redis-2"]);
    let p = pods.get("redis-1").await.expect("pod");
    let labels = p.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels
            .get("statefulset.kubernetes.io/pod-name")
            .map(String::as_str),
        Some("redis-1")
    );
    assert_eq!(
        labels
            .get("apps.kubernetes.io/pod-index")
            .map(String::as_str),
        Some("1")
    );
    let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("StatefulSet", "redis")
    );

    // Scaling through the scale subresource keeps the lowest ordinals.
    sets.patch_scale(
        "redis",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale");
    eventually(10, || {
        let pods = pods.clone();
        async move {
            let l = pods_of(&pods, "redis").await;
            (l.len() == 1 && l[0].metadata.name.as_deref() == Some("redis-0")).then_some(())
        }
    })
    .await;

    // A template change replaces the pod under the same name, with the new revision.
    let old = status.update_revision.clone().expect("revision");
    sets.patch("redis", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "redis", "image": "redis:7.2"}]}}}})))
        .await
        .expect("new image");
    eventually(10, || {
        let pods = pods.clone();
        let old = old.clone();
        async move {
            let p = pods.get_opt("redis-0").await.ok()??;
            let rev = p
                .metadata
                .labels
                .as_ref()?
                .get("controller-revision-hash")?
                .clone();
            let image = p.spec.as_ref()?.containers[0].image.clone()?;
            (rev != old && image == "redis:7.2").then_some(())
        }
    })
    .await;

    // Deleting the StatefulSet collects its pods.
    sets.delete("redis", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(10, || {
        let pods = pods.clone();
        async move { pods_of(&pods, "redis").await.is_empty().then_some(()) }
    })
    .await;
    standin.shutdown().await;
}
