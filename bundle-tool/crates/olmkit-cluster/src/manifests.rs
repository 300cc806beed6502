//! The OLM v0 manifests of an install: Namespace, CatalogSource, OperatorGroup, Subscription.
//!
//! Pure functions from parameters to JSON objects, in the field order `kubectl` users expect
//! (apiVersion, kind, metadata, spec) so `install --print` output reads like hand-written YAML
//! and is byte-identical run to run. The same objects are what `install` applies, so the printed
//! YAML and the live install never drift apart.

use crate::install_mode::Targets;
use crate::names::is_digest_ref;
use crate::olm::MANAGED_BY_LABEL;
use serde_json::{Map, Value, json};
use std::fmt;
use thiserror::Error;

/// InstallPlan approval of a Subscription.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Approval {
    /// OLM runs every InstallPlan at once.
    #[default]
    Automatic,
    /// Every InstallPlan waits for `spec.approved: true`.
    Manual,
}

impl Approval {
    /// OLM's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Automatic => "Automatic",
            Approval::Manual => "Manual",
        }
    }
}

impl fmt::Display for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn labels() -> Value {
    json!({ MANAGED_BY_LABEL: "bundle-tool" })
}

/// A Namespace.
pub fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": name },
    })
}

/// Parameters of the CatalogSource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogSourceParams {
    /// Object name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Catalog image.
    pub image: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.publisher`.
    pub publisher: String,
    /// `spec.updateStrategy.registryPoll.interval` (Go duration); ignored for digest images,
    /// which never change.
    pub poll_interval: Option<String>,
    /// `spec.grpcPodConfig.securityContextConfig` (`restricted` or `legacy`).
    pub security_context_config: Option<String>,
}

/// The CatalogSource: a `grpc` source OLM runs as a pod serving the catalog image.
pub fn catalog_source(p: &CatalogSourceParams) -> Value {
    let mut spec = Map::new();
    spec.insert("sourceType".into(), json!("grpc"));
    spec.insert("image".into(), json!(p.image));
    spec.insert("displayName".into(), json!(p.display_name));
    spec.insert("publisher".into(), json!(p.publisher));
    if let Some(sc) = &p.security_context_config {
        spec.insert(
            "grpcPodConfig".into(),
            json!({ "securityContextConfig": sc }),
        );
    }
    if let Some(interval) = &p.poll_interval
        && !is_digest_ref(&p.image)
    {
        spec.insert(
            "updateStrategy".into(),
            json!({ "registryPoll": { "interval": interval } }),
        );
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": { "name": p.name, "namespace": p.namespace, "labels": labels() },
        "spec": spec,
    })
}

/// An OperatorGroup can only be created for explicit targets.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("an OperatorGroup with a label selector cannot be generated")]
pub struct SelectorTargetsError;

/// The OperatorGroup: `spec: {}` targets all namespaces, `targetNamespaces` the listed ones.
pub fn operator_group(
    name: &str,
    namespace: &str,
    targets: &Targets,
) -> Result<Value, SelectorTargetsError> {
    let spec = match targets {
        Targets::AllNamespaces => json!({}),
        Targets::Namespaces(ns) => json!({ "targetNamespaces": ns }),
        Targets::Selector => return Err(SelectorTargetsError),
    };
    Ok(json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": { "name": name, "namespace": namespace, "labels": labels() },
        "spec": spec,
    }))
}

/// Parameters of the Subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionParams {
    /// Object name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Package.
    pub package: String,
    /// Channel.
    pub channel: String,
    /// Approval.
    pub approval: Approval,
    /// `spec.startingCSV`.
    pub starting_csv: Option<String>,
    /// CatalogSource name.
    pub source: String,
    /// CatalogSource namespace.
    pub source_namespace: String,
}

/// The Subscription.
pub fn subscription(p: &SubscriptionParams) -> Value {
    let mut spec = Map::new();
    spec.insert("channel".into(), json!(p.channel));
    spec.insert("installPlanApproval".into(), json!(p.approval.as_str()));
    spec.insert("name".into(), json!(p.package));
    spec.insert("source".into(), json!(p.source));
    spec.insert("sourceNamespace".into(), json!(p.source_namespace));
    if let Some(csv) = &p.starting_csv {
        spec.insert("startingCSV".into(), json!(csv));
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": { "name": p.name, "namespace": p.namespace, "labels": labels() },
        "spec": spec,
    })
}

/// Manifests could not be rendered.
#[derive(Debug, Error)]
#[error("cannot render the manifests as YAML: {0}")]
pub struct RenderManifestsError(#[from] olmkit_core::docs::RenderDocumentError);

/// Renders objects as a `---`-separated YAML stream, ready for `kubectl apply -f -`.
pub fn render_yaml(objects: &[Value]) -> Result<String, RenderManifestsError> {
    Ok(olmkit_core::docs::to_yaml_stream("manifests", objects)?)
}

/// `kind/name` of an object, for messages.
pub fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("object");
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(image: &str) -> CatalogSourceParams {
        CatalogSourceParams {
            name: "memcached-catalog".into(),
            namespace: "operators".into(),
            image: image.into(),
            display_name: "Memcached".into(),
            publisher: "Example".into(),
            poll_interval: Some("10m".into()),
            security_context_config: None,
        }
    }

    #[test]
    fn catalog_source_polls_tags_only() {
        let v = catalog_source(&cs("quay.io/example/cat:v1"));
        assert_eq!(
            v["spec"]["updateStrategy"]["registryPoll"]["interval"],
            "10m"
        );
        let v = catalog_source(&cs(
            "quay.io/example/cat@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ));
        assert!(v["spec"].get("updateStrategy").is_none());
    }

    #[test]
    fn operator_group_targets() {
        let all = operator_group("og", "ops", &Targets::AllNamespaces).unwrap();
        assert_eq!(all["spec"], json!({}));
        let own = operator_group("og", "ops", &Targets::Namespaces(vec!["ops".into()])).unwrap();
        assert_eq!(own["spec"]["targetNamespaces"], json!(["ops"]));
        assert!(operator_group("og", "ops", &Targets::Selector).is_err());
    }

    #[test]
    fn subscription_fields() {
        let v = subscription(&SubscriptionParams {
            name: "memcached-operator".into(),
            namespace: "operators".into(),
            package: "memcached-operator".into(),
            channel: "alpha".into(),
            approval: Approval::Manual,
            starting_csv: Some("memcached-operator.v0.1.0".into()),
            source: "memcached-catalog".into(),
            source_namespace: "operators".into(),
        });
        assert_eq!(v["spec"]["installPlanApproval"], "Manual");
        assert_eq!(v["spec"]["startingCSV"], "memcached-operator.v0.1.0");
        assert_eq!(describe(&v), "Subscription operators/memcached-operator");
    }
}
