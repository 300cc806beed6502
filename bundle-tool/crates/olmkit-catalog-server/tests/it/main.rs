//! The integration tests of `olmkit-catalog-server`, as one test binary (a module per suite): one link and one
//! binary instead of one per file, which is most of the cold build's link time and disk.
//! The end-to-end suites are the modules named `e2e_*` (`make test-unit` skips them by that
//! prefix, `make test-e2e` selects them); shared helpers live in `harness/` or `common/`.

mod harness;

mod e2e_registry_attacks;
mod e2e_registry_catalog_server;
mod e2e_registry_load;
mod index_build;
mod input_attacks;
