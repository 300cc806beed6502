//! The merged multi-version CustomResourceDefinition of `memcacheds.cache.example.com`.
//!
//! kube-derive emits one single-version CRD per Rust type; this module merges them with v1 as the
//! storage version and, on request, adds the `spec.conversion` webhook stanza. The stanza is kept
//! out of the plain [`crd()`] because OLM injects its own (with its own CA bundle) for CRDs listed
//! in a CSV's `conversionCRDs`, and kustomize adds it for non-OLM installs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::CustomResourceExt;
pub use olmkit_runtime::crd::{CONVERSION_PATH, ConversionWiring, WEBHOOK_PORT};

/// The operator's project name: its webhook Service and namespace follow kubebuilder's naming
/// from it (see [`wiring`]).
pub const PROJECT: &str = "memcached-operator";

/// Where the API server sends ConversionReviews: kubebuilder's Service and namespace of the
/// project, port 443, path [`CONVERSION_PATH`].
pub fn wiring() -> ConversionWiring {
    ConversionWiring::for_project(PROJECT)
}

/// The merged CRD with every served version, v1 as storage, and no conversion stanza.
pub fn crd() -> CustomResourceDefinition {
    let parts = vec![
        crate::v1alpha1::Memcached::crd(),
        crate::v1beta1::Memcached::crd(),
        crate::v1::Memcached::crd(),
    ];
    match olmkit_runtime::crd::merge(parts, crate::STORAGE_VERSION, &crate::SERVED_VERSIONS) {
        Ok(crd) => crd,
        // The inputs are compile-time constants of this crate, so a merge failure is a bug in
        // the type definitions that the crate's own tests catch.
        Err(e) => unreachable!("memcached CRD versions do not merge: {e}"),
    }
}

/// The merged CRD with a webhook conversion stanza pointing at `wiring`.
pub fn crd_with_conversion(wiring: &ConversionWiring) -> CustomResourceDefinition {
    olmkit_runtime::crd::with_webhook_conversion(crd(), wiring)
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
        let crd = crd_with_conversion(&wiring());
        let conv = crd.spec.conversion.expect("conversion");
        assert_eq!(conv.strategy, "Webhook");
        let svc = conv
            .webhook
            .and_then(|w| w.client_config)
            .and_then(|c| c.service);
        assert_eq!(svc.and_then(|s| s.path).as_deref(), Some("/convert"));
    }
}
