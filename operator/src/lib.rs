//! The Memcached operator: its controller and table of API calls, on the operator runtime
//! library (`olmkit_runtime`, which provides the process: `run`/`webhook`/`crd`/`rbac`, leader
//! election, metrics, health, the conversion webhook). The API types, their conversion and the
//! CRD are in the `memcached-api` crate.
//!
//! Module ownership:
//! - [`controller`]: the reconciler: pure desired-state, status and event decisions plus the
//!   thin I/O shell that applies them;
//! - [`gauges`]: the metrics computed from the controller's caches;
//! - [`rbac`]: the table of API calls the roles are generated from.

// Tests may unwrap: a panic is the failure report there.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::field_reassign_with_default))]

pub mod controller;
pub mod gauges;
pub mod rbac;

use std::process::ExitCode;

use olmkit_runtime::cli::Operator;

/// The operator's name: field manager, event reporter, Lease `memcached-operator-leader`,
/// metric prefix `memcached_operator_`, User-Agent.
pub const NAME: &str = "memcached-operator";

/// The `operator` binary: the Memcached API, controller and permissions on the runtime.
pub fn main() -> ExitCode {
    let gauges = gauges::CacheGauges::default();
    let collector = gauges.collector();
    Operator::new(NAME, env!("CARGO_PKG_VERSION"))
        .binary("operator")
        .log_target(env!("CARGO_CRATE_NAME"))
        .crds(vec![memcached_api::crd()])
        .permissions(rbac::PERMISSIONS)
        .conversion(memcached_api::conversion::converter())
        .collector(collector)
        .controllers(move |ctx, token| controller::run(ctx, token, gauges.clone()))
        .main()
}
