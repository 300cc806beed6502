//! The operator runtime library: everything an operator on kube-rs needs that is not its own
//! API and reconcile logic.
//!
//! Always available (what an API crate needs; `default-features = false` keeps it to kube's
//! derive feature, no client or runtime):
//! - [`conversion`]: hub-and-spoke conversion between served versions, and the annotation that
//!   keeps round trips lossless;
//! - [`crd`]: merging the per-version CRDs kube-derive emits, the conversion webhook stanza;
//! - [`rbac`]: roles generated from a declared table of the API calls the operator makes.
//!
//! With the default `manager` feature, the operator process itself (see [`cli::Operator`]):
//! the `run` / `webhook` / `crd` / `rbac` subcommands, the manager's lifecycle (signals,
//! graceful stop), leader election on a Lease, `/metrics` behind TokenReview and
//! SubjectAccessReview, health probes, the conversion webhook server (certificate reload,
//! limits, memory budget), the watch scope from OLM's `olm.targetNamespaces`, per-object
//! backoff, events, cache readiness and telemetry.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod conversion;
pub mod crd;
pub mod rbac;

#[cfg(feature = "manager")]
pub mod backoff;
#[cfg(feature = "manager")]
pub mod cli;
#[cfg(feature = "manager")]
pub mod events;
#[cfg(feature = "manager")]
pub mod http;
#[cfg(feature = "manager")]
pub mod leader;
#[cfg(feature = "manager")]
pub mod manager;
#[cfg(feature = "manager")]
pub mod metrics;
#[cfg(feature = "manager")]
pub mod ready;
#[cfg(feature = "manager")]
pub mod scope;
#[cfg(feature = "manager")]
pub mod telemetry;
#[cfg(feature = "manager")]
pub mod webhook;

/// Crates an operator's code uses with the runtime, re-exported so a scaffolded project needs no
/// version choices of its own.
#[cfg(feature = "manager")]
pub use {futures, prometheus_client, tokio, tokio_util, tracing};

/// What the runtime's own tests share: a small resource with two served versions.
#[cfg(all(test, feature = "manager"))]
mod testing {
    use std::sync::Arc;

    use crate::conversion::Converter;

    /// The `Widget` converter of the conversion tests (`demo.example.com`, v1alpha1 with
    /// `spec.size`, v1beta1, v1 with `spec.replicas`).
    pub fn widget_converters() -> Vec<Arc<dyn Converter>> {
        vec![Arc::new(crate::conversion::tests::widgets())]
    }
}
