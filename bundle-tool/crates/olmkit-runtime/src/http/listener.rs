//! The accept loop every listener of the operator uses (the webhook's HTTPS port and its
//! optional health port, `/metrics`, `/healthz` and `/readyz`), with the same connection limits
//! everywhere, so no port can be held open or made to buffer without bound:
//!
//! - **a connection cap** ([`ConnectionLimits::max_connections`]): at the cap, the connection
//!   that has been idle longest (no request in flight, for two seconds at least) is closed to make
//!   room, so idle and trickling clients cannot lock others out; while none qualifies, accepting
//!   waits (the kernel queues new connections meanwhile, first come first served);
//! - **a header read timeout** ([`ConnectionLimits::header_read_timeout`]): the TLS handshake
//!   and each HTTP/1.1 request's headers must arrive within it;
//! - **an idle timeout** ([`ConnectionLimits::idle_timeout`]): a connection with no request in
//!   flight for that long is closed (HTTP/2 gets a GOAWAY first). This also closes connections
//!   that never complete a request: idle after connecting or after the handshake, trickling
//!   headers (HTTP/1.1 or HTTP/2), or stuck before HTTP/2's preface;
//! - **a request lifetime** ([`ConnectionLimits::max_request_time`]): a request still in flight
//!   that long after its headers arrived, including the time its answer takes to be written
//!   (a client that does not read), has its connection closed, which frees what the request
//!   holds.
//!
//! A request counts as in flight from the moment its headers are complete until hyper has taken
//! the last byte of its answer; what hyper and TLS buffer per connection is bounded by
//! [`configure`] ([`HTTPS_CONNECTION_BYTES`], [`HTTP1_CONNECTION_BYTES`] and per request
//! [`REQUEST_BYTES`]). Ports without TLS speak HTTP/1.1 only.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum_server::accept::Accept;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Connections open at once on a plain-HTTP health port (the manager's probes,
/// `--webhook-health-port`).
pub const HEALTH_MAX_CONNECTIONS: usize = 16;

/// hyper's ceiling on HTTP/1.1 request headers.
pub const HYPER_MAX_HEADERS: usize = 256;
/// hyper's ceiling on an HTTP/1.1 connection's read buffer (headers must fit in it) and on what
/// it queues for writing.
pub const HYPER_MAX_BUF_SIZE: usize = 128 * 1024;
/// HTTP/2 header list ceiling, per stream (above the webhook's own 32 KiB limit, so that its
/// route answers 431 with a reason).
pub const H2_MAX_HEADER_LIST: u32 = 40 * 1024;
/// HTTP/2 receive windows: what a client can push before the server reads it.
pub const H2_STREAM_WINDOW: u32 = 256 * 1024;
/// HTTP/2 connection receive window: all streams of a connection together.
pub const H2_CONNECTION_WINDOW: u32 = 512 * 1024;
/// HTTP/2 streams per connection.
pub const H2_MAX_STREAMS: u32 = 32;
/// What HTTP/2 buffers per stream of an answer beyond what the client's window takes.
pub const H2_MAX_SEND_BUF: usize = 64 * 1024;
/// What rustls buffers per connection at most: 64 KiB of TLS records not yet sent (its
/// default `set_buffer_limit`), 16 KiB of received plaintext not yet read and one record of
/// up to 16 KiB being received.
pub const TLS_BUFFERS: usize = 96 * 1024;
/// Per connection: hyper's and h2's connection state, stream states, HPACK tables.
const CONNECTION_STATE: usize = 48 * 1024;

/// The most an HTTPS connection (HTTP/2 or HTTP/1.1) holds outside its requests: TLS buffers,
/// and the larger of HTTP/2's connection window plus one header block being received and
/// HTTP/1.1's read and write buffers.
pub const HTTPS_CONNECTION_BYTES: usize = TLS_BUFFERS + CONNECTION_STATE + {
    let h2 = H2_CONNECTION_WINDOW as usize + H2_MAX_HEADER_LIST as usize;
    let h1 = 2 * HYPER_MAX_BUF_SIZE;
    if h2 > h1 { h2 } else { h1 }
};
/// The most a plain HTTP/1.1 connection (health and plain metrics ports) holds: read and write
/// buffers.
pub const HTTP1_CONNECTION_BYTES: usize = CONNECTION_STATE + 2 * HYPER_MAX_BUF_SIZE;
/// What a request in flight holds outside its own accounting: its headers, HTTP/2's send buffer
/// and one frame of its answer being written.
pub const REQUEST_BYTES: usize = H2_MAX_HEADER_LIST as usize + H2_MAX_SEND_BUF + 64 * 1024;

