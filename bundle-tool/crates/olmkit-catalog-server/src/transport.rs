//! The HTTP/2 transport of the catalog server: accepting connections and serving the tonic
//! services on them, so that no client can hold what others need (issue #24).
//!
//! tonic's own server gives no handle on connections or on the per-call tasks, and each attack
//! needed one:
//!
//! - **Connections.** At most [`Limits::max_connections`] are served at once, fewer when the
//!   open-file limit would not allow that many (one file descriptor each, plus a reserve for the
//!   catalog files queries open). A new connection must send the HTTP/2 preface within
//!   [`Limits::handshake_timeout`] or is closed. At the cap, the connection idle longest (still
//!   in its handshake first, then one with no call in progress) is closed to make room, so
//!   connections that send nothing cannot lock out a health probe; when every connection is
//!   busy, the server stops accepting (new clients wait in the listen backlog) until one closes
//!   or goes idle, and says so in its log. Failing `accept` (`EMFILE`, ...) backs off instead of
//!   retrying at once: tonic's loop retried immediately and spun at 98% CPU with no log line.
//! - **Calls that wait for their client.** hyper runs each call (HTTP/2 stream) as a task given
//!   to our executor, which watches it: a call whose response chunk cannot be sent because the
//!   client's window stays closed, or whose request message the client stops sending halfway,
//!   is cancelled alone (`RST_STREAM(CANCEL)`) after [`Limits::stream_stall_timeout`]; what it
//!   held (its stream slot, buffered bytes) goes with it. Waiting for the server (a query, or a
//!   health `Watch` with nothing new) is not a stall. Response chunks are cut to one HTTP/2
//!   frame's worth, so a call cannot hand the connection more than 16 KiB that its client then
//!   never takes without the watch seeing it wait.
//! - **Request bytes** are bounded by [`crate::request_limit`], whose budgets are per
//!   connection.

use crate::limits::Limits;
use crate::request_limit::{LimitedBody, RequestBudgets, ServerRequestBudget};
use crate::watch::{StreamWatch, WATCH, current_watch};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::transport::server::TcpConnectInfo;
use tracing::{debug, info, warn};

/// HTTP/2 receive windows. Requests are a few names, so small windows cost nothing and bound
/// what a client can push at the server unread.
const STREAM_WINDOW: u32 = 64 * 1024;
const CONNECTION_WINDOW: u32 = 512 * 1024;
/// Largest HTTP/2 header list accepted (hyper's default, stated so it is not forgotten).
const MAX_HEADER_LIST: u32 = 16 * 1024;
/// Dead or unresponsive peers are found by HTTP/2 PING and their streams released.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest response chunk handed to HTTP/2 at once: one default-sized DATA frame.
const MAX_CHUNK: usize = 16 * 1024;
/// What every HTTP/2 client sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// File descriptors kept for everything but connections (listener, runtime, logs), on top of
/// one per query worker (catalog files are read while a query runs).
const FD_RESERVE: u64 = 32;
/// How long a connection closed to make room may take to say goodbye.
const EVICT_GRACE: Duration = Duration::from_secs(1);
/// Longest pause of the accept loop after a failing `accept`.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// At most one log line per this period for each kind of repeated event.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A response body that tells its call's watch while a chunk waits to be sent, and hands
/// HTTP/2 at most [`MAX_CHUNK`] bytes at a time.
///
/// hyper polls the body for the next chunk only once it has given the previous one to h2,
/// which it does only when the client's window lets at least a byte through; so "a chunk was
/// handed out and the body has not been polled since" is exactly "the client is not taking
/// data".
pub struct WatchedBody<B> {
    inner: B,
    rest: Option<Bytes>,
    watch: Option<Arc<StreamWatch>>,
}

impl<B> WatchedBody<B> {
    fn new(inner: B, watch: Option<Arc<StreamWatch>>) -> Self {
        Self {
            inner,
            rest: None,
            watch,
        }
    }

    /// Hands out the first [`MAX_CHUNK`] bytes of `data`, keeping the rest for the next poll.
    fn hand_out(&mut self, mut data: Bytes) -> Frame<Bytes> {
        if data.len() > MAX_CHUNK {
            self.rest = Some(data.split_off(MAX_CHUNK));
        }
        if let Some(w) = &self.watch {
            w.set_sending(!data.is_empty());
        }
        Frame::data(data)
    }
}

