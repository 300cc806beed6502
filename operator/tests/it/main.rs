//! The integration tests of `operator`, as one test binary (a module per suite): one link and one
//! binary instead of one per file, which is most of the cold build's link time and disk.
//! The end-to-end suites are the modules named `e2e_*` (`make test-unit` skips them by that
//! prefix, `make test-e2e` selects them); shared helpers live in `harness/` or `common/`.

mod harness;

mod config;
mod conversion_golden;
mod e2e_conversion_webhook;
mod e2e_conversion_webhook_load;
mod e2e_metrics_auth;
mod e2e_operator_endpoints;
mod e2e_operator_leader;
mod e2e_operator_lifecycle;
mod e2e_operator_scope;
mod e2e_operator_shutdown_unreachable;
mod e2e_operator_takeover;
mod e2e_webhook_connection_limits;
