//! API semantics through the real kube-rs client: CRUD, errors, generation, status isolation,
//! selectors, pagination, patches, server-side apply, deletion, garbage collection, namespaces,
//! scale, schema handling, tables, discovery and the request log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::core::Status;
use serde_json::{Value, json};

fn api_err(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .expect("cm")
}

#[tokio::test]
async fn crud_conflicts_and_errors() {
    let (standin, client) = start_with_widgets().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let created = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let e = api_err(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .expect_err("dup"),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"a\" already exists");
    assert!(cms.get_opt("missing").await.expect("get_opt").is_none());
    let e = api_err(cms.get("missing").await.expect_err("404"));
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));

    // Stale resourceVersion → 409 Conflict; no resourceVersion → unconditional (built-ins).
    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &fresh)
        .await
        .expect("replace");
    assert!(rv(&updated) > rv(&created));
    stale.data = Some([("k".to_string(), "v3".to_string())].into());
    let e = api_err(
        cms.replace("a", &PostParams::default(), &stale)
            .await
            .expect_err("stale"),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let mut unconditional = stale.clone();
    unconditional.metadata.resource_version = None;
    cms.replace("a", &PostParams::default(), &unconditional)
        .await
        .expect("unconditional");

    // Missing namespace → 404 on namespaces.
    let nowhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let e = api_err(
        nowhere
            .create(&PostParams::default(), &cm("x", json!({})))
            .await
            .expect_err("no ns"),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    // Invalid names → 422 naming the field.
    let e = api_err(
        cms.create(&PostParams::default(), &cm("Bad_Name", json!({})))
            .await
            .expect_err("name"),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.contains("metadata.name"), "{}", e.message);

    // generateName.
    let mut g = cm("", json!({}));
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let made = cms
        .create(&PostParams::default(), &g)
        .await
        .expect("generateName");
    assert!(
        made.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("gen-") && n.len() == 9)
    );

    // Custom resources: PUT needs a resourceVersion, as on a real server.
    let w = widgets(&client, "test");
    let mut obj = w
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("widget");
    obj.metadata.resource_version = None;
    let e = api_err(
        w.replace("w", &PostParams::default(), &obj)
            .await
            .expect_err("no rv"),
    );
    assert_eq!(e.code, 422);
    standin.shutdown().await;
}

#[tokio::test]
async fn generation_status_isolation_and_defaults() {
    let (standin, client) = start_with_widgets().await;
    let w = widgets(&client, "test");
    let mut obj = widget("w", 1);
    obj.data["status"] = json!({"phase": "Ignored"});
    let created = w
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.data["spec"]["image"],
        json!("busybox:1.36"),
        "schema default applied"
    );
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    // Status through /status changes only status and not generation.
    let st = w
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"replicas": 9}})),
        )
        .await
        .expect("status");
    assert_eq!(st.data["status"]["phase"], json!("Ready"));
    assert_eq!(st.data["spec"]["replicas"], json!(1));
    assert_eq!(st.metadata.generation, Some(1));

    // Main resource writes keep the stored status and bump generation on spec changes only.
    let m = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"phase": "Hacked"}})),
        )
        .await
        .expect("spec");
    assert_eq!(m.metadata.generation, Some(2));
    assert_eq!(m.data["status"]["phase"], json!("Ready"));
    let l = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("labels");
    assert_eq!(l.metadata.generation, Some(2));
    // A patch that changes nothing writes nothing.
    let same = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("no-op");
    assert_eq!(rv(&same), rv(&l));

    // Validation (422 with every problem) and pruning of unknown fields.
    let e = api_err(
        w.patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1, "image": 5}})),
        )
        .await
        .expect_err("invalid"),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("spec.replicas") && e.message.contains("spec.image"),
        "{}",
        e.message
    );
    let pruned = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bogus": 1, "extra": {"free": {"x": 1}}}})),
        )
        .await
        .expect("prune");
    assert!(pruned.data["spec"].get("bogus").is_none());
    assert_eq!(pruned.data["spec"]["extra"]["free"]["x"], json!(1));
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let e = api_err(
        w.patch("w", &strict, &Patch::Merge(json!({"spec": {"bogus": 1}})))
            .await
            .expect_err("strict"),
    );
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("unknown field \"spec.bogus\""),
        "{}",
        e.message
    );

    // Strategic merge patch is refused for custom resources, like a real server.
    let e = api_err(
        w.patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect_err("smp"),
    );
    assert_eq!(e.code, 415);
    standin.shutdown().await;
}

