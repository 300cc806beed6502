//! Multi-version CRDs with a conversion webhook: an HTTPS webhook (axum-server + rcgen
//! certificates) converts widgets between v1 (`spec.replicas`, storage) and v1beta1
//! (`spec.size`); reads, writes, lists and watches work in both versions; a failing webhook
//! gives the real server's 500; deprecated versions carry a `Warning` header.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use common::*;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube_standin::StandInOptions;
use serde_json::{Value, json};

#[derive(Default)]
struct Hook {
    fail: AtomicBool,
    calls: AtomicUsize,
}

fn convert_one(mut o: Value, desired: &str) -> Value {
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        if desired.ends_with("/v1beta1") {
            if let Some(r) = spec.shift_remove("replicas") {
                spec.insert("size".into(), r);
            }
        } else if let Some(s) = spec.shift_remove("size") {
            spec.insert("replicas".into(), s);
        }
    }
    o["apiVersion"] = json!(desired);
    o
}

async fn convert(State(hook): State<Arc<Hook>>, Json(review): Json<Value>) -> Json<Value> {
    hook.calls.fetch_add(1, Ordering::SeqCst);
    let req = &review["request"];
    let desired = req["desiredAPIVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let response = if hook.fail.load(Ordering::SeqCst) {
        json!({"uid": req["uid"], "result": {"status": "Failure", "message": "the webhook refuses today"}})
    } else {
        let converted: Vec<Value> = req["objects"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|o| convert_one(o, &desired))
            .collect();
        json!({"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": converted})
    };
    Json(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}),
    )
}

/// Starts the webhook; returns its port and the CA bundle (PEM).
async fn start_webhook(hook: Arc<Hook>) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test-ca");
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["conv.test.svc".to_string(), "localhost".to_string()])
            .expect("params");
    let cert = params.signed_by(&key, &issuer).expect("cert");
    let config = axum_server::tls_rustls::RustlsConfig::from_pem(
        cert.pem().into_bytes(),
        key.serialize_pem().into_bytes(),
    )
    .await
    .expect("tls config");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let app = axum::Router::new()
        .route("/convert", post(convert))
        .with_state(hook);
    let server = axum_server::from_tcp_rustls(listener, config).expect("server");
    tokio::spawn(async move {
        let _ = server.serve(app.into_make_service()).await;
    });
    (port, ca_cert.pem())
}

fn webhook_conversion(client_config: Value) -> Value {
    json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config}})
}

