//! `webhookdefinitions` derived from the manifests.
//!
//! OLM does not install webhook configurations or conversion stanzas from a bundle as they are:
//! for each CSV `webhookdefinitions` entry it creates a Service `<deploymentName>-service`
//! (port `containerPort` → pod port `targetPort`), a CA and a serving certificate, mounts the
//! certificate into the Deployment at `/tmp/k8s-webhook-server/serving-certs` (tls.crt/key)
//! and `/apiserver.local.config/certificates`, and then writes the Validating/Mutating
//! configuration, or for a `ConversionWebhook` rewrites `spec.conversion` of every CRD in
//! `conversionCRDs` to point at that Service with the CA bundle.
//!
//! So the manifests' webhook configurations and CRD conversion stanzas are translated here the
//! way operator-sdk's `applyWebhooks` does: webhook → `clientConfig.service` → that Service's
//! port (`containerPort`) and `targetPort` → the Deployment its selector picks. Conversion
//! webhooks are grouped per (port, path), named `c<plural>...kb.io`, with `sideEffects: None`
//! and the CRD's `conversionReviewVersions`; the list is sorted by `generateName`.
//!
//! A webhook that cannot be routed to a Deployment of the bundle (no such Service, a selector
//! matching no Deployment, a URL) is an error naming the document and field, since OLM could
//! not serve it. With `lenient` (`--upstream-compat`) it is written as operator-sdk writes it
//! instead, with a note: `deploymentName` guessed from the Service name without `-service`, no
//! ports, and for a URL no Service fields at all (operator-sdk's `validatingToWebhookDescription`);
//! a conversion webhook whose Service is missing is left out (its `applyWebhooks` only looks at
//! the manifests' Services).

use super::GenerateBundleError;
use super::collect::{AdmissionWebhook, Collected, Crd};
use crate::json::{arr_at, string_map};
use crate::model::Manifest;
use olmkit_core::csv::str_at;
use olmkit_core::csv::{DeploymentSpec, WebhookDefinition};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Where OLM mounts the serving certificate it generates for webhooks and API services.
pub const OLM_CERT_MOUNT_PATHS: [&str; 2] = [
    "/tmp/k8s-webhook-server/serving-certs",
    "/apiserver.local.config/certificates",
];

/// Derived webhook wiring.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Webhooks {
    /// `spec.webhookdefinitions`, sorted by `generateName`.
    pub definitions: Vec<Value>,
    /// (Service name, port) of admission webhooks: OLM serves them through its own Service,
    /// so these ports are removed from the bundled Services (operator-sdk does the same).
    pub admission_service_ports: BTreeSet<(String, i64)>,
    /// Deployments that serve a webhook (OLM mounts its certificate into them).
    pub serving_deployments: BTreeSet<String>,
    /// CRDs converted by a webhook.
    pub conversion_crds: BTreeSet<String>,
}

impl Webhooks {
    /// True if a conversion webhook is defined.
    pub fn has_conversion(&self) -> bool {
        !self.conversion_crds.is_empty()
    }
}

fn sorted_object(entries: BTreeMap<&str, Value>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map<String, Value>>(),
    )
}

/// The Deployment whose pod template labels contain every entry of `selector`.
fn deployment_for_selector<'a>(
    c: &'a Collected,
    selector: &[(String, String)],
) -> Option<&'a Manifest> {
    if selector.is_empty() {
        return None;
    }
    c.deployments.iter().find(|d| {
        let labels = string_map(&d.object, "/spec/template/metadata/labels");
        selector
            .iter()
            .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
    })
}

/// Resolved Service side of a webhook.
struct Route {
    deployment: String,
    container_port: i64,
    target_port: Value,
}

/// operator-sdk's fallback when no Deployment is found: the Service name without `-service`.
fn guessed_deployment(service: &str) -> String {
    service
        .strip_suffix("-service")
        .unwrap_or(service)
        .to_string()
}

/// Inserts the Service side of a definition: the route when there is one, operator-sdk's guess
/// otherwise.
fn insert_route(e: &mut BTreeMap<&str, Value>, r: Result<Route, String>) {
    match r {
        Ok(r) => {
            e.insert("deploymentName", Value::from(r.deployment));
            e.insert("containerPort", Value::from(r.container_port));
            e.insert("targetPort", r.target_port);
        }
        Err(deployment) => {
            e.insert("deploymentName", Value::from(deployment));
        }
    }
}

/// `route`, or with `lenient` operator-sdk's guess (`Err(deployment name)`) and a note.
#[allow(clippy::too_many_arguments)]
fn route_or_guess(
    c: &Collected,
    owner: &Manifest,
    field: &str,
    service: &str,
    port: i64,
    lenient: bool,
    notes: &mut Vec<String>,
) -> Result<Result<Route, String>, GenerateBundleError> {
    match route(c, owner, field, service, port, notes) {
        Ok(r) => Ok(Ok(r)),
        Err(e) if lenient => {
            let guess = guessed_deployment(service);
            notes.push(format!(
                "{e}; written as operator-sdk does, with deploymentName {guess} and no ports: OLM cannot serve this webhook unless that Deployment exists"
            ));
            Ok(Err(guess))
        }
        Err(e) => Err(e),
    }
}

