//! The integration tests of `olmkit-catalog`, as one test binary (a module per suite): one link and one
//! binary instead of one per file, which is most of the cold build's link time and disk.
//! The end-to-end suites are the modules named `e2e_*` (`make test-unit` skips them by that
//! prefix, `make test-e2e` selects them); shared helpers live in `harness/` or `common/`.

mod edges_props;
mod fbc_fixtures;
mod goyaml_props;
mod graph_snapshots;
mod input_race;
mod model_rules;
mod olmv1_render;
mod props;
mod real_bundles;
mod stranded;
mod templates;