fn versioned(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "test", &widget_resource(version))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_conversion_in_both_versions() {
    let hook = Arc::new(Hook::default());
    let (port, ca) = start_webhook(hook.clone()).await;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca);
    let crd = widget_crd(Some(webhook_conversion(json!({
        "service": {"namespace": "test", "name": "conv", "path": "/convert", "port": 443},
        "caBundle": ca_b64,
    }))));
    let (standin, client) = start(StandInOptions {
        crds: vec![crd],
        namespaces: vec!["test".into()],
        service_endpoints: [("test/conv".to_string(), format!("https://127.0.0.1:{port}"))].into(),
        ..Default::default()
    })
    .await;
    let v1 = versioned(&client, "v1");
    let beta = versioned(&client, "v1beta1");

    // Write in v1beta1, read in both.
    let mut obj = DynamicObject::new("w", &widget_resource("v1beta1"));
    obj.data = json!({"spec": {"size": 3}});
    let created = beta
        .create(&PostParams::default(), &obj)
        .await
        .expect("create v1beta1");
    assert_eq!(created.data["spec"]["size"], json!(3));
    assert_eq!(
        created.types.as_ref().map(|t| t.api_version.as_str()),
        Some("test.example.com/v1beta1")
    );
    let stored = standin
        .object(GROUP, "widgets", "test", "w")
        .expect("stored");
    assert_eq!(
        stored["apiVersion"],
        json!("test.example.com/v1"),
        "stored in the storage version"
    );
    assert_eq!(stored["spec"]["replicas"], json!(3));
    assert_eq!(
        v1.get("w").await.expect("get v1").data["spec"]["replicas"],
        json!(3)
    );
    assert!(hook.calls.load(Ordering::SeqCst) >= 2);

    // Watch in v1beta1 while writing in v1.
    let mut events = watcher(beta.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = events.next().await.expect("event").expect("ok");
    assert_eq!(first.data["spec"]["size"], json!(3));
    v1.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("patch v1");
    let next = events.next().await.expect("event").expect("ok");
    assert_eq!(next.data["spec"]["size"], json!(4));

    // Patch in v1beta1; list in v1beta1.
    beta.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 5}})),
    )
    .await
    .expect("patch beta");
    assert_eq!(
        v1.get("w").await.expect("get").data["spec"]["replicas"],
        json!(5)
    );
    let mut second = DynamicObject::new("x", &widget_resource("v1"));
    second.data = json!({"spec": {"replicas": 1}});
    v1.create(&PostParams::default(), &second)
        .await
        .expect("create v1");
    let listed = beta.list(&Default::default()).await.expect("list beta");
    let sizes: Vec<Value> = listed
        .items
        .iter()
        .map(|o| o.data["spec"]["size"].clone())
        .collect();
    assert_eq!(sizes, vec![json!(5), json!(1)]);

    // Server-side apply in v1beta1.
    let applied = beta
        .patch("w", &PatchParams::apply("tester").force(), &Patch::Apply(json!({
            "apiVersion": "test.example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 6}})))
        .await
        .expect("apply beta");
    assert_eq!(applied.data["spec"]["size"], json!(6));
    assert_eq!(
        v1.get("w").await.expect("get").data["spec"]["replicas"],
        json!(6)
    );

    // The deprecated version carries a Warning header.
    let resp = reqwest::get(format!(
        "{}/apis/{GROUP}/v1beta1/namespaces/test/widgets/w",
        standin.url()
    ))
    .await
    .expect("raw get");
    let warning = resp
        .headers()
        .get("warning")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        warning,
        "299 - \"test.example.com/v1beta1 Widget is deprecated; use v1\""
    );

    // A failing webhook fails the request like the real server.
    hook.fail.store(true, Ordering::SeqCst);
    let err = beta.get("w").await.expect_err("conversion fails");
    let kube::Error::Api(status) = err else {
        panic!("expected API error")
    };
    assert_eq!(status.code, 500);
    assert!(
        status.message.starts_with("conversion webhook for test.example.com/v1, Kind=Widget failed: the webhook refuses today"),
        "{}",
        status.message
    );
    // Reads in the storage version need no conversion.
    assert!(v1.get("w").await.is_ok());
    drop(events);
    standin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_by_url_and_unreachable_service() {
    let hook = Arc::new(Hook::default());
    let (port, ca) = start_webhook(hook.clone()).await;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca);
    let (standin, client) = start(StandInOptions {
        crds: vec![widget_crd(Some(webhook_conversion(json!({
            "url": format!("https://localhost:{port}/convert"), "caBundle": ca_b64}))))],
        namespaces: vec!["test".into()],
        ..Default::default()
    })
    .await;
    let beta = versioned(&client, "v1beta1");
    let v1 = versioned(&client, "v1");
    v1.create(&PostParams::default(), &widget("w", 2))
        .await
        .expect("create");
    assert_eq!(
        beta.get("w").await.expect("get by url").data["spec"]["size"],
        json!(2)
    );
    standin.shutdown().await;

    // A service with no mapped endpoint: 500 naming the problem.
    let (standin, client) = start(StandInOptions {
        crds: vec![widget_crd(Some(webhook_conversion(json!({
            "service": {"namespace": "test", "name": "nowhere", "path": "/convert"}}))))],
        namespaces: vec!["test".into()],
        ..Default::default()
    })
    .await;
    let v1 = versioned(&client, "v1");
    v1.create(&PostParams::default(), &widget("w", 2))
        .await
        .expect("create");
    let kube::Error::Api(status) = versioned(&client, "v1beta1")
        .get("w")
        .await
        .expect_err("unmapped")
    else {
        panic!("expected API error")
    };
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .contains("service test/nowhere has no endpoint"),
        "{}",
        status.message
    );
    standin.shutdown().await;
}
