//! Resource budgets of the catalog server, so that no client can starve another.
//!
//! An attack found one HTTP/2 connection opening hundreds of `ListBundles` streams and never
//! reading them: each stream parked a blocking-pool thread on a full channel, the pool grew to
//! its 512-thread ceiling, and every other client's `GetBundle` then queued behind those threads
//! until its deadline. The budgets here make that impossible:
//!
//! - **Open streams.** Every streaming response holds a [`StreamPermit`] from a total budget and
//!   from a smaller per-connection budget (connections are told apart by peer address); beyond
//!   either, the call fails at once with `RESOURCE_EXHAUSTED` rather than queueing. HTTP/2's own
//!   `max_concurrent_streams` bounds what one connection can even ask for.
//! - **Blocking work.** Queries that may read the disk run on tokio's blocking pool, but only
//!   while holding a permit of one of two separate pools: one for unary calls, one for producing
//!   the next batch of a stream. A stream holds no thread while its client does not read, and
//!   streams can never take the permits unary calls need. A stream's batch is produced by a task
//!   of its own, not by the response body's future: a second attack (issue #24) showed that a
//!   permit handed to a waiter inside a body the transport never polls again (its client
//!   advertised a zero window) is never used nor given back, so two such streams held the one
//!   stream worker of a 2-core machine forever and every other `ListBundles` timed out.
//! - **Health.** A [`Pressure`] watchdog reports when the server cannot serve for longer than
//!   a grace period (the open-stream budget exhausted, or calls or stream batches waiting for a
//!   worker the whole time), so `serve` can flip health to `NOT_SERVING` and back.
//! - **Connections, time and request bytes** are bounded by [`crate::transport`] (connection
//!   cap, handshake timeout, cancelling streams stalled on their client) and
//!   [`crate::request_limit`] (request message size and buffered bytes); their limits are here.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` per connection.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Default number of streaming responses open at once, in total. A stream whose client stops
/// reading can hold up to about 800 KiB (HTTP/2's 400 KiB send buffer, the encoder's buffer, one
/// batch), so this bounds that memory to about 26 MiB; OLM keeps a handful open per catalog.
pub const DEFAULT_MAX_OPEN_STREAMS: usize = 32;
/// Default number of streaming responses open at once on one connection.
pub const DEFAULT_MAX_OPEN_STREAMS_PER_CONNECTION: usize = 8;
/// Default time the server may be unable to serve before health says `NOT_SERVING`.
pub const DEFAULT_OVERLOAD_GRACE: Duration = Duration::from_secs(30);
/// Default number of client connections served at once (lowered to fit the open-file limit).
/// OLM keeps one or two per catalog source.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default time a new connection has to send the HTTP/2 preface.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a call may wait for its client, with a response chunk it cannot send (the
/// client's window is closed) or part of a request message it has not finished sending, before
/// the call alone is cancelled.
pub const DEFAULT_STREAM_STALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Default largest request message. Every request of the registry, health and reflection APIs
/// is a few names: Kubernetes names are at most 253 bytes.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024;
/// Default bytes of unfinished request messages one connection may have the server hold.
pub const DEFAULT_MAX_BUFFERED_REQUEST_BYTES_PER_CONNECTION: usize = 64 * 1024;
/// Default bytes of unfinished request messages the whole server holds.
pub const DEFAULT_MAX_BUFFERED_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Limits of the catalog server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// HTTP/2 `max_concurrent_streams` per connection (all RPCs).
    pub max_concurrent_streams: u32,
    /// Streaming responses open at once, in total.
    pub max_open_streams: usize,
    /// Streaming responses open at once on one connection.
    pub max_open_streams_per_connection: usize,
    /// Blocking workers for unary queries (0: two per CPU, at least 4: queries are CPU work on
    /// a warm page cache, disk reads on a cold one).
    pub unary_workers: usize,
    /// Blocking workers producing stream batches (0: half the CPUs, at least 1).
    pub stream_workers: usize,
    /// How long the server may be unable to serve before health says `NOT_SERVING`.
    pub overload_grace: Duration,
    /// Client connections served at once (the open-file limit may lower it).
    pub max_connections: usize,
    /// How long a new connection has to send the HTTP/2 preface.
    pub handshake_timeout: Duration,
    /// How long a call may wait for its client before it alone is cancelled.
    pub stream_stall_timeout: Duration,
    /// Largest request message, in bytes.
    pub max_request_bytes: usize,
    /// Bytes of unfinished request messages held for one connection.
    pub max_buffered_request_bytes_per_connection: usize,
    /// Bytes of unfinished request messages held in total.
    pub max_buffered_request_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_open_streams: DEFAULT_MAX_OPEN_STREAMS,
            max_open_streams_per_connection: DEFAULT_MAX_OPEN_STREAMS_PER_CONNECTION,
            unary_workers: 0,
            stream_workers: 0,
            overload_grace: DEFAULT_OVERLOAD_GRACE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            stream_stall_timeout: DEFAULT_STREAM_STALL_TIMEOUT,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_buffered_request_bytes_per_connection:
                DEFAULT_MAX_BUFFERED_REQUEST_BYTES_PER_CONNECTION,
            max_buffered_request_bytes: DEFAULT_MAX_BUFFERED_REQUEST_BYTES,
        }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Limits {
    /// Unary workers after applying the default.
    pub fn effective_unary_workers(&self) -> usize {
        match self.unary_workers {
            0 => (2 * cpus()).max(4),
            n => n,
        }
    }

    /// Stream workers after applying the default.
    pub fn effective_stream_workers(&self) -> usize {
        match self.stream_workers {
            0 => (cpus() / 2).max(1),
            n => n,
        }
    }

    /// The most blocking-pool threads the queries can use at once (for sizing the runtime).
    pub fn blocking_threads(&self) -> usize {
        self.effective_unary_workers() + self.effective_stream_workers()
    }
}

