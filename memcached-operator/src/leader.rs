//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager), gating the
//! controller so that two replicas never reconcile at once.
//!
//! The replica holding the lease runs the work (the controllers) under a child cancellation
//! token. When the lease is lost — another replica took it, or a renewal failed so this replica
//! can no longer prove it holds it — the work is aborted at once (in-flight reconciles are
//! dropped at their next await point) and the replica goes back to campaigning. The webhook and
//! the health endpoints keep running on every replica.
//!
//! The client used for the lease has request timeouts shorter than the renewal margin
//! (`grace`): a leader cut off from the API server sees its renewal fail, and steps down, before
//! its lease can expire and a standby take over. On shutdown the work is finished gracefully and
//! the lease released, so a standby takes over after at most one lease duration.
//!
//! Each replica writes the Lease under its own field manager (kube-lease-manager's default,
//! `kube-lease-manager-<identity>`): server-side apply detects a concurrent lock only between
//! distinct managers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Settings of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity (holderIdentity).
    pub identity: String,
    /// How long a lease is valid after its last renewal, in whole seconds.
    pub lease_duration_secs: u64,
    /// How long before expiry the holder renews, in whole seconds (less than the duration).
    pub renew_grace_secs: u64,
}

/// Leader-election settings that kube-lease-manager would refuse (it panics on them).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LeaderElectionConfigError {
    /// A duration is not a positive whole number of seconds.
    #[error("--leader-election-{flag} must be a positive whole number of seconds, got {value:?}")]
    NotWholeSeconds {
        /// The flag suffix.
        flag: &'static str,
        /// The value given.
        value: Duration,
    },
    /// Renew grace not below lease duration.
    #[error(
        "--leader-election-renew-grace ({grace}s) must be shorter than --leader-election-lease-duration ({duration}s)"
    )]
    GraceTooLong {
        /// Grace seconds.
        grace: u64,
        /// Duration seconds.
        duration: u64,
    },
}

/// Checks and converts the two durations into whole seconds.
pub fn lease_seconds(
    duration: Duration,
    grace: Duration,
) -> Result<(u64, u64), LeaderElectionConfigError> {
    let whole = |flag, d: Duration| {
        if d.subsec_nanos() != 0 || d.as_secs() == 0 {
            Err(LeaderElectionConfigError::NotWholeSeconds { flag, value: d })
        } else {
            Ok(d.as_secs())
        }
    };
    let d = whole("lease-duration", duration)?;
    let g = whole("renew-grace", grace)?;
    if g >= d {
        return Err(LeaderElectionConfigError::GraceTooLong {
            grace: g,
            duration: d,
        });
    }
    Ok((d, g))
}

/// Timeout of each lease request: three quarters of the renewal margin.
pub fn lease_request_timeout(cfg: &LeaderElectionConfig) -> Duration {
    Duration::from_millis(cfg.renew_grace_secs * 750)
}

async fn build_manager(
    client: &Client,
    cfg: &LeaderElectionConfig,
) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
    LeaseManagerBuilder::new(client.clone(), &cfg.lease_name)
        .with_namespace(&cfg.namespace)
        .with_identity(&cfg.identity)
        .with_duration(cfg.lease_duration_secs)
        .with_grace(cfg.renew_grace_secs)
        .build()
        .await
}

struct Running {
    handle: JoinHandle<()>,
    token: CancellationToken,
}

async fn stop_now(running: &mut Option<Running>) {
    if let Some(r) = running.take() {
        r.handle.abort();
        let _ = r.handle.await;
    }
}

async fn stop_gracefully(running: &mut Option<Running>) {
    if let Some(r) = running.take() {
        r.token.cancel();
        let _ = r.handle.await;
    }
}

/// Campaigns for the lease until `shutdown`; runs `work(token)` while leading. `work` must
/// return soon after `token` is cancelled.
pub async fn run<F, Fut>(
    client: Client,
    cfg: LeaderElectionConfig,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    work: F,
) where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    info!(lease = %cfg.lease_name, namespace = %cfg.namespace, identity = %cfg.identity, "campaigning for leadership");
    let mut retry = Duration::from_secs(1);
    loop {
        let manager = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            m = build_manager(&client, &cfg) => m,
        };
        let manager = match manager {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, retry_in = ?retry, "cannot set up the leader-election lease");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(Duration::from_secs(cfg.renew_grace_secs.max(1)));
                continue;
            }
        };
        retry = Duration::from_secs(1);
        let mut running: Option<Running> = None;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    info!("shutting down: finishing in-flight reconciles before releasing the lease");
                    stop_gracefully(&mut running).await;
                    metrics.set_leader(false);
                    match manager.release().await {
                        Ok(()) => info!(lease = %cfg.lease_name, "released the lease"),
                        Err(e) => warn!(error = %e, "cannot release the lease; it expires on its own"),
                    }
                    return;
                }
                changed = manager.changed() => match changed {
                    Ok(true) => {
                        info!(identity = %cfg.identity, "became the leader; starting controllers");
                        metrics.set_leader(true);
                        let token = shutdown.child_token();
                        let handle = tokio::spawn(work(token.clone()));
                        running = Some(Running { handle, token });
                    }
                    Ok(false) => {
                        warn!(identity = %cfg.identity, "lost the lease; stopping controllers");
                        stop_now(&mut running).await;
                        metrics.set_leader(false);
                    }
                    Err(e) => {
                        // Cannot prove we still hold the lease: step down now, campaign again.
                        warn!(error = %e, "lease renewal failed; stepping down");
                        stop_now(&mut running).await;
                        metrics.set_leader(false);
                        break;
                    }
                }
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_must_be_whole_seconds_with_grace_below_duration() {
        assert_eq!(
            lease_seconds(Duration::from_secs(15), Duration::from_secs(5)),
            Ok((15, 5))
        );
        assert!(matches!(
            lease_seconds(Duration::from_millis(1500), Duration::from_secs(1)),
            Err(LeaderElectionConfigError::NotWholeSeconds {
                flag: "lease-duration",
                ..
            })
        ));
        assert!(matches!(
            lease_seconds(Duration::from_secs(5), Duration::ZERO),
            Err(LeaderElectionConfigError::NotWholeSeconds {
                flag: "renew-grace",
                ..
            })
        ));
        assert_eq!(
            lease_seconds(Duration::from_secs(5), Duration::from_secs(5)),
            Err(LeaderElectionConfigError::GraceTooLong {
                grace: 5,
                duration: 5
            })
        );
    }

    #[test]
    fn request_timeout_fits_inside_the_renewal_margin() {
        let cfg = LeaderElectionConfig {
            lease_name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            lease_duration_secs: 15,
            renew_grace_secs: 4,
        };
        assert_eq!(lease_request_timeout(&cfg), Duration::from_secs(3));
    }
}