/// Follows `service`/`port` to the Deployment and the port pair OLM needs. `owner` and `field`
/// name the referencing document and field in errors.
fn route(
    c: &Collected,
    owner: &Manifest,
    field: &str,
    service: &str,
    port: i64,
    notes: &mut Vec<String>,
) -> Result<Route, GenerateBundleError> {
    let svc = c.services.iter().find(|s| s.name() == service).ok_or_else(|| {
        GenerateBundleError::invalid(
            owner,
            field,
            format!(
                "Service {service:?} is not in the manifests, so the Deployment serving this webhook cannot be found (include config/webhook in the kustomization)"
            ),
        )
    })?;
    if str_at(&svc.object, "/spec/type") == Some("ExternalName") {
        return Err(GenerateBundleError::invalid(
            svc,
            "spec.type",
            "an ExternalName Service cannot route to a Deployment of the bundle, which OLM requires for webhooks",
        ));
    }
    let selector = string_map(&svc.object, "/spec/selector");
    let dep = deployment_for_selector(c, &selector).ok_or_else(|| {
        GenerateBundleError::invalid(
            svc,
            "spec.selector",
            format!(
                "selects no Deployment of the manifests (selector {}), so OLM could not tell which Deployment serves the webhook",
                selector
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )
    })?;
    let ports = arr_at(&svc.object, "/spec/ports");
    let (pi, p) = ports
        .iter()
        .enumerate()
        .find(|(_, p)| p.get("port").and_then(Value::as_i64) == Some(port))
        .ok_or_else(|| {
            GenerateBundleError::invalid(
                svc,
                "spec.ports",
                format!("has no port {port}, which {} uses", owner.label()),
            )
        })?;
    let target = match p.get("targetPort") {
        Some(t @ Value::Number(_)) | Some(t @ Value::String(_)) => t.clone(),
        _ => Value::from(port),
    };
    // Declaring container ports is informational in Kubernetes, so a mismatch is only noted.
    let declared = DeploymentSpec::of_object(&dep.object)
        .pod_spec()
        .containers()
        .any(|ctr| {
            ctr.ports().iter().any(|cp| match &target {
                Value::String(name) => str_at(cp, "/name") == Some(name.as_str()),
                t => cp.get("containerPort") == Some(t),
            })
        });
    if !declared {
        notes.push(format!(
            "Service {service} port {port} targets {target} (spec.ports[{pi}].targetPort), which no container of Deployment {} declares; check that the webhook server listens there",
            dep.name()
        ));
    }
    Ok(Route {
        deployment: dep.name().to_string(),
        container_port: port,
        target_port: target,
    })
}

fn admission_definition(
    c: &Collected,
    hook: &AdmissionWebhook,
    lenient: bool,
    notes: &mut Vec<String>,
) -> Result<Value, GenerateBundleError> {
    let w = &hook.webhook;
    let field = |f: &str| format!("webhooks[{}].{f}", hook.index);
    let url = w.pointer("/clientConfig/url").is_some();
    if url && lenient {
        notes.push(format!(
            "{}: {}: a URL webhook is written without deploymentName, as operator-sdk does; OLM cannot install it",
            hook.doc.label(),
            field("clientConfig.url")
        ));
    } else if url {
        return Err(GenerateBundleError::invalid(
            &hook.doc,
            field("clientConfig.url"),
            "OLM only installs webhooks served by a Deployment of the bundle through a Service; a URL cannot be expressed in a CSV",
        ));
    }
    let r = if url {
        None
    } else {
        let service = str_at(w, "/clientConfig/service/name").ok_or_else(|| {
            GenerateBundleError::invalid(
                &hook.doc,
                field("clientConfig.service.name"),
                "is required",
            )
        })?;
        let port = w
            .pointer("/clientConfig/service/port")
            .and_then(Value::as_i64)
            .unwrap_or(443);
        Some(route_or_guess(
            c,
            &hook.doc,
            &field("clientConfig.service"),
            service,
            port,
            lenient,
            notes,
        )?)
    };
    let mut e: BTreeMap<&str, Value> = BTreeMap::new();
    e.insert(
        "type",
        Value::from(if hook.mutating {
            "MutatingAdmissionWebhook"
        } else {
            "ValidatingAdmissionWebhook"
        }),
    );
    e.insert(
        "generateName",
        w.get("name").cloned().unwrap_or(Value::Null),
    );
    if let Some(r) = r {
        insert_route(&mut e, r);
    }
    let mut keys = vec![
        "rules",
        "failurePolicy",
        "matchPolicy",
        "objectSelector",
        "sideEffects",
        "timeoutSeconds",
        "admissionReviewVersions",
    ];
    if hook.mutating {
        keys.push("reinvocationPolicy");
    }
    for k in keys {
        if let Some(v) = w.get(k).filter(|v| !v.is_null()) {
            e.insert(k, v.clone());
        }
    }
    if let Some(path) = str_at(w, "/clientConfig/service/path") {
        e.insert("webhookPath", Value::from(path));
    }
    // Required by admissionregistration/v1 and by OLM; operator-sdk fills the same defaults.
    e.entry("sideEffects")
        .or_insert_with(|| Value::from("None"));
    e.entry("admissionReviewVersions")
        .or_insert_with(|| Value::Array(vec![Value::from("v1")]));
    if w.get("namespaceSelector").is_some_and(|v| !v.is_null()) {
        notes.push(format!(
            "{}: webhooks[{}].namespaceSelector is not carried over: OLM scopes webhooks to the namespaces of the operator's OperatorGroup",
            hook.doc.label(),
            hook.index
        ));
    }
    Ok(sorted_object(e))
}

/// `c<first label of each CRD name>.kb.io`, operator-sdk's `getGenerateName`.
pub fn conversion_generate_name(crds: &[String]) -> String {
    let mut names: Vec<&String> = crds.iter().collect();
    names.sort();
    let joined: String = names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| n.split('.').next().unwrap_or(""))
        .collect();
    format!("c{joined}.kb.io")
}