#[tokio::test]
async fn selectors_and_pagination() {
    let (standin, client) = start_with_widgets().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    for i in 0..12 {
        let tier = if i % 3 == 0 { "front" } else { "back" };
        cms.create(
            &PostParams::default(),
            &cm(
                &format!("c{i:02}"),
                json!({"tier": tier, "n": i.to_string()}),
            ),
        )
        .await
        .expect("create");
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let front = cms
        .list(&ListParams::default().labels("tier=front"))
        .await
        .expect("list");
    assert_eq!(names(front), vec!["c00", "c03", "c06", "c09"]);
    let l = cms
        .list(&ListParams::default().labels("tier!=front,n in (1,2,3,4)"))
        .await
        .expect("list");
    assert_eq!(names(l), vec!["c01", "c02", "c04"]);
    let l = cms
        .list(&ListParams::default().labels("!tier"))
        .await
        .expect("list");
    assert!(l.items.is_empty());
    let l = cms
        .list(&ListParams::default().fields("metadata.name=c05"))
        .await
        .expect("fields");
    assert_eq!(names(l), vec!["c05"]);
    let e = api_err(
        cms.list(&ListParams::default().fields("data.k=v"))
            .await
            .expect_err("field"),
    );
    assert_eq!(e.code, 400);
    let e = api_err(
        cms.list(&ListParams::default().labels("a in b"))
            .await
            .expect_err("bad selector"),
    );
    assert_eq!(e.code, 400);

    // Pagination: pages of 5 cover everything once, with a stable list resourceVersion.
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(5);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.expect("page");
        pages += 1;
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        all.extend(names(page));
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(all.len(), 12);
    // Cluster-wide list over namespaces.
    let everywhere: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        everywhere
            .list(&ListParams::default())
            .await
            .expect("all")
            .items
            .len(),
        12
    );
    standin.shutdown().await;
}

#[tokio::test]
async fn server_side_apply() {
    let (standin, client) = start_with_widgets().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "test");
    let manifest = |replicas: i64, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": image}]}}}})
    };
    let op = PatchParams::apply("operator");
    let created = deploys
        .patch("web", &op, &Patch::Apply(manifest(2, "nginx:1")))
        .await
        .expect("create by apply");
    let mf = created.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(mf.len(), 1);
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("operator"), Some("Apply"))
    );
    assert_eq!(
        created
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.restart_policy.as_deref()),
        Some("Always"),
        "built-in defaults applied"
    );

    // Re-applying the same configuration writes nothing.
    let again = deploys
        .patch("web", &op, &Patch::Apply(manifest(2, "nginx:1")))
        .await
        .expect("reapply");
    assert_eq!(rv(&again), rv(&created));

    // Another manager changing an owned field conflicts...
    let other = PatchParams::apply("someone-else");
    let e = api_err(
        deploys
            .patch("web", &other, &Patch::Apply(manifest(5, "nginx:1")))
            .await
            .expect_err("conflict"),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("conflict with \"operator\"") && e.message.contains(".spec.replicas"),
        "{}",
        e.message
    );
    // ...unless forced, which moves ownership.
    let forced = deploys
        .patch(
            "web",
            &other.clone().force(),
            &Patch::Apply(manifest(5, "nginx:1")),
        )
        .await
        .expect("force");
    assert_eq!(forced.spec.replicas, Some(5));
    let operator_fields = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("operator"))
        .and_then(|m| m.fields_v1)
        .map(|f| f.0)
        .unwrap_or_default();
    assert!(
        operator_fields["f:spec"].get("f:replicas").is_none(),
        "{operator_fields}"
    );

    // An Update (merge patch) by a third manager takes the field it changes.
    deploys
        .patch(
            "web",
            &PatchParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .expect("merge");
    let e = api_err(
        deploys
            .patch("web", &other, &Patch::Apply(manifest(5, "nginx:1")))
            .await
            .expect_err("conflict editor"),
    );
    assert!(e.message.contains("\"editor\""), "{}", e.message);

    // Dropping a field from the applied configuration removes it when nobody else owns it.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let cfg = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
    cms.patch("c", &op, &Patch::Apply(cfg(json!({"a": "1", "b": "2"}))))
        .await
        .expect("apply cm");
    let c = cms
        .patch("c", &op, &Patch::Apply(cfg(json!({"a": "1"}))))
        .await
        .expect("apply cm");
    assert_eq!(
        c.data
            .unwrap_or_default()
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        vec!["a"]
    );

    // Apply without fieldManager is rejected.
    let e = api_err(
        cms.patch("c", &PatchParams::default(), &Patch::Apply(cfg(json!({}))))
            .await
            .expect_err("no manager"),
    );
    assert_eq!(e.code, 422);
    standin.shutdown().await;
}

