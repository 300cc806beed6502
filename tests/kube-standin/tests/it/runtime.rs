//! kube-runtime against the stand-in: watcher + reflector stay in sync across many writes,
//! resume after a disconnect, recover from 410 Gone; Controller reconciles; the finalizer helper
//! adds, cleans up and removes its finalizer; kube-lease-manager elects one leader.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube_standin::StandInOptions;
use serde_json::json;

fn names_and_rvs(objs: Vec<Arc<DynamicObject>>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = objs
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

async fn server_state(api: &Api<DynamicObject>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_stays_in_sync_resumes_and_recovers_from_gone() {
    let (standin, client) = start(StandInOptions {
        crds: vec![widget_crd(None)],
        namespaces: vec!["test".into()],
        watch_history: 20,
        bookmark_interval: Some(Duration::from_secs(3600)),
        ..Default::default()
    })
    .await;
    let api = widgets(&client, "test");
    let writer = reflector::store::Writer::<DynamicObject>::new(widget_resource("v1"));
    let reader = writer.as_reader();
    let cfg = watcher::Config::default().labels("watched=yes");
    let stream = watcher(api.clone(), cfg)
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("ready");

    // Many concurrent writes: creates, patches and deletes.
    let mut handles = Vec::new();
    for i in 0..40 {
        let api = api.clone();
        handles.push(tokio::spawn(async move {
            let name = format!("w{i}");
            let mut w = widget(&name, i);
            w.metadata.labels = Some([("watched".to_string(), "yes".to_string())].into());
            api.create(&PostParams::default(), &w)
                .await
                .expect("create");
            for r in 0..3 {
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": r}})),
                )
                .await
                .expect("patch");
            }
            if i % 4 == 0 {
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete");
            }
        }));
    }
    for h in handles {
        h.await.expect("writer");
    }
    let want = server_state(&api).await;
    assert_eq!(want.len(), 30);
    eventually(10, || {
        let reader = reader.clone();
        let want = want.clone();
        async move { (names_and_rvs(reader.state()) == want).then_some(()) }
    })
    .await;

    // Disconnect: the watcher resumes from its resourceVersion without a new list.
    let lists_before = standin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "widgets")
        .count();
    standin.disconnect_watches();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 99}})),
    )
    .await
    .expect("patch");
    eventually(10, || {
        let reader = reader.clone();
        async move {
            reader
                .state()
                .iter()
                .any(|o| {
                    o.metadata.name.as_deref() == Some("w1")
                        && o.data["spec"]["replicas"] == json!(99)
                })
                .then_some(())
        }
    })
    .await;
    let lists_after = standin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "widgets")
        .count();
    assert_eq!(lists_before, lists_after, "resumed without re-listing");
    assert!(
        standin
            .requests()
            .iter()
            .filter(|r| r.verb == "watch" && r.resource == "widgets")
            .count()
            >= 2
    );

    // Gone: writes the watcher does not see push its resourceVersion out of the bounded history;
    // after a disconnect it gets 410, re-lists and is in sync again.
    for i in 0..30 {
        api.create(&PostParams::default(), &widget(&format!("unwatched{i}"), 1))
            .await
            .expect("unwatched");
    }
    let lists_before = standin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "widgets")
        .count();
    standin.disconnect_watches();
    let mut w = widget("late", 1);
    w.metadata.labels = Some([("watched".to_string(), "yes".to_string())].into());
    api.create(&PostParams::default(), &w).await.expect("late");
    eventually(15, || {
        let reader = reader.clone();
        async move {
            reader
                .state()
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some("late"))
                .then_some(())
        }
    })
    .await;
    let lists_after = standin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "widgets")
        .count();
    assert!(
        lists_after > lists_before,
        "a 410 makes the watcher re-list"
    );
    let watched: Vec<(String, String)> = server_state(&api)
        .await
        .into_iter()
        .filter(|(n, _)| !n.starts_with("unwatched"))
        .collect();
    assert_eq!(names_and_rvs(reader.state()), watched);
    task.abort();
    standin.shutdown().await;
}

