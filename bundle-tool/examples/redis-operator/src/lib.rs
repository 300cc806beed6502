//! The Redis Operator: its controllers (`controller`), the table of API calls its RBAC role
//! is generated from (`rbac`), and the [`operator`] that ties them to the olmkit runtime.
//!
//! `bundle-tool create api` adds to this file at the `+olmkit:scaffold` markers: keep them.

pub mod controller;
pub mod rbac;

use olmkit_runtime::cli::Operator;

/// The operator's name: its field manager, event reporter, leader-election Lease
/// (`redis-operator-leader`) and metric prefix.
pub const NAME: &str = "redis-operator";

/// The operator: its CRDs, permissions, conversions and controllers.
pub fn operator() -> Operator {
    Operator::new(NAME, env!("CARGO_PKG_VERSION"))
        .crds(redis_api::crds())
        .permissions(rbac::PERMISSIONS)
        // +olmkit:scaffold:conversions
        .controllers(controller::run)
}