#[tokio::test]
async fn patch_flavours() {
    let (standin, client) = start_with_widgets().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "test");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "one", "image": "x:1", "env": [{"name": "A", "value": "1"}]}, {"name": "two", "image": "y:1"}]}}}}))
    .expect("deploy");
    deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    let p = deploys
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "one", "env": [{"name": "B", "value": "2"}]}]}}}})),
        )
        .await
        .expect("strategic");
    let cs = p
        .spec
        .template
        .spec
        .map(|s| s.containers)
        .unwrap_or_default();
    assert_eq!(cs.len(), 2, "containers merged by name");
    assert_eq!(cs[0].env.as_ref().map(Vec::len), Some(2));
    let p = deploys
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
            {"op": "replace", "path": "/spec/replicas", "value": 4}]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("json patch");
    assert_eq!(p.spec.replicas, Some(4));
    let e = api_err(
        deploys
            .patch(
                "d",
                &PatchParams::default(),
                &Patch::Json::<()>(
                    serde_json::from_value(json!([
                {"op": "test", "path": "/spec/replicas", "value": 1}]))
                    .expect("json patch"),
                ),
            )
            .await
            .expect_err("test op"),
    );
    assert_eq!(e.code, 422);
    // Scale subresource of a Deployment.
    let scale = deploys.get_scale("d").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(4));
    assert_eq!(
        scale.status.map(|s| s.selector.unwrap_or_default()),
        Some("a=b".to_string())
    );
    deploys
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("patch scale");
    assert_eq!(deploys.get("d").await.expect("get").spec.replicas, Some(1));
    // Scale subresource of a custom resource (paths from the CRD).
    let w = widgets(&client, "test");
    w.create(&PostParams::default(), &widget("w", 2))
        .await
        .expect("widget");
    w.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "selector": "app=w"}})),
    )
    .await
    .expect("status");
    let s = w.get_scale("w").await.expect("scale");
    assert_eq!(s.status.and_then(|s| s.selector), Some("app=w".into()));
    w.patch_scale(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 6}})),
    )
    .await
    .expect("scale");
    assert_eq!(
        w.get("w").await.expect("get").data["spec"]["replicas"],
        json!(6)
    );
    standin.shutdown().await;
}

fn owned_by(
    name: &str,
    owner: &kube::core::ObjectMeta,
    kind: &str,
    api_version: &str,
) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": api_version, "kind": kind, "name": owner.name, "uid": owner.uid,
        "blockOwnerDeletion": true, "controller": true}]}}))
    .expect("dependent")
}