/// A budget refused a call.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BudgetError {
    /// The server-wide open-stream budget is used up.
    #[error("too many streaming calls in progress on this server (limit {limit}); retry later")]
    Streams {
        /// The limit.
        limit: usize,
    },
    /// This connection's open-stream budget is used up.
    #[error(
        "too many streaming calls in progress on this connection (limit {limit}); read or cancel them first"
    )]
    ConnectionStreams {
        /// The limit.
        limit: usize,
    },
    /// The worker pool was closed (the server is stopping).
    #[error("the server is shutting down")]
    Closed,
}

impl From<BudgetError> for tonic::Status {
    fn from(e: BudgetError) -> Self {
        match e {
            BudgetError::Closed => tonic::Status::unavailable(e.to_string()),
            _ => tonic::Status::resource_exhausted(e.to_string()),
        }
    }
}

/// The shared budgets. Cloning shares them.
#[derive(Clone, Debug)]
pub struct Budgets {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limits: Limits,
    streams: Arc<Semaphore>,
    per_connection: Mutex<HashMap<SocketAddr, usize>>,
    unary: Arc<Semaphore>,
    stream_work: Arc<Semaphore>,
    /// Unary calls waiting for a worker right now.
    unary_waiting: AtomicUsize,
    /// Stream batches waiting for a worker right now.
    stream_waiting: Arc<AtomicUsize>,
    /// Stream batches that got a worker, ever, and that count at the last overload check:
    /// batches queue behind each other under ordinary load, so what says the pool cannot serve
    /// is batches waiting while none gets a worker.
    stream_started: Arc<AtomicUsize>,
    stream_started_seen: AtomicUsize,
}

/// One open streaming response's share of the budgets; released when dropped (the stream ended
/// or the client reset it).
#[derive(Debug)]
pub struct StreamPermit {
    _total: OwnedSemaphorePermit,
    peer: Option<SocketAddr>,
    budgets: Budgets,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        if let Some(peer) = self.peer
            && let Ok(mut map) = self.budgets.inner.per_connection.lock()
            && let Some(n) = map.get_mut(&peer)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&peer);
            }
        }
    }
}