/// How long a connection closed for idleness (or eviction) may take to finish its last writes.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// At the cap, only connections idle at least this long (or the idle timeout, if shorter) are
/// closed to make room: a client between two requests is not cut off as it sends the next.
/// That includes a client the webhook told to come back (`429`, `Retry-After: 1`): client-go
/// sleeps exactly the Retry-After, then sends on the same connection (`IsNextRetry` in
/// k8s.io/client-go/rest/with_retry.go), and Go's transport does not resend a POST whose
/// connection closed under it. At one second, as before, the eviction met that retry.
pub(crate) const EVICTABLE_AFTER: Duration = Duration::from_secs(2);
/// How often the accept loop, waiting at the cap, looks for a connection to close again.
const EVICT_POLL: Duration = Duration::from_millis(100);

/// The limits of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Longest time for the TLS handshake and for each HTTP/1.1 request's headers.
    pub header_read_timeout: Duration,
    /// Connections with no request in flight for this long are closed.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest time a request may stay in flight, its answer's writing included.
    pub max_request_time: Duration,
}

/// Sets the HTTP limits of a connection builder (hyper's own ceilings, windows, streams).
pub fn configure(builder: &mut Builder<TokioExecutor>, header_read_timeout: Duration) {
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_headers(HYPER_MAX_HEADERS)
        .max_buf_size(HYPER_MAX_BUF_SIZE);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(H2_MAX_HEADER_LIST)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_send_buf_size(H2_MAX_SEND_BUF);
}

/// One open connection, as the accept loop and the connection's own task see it.
#[derive(Debug)]
struct Connection {
    state: Mutex<ConnectionState>,
    /// Woken when a request starts or ends (the deadlines move).
    changed: Notify,
    /// Cancelled to make the connection close (eviction at the cap).
    evict: CancellationToken,
}

#[derive(Debug)]
struct ConnectionState {
    /// Start of every request in flight, by id.
    requests: HashMap<u64, Instant>,
    next_id: u64,
    /// Since when no request has been in flight.
    idle_since: Instant,
}

impl Connection {
    fn new() -> Self {
        Self {
            state: Mutex::new(ConnectionState {
                requests: HashMap::new(),
                next_id: 0,
                idle_since: Instant::now(),
            }),
            changed: Notify::new(),
            evict: CancellationToken::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ConnectionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start_request(self: &Arc<Self>) -> InFlight {
        let id = {
            let mut state = self.lock();
            let id = state.next_id;
            state.next_id += 1;
            state.requests.insert(id, Instant::now());
            id
        };
        self.changed.notify_one();
        InFlight {
            connection: self.clone(),
            id,
        }
    }

    /// When the connection is to be closed unless something changes, and why.
    fn deadline(&self, limits: &ConnectionLimits) -> (Instant, Closing) {
        let state = self.lock();
        match state.requests.values().min() {
            Some(oldest) => (*oldest + limits.max_request_time, Closing::Overdue),
            None => (state.idle_since + limits.idle_timeout, Closing::Idle),
        }
    }

    /// Since when the connection has been idle, if it is.
    fn idle_since(&self) -> Option<Instant> {
        let state = self.lock();
        state.requests.is_empty().then_some(state.idle_since)
    }
}

/// A request in flight; ends when dropped (with the answer's body, or the handler).
#[derive(Debug)]
struct InFlight {
    connection: Arc<Connection>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut state = self.connection.lock();
            state.requests.remove(&self.id);
            if state.requests.is_empty() {
                state.idle_since = Instant::now();
            }
        }
        self.connection.changed.notify_one();
    }
}

/// Why a connection is being closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closing {
    Idle,
    Overdue,
    Evicted,
    Shutdown,
}