#[tokio::test]
async fn finalizers_and_garbage_collection() {
    let (standin, client) = start_with_widgets().await;
    let w = widgets(&client, "test");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");

    // Finalizers hold a deleted object until the last one is removed.
    let mut held = widget("held", 1);
    held.metadata.finalizers = Some(vec!["test/one".into()]);
    w.create(&PostParams::default(), &held)
        .await
        .expect("create");
    let deleted = w
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = deleted.left().expect("object is kept");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let e = api_err(
        w.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test/one", "test/two"]}})),
        )
        .await
        .expect_err("no new finalizers"),
    );
    assert_eq!(e.code, 422);
    w.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    assert!(w.get_opt("held").await.expect("get").is_none());

    // Background: dependents whose owners are all gone are deleted, cascading.
    let owner = w
        .create(&PostParams::default(), &widget("owner", 1))
        .await
        .expect("owner");
    let child = cms
        .create(
            &PostParams::default(),
            &owned_by("child", &owner.metadata, "Widget", "test.example.com/v1"),
        )
        .await
        .expect("child");
    let grandchild = cms
        .create(
            &PostParams::default(),
            &owned_by("grandchild", &child.metadata, "ConfigMap", "v1"),
        )
        .await
        .expect("grandchild");
    let _ = grandchild;
    w.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    assert!(cms.get_opt("child").await.expect("get").is_none());
    assert!(cms.get_opt("grandchild").await.expect("get").is_none());

    // Orphan: dependents stay, without the owner reference.
    let owner = w
        .create(&PostParams::default(), &widget("owner2", 1))
        .await
        .expect("owner");
    cms.create(
        &PostParams::default(),
        &owned_by("orphan", &owner.metadata, "Widget", "test.example.com/v1"),
    )
    .await
    .expect("dep");
    w.delete("owner2", &DeleteParams::orphan())
        .await
        .expect("orphan delete");
    let orphan = cms.get("orphan").await.expect("orphan kept");
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    assert!(w.get_opt("owner2").await.expect("get").is_none());

    // Foreground: the owner waits (foregroundDeletion) for a dependent held by a finalizer.
    let owner = w
        .create(&PostParams::default(), &widget("owner3", 1))
        .await
        .expect("owner");
    let mut dep = owned_by("slow", &owner.metadata, "Widget", "test.example.com/v1");
    dep.metadata.finalizers = Some(vec!["test/slow".into()]);
    cms.create(&PostParams::default(), &dep).await.expect("dep");
    w.delete(
        "owner3",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..Default::default()
        },
    )
    .await
    .expect("fg delete");
    let waiting = w.get("owner3").await.expect("owner waits");
    assert!(
        waiting
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        cms.get("slow")
            .await
            .expect("dep terminating")
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cms.patch(
        "slow",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    assert!(w.get_opt("owner3").await.expect("get").is_none());

    // A dependent created for an owner that does not exist is collected.
    let ghost = kube::core::ObjectMeta {
        name: Some("ghost".into()),
        uid: Some("00000000-0000-4000-8000-000000000000".into()),
        ..Default::default()
    };
    cms.create(
        &PostParams::default(),
        &owned_by("dangling", &ghost, "Widget", "test.example.com/v1"),
    )
    .await
    .expect("create");
    assert!(cms.get_opt("dangling").await.expect("get").is_none());

    // Deleting a namespace deletes its contents; it lingers while a finalizer holds one.
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).expect("ns"),
    )
    .await
    .expect("ns");
    let doomed: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    doomed
        .create(&PostParams::default(), &cm("plain", json!({})))
        .await
        .expect("plain");
    let mut stuck = cm("stuck", json!({}));
    stuck.metadata.finalizers = Some(vec!["test/stuck".into()]);
    doomed
        .create(&PostParams::default(), &stuck)
        .await
        .expect("stuck");
    nss.delete("doomed", &DeleteParams::default())
        .await
        .expect("delete ns");
    let ns = nss.get("doomed").await.expect("terminating ns");
    assert_eq!(ns.status.and_then(|s| s.phase), Some("Terminating".into()));
    assert!(doomed.get_opt("plain").await.expect("get").is_none());
    let e = api_err(
        doomed
            .create(&PostParams::default(), &cm("late", json!({})))
            .await
            .expect_err("terminating"),
    );
    assert_eq!(e.code, 403);
    doomed
        .patch(
            "stuck",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release");
    assert!(nss.get_opt("doomed").await.expect("get").is_none());
    standin.shutdown().await;
}

#[tokio::test]
async fn crd_lifecycle_discovery_tables_and_request_log() {
    let (standin, client) = start(Default::default()).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(widget_crd(None)).expect("crd"),
    )
    .await
    .expect("crd");
    let crd = crds.get("widgets.test.example.com").await.expect("crd");
    let conds = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    // Discovery sees the new kind at once.
    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!((ar.version.as_str(), ar.plural.as_str()), ("v1", "widgets"));
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "scale"));

    let w = widgets(&client, "default");
    w.create(&PostParams::default(), &widget("w", 3))
        .await
        .expect("widget");
    w.patch_status("w", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})))
        .await
        .expect("status");

    // Table output with the printer columns.
    let http = reqwest_like_get(
        &standin.url(),
        "/apis/test.example.com/v1/namespaces/default/widgets",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    let names: Vec<&str> = http["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, vec!["Name", "Replicas", "Phase", "Ready"]);
    assert_eq!(http["rows"][0]["cells"], json!(["w", 3, "Running", "True"]));
    assert_eq!(
        http["rows"][0]["object"]["kind"],
        json!("PartialObjectMetadata")
    );

    // Deleting the CRD removes its objects and the kind.
    crds.delete("widgets.test.example.com", &DeleteParams::default())
        .await
        .expect("delete crd");
    assert!(
        crds.get_opt("widgets.test.example.com")
            .await
            .expect("get")
            .is_none()
    );
    let e = api_err(w.list(&ListParams::default()).await.expect_err("kind gone"));
    assert_eq!(e.code, 404);

    // The request log names verbs and resources.
    let reqs = standin.requests();
    assert!(
        reqs.iter()
            .any(|r| r.verb == "create" && r.resource == "widgets" && r.code == 201)
    );
    assert!(
        reqs.iter()
            .any(|r| r.verb == "patch" && r.subresource == "status" && r.namespace == "default")
    );
    assert!(
        reqs.iter()
            .any(|r| r.verb == "delete" && r.group == "apiextensions.k8s.io")
    );
    standin.clear_requests();
    assert!(standin.requests().is_empty());
    standin.shutdown().await;
}

/// A plain GET with an Accept header (what kubectl sends for tables).
async fn reqwest_like_get(base: &str, path: &str, accept: &str) -> Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).expect("json body")
}

