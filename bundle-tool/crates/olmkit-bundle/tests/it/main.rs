//! The integration tests of `olmkit-bundle`, as one test binary (a module per suite): one link and one
//! binary instead of one per file, which is most of the cold build's link time and disk.
//! The end-to-end suites are the modules named `e2e_*` (`make test-unit` skips them by that
//! prefix, `make test-e2e` selects them); shared helpers live in `harness/` or `common/`.

mod common;

mod conformance;
mod conformance_fixtures;
mod crd_upgrade_safety;
mod generate;
mod real_bundles;
mod validate_olmv1;
mod validate_rules;
