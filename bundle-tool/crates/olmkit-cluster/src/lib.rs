//! Install, status, upgrade and approve of operators on a cluster through OLM (v0 and v1).
//!
//! Kept apart as the rest of the toolkit: [`olm`] holds API identities and read models,
//! [`manifests`] and [`olmv1::manifests`] render what gets applied (pure), [`install_mode`]
//! decides the OperatorGroup, [`assess`] judges OLM's progress (pure), [`client`] and [`wait`]
//! do the I/O, [`catalog_view`] reads the local catalog, [`olmv1::support`] checks a bundle
//! against OLM v1's limits, and [`table`] lays out `kubectl get`-style output. [`run_bundle`]
//! and [`cleanup`] try a bundle on a cluster before publishing it (operator-sdk's `run bundle`,
//! `run bundle-upgrade` and `cleanup`).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod assess;
pub mod catalog_view;
pub mod cleanup;
pub mod client;
pub mod install;
pub mod install_mode;
pub mod manifests;
pub mod names;
pub mod olm;
pub mod olmv1;
pub mod run_bundle;
pub mod status;
pub mod table;
pub mod upgrade;
pub mod wait;
