//! API types of the Pulsar Consumer Operator: one module per kind (`bundle-tool create api`), with a
//! module per version inside it.
//!
//! `crds()` is what `manager crd` prints and `make manifests` writes into `config/crd/bases`.
//! `bundle-tool create api` adds kinds at the `+olmkit:scaffold` markers: keep them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod pulsar_consumer;
// +olmkit:scaffold:kinds

/// The CustomResourceDefinition of every kind, each with all its versions.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        pulsar_consumer::crd(),
        // +olmkit:scaffold:crds
    ]
}