/// Decrements the waiting-count even if the waiting future is dropped (client cancelled).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Aborts a task when its handle is dropped: a stream that goes away does not leave its next
/// batch queued for a worker.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Budgets {
    /// Budgets for these limits.
    pub fn new(limits: Limits) -> Self {
        let unary = limits.effective_unary_workers();
        let stream_work = limits.effective_stream_workers();
        Self {
            inner: Arc::new(Inner {
                streams: Arc::new(Semaphore::new(limits.max_open_streams.max(1))),
                per_connection: Mutex::default(),
                unary: Arc::new(Semaphore::new(unary)),
                stream_work: Arc::new(Semaphore::new(stream_work)),
                unary_waiting: AtomicUsize::new(0),
                stream_waiting: Arc::default(),
                stream_started: Arc::default(),
                stream_started_seen: AtomicUsize::new(0),
                limits,
            }),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Takes a slot for a streaming response from `peer`, or says which budget is used up.
    pub fn open_stream(&self, peer: Option<SocketAddr>) -> Result<StreamPermit, BudgetError> {
        let limits = &self.inner.limits;
        let total = self
            .inner
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| BudgetError::Streams {
                limit: limits.max_open_streams,
            })?;
        if let Some(peer) = peer {
            let mut map = self
                .inner
                .per_connection
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let n = map.entry(peer).or_insert(0);
            if *n >= limits.max_open_streams_per_connection {
                return Err(BudgetError::ConnectionStreams {
                    limit: limits.max_open_streams_per_connection,
                });
            }
            *n += 1;
        }
        Ok(StreamPermit {
            _total: total,
            peer,
            budgets: self.clone(),
        })
    }

    /// Runs `f` on the blocking pool once a unary worker is free (first come, first served).
    pub async fn unary<T, F>(&self, f: F) -> Result<T, BudgetError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let permit = {
            self.inner.unary_waiting.fetch_add(1, Ordering::Relaxed);
            let _waiting = Waiting(&self.inner.unary_waiting);
            self.inner.unary.clone().acquire_owned().await
        }
        .map_err(|_| BudgetError::Closed)?;
        run_blocking(permit, f).await
    }

    /// Runs `f` (producing a stream's next batch) on the blocking pool once a stream worker is
    /// free.
    ///
    /// Waiting for the worker and running `f` happen in a task of their own, started at once:
    /// the permit is taken, used and given back whether or not the caller's future is polled
    /// again. The caller is a response body, which HTTP/2 stops polling while its client's
    /// window is closed; had it awaited the semaphore itself, a permit handed to it would stay
    /// with it for as long as the client pleased (issue #24). Only the finished batch waits for
    /// the caller. Dropping the returned future abandons the batch.
    pub fn stream_work<T, F>(&self, f: F) -> impl Future<Output = Result<T, BudgetError>> + Send
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let workers = self.inner.stream_work.clone();
        let waiting = self.inner.stream_waiting.clone();
        let started = self.inner.stream_started.clone();
        let task = AbortOnDrop(tokio::spawn(async move {
            let permit = {
                waiting.fetch_add(1, Ordering::Relaxed);
                let _waiting = Waiting(&waiting);
                workers.acquire_owned().await
            }
            .map_err(|_| BudgetError::Closed)?;
            started.fetch_add(1, Ordering::Relaxed);
            run_blocking(permit, f).await
        }));
        async move {
            let mut task = task;
            (&mut task.0).await.map_err(|_| BudgetError::Closed)?
        }
    }

    /// What keeps the server from serving right now, if anything. Meant to be called by one
    /// watchdog at a steady pace: the stream-worker check compares with the previous call.
    pub fn overloaded(&self) -> Option<String> {
        if self.inner.streams.available_permits() == 0 {
            return Some(format!(
                "all {} streaming-call slots are in use",
                self.inner.limits.max_open_streams
            ));
        }
        let waiting = self.inner.unary_waiting.load(Ordering::Relaxed);
        if waiting > 0 {
            return Some(format!(
                "{waiting} call(s) waiting for one of {} query workers",
                self.inner.limits.effective_unary_workers()
            ));
        }
        let started = self.inner.stream_started.load(Ordering::Relaxed);
        let seen = self
            .inner
            .stream_started_seen
            .swap(started, Ordering::Relaxed);
        let waiting = self.inner.stream_waiting.load(Ordering::Relaxed);
        if waiting > 0 && started == seen {
            return Some(format!(
                "{waiting} stream batch(es) waiting for one of {} stream workers, none of \
                 which took a batch since the last check",
                self.inner.limits.effective_stream_workers()
            ));
        }
        None
    }

    /// Streaming responses open now.
    pub fn open_streams(&self) -> usize {
        self.inner
            .limits
            .max_open_streams
            .max(1)
            .saturating_sub(self.inner.streams.available_permits())
    }
}

async fn run_blocking<T, F>(permit: OwnedSemaphorePermit, f: F) -> Result<T, BudgetError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let out = tokio::task::spawn_blocking(move || {
        let out = f();
        drop(permit);
        out
    })
    .await;
    // A panicking query is a bug; surface it as the pool being unusable rather than unwinding
    // into the connection task.
    out.map_err(|_| BudgetError::Closed)
}

/// Tracks how long the server has continuously been unable to serve.
#[derive(Debug)]
pub struct Pressure {
    since: Option<tokio::time::Instant>,
    grace: Duration,
}

/// A change the watchdog asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PressureChange {
    /// Overloaded for longer than the grace period: report `NOT_SERVING` with this reason.
    Overloaded(String),
    /// No longer overloaded: report `SERVING` again.
    Recovered,
}

impl Pressure {
    /// A watchdog with this grace period.
    pub fn new(grace: Duration) -> Self {
        Self { since: None, grace }
    }

    /// Feeds one sample (the result of [`Budgets::overloaded`]) taken at `now`; returns the
    /// change to make, if any. `unhealthy` is whether `NOT_SERVING` is currently reported for
    /// overload.
    pub fn sample(
        &mut self,
        overloaded: Option<String>,
        now: tokio::time::Instant,
        unhealthy: bool,
    ) -> Option<PressureChange> {
        match overloaded {
            None => {
                self.since = None;
                unhealthy.then_some(PressureChange::Recovered)
            }
            Some(reason) => {
                let since = *self.since.get_or_insert(now);
                (!unhealthy && now.duration_since(since) >= self.grace)
                    .then_some(PressureChange::Overloaded(reason))
            }
        }
    }
}

