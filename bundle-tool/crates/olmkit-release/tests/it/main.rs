//! olmkit-release's integration tests: one test binary (the `tests/it` shape every package has).
#![allow(clippy::unwrap_used)]

mod catalog_plan;
