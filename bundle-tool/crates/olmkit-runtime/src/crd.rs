//! The CustomResourceDefinition of a multi-version resource, from its Rust types.
//!
//! kube-derive emits one single-version CRD per Rust type. [`merge`] joins them (kube's
//! `merge_crds`) with the storage version chosen and the versions ordered oldest first, as
//! controller-gen writes them, so generated YAML is stable and reads naturally. The conversion
//! webhook stanza ([`with_webhook_conversion`]) is kept out of the plain CRD because OLM injects
//! its own (with its own CA bundle) for CRDs listed in a CSV's `conversionCRDs`, and kustomize
//! adds it for non-OLM installs.
//!
//! ```
//! use kube::CustomResourceExt;
//! # mod v1 { use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
//! #   #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #   #[kube(group = "demo.example.com", version = "v1", kind = "Widget", namespaced)]
//! #   pub struct WidgetSpec { pub replicas: i32 } }
//! # mod v1alpha1 { use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
//! #   #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #   #[kube(group = "demo.example.com", version = "v1alpha1", kind = "Widget", namespaced)]
//! #   pub struct WidgetSpec { pub size: i32 } }
//! let crd = olmkit_runtime::crd::merge(
//!     vec![v1::Widget::crd(), v1alpha1::Widget::crd()],
//!     "v1",
//!     &["v1alpha1", "v1"],
//! )
//! .unwrap();
//! let names: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
//! assert_eq!(names, ["v1alpha1", "v1"]);
//! ```

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};

/// Path the operator serves ConversionReviews on (kubebuilder's).
pub const CONVERSION_PATH: &str = "/convert";
/// Container port of the webhook server (the kubebuilder and OLM convention).
pub const WEBHOOK_PORT: i32 = 9443;

/// The per-version CRDs do not merge.
#[derive(Debug, thiserror::Error)]
#[error("the CRD versions do not merge: {0}")]
pub struct MergeError(#[from] kube::core::crd::MergeError);

/// Merges single-version CRDs into one with `storage` as the storage version, versions in the
/// order of `order` (versions not listed go last).
pub fn merge(
    parts: Vec<CustomResourceDefinition>,
    storage: &str,
    order: &[&str],
) -> Result<CustomResourceDefinition, MergeError> {
    let mut merged = kube::core::crd::merge_crds(parts, storage)?;
    merged.spec.versions.sort_by_key(|v| {
        order
            .iter()
            .position(|s| *s == v.name)
            .unwrap_or(usize::MAX)
    });
    Ok(merged)
}

/// Where the API server sends ConversionReviews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionWiring {
    /// Name of the Service in front of the operator's webhook port.
    pub service_name: String,
    /// Namespace of that Service.
    pub service_namespace: String,
    /// HTTP path of the conversion endpoint.
    pub path: String,
    /// Service port.
    pub port: i32,
    /// PEM CA bundle the API server trusts for the webhook, if known.
    pub ca_bundle: Option<Vec<u8>>,
}

impl ConversionWiring {
    /// kubebuilder's wiring for a project: Service `<project>-webhook-service` in namespace
    /// `<project>-system`, port 443, path [`CONVERSION_PATH`].
    pub fn for_project(project: &str) -> Self {
        Self {
            service_name: format!("{project}-webhook-service"),
            service_namespace: format!("{project}-system"),
            path: CONVERSION_PATH.into(),
            port: 443,
            ca_bundle: None,
        }
    }
}

/// `crd` with a webhook conversion stanza pointing at `wiring`.
pub fn with_webhook_conversion(
    mut crd: CustomResourceDefinition,
    wiring: &ConversionWiring,
) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: wiring.service_name.clone(),
                    namespace: wiring.service_namespace.clone(),
                    path: Some(wiring.path.clone()),
                    port: Some(wiring.port),
                }),
                ca_bundle: wiring.ca_bundle.clone().map(ByteString),
                url: None,
            }),
        }),
    });
    crd
}

/// The file name controller-gen gives a CRD in `config/crd/bases`: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}
