//! The helpers the suites of this test binary share, each compiled once (a suite takes one
//! with `use crate::harness::<name> as <its local name>;`).

pub mod cluster_harness;
pub mod image_harness;
pub mod olm_replay;
#[path = "../../../crates/olmkit-catalog-server/tests/it/harness/registry_harness.rs"]
pub mod registry_harness;
pub mod registry_pods;
