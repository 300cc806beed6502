//! The controllers: one per kind, each run once per watched namespace (`WATCH_NAMESPACE`, which
//! OLM sets from its OperatorGroup; empty watches all namespaces).
//!
//! `bundle-tool create api` adds controllers at the `+olmkit:scaffold` markers: keep them.

pub mod redis_cluster;
// +olmkit:scaffold:controller-modules

use olmkit_runtime::manager::ControllerContext;
use olmkit_runtime::tokio::task::JoinSet;
use olmkit_runtime::tokio_util::sync::CancellationToken;
use olmkit_runtime::tracing::info;

/// Runs every controller until `stop` is cancelled (at the end of a leadership term, or on
/// shutdown), then waits for their in-flight reconciles to finish.
pub async fn run(ctx: ControllerContext, stop: CancellationToken) {
    info!(scope = %ctx.scope, "starting the controllers");
    let mut controllers = JoinSet::new();
    // Every controller returns once `stop` is cancelled; so does this one, which keeps the
    // manager's term running while there are no others.
    controllers.spawn(stop.clone().cancelled_owned());
    // One RedisCluster controller per watched namespace.
    for namespace in ctx.scope.watches() {
        controllers.spawn(redis_cluster::run(ctx.clone(), namespace, stop.clone()));
    }
    // +olmkit:scaffold:controllers
    controllers.join_all().await;
}
