//! API types of the Redis Operator: one module per kind (`bundle-tool create api`), with a
//! module per version inside it.
//!
//! `crds()` is what `manager crd` prints and `make manifests` writes into `config/crd/bases`.
//! `bundle-tool create api` adds kinds at the `+olmkit:scaffold` markers: keep them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod redis_cluster;
// +olmkit:scaffold:kinds

/// The CustomResourceDefinition of every kind, each with all its versions.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        redis_cluster::crd(),
        // +olmkit:scaffold:crds
    ]
}