impl<B> Body for WatchedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        // Polled again: the previous chunk was taken.
        if let Some(w) = &self.watch {
            w.set_sending(false);
        }
        if let Some(rest) = self.rest.take() {
            return Poll::Ready(Some(Ok(self.hand_out(rest))));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(self.hand_out(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match &self.rest {
            None => self.inner.size_hint(),
            Some(_) => SizeHint::default(),
        }
    }
}

/// One accepted connection, as the accept loop sees it.
#[derive(Debug)]
struct ConnInfo {
    id: u64,
    /// Whether the HTTP/2 preface has arrived.
    handshaken: AtomicBool,
    /// Calls in progress.
    active: AtomicUsize,
    /// Milliseconds after the registry's epoch since the connection has had no call.
    idle_since: AtomicU64,
    /// Told when the connection is closed to make room.
    evict: Notify,
}

/// The connections being served, and the cap.
#[derive(Debug)]
struct Connections {
    max: usize,
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnInfo>>>,
    /// Told when a connection closes or goes idle (room may have appeared).
    room: Notify,
    /// Calls cancelled for waiting on their client, since the last log line about them.
    stalls: Mutex<Throttle>,
}

impl Connections {
    fn new(max: usize) -> Self {
        Self {
            max,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::default(),
            room: Notify::new(),
            stalls: Mutex::new(Throttle::default()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn register(self: &Arc<Self>) -> ConnSlot {
        let info = Arc::new(ConnInfo {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            handshaken: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now_ms()),
            evict: Notify::new(),
        });
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(info.id, info.clone());
        ConnSlot {
            conns: self.clone(),
            info,
        }
    }

    /// The connection to close to make room: the oldest still in its handshake, else the one
    /// idle longest; none when every connection has a call in progress.
    fn evictable(&self) -> Option<Arc<ConnInfo>> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values()
            .filter(|c| c.active.load(Ordering::Acquire) == 0)
            .min_by_key(|c| {
                (
                    c.handshaken.load(Ordering::Acquire),
                    c.idle_since.load(Ordering::Acquire),
                )
            })
            .cloned()
    }

    /// Closes the connection [`Connections::evictable`] names; false when there is none.
    fn evict_one(&self) -> bool {
        let Some(victim) = self.evictable() else {
            return false;
        };
        // Its slot is free from now on; its task closes it within `EVICT_GRACE`.
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&victim.id);
        victim.evict.notify_one();
        true
    }

    fn stream_cancelled(&self, timeout: Duration) {
        let mut t = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = t.event() {
            info!(
                "cancelled {n} call(s) whose client took no data or sent no more of its request \
                 for {timeout:?} (--stream-stall-timeout-secs)"
            );
        }
    }
}

/// A connection's place among the open ones; given back when dropped.
struct ConnSlot {
    conns: Arc<Connections>,
    info: Arc<ConnInfo>,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.conns
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.info.id);
        self.conns.room.notify_one();
    }
}

/// Counts a call as in progress on its connection while it lives.
struct ActiveCall {
    conns: Arc<Connections>,
    info: Arc<ConnInfo>,
}

impl ActiveCall {
    fn new(conns: Arc<Connections>, info: Arc<ConnInfo>) -> Self {
        info.active.fetch_add(1, Ordering::AcqRel);
        Self { conns, info }
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        if self.info.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.info
                .idle_since
                .store(self.conns.now_ms(), Ordering::Release);
            // An idle connection can make room for a waiting newcomer.
            self.conns.room.notify_one();
        }
    }
}

/// Log-line rate limiting: at most one per [`LOG_EVERY`], counting the events in between.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    pending: u64,
}

impl Throttle {
    /// Records an event; returns how many to report now, if a line is due.
    fn event(&mut self) -> Option<u64> {
        self.pending += 1;
        let due = self.last.is_none_or(|t| t.elapsed() >= LOG_EVERY);
        due.then(|| {
            self.last = Some(Instant::now());
            std::mem::take(&mut self.pending)
        })
    }
}

/// The executor hyper runs each call's task on: every task is [`Watched`].
#[derive(Clone)]
struct CallExecutor {
    conns: Arc<Connections>,
    info: Arc<ConnInfo>,
    stall_timeout: Duration,
}

impl<F> hyper::rt::Executor<F> for CallExecutor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        tokio::spawn(Watched {
            inner: Some(Box::pin(fut)),
            watch: Arc::new(StreamWatch::new()),
            timer: None,
            armed_for: None,
            timeout: self.stall_timeout,
            conns: self.conns.clone(),
            _active: ActiveCall::new(self.conns.clone(), self.info.clone()),
        });
    }
}

