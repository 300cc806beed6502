//! Version conversion of custom resources: strategy `None` rewrites apiVersion; strategy
//! `Webhook` POSTs an `apiextensions.k8s.io/v1` ConversionReview over HTTPS (trusting the CRD's
//! `caBundle`, rustls with ring) to `clientConfig.url`, or to `clientConfig.service` resolved
//! through the `service_endpoints` option — connecting to the mapped address while verifying the
//! certificate for `<service>.<namespace>.svc`, as a real API server does.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::meta;
use crate::registry::{Conversion, ResourceType, WebhookConfig};

/// Converts objects between the versions of a kind.
pub struct Converter {
    service_endpoints: BTreeMap<String, String>,
    clients: Mutex<HashMap<String, reqwest::Client>>,
}

impl Converter {
    pub fn new(service_endpoints: BTreeMap<String, String>) -> Self {
        Converter {
            service_endpoints,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// `objects` in `version` (each may currently be in any version of the kind).
    pub async fn convert(
        &self,
        rt: &ResourceType,
        objects: Vec<Value>,
        version: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let desired = rt.api_version(version);
        let todo: Vec<usize> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.get("apiVersion").and_then(Value::as_str) != Some(desired.as_str()))
            .map(|(i, _)| i)
            .collect();
        if todo.is_empty() {
            return Ok(objects);
        }
        let mut objects = objects;
        match &rt.conversion {
            Conversion::None => {
                for i in todo {
                    if let Some(o) = objects.get_mut(i).and_then(Value::as_object_mut) {
                        o.insert("apiVersion".into(), json!(desired));
                    }
                }
                Ok(objects)
            }
            Conversion::Webhook(cfg) => {
                let inputs: Vec<Value> = todo
                    .iter()
                    .filter_map(|i| objects.get(*i).cloned())
                    .collect();
                let from = inputs
                    .first()
                    .and_then(|o| o.get("apiVersion"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let fail = |why: String| {
                    ApiError::internal(format!(
                        "conversion webhook for {from}, Kind={} failed: {why}",
                        rt.kind
                    ))
                };
                let converted = self
                    .call_webhook(rt, cfg, &inputs, &desired)
                    .await
                    .map_err(fail)?;
                for (i, mut conv) in todo.into_iter().zip(converted) {
                    let Some(orig) = objects.get_mut(i) else {
                        continue;
                    };
                    // Only labels and annotations may change in conversion; the rest of
                    // metadata is the API server's.
                    let mut m = meta::meta(orig).cloned().unwrap_or_default();
                    for k in ["labels", "annotations"] {
                        match conv.pointer(&format!("/metadata/{k}")) {
                            Some(v) => {
                                m.insert(k.into(), v.clone());
                            }
                            None => {
                                m.shift_remove(k);
                            }
                        }
                    }
                    if let Some(o) = conv.as_object_mut() {
                        o.insert("metadata".into(), Value::Object(m));
                    }
                    *orig = conv;
                }
                Ok(objects)
            }
        }
    }

    fn client(
        &self,
        ca: Option<&[u8]>,
        resolve: Option<(&str, SocketAddr)>,
    ) -> Result<reqwest::Client, String> {
        let key = format!(
            "{}|{:?}",
            ca.map(|c| hex::encode(Sha256::digest(c)))
                .unwrap_or_default(),
            resolve
        );
        if let Ok(c) = self.clients.lock()
            && let Some(client) = c.get(&key)
        {
            return Ok(client.clone());
        }
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = ca {
            for cert in CertificateDer::pem_slice_iter(ca) {
                let cert = cert.map_err(|e| format!("caBundle is not PEM: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("caBundle certificate rejected: {e}"))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut b = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(Duration::from_secs(10))
            .no_proxy();
        if let Some((host, addr)) = resolve {
            b = b.resolve(host, addr);
        }
        let client = b.build().map_err(|e| e.to_string())?;
        if let Ok(mut c) = self.clients.lock() {
            c.insert(key, client.clone());
        }
        Ok(client)
    }

    async fn endpoint(
        &self,
        cfg: &WebhookConfig,
    ) -> Result<(String, Option<(String, SocketAddr)>), String> {
        if let Some(url) = &cfg.url {
            return Ok((url.clone(), None));
        }
        let Some(svc) = &cfg.service else {
            return Err("the webhook has neither url nor service".into());
        };
        let id = format!("{}/{}", svc.namespace, svc.name);
        let base = self.service_endpoints.get(&id).ok_or_else(|| {
            format!("service {id} has no endpoint (map it with StandInOptions.service_endpoints / --service-endpoint {id}=URL)")
        })?;
        let path = svc.path.clone().unwrap_or_default();
        let parsed =
            reqwest::Url::parse(base).map_err(|e| format!("endpoint {base} for {id}: {e}"))?;
        if parsed.scheme() != "https" {
            return Ok((format!("{}{path}", base.trim_end_matches('/')), None));
        }
        let host = parsed.host_str().unwrap_or("127.0.0.1").to_string();
        let port = parsed.port_or_known_default().unwrap_or(443);
        let addr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("resolving {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} resolves to nothing"))?;
        let dns = format!("{}.{}.svc", svc.name, svc.namespace);
        Ok((format!("https://{dns}:{port}{path}"), Some((dns, addr))))
    }

    async fn call_webhook(
        &self,
        rt: &ResourceType,
        cfg: &WebhookConfig,
        inputs: &[Value],
        desired: &str,
    ) -> Result<Vec<Value>, String> {
        if !cfg.review_versions.is_empty() && !cfg.review_versions.iter().any(|v| v == "v1") {
            return Err(format!(
                "conversionReviewVersions {:?} has no version the stand-in speaks (v1)",
                cfg.review_versions
            ));
        }
        let (url, resolve) = self.endpoint(cfg).await?;
        let client = self.client(
            cfg.ca_bundle.as_deref(),
            resolve.as_ref().map(|(h, a)| (h.as_str(), *a)),
        )?;
        let uid = meta::new_uid();
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": inputs}
        });
        let resp = client
            .post(&url)
            .json(&review)
            .send()
            .await
            .map_err(|e| format!("Post \"{url}\": {}", error_chain(&e)))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| format!("invalid response from {url} (HTTP {status}): {e}"))?;
        if !status.is_success() {
            return Err(format!("{url} answered HTTP {status}"));
        }
        let r = body
            .get("response")
            .ok_or("conversion review has no response")?;
        if r.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
            return Err(format!(
                "expected response uid {uid:?}, got {:?}",
                r.get("uid")
            ));
        }
        let result = r.get("result").cloned().unwrap_or(Value::Null);
        if result.get("status").and_then(Value::as_str) != Some("Success") {
            return Err(result
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("conversion failed")
                .to_string());
        }
        let converted = r
            .get("convertedObjects")
            .and_then(Value::as_array)
            .cloned()
            .ok_or("response has no convertedObjects")?;
        if converted.len() != inputs.len() {
            return Err(format!(
                "expected {} converted objects, got {}",
                inputs.len(),
                converted.len()
            ));
        }
        for c in &converted {
            if c.get("apiVersion").and_then(Value::as_str) != Some(desired) {
                return Err(format!(
                    "invalid converted object: apiVersion {:?} is not {desired}",
                    c.get("apiVersion")
                ));
            }
            if c.get("kind").and_then(Value::as_str) != Some(rt.kind.as_str()) {
                return Err(format!(
                    "invalid converted object: kind {:?} is not {}",
                    c.get("kind"),
                    rt.kind
                ));
            }
        }
        Ok(converted)
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