#[derive(Clone)]
struct Ctx {
    api: Api<DynamicObject>,
    cleanups: Arc<AtomicUsize>,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api = ctx.api.clone();
    let c = ctx.clone();
    finalizer(&api, "test.example.com/cleanup", obj, |event| async move {
        match event {
            FinalizerEvent::Apply(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let want = json!({"status": {"phase": "Reconciled", "replicas": o.data["spec"]["replicas"]}});
                if o.data.get("status") != want.get("status") {
                    c.api.patch_status(&name, &PatchParams::apply("test-controller"), &Patch::Merge(&want)).await?;
                }
                Ok(Action::await_change())
            }
            FinalizerEvent::Cleanup(_) => {
                c.cleanups.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

fn error_policy(_: Arc<DynamicObject>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_and_finalizer_helper() {
    let (standin, client) = start_with_widgets().await;
    let api = widgets(&client, "test");
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        cleanups: Arc::new(AtomicUsize::new(0)),
    });
    let controller = Controller::new_with(
        api.clone(),
        watcher::Config::default(),
        widget_resource("v1"),
    )
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|_| async {});
    let task = tokio::spawn(controller);
    for i in 0..5 {
        api.create(&PostParams::default(), &widget(&format!("c{i}"), i))
            .await
            .expect("create");
    }
    eventually(15, || {
        let api = api.clone();
        async move {
            let l = api.list(&Default::default()).await.ok()?;
            l.items
                .iter()
                .all(|o| {
                    o.data["status"]["phase"] == json!("Reconciled")
                        && o.metadata.finalizers.clone().unwrap_or_default()
                            == vec!["test.example.com/cleanup".to_string()]
                })
                .then_some(())
        }
    })
    .await;
    // A spec change is reconciled again.
    api.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 42}})),
    )
    .await
    .expect("patch");
    eventually(10, || {
        let api = api.clone();
        async move { (api.get("c1").await.ok()?.data["status"]["replicas"] == json!(42)).then_some(()) }
    })
    .await;
    // Deletion: cleanup runs, the finalizer is removed, the object disappears.
    api.delete("c2", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(10, || {
        let api = api.clone();
        async move { api.get_opt("c2").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert_eq!(ctx.cleanups.load(Ordering::SeqCst), 1);
    task.abort();
    standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_manager_elects_one_leader() {
    let (standin, client) = start_with_widgets().await;
    let build = |id: &str| {
        kube_lease_manager::LeaseManagerBuilder::new(client.clone(), "leader")
            .with_namespace("test")
            .with_identity(id)
            .with_duration(3)
            .with_grace(1)
            .build()
    };
    let a = build("a").await.expect("manager a");
    let b = build("b").await.expect("manager b");
    let (mut rx_a, task_a) = a.watch().await;
    eventually(10, || {
        let v = *rx_a.borrow_and_update();
        async move { v.then_some(()) }
    })
    .await;
    let (rx_b, task_b) = b.watch().await;
    // While "a" renews, "b" never gets the lease.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(*rx_a.borrow() && !*rx_b.borrow(), "exactly one leader");
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), "test");
    let holder = |l: Lease| l.spec.and_then(|s| s.holder_identity);
    assert_eq!(
        holder(leases.get("leader").await.expect("lease")),
        Some("a".into())
    );
    // "a" steps down and releases; "b" takes over.
    drop(rx_a);
    let a = task_a.await.expect("join").expect("manager a");
    a.release().await.expect("release");
    eventually(15, || {
        let v = *rx_b.borrow();
        async move { v.then_some(()) }
    })
    .await;
    assert_eq!(
        holder(leases.get("leader").await.expect("lease")),
        Some("b".into())
    );
    // "b" dies without releasing; "c" takes over once the lease expires.
    task_b.abort();
    drop(rx_b);
    let c = build("c").await.expect("manager c");
    let (rx_c, task_c) = c.watch().await;
    eventually(20, || {
        let v = *rx_c.borrow();
        async move { v.then_some(()) }
    })
    .await;
    assert_eq!(
        holder(leases.get("leader").await.expect("lease")),
        Some("c".into())
    );
    task_c.abort();
    standin.shutdown().await;
}

#[tokio::test]
async fn recorder_events_and_metadata_lists() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder};
    let (standin, client) = start_with_widgets().await;
    let api = widgets(&client, "test");
    let w = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let recorder = Recorder::new(client.clone(), "test-controller".into());
    let reference = w.object_ref(&widget_resource("v1"));
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.expect("publish");
    recorder
        .publish(&event, &reference)
        .await
        .expect("publish again");
    let events: Api<K8sEvent> = Api::namespaced(client.clone(), "test");
    let list = events.list(&Default::default()).await.expect("events");
    assert_eq!(
        list.items.len(),
        1,
        "the repeat is recorded as a series of the same event"
    );
    let e = &list.items[0];
    assert_eq!(e.reason.as_deref(), Some("Reconciled"));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("w")
    );
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));

    // Metadata-only lists (what metadata_watcher uses).
    let meta = api
        .list_metadata(&Default::default())
        .await
        .expect("metadata list");
    assert_eq!(meta.items.len(), 1);
    assert_eq!(meta.items[0].metadata.name.as_deref(), Some("w"));
    standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watch() {
    let (standin, client) = start_with_widgets().await;
    let api = widgets(&client, "test");
    for i in 0..5 {
        api.create(&PostParams::default(), &widget(&format!("s{i}"), i))
            .await
            .expect("create");
    }
    let writer = reflector::store::Writer::<DynamicObject>::new(widget_resource("v1"));
    let reader = writer.as_reader();
    let stream = watcher(api.clone(), watcher::Config::default().streaming_lists())
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("ready");
    assert_eq!(reader.state().len(), 5);
    api.create(&PostParams::default(), &widget("s5", 5))
        .await
        .expect("create");
    eventually(10, || {
        let reader = reader.clone();
        async move { (reader.state().len() == 6).then_some(()) }
    })
    .await;
    let reqs = standin.requests();
    assert!(
        reqs.iter()
            .all(|r| !(r.verb == "list" && r.resource == "widgets")),
        "no list, only a streaming watch"
    );
    assert!(
        reqs.iter()
            .any(|r| r.verb == "watch" && r.query.contains("sendInitialEvents=true"))
    );
    task.abort();
    standin.shutdown().await;
}