/// The open connections of a listener.
#[derive(Debug, Default)]
struct Registry {
    connections: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(self: &Arc<Self>) -> (Registered, Arc<Connection>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new());
        self.lock().insert(id, connection.clone());
        (
            Registered {
                registry: self.clone(),
                id,
            },
            connection,
        )
    }

    /// Asks the connection idle longest to close, if one has been idle `min_idle`; false when
    /// none qualifies (or one is closing already).
    fn evict_idlest(&self, min_idle: Duration) -> bool {
        let connections = self.lock();
        if connections.values().any(|c| c.evict.is_cancelled()) {
            return true;
        }
        let now = Instant::now();
        let idlest = connections
            .values()
            .filter_map(|c| c.idle_since().map(|since| (since, c)))
            .filter(|(since, _)| now.duration_since(*since) >= min_idle)
            .min_by_key(|(since, _)| *since);
        match idlest {
            Some((_, connection)) => {
                connection.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// Removes its connection from the registry when dropped.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

/// The router as a per-connection service that tracks its requests in flight.
#[derive(Clone)]
struct Tracked {
    app: Router,
    connection: Arc<Connection>,
}

impl<B> tower::Service<http::Request<B>> for Tracked
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let in_flight = self.connection.start_request();
        let app = self.app.clone();
        Box::pin(async move {
            let response = tower::ServiceExt::oneshot(app, request.map(Body::new)).await?;
            // The request stays in flight until hyper has taken the answer's last frame.
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _in_flight = &in_flight;
                    frame
                }))
            }))
        })
    }
}

/// TLS for a listener: its configuration (ALPN included) and handshake timeout.
type Tls = axum_server::tls_rustls::RustlsAcceptor;

/// Serves `app` on `listener` (over TLS when `tls` is given) with `limits` until `stop`; then
/// closes idle connections at once and gives requests in flight `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    grace: Duration,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    configure(&mut builder, limits.header_read_timeout);
    // Plain ports speak HTTP/1.1 only, as Go's servers do without TLS (no h2c).
    let builder = Arc::new(if tls.is_none() {
        builder.http1_only()
    } else {
        builder
    });
    let tls: Option<Tls> = tls.map(|config| {
        axum_server::tls_rustls::RustlsAcceptor::new(
            axum_server::tls_rustls::RustlsConfig::from_config(config),
        )
        .handshake_timeout(limits.header_read_timeout)
    });
    let max = limits.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max));
    let registry = Arc::new(Registry::default());
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: let some close before trying again.
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                tracing::debug!(%peer, max, "connection cap reached; closing the idlest connection or waiting");
                let min_idle = EVICTABLE_AFTER.min(limits.idle_timeout);
                let permit = loop {
                    registry.evict_idlest(min_idle);
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => break None,
                        permit = permits.clone().acquire_owned() => break permit.ok(),
                        () = tokio::time::sleep(EVICT_POLL) => {}
                    }
                };
                match permit {
                    Some(permit) => permit,
                    None => break,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let (registered, connection) = registry.add();
        let (builder, tls, app, stop) = (builder.clone(), tls.clone(), app.clone(), stop.clone());
        tokio::spawn(async move {
            let _registered = registered;
            serve_connection(
                tcp, tls, builder, app, connection, limits, stop, grace, permit,
            )
            .await;
        });
    }
    drop(listener);
    // Every connection task returns its permit when it ends; they all end within `grace` (and
    // the close grace) of `stop`.
    let _ = tokio::time::timeout(
        grace + CLOSE_GRACE + Duration::from_millis(100),
        permits.acquire_many(u32::try_from(max).unwrap_or(u32::MAX)),
    )
    .await;
}

#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    tcp: TcpStream,
    tls: Option<Tls>,
    builder: Arc<Builder<TokioExecutor>>,
    app: Router,
    connection: Arc<Connection>,
    limits: ConnectionLimits,
    stop: CancellationToken,
    grace: Duration,
    _permit: OwnedSemaphorePermit,
) {
    let service = Tracked {
        app,
        connection: connection.clone(),
    };
    match tls {
        None => drive(tcp, service, &builder, &connection, &limits, &stop, grace).await,
        Some(tls) => {
            // The handshake has its own timeout (the header read timeout); eviction and
            // shutdown end it early.
            let handshake = tls.accept(tcp, ());
            let stream = tokio::select! {
                accepted = handshake => match accepted {
                    Ok((stream, ())) => stream,
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                },
                () = connection.evict.cancelled() => return,
                () = stop.cancelled() => return,
            };
            drive(
                stream,
                service,
                &builder,
                &connection,
                &limits,
                &stop,
                grace,
            )
            .await;
        }
    }
}