#[tokio::test]
async fn bad_requests_get_status_errors() {
    let (standin, _client) = start_with_widgets().await;
    let base = standin.url();
    let http = reqwest::Client::new();
    let status = |v: &Value| (v["kind"].clone(), v["status"].clone(), v["code"].clone());
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (
            http.post(format!("{base}/api/v1/namespaces/test/configmaps"))
                .header("content-type", "application/json")
                .body("{not json"),
            400,
        ),
        (
            http.post(format!("{base}/api/v1/namespaces/test/configmaps"))
                .header("content-type", "application/json")
                .body("[1,2]"),
            400,
        ),
        (
            http.post(format!("{base}/api/v1/namespaces/test/configmaps"))
                .header("content-type", "application/vnd.kubernetes.protobuf")
                .body("k8s\0"),
            415,
        ),
        (
            http.patch(format!("{base}/api/v1/namespaces/test/configmaps/x"))
                .header("content-type", "text/plain")
                .body("{}"),
            415,
        ),
        (
            http.get(format!("{base}/apis/nope.example.com/v1/foos")),
            404,
        ),
        (
            http.get(format!("{base}/api/v1/namespaces/test/configmaps/x/log")),
            404,
        ),
        (
            http.get(format!(
                "{base}/api/v1/namespaces/test/configmaps?labelSelector=a%20in%20b"
            )),
            400,
        ),
        (
            http.get(format!("{base}/api/v1/namespaces/test/configmaps?limit=x")),
            400,
        ),
        (
            http.get(format!(
                "{base}/api/v1/namespaces/test/configmaps?continue=garbage"
            )),
            400,
        ),
        (
            http.get(format!(
                "{base}/api/v1/namespaces/test/configmaps?watch=true&resourceVersion=abc"
            )),
            400,
        ),
        (
            http.delete(format!("{base}/api/v1/namespaces/test/configmaps/x"))
                .body("{bad"),
            400,
        ),
        (
            http.put(format!("{base}/api/v1/namespaces/test/configmaps/x"))
                .header("content-type", "application/json")
                .body(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"}}"#),
            400,
        ),
        (
            http.post(format!("{base}/api/v1/namespaces/test/configmaps"))
                .header("content-type", "application/json")
                .body(r#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"y"}}"#),
            400,
        ),
        (http.post(format!("{base}/api")), 405),
    ];
    for (req, code) in cases {
        let resp = req
            .send()
            .await
            .expect("response, not a dropped connection");
        let got = resp.status().as_u16();
        let body: Value = resp.json().await.expect("Status body");
        assert_eq!(got, code, "{body}");
        assert_eq!(
            status(&body),
            (json!("Status"), json!("Failure"), json!(code)),
            "{body}"
        );
    }
    // A watch from a too-old resourceVersion: 200 with one ERROR event carrying 410 Expired.
    standin.compact_watch_history();
    let resp = http
        .get(format!(
            "{base}/api/v1/namespaces/test/configmaps?watch=true&resourceVersion=1"
        ))
        .send()
        .await
        .expect("watch");
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.text().await.expect("events");
    let ev: Value = serde_json::from_str(text.trim()).expect("one event");
    assert_eq!(ev["type"], json!("ERROR"));
    assert_eq!(
        (ev["object"]["code"].clone(), ev["object"]["reason"].clone()),
        (json!(410), json!("Expired"))
    );
    standin.shutdown().await;
}
