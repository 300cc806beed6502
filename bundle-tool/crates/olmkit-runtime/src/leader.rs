//! Leader election on a `coordination.k8s.io/v1` Lease, gating the controllers so that two
//! replicas never reconcile at once.
//!
//! The algorithm is client-go's `tools/leaderelection` (`LeaderElector.tryAcquireOrRenew`), the
//! one controller-runtime managers use, so that the timing operators and admins know holds:
//!
//! - **Candidates** read the Lease every retry period (2 s by default, with up to 20 % jitter,
//!   client-go's `JitterFactor` 1.2). A Lease whose holder is empty (released) is taken at once;
//!   a Lease held by another identity is taken only when its record has not changed for its
//!   `leaseDurationSeconds` *as observed by this replica's monotonic clock* (client-go's
//!   `observedTime`), so clock skew between nodes cannot make two leaders.
//! - **Writes are compare-and-swap**: a merge patch carrying the `metadata.resourceVersion` that
//!   was read, which the API server refuses with `409 Conflict` if anyone wrote in between. Of
//!   two candidates racing for a released Lease exactly one wins. (A patch, not an update, so the
//!   role stays `create`, `get`, `patch` on leases, as released CSVs grant it.)
//! - **The leader** renews every retry period; if no renewal has succeeded for the renew
//!   deadline (lease duration minus `--leader-election-renew-grace`), or the Lease names someone
//!   else, it stops its work at once (in-flight reconciles are dropped at their next await) and
//!   campaigns again as a candidate.
//! - **Each term starts from nothing**: the work is a fresh task per term (new watches, caches,
//!   queues), so nothing cached, watched or queued as a follower or in an earlier term survives.
//! - **On shutdown** the work is asked to finish (in-flight reconciles complete) for at most the
//!   shutdown timeout, then aborted, and the Lease is released in every case (holder, times and
//!   duration cleared), so a candidate takes over within one retry period instead of waiting
//!   for expiry. Released this way, the Lease is also taken at once by kube-lease-manager (the
//!   0.4.0 operator) and by client-go.
//!
//! Every Lease request has a timeout shorter than the renewal margin, so a leader cut off from
//! the API server steps down before its Lease can expire and a standby take over.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;

/// client-go's `JitterFactor`: candidates wait up to this much longer than the retry period.
const JITTER: f64 = 0.2;

/// Settings of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity (holderIdentity).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal, in whole seconds (the Lease's
    /// `leaseDurationSeconds` is an integer).
    pub lease_duration_secs: u64,
    /// How long before expiry the holder gives up renewing, in whole seconds: the renew
    /// deadline is the lease duration minus this.
    pub renew_grace_secs: u64,
    /// How often candidates look at the Lease and the leader renews it.
    pub retry_period: Duration,
    /// Field manager of the Lease writes (`<operator>-leader-election`).
    pub field_manager: String,
}

impl LeaderElectionConfig {
    /// client-go's `RenewDeadline`.
    fn renew_deadline(&self) -> Duration {
        Duration::from_secs(self.lease_duration_secs - self.renew_grace_secs)
    }
}

/// Leader-election settings that cannot work.
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
    /// The retry period does not fit into the renew deadline (client-go's check:
    /// `RenewDeadline > JitterFactor * RetryPeriod`).
    #[error(
        "--leader-election-retry-period ({retry:?}) must be positive and shorter than the renew deadline \
         (lease duration minus renew grace, {deadline:?}) divided by 1.2"
    )]
    RetryTooLong {
        /// The retry period.
        retry: Duration,
        /// The renew deadline.
        deadline: Duration,
    },
}

/// Checks and converts the durations: lease duration and renew grace in whole seconds.
pub fn lease_seconds(
    duration: Duration,
    grace: Duration,
    retry: Duration,
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
    let deadline = Duration::from_secs(d - g);
    if retry.is_zero() || retry.mul_f64(1.0 + JITTER) >= deadline {
        return Err(LeaderElectionConfigError::RetryTooLong { retry, deadline });
    }
    Ok((d, g))
}

/// Timeout of each Lease request: three quarters of the renewal margin, and never more than the
/// renew deadline, so a hung request cannot outlast the leader's right to lead.
pub fn lease_request_timeout(cfg: &LeaderElectionConfig) -> Duration {
    Duration::from_millis(cfg.renew_grace_secs * 750).min(cfg.renew_deadline())
}