/// A call's task, cancelled (dropped, which resets its stream) once it has waited for its
/// client longer than the stall timeout.
struct Watched {
    inner: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    watch: Arc<StreamWatch>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    armed_for: Option<Instant>,
    timeout: Duration,
    conns: Arc<Connections>,
    _active: ActiveCall,
}

impl Future for Watched {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(());
        };
        this.watch.register_task(cx.waker());
        if WATCH
            .sync_scope(this.watch.clone(), || inner.as_mut().poll(cx))
            .is_ready()
        {
            this.inner = None;
            return Poll::Ready(());
        }
        let Some(since) = this.watch.stalled_since() else {
            return Poll::Pending;
        };
        let deadline = since + this.timeout;
        if this.armed_for != Some(deadline) {
            match &mut this.timer {
                Some(t) => t.as_mut().reset(deadline),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            this.armed_for = Some(deadline);
        }
        let expired = this
            .timer
            .as_mut()
            .is_some_and(|t| t.as_mut().poll(cx).is_ready());
        if expired {
            // Dropping the task drops hyper's handles on the stream, and the request body,
            // wherever it is, fails: h2 then resets the stream (CANCEL).
            this.watch.cancel();
            this.inner = None;
            this.conns.stream_cancelled(this.timeout);
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// The connection's side of the preface, replayed to hyper after we read and checked it.
struct Replayed {
    inner: TcpStream,
    replayed: usize,
}

impl AsyncRead for Replayed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.replayed < PREFACE.len() {
            let n = buf.remaining().min(PREFACE.len() - self.replayed);
            buf.put_slice(&PREFACE[self.replayed..self.replayed + n]);
            self.replayed += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replayed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads the HTTP/2 preface, failing at the first byte that differs (an HTTP/1 request, a TLS
/// hello, noise).
async fn read_preface(tcp: &mut TcpStream) -> std::io::Result<()> {
    let mut got = [0u8; PREFACE.len()];
    let mut n = 0;
    while n < PREFACE.len() {
        let read = tcp.read(&mut got[n..]).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        n += read;
        if got[..n] != PREFACE[..n] {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not an HTTP/2 connection preface",
            ));
        }
    }
    Ok(())
}

/// What each call of a connection goes through before and after the tonic services: its
/// connection's address (for per-connection stream budgets), the request limits, the watch.
#[derive(Clone)]
struct CallService {
    routes: Routes,
    requests: RequestBudgets,
    connect_info: TcpConnectInfo,
}

type CallFuture = Pin<
    Box<
        dyn Future<Output = Result<http::Response<WatchedBody<tonic::body::Body>>, Infallible>>
            + Send,
    >,
>;

impl hyper::service::Service<http::Request<Incoming>> for CallService {
    type Response = http::Response<WatchedBody<tonic::body::Body>>;
    type Error = Infallible;
    type Future = CallFuture;

    fn call(&self, mut req: http::Request<Incoming>) -> CallFuture {
        req.extensions_mut().insert(self.connect_info.clone());
        let routes = self.routes.clone();
        let requests = self.requests.clone();
        let deadline = grpc_timeout(req.headers());
        Box::pin(async move {
            // First polled inside the call's task, where its watch is in scope.
            let watch = current_watch();
            let req = req.map(|b| LimitedBody::new(b, requests, watch.clone()));
            let answer = tower::ServiceExt::oneshot(routes, req);
            // The client's deadline, as tonic's own server enforces it: until the response
            // (or a stream's first headers) is ready.
            let response = match deadline {
                None => answer.await?,
                Some(d) => match tokio::time::timeout(d, answer).await {
                    Ok(response) => response?,
                    Err(_) => {
                        tonic::Status::deadline_exceeded("the call's deadline passed").into_http()
                    }
                },
            };
            Ok(response.map(|b| WatchedBody::new(b, watch)))
        })
    }
}

/// The deadline a client sent in `grpc-timeout` (gRPC over HTTP/2: at most 8 digits and a unit),
/// if any and well-formed.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at(split);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The connection cap for `requested` connections under an open-file limit of `nofile`:
/// keep `reserve` descriptors for everything else (at least half of them for connections).
fn connection_cap(requested: usize, nofile: Option<u64>, reserve: u64) -> usize {
    let allowed = nofile.map_or(u64::MAX, |n| n.saturating_sub(reserve).max(n / 2));
    (requested as u64).min(allowed).max(1) as usize
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// Serves `routes` on accepted connections within the limits.
pub struct Transport {
    routes: Routes,
    limits: Limits,
    requests: ServerRequestBudget,
    conns: Arc<Connections>,
}

impl Transport {
    /// A transport for these services and limits; the connection cap is lowered (with a
    /// warning) when the open-file limit would not allow it.
    pub fn new(routes: Routes, limits: &Limits) -> Self {
        let nofile = open_file_limit();
        let reserve = FD_RESERVE + limits.blocking_threads() as u64;
        let max = connection_cap(limits.max_connections, nofile, reserve);
        if max < limits.max_connections {
            warn!(
                "serving at most {max} connections: the open-file limit ({}) does not allow \
                 --max-connections {}",
                nofile.unwrap_or_default(),
                limits.max_connections
            );
        }
        Self {
            routes,
            requests: ServerRequestBudget::new(
                limits.max_request_bytes,
                limits.max_buffered_request_bytes_per_connection,
                limits.max_buffered_request_bytes,
            ),
            limits: limits.clone(),
            conns: Arc::new(Connections::new(max)),
        }
    }

    /// The connection cap in effect.
    pub fn max_connections(&self) -> usize {
        self.conns.max
    }

    /// Accepts and serves connections until `shutdown` resolves, then asks every connection to
    /// finish its calls (HTTP/2 GOAWAY) and returns once all are closed.
    pub async fn run(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let stop = CancellationToken::new();
        let this = Arc::new(self);
        tokio::pin!(shutdown);
        let mut backoff = Duration::ZERO;
        let (mut full_log, mut evict_log, mut error_log) = (
            Throttle::default(),
            Throttle::default(),
            Throttle::default(),
        );
        loop {
            if this.conns.len() >= this.conns.max && this.conns.evictable().is_none() {
                if full_log.event().is_some() {
                    warn!(
                        "connection limit ({}) reached and every connection has a call in \
                         progress: not accepting new connections until one closes or goes idle",
                        this.conns.max
                    );
                }
                // Woken when a connection closes or goes idle; the timer is a safety net.
                tokio::select! {
                    () = this.conns.room.notified() => {}
                    () = tokio::time::sleep(LOG_EVERY) => {}
                    () = &mut shutdown => break,
                }
                continue;
            }
            let accepted = tokio::select! {
                r = listener.accept() => r,
                () = &mut shutdown => break,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors (or another passing failure): the listener stays
                    // readable, so retrying at once would spin.
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_BACKOFF);
                    if let Some(n) = error_log.event() {
                        warn!(
                            "cannot accept connections ({e}; {n} time(s)); retrying in {backoff:?}"
                        );
                    }
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = &mut shutdown => break,
                    }
                    continue;
                }
            };
            backoff = Duration::ZERO;
            if this.conns.len() >= this.conns.max {
                if !this.conns.evict_one() {
                    // The idle connection found a moment ago got a call meanwhile.
                    continue;
                }
                if let Some(n) = evict_log.event() {
                    warn!(
                        "connection limit ({}) reached: closed {n} idle connection(s) to make \
                         room for new ones",
                        this.conns.max
                    );
                }
            }
            let slot = this.conns.register();
            tokio::spawn(this.clone().serve_connection(tcp, peer, slot, stop.clone()));
        }
        drop(listener);
        stop.cancel();
        while this.conns.len() > 0 {
            this.conns.room.notified().await;
        }
    }

    /// hyper's HTTP/2 settings, with the executor that watches the connection's calls.
    fn http2(&self, info: Arc<ConnInfo>) -> hyper::server::conn::http2::Builder<CallExecutor> {
        let executor = CallExecutor {
            conns: self.conns.clone(),
            info,
            stall_timeout: self.limits.stream_stall_timeout,
        };
        let mut builder = hyper::server::conn::http2::Builder::new(executor);
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.limits.max_concurrent_streams)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_header_list_size(MAX_HEADER_LIST)
            .keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT);
        builder
    }

    /// Serves one connection: the preface within the handshake timeout, then HTTP/2 until the
    /// client leaves, the connection is closed to make room, or the server stops.
    async fn serve_connection(
        self: Arc<Self>,
        mut tcp: TcpStream,
        peer: SocketAddr,
        slot: ConnSlot,
        stop: CancellationToken,
    ) {
        let info = slot.info.clone();
        let _ = tcp.set_nodelay(true);
        let timeout = self.limits.handshake_timeout;
        let preface = tokio::select! {
            r = tokio::time::timeout(timeout, read_preface(&mut tcp)) => r,
            () = info.evict.notified() => {
                debug!(%peer, "closed a connection in its handshake to make room");
                return;
            }
            () = stop.cancelled() => return,
        };
        match preface {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                debug!(%peer, "closed a connection: {e}");
                return;
            }
            Err(_) => {
                debug!(%peer, "closed a connection: no HTTP/2 preface within {timeout:?}");
                return;
            }
        }
        info.handshaken.store(true, Ordering::Release);
        let service = CallService {
            routes: self.routes.clone(),
            requests: self.requests.connection(),
            connect_info: TcpConnectInfo {
                local_addr: tcp.local_addr().ok(),
                remote_addr: Some(peer),
            },
        };
        let io = TokioIo::new(Replayed {
            inner: tcp,
            replayed: 0,
        });
        let conn = self.http2(info.clone()).serve_connection(io, service);
        tokio::pin!(conn);
        let grace = tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            () = info.evict.notified() => {
                debug!(%peer, "closing an idle connection to make room");
                Some(EVICT_GRACE)
            }
            // Calls in flight may finish; `serve` bounds how long it waits for them.
            () = stop.cancelled() => None,
        };
        conn.as_mut().graceful_shutdown();
        match grace {
            Some(grace) => {
                let _ = tokio::time::timeout(grace, conn).await;
            }
            None => {
                let _ = conn.await;
            }
        }
        drop(slot);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_room_for_other_files() {
        assert_eq!(connection_cap(512, None, 40), 512);
        assert_eq!(connection_cap(512, Some(1_048_576), 40), 512);
        assert_eq!(connection_cap(512, Some(256), 40), 216);
        // A tiny limit still leaves half of it to connections.
        assert_eq!(connection_cap(512, Some(60), 40), 30);
        assert_eq!(connection_cap(0, Some(60), 40), 1);
    }

    #[test]
    fn idle_connections_are_evicted_handshakes_first_busy_ones_never() {
        let conns = Arc::new(Connections::new(3));
        let a = conns.register();
        let b = conns.register();
        let c = conns.register();
        a.info.handshaken.store(true, Ordering::Release);
        b.info.handshaken.store(true, Ordering::Release);
        let _busy = ActiveCall::new(conns.clone(), b.info.clone());
        // `c` never finished its handshake: first to go.
        assert_eq!(conns.evictable().unwrap().id, c.info.id);
        assert!(conns.evict_one());
        assert_eq!(conns.len(), 2);
        // Then the idle one; never the busy one.
        assert_eq!(conns.evictable().unwrap().id, a.info.id);
        assert!(conns.evict_one());
        assert!(conns.evictable().is_none());
        assert!(!conns.evict_one());
        drop((a, c));
        assert_eq!(conns.len(), 1);
    }

    #[test]
    fn grpc_timeouts_parse_like_the_spec_says() {
        let parse = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&h)
        };
        assert_eq!(parse("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "123456789S", "10x", "-1S"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }

    #[test]
    fn throttled_log_lines_count_what_they_skipped() {
        let mut t = Throttle::default();
        assert_eq!(t.event(), Some(1));
        assert_eq!(t.event(), None);
        assert_eq!(t.event(), None);
        t.last = Some(Instant::now() - LOG_EVERY);
        assert_eq!(t.event(), Some(3));
    }

    #[tokio::test]
    async fn a_watch_reports_the_earliest_wait_until_cleared() {
        let w = StreamWatch::new();
        assert!(w.stalled_since().is_none());
        w.set_sending(true);
        let since = w.stalled_since().unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Still waiting: the start does not move.
        w.set_sending(true);
        w.set_receiving(true);
        assert_eq!(w.stalled_since(), Some(since));
        w.set_sending(false);
        assert!(w.stalled_since().unwrap() > since);
        w.set_receiving(false);
        assert!(w.stalled_since().is_none());
    }

    #[tokio::test]
    async fn large_response_chunks_are_cut_to_one_frame() {
        use http_body_util::BodyExt;
        let data = Bytes::from(vec![7u8; 40_000]);
        let inner = http_body_util::Full::new(data);
        let watch = Arc::new(StreamWatch::new());
        let mut body = WatchedBody::new(inner, Some(watch.clone()));
        let mut sizes = Vec::new();
        while let Some(frame) = body.frame().await {
            sizes.push(frame.unwrap().into_data().unwrap().len());
            assert!(watch.stalled_since().is_some(), "a chunk is out");
        }
        assert_eq!(sizes, vec![16_384, 16_384, 7_232]);
        assert!(watch.stalled_since().is_none());
    }
}