/// At most this many bytes of a client-supplied string go into an error message.
pub const ECHO_LIMIT: usize = 128;

/// A client-supplied string as error messages show it: quoted, and cut to [`ECHO_LIMIT`] bytes
/// (at a character boundary) with the full length noted, so a megabyte-long name does not come
/// back as a megabyte-long trailer.
pub fn echo(s: &str) -> String {
    match split(s) {
        None => format!("{s:?}"),
        Some(head) => format!("{head:?}… ({} bytes)", s.len()),
    }
}

/// Like [`echo`], unquoted (for the messages where opm prints the name bare).
pub fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    match split(s) {
        None => s.into(),
        Some(head) => format!("{head}… ({} bytes)", s.len()).into(),
    }
}

/// The first [`ECHO_LIMIT`] bytes of `s` (cut at a character boundary) when it is longer.
fn split(s: &str) -> Option<&str> {
    if s.len() <= ECHO_LIMIT {
        return None;
    }
    let mut end = ECHO_LIMIT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Some(&s[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn echo_bounds_long_input_and_keeps_short_input() {
        assert_eq!(echo("etcd"), "\"etcd\"");
        let long = "é".repeat(100_000);
        let shown = echo(&long);
        assert!(shown.len() < ECHO_LIMIT + 40, "{shown}");
        assert!(shown.ends_with("(200000 bytes)"), "{shown}");
        assert_eq!(cut("etcd"), "etcd");
        assert!(cut(&long).len() < ECHO_LIMIT + 40);
    }

    #[test]
    fn stream_budgets_refuse_beyond_total_and_per_connection() {
        let b = Budgets::new(Limits {
            max_open_streams: 3,
            max_open_streams_per_connection: 2,
            ..Limits::default()
        });
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let p1 = b.open_stream(Some(a)).unwrap();
        let _p2 = b.open_stream(Some(a)).unwrap();
        assert_eq!(
            b.open_stream(Some(a)).unwrap_err(),
            BudgetError::ConnectionStreams { limit: 2 }
        );
        let _p3 = b.open_stream(Some(c)).unwrap();
        assert_eq!(
            b.open_stream(Some(c)).unwrap_err(),
            BudgetError::Streams { limit: 3 }
        );
        assert!(b.overloaded().is_some());
        drop(p1);
        assert!(b.overloaded().is_none());
        assert_eq!(b.open_streams(), 2);
        b.open_stream(Some(a)).unwrap();
    }

    #[test]
    fn pressure_waits_for_the_grace_period_and_recovers() {
        let t0 = tokio::time::Instant::now();
        let mut p = Pressure::new(Duration::from_secs(5));
        let busy = || Some("busy".to_string());
        assert_eq!(p.sample(busy(), t0, false), None);
        assert_eq!(p.sample(busy(), t0 + Duration::from_secs(4), false), None);
        assert_eq!(
            p.sample(busy(), t0 + Duration::from_secs(5), false),
            Some(PressureChange::Overloaded("busy".into()))
        );
        assert_eq!(p.sample(busy(), t0 + Duration::from_secs(6), true), None);
        assert_eq!(
            p.sample(None, t0 + Duration::from_secs(7), true),
            Some(PressureChange::Recovered)
        );
        assert_eq!(p.sample(busy(), t0 + Duration::from_secs(8), false), None);
    }

    #[tokio::test]
    async fn a_stream_batch_nobody_awaits_still_gives_its_worker_back() {
        let b = Budgets::new(Limits {
            stream_workers: 1,
            ..Limits::default()
        });
        // Polled once each, then never again, like bodies behind closed HTTP/2 windows: the
        // first gets the worker, the second queues for it.
        let mut abandoned =
            Box::pin(b.stream_work(|| std::thread::sleep(Duration::from_millis(50))));
        let mut queued = Box::pin(b.stream_work(|| 1));
        assert!(futures::poll!(abandoned.as_mut()).is_pending());
        assert!(futures::poll!(queued.as_mut()).is_pending());
        let later = b.stream_work(|| 2);
        let out = tokio::time::timeout(Duration::from_secs(10), later)
            .await
            .expect("the worker is not held by futures nobody polls");
        assert_eq!(out.unwrap(), 2);
        drop((abandoned, queued));
        assert!(b.overloaded().is_none());
    }

    #[tokio::test]
    async fn unary_work_runs_on_the_blocking_pool() {
        let b = Budgets::new(Limits {
            unary_workers: 1,
            ..Limits::default()
        });
        let out = b.unary(|| 21 * 2).await.unwrap();
        assert_eq!(out, 42);
        assert!(b.overloaded().is_none());
    }
}