/// What a Lease request can fail with.
#[derive(Debug, Error)]
enum LeaseError {
    /// Someone else wrote the Lease between our read and our write.
    #[error("the Lease changed since it was read")]
    Conflict,
    /// Any other API error.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The Lease as last read, and when this replica saw its record change.
struct Observed {
    lease: Lease,
    at: Instant,
}

/// One replica's view of the election: client-go's `LeaderElector` state.
struct Elector {
    api: Api<Lease>,
    cfg: LeaderElectionConfig,
    observed: Option<Observed>,
}

fn spec_of(lease: &Lease) -> LeaseSpec {
    lease.spec.clone().unwrap_or_default()
}

fn holder_of(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

/// True when `spec` is held by someone other than `identity` whose lease has not expired as
/// observed here: its record has not stayed unchanged since `observed_at` for its duration.
fn held_by_other(identity: &str, spec: &LeaseSpec, observed_at: Option<Instant>) -> bool {
    let holder = holder_of(spec);
    if holder.is_empty() || holder == identity {
        return false;
    }
    let secs = spec
        .lease_duration_seconds
        .unwrap_or(0)
        .max(0)
        .unsigned_abs();
    observed_at.is_some_and(|at| at.elapsed() < Duration::from_secs(secs.into()))
}

/// The record `identity` writes over `old` at `now` (client-go's `tryAcquireOrRenew`): a
/// renewal keeps the acquire time and transition count, a takeover counts one more transition.
fn our_spec(identity: &str, duration_secs: u64, old: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    let ours = holder_of(old) == identity;
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(i32::try_from(duration_secs).unwrap_or(i32::MAX)),
        acquire_time: if ours {
            old.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(old.lease_transitions.unwrap_or(0) + i32::from(!ours)),
        ..old.clone()
    }
}

impl Elector {
    fn new(client: Client, cfg: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: None,
        }
    }

    /// Records `lease` as read now; the observed time moves only when its record changed.
    fn observe(&mut self, lease: Lease) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.lease.spec != lease.spec);
        let at = match &self.observed {
            Some(o) if !changed => o.at,
            _ => Instant::now(),
        };
        self.observed = Some(Observed { lease, at });
    }

    /// When this replica saw the current record change.
    fn observed_at(&self) -> Option<Instant> {
        self.observed.as_ref().map(|o| o.at)
    }

    /// client-go's `tryAcquireOrRenew`: true when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let now = Timestamp::now();
        let (id, secs) = (self.cfg.identity.clone(), self.cfg.lease_duration_secs);
        let id = id.as_str();
        let Some(lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.lease_name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    lease_transitions: Some(0),
                    ..our_spec(id, secs, &LeaseSpec::default(), now)
                }),
            };
            let pp = PostParams {
                field_manager: Some(self.cfg.field_manager.clone()),
                ..Default::default()
            };
            return match self.api.create(&pp, &lease).await {
                Ok(created) => {
                    self.observe(created);
                    Ok(true)
                }
                Err(e) if is_conflict(&e) => Err(LeaseError::Conflict),
                Err(e) => Err(e.into()),
            };
        };
        self.observe(lease.clone());
        let old = spec_of(&lease);
        if held_by_other(id, &old, self.observed_at()) {
            return Ok(false);
        }
        let spec = our_spec(id, secs, &old, now);
        let written = self.write(&lease, &spec).await?;
        self.observe(written);
        Ok(true)
    }

    /// Writes `spec` into `lease` if nobody wrote it since it was read.
    async fn write(&self, lease: &Lease, spec: &LeaseSpec) -> Result<Lease, LeaseError> {
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": spec.holder_identity,
                "leaseDurationSeconds": spec.lease_duration_seconds,
                "acquireTime": spec.acquire_time,
                "renewTime": spec.renew_time,
                "leaseTransitions": spec.lease_transitions,
            },
        });
        let pp = PatchParams {
            field_manager: Some(self.cfg.field_manager.clone()),
            ..Default::default()
        };
        match self
            .api
            .patch(&self.cfg.lease_name, &pp, &Patch::Merge(&patch))
            .await
        {
            Ok(l) => Ok(l),
            Err(e) if is_conflict(&e) => Err(LeaseError::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    /// Clears the Lease if this replica still holds it (client-go's `release`).
    async fn release(&mut self) -> Result<bool, LeaseError> {
        let Some(lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            return Ok(false);
        };
        if holder_of(&spec_of(&lease)) != self.cfg.identity {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": null,
                "leaseDurationSeconds": null,
                "acquireTime": null,
                "renewTime": null,
            },
        });
        let pp = PatchParams {
            field_manager: Some(self.cfg.field_manager.clone()),
            ..Default::default()
        };
        match self
            .api
            .patch(&self.cfg.lease_name, &pp, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Err(LeaseError::Conflict),
            Err(e) => Err(e.into()),
        }
    }
}