/// Derives `webhookdefinitions` and the related bookkeeping from the collected manifests.
/// `lenient`: write unroutable webhooks as operator-sdk does instead of failing.
pub fn derive(
    c: &Collected,
    lenient: bool,
    notes: &mut Vec<String>,
) -> Result<Webhooks, GenerateBundleError> {
    let mut out = Webhooks::default();
    for hook in &c.admission_webhooks {
        let def = admission_definition(c, hook, lenient, notes)?;
        if let (Some(svc), port) = (
            str_at(&hook.webhook, "/clientConfig/service/name"),
            hook.webhook
                .pointer("/clientConfig/service/port")
                .and_then(Value::as_i64)
                .unwrap_or(443),
        ) {
            out.admission_service_ports.insert((svc.to_string(), port));
        }
        if let Some(d) = (WebhookDefinition {
            index: 0,
            raw: &def,
        })
        .deployment_name()
        {
            out.serving_deployments.insert(d.to_string());
        }
        out.definitions.push(def);
    }
    // Conversion webhooks, grouped per (service, port, path) like operator-sdk's `crdGroups`.
    let mut groups: BTreeMap<(String, i64, String), Vec<usize>> = BTreeMap::new();
    for (i, crd) in c.crds.iter().enumerate() {
        if let Some(conv) = &crd.conversion {
            groups
                .entry((conv.service.clone(), conv.port, conv.path.clone()))
                .or_default()
                .push(i);
        }
    }
    for ((service, port, path), members) in groups {
        let Some(first) = members.first().and_then(|&i| c.crds.get(i)) else {
            continue;
        };
        if lenient && !c.services.iter().any(|s| s.name() == service) {
            notes.push(format!(
                "{}: spec.conversion.webhook.clientConfig.service: Service {service:?} is not in the manifests; left out of webhookdefinitions, as operator-sdk does",
                first.doc.label()
            ));
            continue;
        }
        let r = route_or_guess(
            c,
            &first.doc,
            "spec.conversion.webhook.clientConfig.service",
            &service,
            port,
            lenient,
            notes,
        )?;
        let members: Vec<&Crd> = members.iter().filter_map(|&i| c.crds.get(i)).collect();
        conversion_definition(&members, r, path, &mut out);
    }
    fn generate_name(raw: &Value) -> Option<&str> {
        WebhookDefinition { index: 0, raw }.generate_name()
    }
    out.definitions.sort_by(|a, b| {
        generate_name(a)
            .unwrap_or("")
            .cmp(generate_name(b).unwrap_or(""))
    });
    Ok(out)
}

/// The `ConversionWebhook` definition of the CRDs `members`, served as `r` says at `path`,
/// added to `out` with the deployment serving it and the CRDs it converts.
fn conversion_definition(
    members: &[&Crd],
    r: Result<Route, String>,
    path: String,
    out: &mut Webhooks,
) {
    let mut crds: Vec<String> = members.iter().map(|crd| crd.name.clone()).collect();
    crds.sort();
    let mut review: Vec<String> = Vec::new();
    for crd in members {
        if let Some(conv) = &crd.conversion {
            for v in &conv.review_versions {
                if !review.contains(v) {
                    review.push(v.clone());
                }
            }
        }
    }
    let mut e: BTreeMap<&str, Value> = BTreeMap::new();
    e.insert("type", Value::from("ConversionWebhook"));
    e.insert("generateName", Value::from(conversion_generate_name(&crds)));
    let deployment = match &r {
        Ok(r) => r.deployment.clone(),
        Err(guess) => guess.clone(),
    };
    insert_route(&mut e, r);
    e.insert(
        "conversionCRDs",
        Value::Array(crds.iter().cloned().map(Value::from).collect()),
    );
    e.insert(
        "admissionReviewVersions",
        Value::Array(review.into_iter().map(Value::from).collect()),
    );
    e.insert("sideEffects", Value::from("None"));
    e.insert("webhookPath", Value::from(path));
    out.serving_deployments.insert(deployment);
    out.conversion_crds.extend(crds);
    out.definitions.push(sorted_object(e));
}
