//! Support library of the end-to-end tests.
//!
//! Each e2e suite lives in the `tests/` directory of the package whose binary it runs, named
//! `e2e_<what>.rs` (so `CARGO_BIN_EXE_<name>` points at the freshly built binary, and `make
//! test-unit` can leave the e2e tier out by name): `bundle-tool/tests/`, `operator/tests/`,
//! `bundle-tool/crates/olmkit-catalog-server/tests/`. This crate holds what they share: paths to fixtures
//! and tools, and starters for the real components the tests talk to.

pub mod olm;
pub mod paths;
pub mod registry;
