//! Support library of the end-to-end tests in `tests/e2e/`.
//!
//! The e2e test files are declared as `[[test]]` targets of the package whose binary they run
//! (so `CARGO_BIN_EXE_<name>` points at the freshly built binary); this crate holds what they
//! share: paths to fixtures and tools, and starters for the real components the tests talk to.

pub mod paths;
pub mod registry;
