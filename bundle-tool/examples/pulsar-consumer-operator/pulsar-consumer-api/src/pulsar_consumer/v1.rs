//! `consumer.example.com/v1` PulsarConsumer.
//!
//! Scaffolded by `bundle-tool create api`; yours to edit. After changing the types, run
//! `make manifests` to regenerate the CRD in `config/crd/bases`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// What `spec.serviceUrl` must look like: Pulsar's binary protocol (`pulsar://`, or `pulsar+ssl://`
/// with TLS), one or more comma-separated `host[:port]`, as the Pulsar client accepts it.
pub const SERVICE_URL_PATTERN: &str =
    r"^pulsar(\+ssl)?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(,[A-Za-z0-9.-]+(:[0-9]{1,5})?)*/?$";
/// What `spec.topic` must look like: a full name (`persistent://tenant/namespace/topic`, or
/// `non-persistent://...`), `tenant/namespace/topic`, or a short name in `public/default`. A
/// leading `-` is refused: the consumer's command line would read it as an option.
pub const TOPIC_PATTERN: &str =
    r"^((persistent|non-persistent)://[^/\s]+/[^/\s]+/[^/\s]+|[^-/\s][^/\s]*(/[^/\s]+/[^/\s]+)?)$";
/// What `spec.subscriptionName` must look like: no blanks, and no leading `-` (the consumer's
/// command line would read it as an option).
pub const SUBSCRIPTION_PATTERN: &str = r"^[^-\s][^\s]*$";

/// Desired state of a PulsarConsumer: `replicas` pods running the operator's image
/// (`docker.io/apachepulsar/pulsar:3.3.0` unless the manager's `PULSARCONSUMER_IMAGE` says
/// otherwise), as a Deployment, each consuming `topic` on the broker at `serviceUrl` through the
/// shared subscription `subscriptionName`.
// clippy reads the repeated `type_ = ...` of separate `printcolumn(...)` groups as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "consumer.example.com",
    version = "v1",
    kind = "PulsarConsumer",
    doc = "PulsarConsumer is the Schema for the pulsarconsumers API",
    plural = "pulsarconsumers",
    singular = "pulsarconsumer",
    shortname = "pc",
    namespaced,
    status = "PulsarConsumerStatus",
    printcolumn(
        name = "Topic",
        type_ = "string",
        json_path = ".spec.topic",
        description = "The topic consumed"
    ),
    printcolumn(
        name = "Subscription",
        type_ = "string",
        json_path = ".spec.subscriptionName",
        description = "The subscription the pods share"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired consumer pods"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready consumer pods"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PulsarConsumerSpec {
    /// The Pulsar service URL the consumers connect to, e.g. `pulsar://pulsar.pulsar.svc:6650`
    /// (`pulsar+ssl://` for TLS; several brokers comma-separated).
    #[schemars(regex(pattern = SERVICE_URL_PATTERN), length(max = 2048))]
    pub service_url: String,

    /// The topic to consume: `persistent://tenant/namespace/topic`, `tenant/namespace/topic`,
    /// or a short name in the `public/default` namespace.
    #[schemars(regex(pattern = TOPIC_PATTERN), length(min = 1, max = 1024))]
    pub topic: String,

    /// The subscription the consumers share (type Shared: each message goes to one of the
    /// pods). It is durable: a new subscription starts at the latest message, and the backlog of
    /// an existing one waits while no pod runs.
    #[schemars(regex(pattern = SUBSCRIPTION_PATTERN), length(min = 1, max = 256))]
    pub subscription_name: String,

    /// Number of consumer pods; 0 stops consuming (the subscription keeps its backlog).
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
}

/// Observed state of a PulsarConsumer.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PulsarConsumerStatus {
    /// `Available`, `Progressing` and `Degraded`: the state of the PulsarConsumer, as Kubernetes conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Names of the consumer pods that are running (phase `Running`, not being deleted), sorted.
    #[serde(default)]
    pub pods: Vec<String>,

    /// Number of consumer pods that are ready (the Deployment's `status.readyReplicas`).
    #[serde(default)]
    pub ready_replicas: i32,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Default of `spec.replicas`.
pub fn default_replicas() -> i32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    /// The schema of `spec` in the generated CRD, as JSON.
    fn spec_schema() -> Value {
        let crd = serde_json::to_value(PulsarConsumer::crd()).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
    }

    #[test]
    fn the_crd_requires_and_validates_the_pulsar_fields() {
        let spec = spec_schema();
        let required: Vec<&str> = spec["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required, ["serviceUrl", "subscriptionName", "topic"]);
        let properties = &spec["properties"];
        assert_eq!(properties["serviceUrl"]["pattern"], SERVICE_URL_PATTERN);
        assert_eq!(properties["topic"]["pattern"], TOPIC_PATTERN);
        assert_eq!(
            properties["subscriptionName"]["pattern"],
            SUBSCRIPTION_PATTERN
        );
        assert_eq!(properties["replicas"]["default"], 1);
        // schemars writes bounds as floats (`minimum: 0.0`).
        assert_eq!(properties["replicas"]["minimum"].as_f64(), Some(0.0));
    }

    #[test]
    fn replicas_default_to_one_and_the_status_to_nothing_running() {
        let spec: PulsarConsumerSpec = serde_json::from_value(json!({
            "serviceUrl": "pulsar://pulsar.pulsar.svc:6650",
            "topic": "orders",
            "subscriptionName": "billing",
        }))
        .unwrap();
        assert_eq!(spec.replicas, 1);
        let status: PulsarConsumerStatus = serde_json::from_value(json!({})).unwrap();
        assert!(status.pods.is_empty());
        assert_eq!(status.ready_replicas, 0);
    }

    #[test]
    fn the_status_always_says_how_many_pods_run() {
        // `pods: []` and `readyReplicas: 0` are written, not left out: a consumer scaled to zero
        // shows that nothing runs rather than an empty status.
        let status = serde_json::to_value(PulsarConsumerStatus::default()).unwrap();
        assert_eq!(status, json!({"pods": [], "readyReplicas": 0}));
    }
}
