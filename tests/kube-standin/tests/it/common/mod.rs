//! Shared helpers of the stand-in's integration tests: a test CRD, starting a stand-in and
//! building a kube client for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube_standin::{StandIn, StandInOptions};
use serde_json::{Value, json};

pub const GROUP: &str = "test.example.com";

/// `widgets.test.example.com`: v1 (storage; status and scale subresources, printer columns,
/// defaults, validation) and v1beta1 (served, deprecated, `size` instead of `replicas`).
pub fn widget_crd(conversion: Option<Value>) -> Value {
    let v1_schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "required": ["replicas"], "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "image": {"type": "string", "default": "busybox:1.36"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "selector": {"type": "string"},
                "phase": {"type": "string"},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"}}},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
            }}
        }
    });
    let beta_schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 0},
                "image": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    });
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                "shortNames": ["wd"], "categories": ["all"]},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": v1_schema},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                 "additionalPrinterColumns": [
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}
                 ]},
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                 "deprecationWarning": "test.example.com/v1beta1 Widget is deprecated; use v1",
                 "schema": {"openAPIV3Schema": beta_schema},
                 "subresources": {"status": {}}}
            ]
        }
    });
    if let Some(c) = conversion {
        crd["spec"]["conversion"] = c;
    }
    crd
}

pub fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, "Widget"), "widgets")
}

pub fn widgets(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &widget_resource("v1"))
}

pub fn widget(name: &str, replicas: i64) -> DynamicObject {
    let mut o = DynamicObject::new(name, &widget_resource("v1"));
    o.data = json!({"spec": {"replicas": replicas}});
    o
}

pub async fn start(opts: StandInOptions) -> (StandIn, Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let standin = StandIn::start(opts).await.expect("stand-in starts");
    let client = client_for(&standin, "default");
    (standin, client)
}

pub fn client_for(standin: &StandIn, ns: &str) -> Client {
    let mut config = kube::Config::new(standin.url().parse().expect("url"));
    config.default_namespace = ns.to_string();
    Client::try_from(config).expect("client")
}

/// A stand-in with the widget CRD and namespace `test`.
pub async fn start_with_widgets() -> (StandIn, Client) {
    start(StandInOptions {
        crds: vec![widget_crd(None)],
        namespaces: vec!["test".into()],
        ..Default::default()
    })
    .await
}

pub fn rv(o: &impl kube::Resource) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("resourceVersion")
}

/// Polls `f` until it returns Some, for up to `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if std::time::Instant::now() >= deadline {
            return f().await.expect("condition not reached");
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