/// The retry period with client-go's jitter (`wait.Jitter(RetryPeriod, 1.2)`).
fn jittered(period: Duration) -> Duration {
    // Sub-second clock noise is jitter enough to keep candidates from polling in lockstep.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    period.mul_f64(1.0 + JITTER * f64::from(nanos) / 1e9)
}

/// Sleeps `d` unless `shutdown` comes first; false on shutdown.
async fn sleep_or(shutdown: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

/// Campaigns until this replica holds the Lease (true) or `shutdown` (false).
async fn acquire(elector: &mut Elector, shutdown: &CancellationToken) -> bool {
    loop {
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return false,
            r = elector.try_acquire_or_renew() => r,
        };
        match attempt {
            Ok(true) => return true,
            Ok(false) => debug!(lease = %elector.cfg.lease_name, "lease held by another replica"),
            Err(LeaseError::Conflict) => debug!("lost a race for the lease"),
            Err(e) => warn!(error = %e, "cannot read or take the lease"),
        }
        if !sleep_or(shutdown, jittered(elector.cfg.retry_period)).await {
            return false;
        }
    }
}

/// Why a term ended.
enum TermEnd {
    /// Shutdown was requested.
    Shutdown,
    /// The Lease was lost or could not be renewed in time.
    Lost,
}

/// Renews every retry period while leading, until shutdown or until leadership is lost.
async fn hold(elector: &mut Elector, shutdown: &CancellationToken) -> TermEnd {
    let mut last_renewed = Instant::now();
    loop {
        if !sleep_or(shutdown, elector.cfg.retry_period).await {
            return TermEnd::Shutdown;
        }
        let left = elector
            .cfg
            .renew_deadline()
            .saturating_sub(last_renewed.elapsed());
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return TermEnd::Shutdown,
            r = tokio::time::timeout(left, elector.try_acquire_or_renew()) => r,
        };
        match attempt {
            Ok(Ok(true)) => last_renewed = Instant::now(),
            Ok(Ok(false)) => {
                warn!(identity = %elector.cfg.identity, "another replica holds the lease");
                return TermEnd::Lost;
            }
            Ok(Err(e)) => warn!(error = %e, "cannot renew the lease"),
            Err(_) => {}
        }
        if last_renewed.elapsed() >= elector.cfg.renew_deadline() {
            warn!(deadline = ?elector.cfg.renew_deadline(), "no renewal within the renew deadline");
            return TermEnd::Lost;
        }
    }
}

struct Running {
    handle: JoinHandle<()>,
    token: CancellationToken,
}

impl Running {
    /// Stops the work now; in-flight reconciles are dropped at their next await.
    async fn abort(self) {
        self.handle.abort();
        let _ = self.handle.await;
    }

    /// Asks the work to finish and waits for it at most `timeout`, then aborts it.
    async fn finish(mut self, timeout: Duration) {
        self.token.cancel();
        if tokio::time::timeout(timeout, &mut self.handle)
            .await
            .is_err()
        {
            warn!(timeout = ?timeout, "graceful shutdown timed out; stopping in-flight reconciles");
            self.abort().await;
        }
    }
}

/// Campaigns for the Lease until `shutdown`; runs a fresh `work(token)` in each term. `work`
/// must return soon after `token` is cancelled; it gets `shutdown_timeout` to do so before it
/// is aborted and the Lease released.
pub async fn run<F, Fut>(
    client: Client,
    cfg: LeaderElectionConfig,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    shutdown_timeout: Duration,
    work: F,
) where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    info!(lease = %cfg.lease_name, namespace = %cfg.namespace, identity = %cfg.identity,
        retry_period = ?cfg.retry_period, "campaigning for leadership");
    let mut elector = Elector::new(client, cfg);
    while acquire(&mut elector, &shutdown).await {
        info!(identity = %elector.cfg.identity, "became the leader; starting controllers");
        metrics.set_leader(true);
        let token = shutdown.child_token();
        let running = Running {
            handle: tokio::spawn(work(token.clone())),
            token,
        };
        match hold(&mut elector, &shutdown).await {
            TermEnd::Lost => {
                warn!(identity = %elector.cfg.identity, "lost the lease; stopping controllers");
                running.abort().await;
                metrics.set_leader(false);
            }
            TermEnd::Shutdown => {
                info!("shutting down: finishing in-flight reconciles before releasing the lease");
                running.finish(shutdown_timeout).await;
                metrics.set_leader(false);
                break;
            }
        }
    }
    release(&mut elector).await;
}

