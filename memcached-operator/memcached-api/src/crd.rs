//! The merged multi-version CustomResourceDefinition of `memcacheds.cache.example.com`.
//!
//! kube-derive emits one single-version CRD per Rust type; this module merges them with v1 as the
//! storage version and, on request, adds the `spec.conversion` webhook stanza. The stanza is kept
//! out of the plain [`crd()`] because OLM injects its own (with its own CA bundle) for CRDs listed
//! in a CSV's `conversionCRDs`, and kustomize adds it for non-OLM installs.

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::core::crd::{CustomResourceExt, merge_crds};

/// Where the API server sends ConversionReviews for this CRD.
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

/// Path the operator serves ConversionReviews on.
pub const CONVERSION_PATH: &str = "/convert";
/// Container port of the conversion webhook (the kubebuilder and OLM convention).
pub const WEBHOOK_PORT: i32 = 9443;

impl Default for ConversionWiring {
    fn default() -> Self {
        Self {
            service_name: "memcached-operator-webhook-service".into(),
            service_namespace: "memcached-operator-system".into(),
            path: CONVERSION_PATH.into(),
            port: 443,
            ca_bundle: None,
        }
    }
}

/// The merged CRD with every served version, v1 as storage, and no conversion stanza.
pub fn crd() -> CustomResourceDefinition {
    let parts = vec![
        crate::v1alpha1::Memcached::crd(),
        crate::v1beta1::Memcached::crd(),
        crate::v1::Memcached::crd(),
    ];
    let mut merged = match merge_crds(parts, crate::STORAGE_VERSION) {
        Ok(crd) => crd,
        // The inputs are compile-time constants of this crate, so a merge failure is a bug in
        // the type definitions that the crate's own tests catch.
        Err(e) => unreachable!("memcached CRD versions do not merge: {e}"),
    };
    // Order versions oldest first, as controller-gen does, so generated YAML is stable and reads
    // naturally.
    merged.spec.versions.sort_by_key(|v| {
        crate::SERVED_VERSIONS
            .iter()
            .position(|s| *s == v.name)
            .unwrap_or(usize::MAX)
    });
    merged
}

/// The merged CRD with a webhook conversion stanza pointing at `wiring`.
pub fn crd_with_conversion(wiring: &ConversionWiring) -> CustomResourceDefinition {
    let mut crd = crd();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_crd_has_all_versions_with_v1_storage() {
        let crd = crd();
        let names: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1alpha1", "v1beta1", "v1"]);
        let storage: Vec<_> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(storage, ["v1"]);
        assert!(crd.spec.versions.iter().all(|v| v.served));
        assert_eq!(crd.metadata.name.as_deref(), Some(crate::CRD_NAME));
        let alpha = &crd.spec.versions[0];
        assert_eq!(alpha.deprecated, Some(true));
        assert!(alpha.deprecation_warning.is_some());
    }

    #[test]
    fn conversion_stanza_points_at_service() {
        let crd = crd_with_conversion(&ConversionWiring::default());
        let conv = crd.spec.conversion.expect("conversion");
        assert_eq!(conv.strategy, "Webhook");
        let svc = conv
            .webhook
            .and_then(|w| w.client_config)
            .and_then(|c| c.service);
        assert_eq!(svc.and_then(|s| s.path).as_deref(), Some("/convert"));
    }
}