/// Serves HTTP on one connection until it ends or one of its limits closes it.
async fn drive<I>(
    io: I,
    service: Tracked,
    builder: &Builder<TokioExecutor>,
    connection: &Connection,
    limits: &ConnectionLimits,
    stop: &CancellationToken,
    grace: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut served =
        pin!(builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service)));
    let closing = loop {
        let (deadline, why) = connection.deadline(limits);
        tokio::select! {
            _ = served.as_mut() => return,
            () = tokio::time::sleep_until(deadline) => {
                // Still due? (A request may have started or ended meanwhile.)
                let (now_due, why_now) = connection.deadline(limits);
                if now_due <= Instant::now() && why_now == why {
                    break why;
                }
            }
            () = connection.changed.notified() => {}
            () = connection.evict.cancelled() => break Closing::Evicted,
            () = stop.cancelled() => break Closing::Shutdown,
        }
    };
    match closing {
        // The request's holder must let go now: the connection is dropped.
        Closing::Overdue => {
            tracing::debug!(
                limit = ?limits.max_request_time,
                "closing a connection whose request is still in flight"
            );
        }
        Closing::Idle | Closing::Evicted => {
            served.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(CLOSE_GRACE, served.as_mut()).await;
        }
        Closing::Shutdown => {
            served.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(grace, served.as_mut()).await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use axum::routing::get;
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn limits(idle_ms: u64, max_connections: usize) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_millis(idle_ms),
            idle_timeout: Duration::from_millis(idle_ms),
            max_connections,
            max_request_time: Duration::from_secs(5),
        }
    }

    async fn start(limits: ConnectionLimits) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", get(|| async { "ok" }));
        let stop = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            None,
            app,
            limits,
            stop.clone(),
            Duration::from_millis(200),
        ));
        (addr, stop)
    }

    /// Reads until the server closes the connection; how long that took.
    async fn closed_after(mut stream: TcpStream, started: std::time::Instant) -> Duration {
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return started.elapsed(),
                Ok(Ok(_)) => {}
                Err(_) => panic!("not closed within 10 s"),
            }
        }
    }

    async fn get_ok(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn idle_and_trickling_connections_are_closed() {
        let (addr, _stop) = start(limits(300, 8)).await;
        let started = std::time::Instant::now();
        let idle = TcpStream::connect(addr).await.unwrap();
        let mut trickle = TcpStream::connect(addr).await.unwrap();
        let trickler = tokio::spawn(async move {
            for b in b"GET / HTTP/1.1\r\nx-slow: "
                .iter()
                .chain(b"a".repeat(1000).iter())
            {
                if trickle.write_all(&[*b]).await.is_err() {
                    return started.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("a trickling client was never cut off");
        });
        let idle_closed = closed_after(idle, started).await;
        let trickle_closed = trickler.await.unwrap();
        assert!(idle_closed < Duration::from_millis(1500), "{idle_closed:?}");
        assert!(
            trickle_closed < Duration::from_millis(1500),
            "{trickle_closed:?}"
        );
        // A keep-alive connection is closed once idle too.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let closed = closed_after(s, started).await;
        assert!(
            closed >= Duration::from_millis(250) && closed < Duration::from_millis(1500),
            "{closed:?}"
        );
    }

    #[tokio::test]
    async fn at_the_cap_the_idlest_connection_makes_room() {
        let (addr, _stop) = start(limits(30_000, 3)).await;
        let started = std::time::Instant::now();
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(TcpStream::connect(addr).await.unwrap());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Let the server accept them all.
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A fourth client is served: the oldest idle connection is closed for it.
        let answer = tokio::time::timeout(Duration::from_secs(5), get_ok(addr))
            .await
            .expect("served at the cap");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let oldest = idle.remove(0);
        let closed = closed_after(oldest, started).await;
        assert!(closed < Duration::from_secs(3), "{closed:?}");
    }
}
