//! The integration tests of `bundle-tool`, as one test binary (a module per suite): one link and one
//! binary instead of one per file, which is most of the cold build's link time and disk.
//! The end-to-end suites are the modules named `e2e_*` (`make test-unit` skips them by that
//! prefix, `make test-e2e` selects them); shared helpers live in `harness/` or `common/`.

mod harness;

mod shared_target;

// First in name order, which is the order libtest starts tests in: its project builds are the
// longest test but one, and started last (as `e2e_scaffold`) they were the binary's last
// half-minute, one test thread busy and the other idle.
mod e2e_authoring;
mod e2e_bundle_generate;
mod e2e_bundle_validate;
mod e2e_catalog_cli;
mod e2e_cluster_olm_traces;
mod e2e_cluster_olm_v0;
mod e2e_cluster_olm_v1;
mod e2e_daily_loop;
mod e2e_examples;
mod e2e_image_layout;
mod e2e_image_registry;
mod e2e_input_attacks;
mod e2e_operator_image_start;
mod e2e_output_targets;
mod e2e_readme_examples;
mod e2e_registry_serve;
mod e2e_release;
mod e2e_run_bundle;
mod e2e_symlink_escape;