/// Releases the Lease if held, within one request timeout per attempt.
async fn release(elector: &mut Elector) {
    let timeout = lease_request_timeout(&elector.cfg);
    match tokio::time::timeout(timeout, elector.release()).await {
        Ok(Ok(true)) => info!(lease = %elector.cfg.lease_name, "released the lease"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => warn!(error = %e, "cannot release the lease; it expires on its own"),
        Err(_) => warn!(
            ?timeout,
            "releasing the lease timed out; it expires on its own"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: Duration = Duration::from_secs(2);

    #[test]
    fn durations_must_be_whole_seconds_with_grace_below_duration() {
        assert_eq!(
            lease_seconds(Duration::from_secs(15), Duration::from_secs(5), RETRY),
            Ok((15, 5))
        );
        assert!(matches!(
            lease_seconds(Duration::from_millis(1500), Duration::from_secs(1), RETRY),
            Err(LeaderElectionConfigError::NotWholeSeconds {
                flag: "lease-duration",
                ..
            })
        ));
        assert!(matches!(
            lease_seconds(Duration::from_secs(5), Duration::ZERO, RETRY),
            Err(LeaderElectionConfigError::NotWholeSeconds {
                flag: "renew-grace",
                ..
            })
        ));
        assert_eq!(
            lease_seconds(Duration::from_secs(5), Duration::from_secs(5), RETRY),
            Err(LeaderElectionConfigError::GraceTooLong {
                grace: 5,
                duration: 5
            })
        );
    }

    #[test]
    fn the_retry_period_fits_into_the_renew_deadline() {
        let deadline = Duration::from_secs(2);
        assert_eq!(
            lease_seconds(Duration::from_secs(4), Duration::from_secs(2), RETRY),
            Err(LeaderElectionConfigError::RetryTooLong {
                retry: RETRY,
                deadline
            })
        );
        assert!(
            lease_seconds(
                Duration::from_secs(4),
                Duration::from_secs(2),
                Duration::ZERO
            )
            .is_err()
        );
        assert!(
            lease_seconds(
                Duration::from_secs(4),
                Duration::from_secs(2),
                Duration::from_millis(500)
            )
            .is_ok()
        );
    }

    fn cfg(duration: u64, grace: u64) -> LeaderElectionConfig {
        LeaderElectionConfig {
            lease_name: "l".into(),
            namespace: "n".into(),
            identity: "me".into(),
            lease_duration_secs: duration,
            renew_grace_secs: grace,
            retry_period: RETRY,
            field_manager: "test-leader-election".into(),
        }
    }

    #[test]
    fn request_timeout_fits_inside_the_renewal_margin() {
        assert_eq!(lease_request_timeout(&cfg(15, 4)), Duration::from_secs(3));
        assert_eq!(cfg(15, 5).renew_deadline(), Duration::from_secs(10));
    }

    #[test]
    fn jitter_stays_within_client_gos_factor() {
        for _ in 0..100 {
            let d = jittered(RETRY);
            assert!(d >= RETRY && d <= RETRY.mul_f64(1.2), "{d:?}");
        }
    }

    fn held_by(holder: Option<&str>, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    fn ago(secs: u64) -> Option<Instant> {
        Instant::now().checked_sub(Duration::from_secs(secs))
    }

    #[test]
    fn a_lease_is_free_when_released_ours_or_unchanged_for_its_duration() {
        let spec = held_by(Some("other"), 15);
        assert!(held_by_other("me", &spec, ago(3)));
        assert!(
            !held_by_other("me", &spec, ago(16)),
            "expired by observed time"
        );
        for free in [
            held_by(None, 15),
            held_by(Some(""), 15),
            held_by(Some("me"), 15),
        ] {
            assert!(!held_by_other("me", &free, ago(3)), "{free:?}");
        }
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(1_010).unwrap();
        let mut theirs = held_by(Some("other"), 15);
        theirs.lease_transitions = Some(3);
        let taken = our_spec("me", 15, &theirs, t0);
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(t0)));
        let renewed = our_spec("me", 15, &taken, t1);
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.acquire_time, Some(MicroTime(t0)));
        assert_eq!(renewed.renew_time, Some(MicroTime(t1)));
        let from_released = our_spec("me", 15, &held_by(None, 15), t1);
        assert_eq!(from_released.lease_transitions, Some(1));
        assert_eq!(from_released.lease_duration_seconds, Some(15));
    }
}
