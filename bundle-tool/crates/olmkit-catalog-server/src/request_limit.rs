//! Bounds on request bytes: every request of the registry, health and reflection APIs is a few
//! names, so the server refuses a larger message when its 5-byte gRPC header announces it, and
//! holds the bytes of unfinished messages only within a per-connection and a server-wide budget.
//!
//! An attack (issue #24) sent 100 `GetPackage` messages of 4,000,000 bytes minus their last
//! byte: tonic accepted each (its default limit is 4 MiB) and buffered it while waiting for the
//! rest, and the server's RSS went from 77 to 408 MiB. [`LimitedBody`] wraps each request body
//! and reads the gRPC framing as it passes:
//!
//! - a message announced larger than the limit fails the call with `RESOURCE_EXHAUSTED` before
//!   a byte of it is buffered;
//! - the bytes received of a message not yet complete are charged to the connection's and the
//!   server's budgets, and given back when the message completes or the call ends. A call whose
//!   next bytes do not fit fails with `RESOURCE_EXHAUSTED`; whole messages (a well-behaved
//!   client's request arrives in one frame) are never charged, so they are never refused.
//! - while a partial message waits for its rest, the call is marked as waiting for its client,
//!   and [`crate::transport`] cancels it after the stall timeout: the body then fails, also in
//!   a handler's own task, which frees its bytes and lets h2 reset the stream.

use crate::watch::StreamWatch;
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use thiserror::Error;
use tonic::Status;

/// Length of a gRPC message header: compression flag and big-endian length.
const HEADER: usize = 5;

/// Why a request was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RequestLimitError {
    /// The announced message is larger than any request needs.
    #[error("request message of {len} bytes is larger than this server accepts ({limit} bytes)")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The connection's budget of unfinished request bytes is used up.
    #[error(
        "too many bytes of unfinished request messages on this connection (limit {limit}); send whole messages"
    )]
    Connection {
        /// The limit.
        limit: usize,
    },
    /// The server-wide budget of unfinished request bytes is used up.
    #[error(
        "too many bytes of unfinished request messages on this server (limit {limit}); retry later"
    )]
    Server {
        /// The limit.
        limit: usize,
    },
}

impl From<RequestLimitError> for Status {
    fn from(e: RequestLimitError) -> Self {
        Status::resource_exhausted(e.to_string())
    }
}

/// A byte budget: what is charged, and its limit.
#[derive(Debug)]
struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    fn new(limit: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    fn try_charge(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&u| u <= self.limit)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The budgets a connection's request bodies charge: its own and the server's.
#[derive(Clone, Debug)]
pub struct RequestBudgets {
    max_message: usize,
    connection: Arc<Budget>,
    server: Arc<Budget>,
}

impl RequestBudgets {
    /// Bytes of unfinished messages this connection's calls hold now.
    pub fn connection_used(&self) -> usize {
        self.connection.used.load(Ordering::Acquire)
    }

    fn try_charge(&self, n: usize) -> Result<(), RequestLimitError> {
        if !self.connection.try_charge(n) {
            return Err(RequestLimitError::Connection {
                limit: self.connection.limit,
            });
        }
        if !self.server.try_charge(n) {
            self.connection.release(n);
            return Err(RequestLimitError::Server {
                limit: self.server.limit,
            });
        }
        Ok(())
    }

    fn release(&self, n: usize) {
        if n > 0 {
            self.connection.release(n);
            self.server.release(n);
        }
    }
}

/// The server-wide request budget, from which each connection gets its own.
#[derive(Clone, Debug)]
pub struct ServerRequestBudget {
    max_message: usize,
    per_connection: usize,
    server: Arc<Budget>,
}

impl ServerRequestBudget {
    /// The server-wide budget of `total` bytes, connections' budgets of `per_connection` bytes,
    /// and messages of at most `max_message` bytes.
    pub fn new(max_message: usize, per_connection: usize, total: usize) -> Self {
        Self {
            max_message,
            per_connection,
            server: Arc::new(Budget::new(total)),
        }
    }

    /// Budgets for a new connection.
    pub fn connection(&self) -> RequestBudgets {
        RequestBudgets {
            max_message: self.max_message,
            connection: Arc::new(Budget::new(self.per_connection)),
            server: self.server.clone(),
        }
    }

    /// Bytes of unfinished messages held on the whole server now.
    pub fn used(&self) -> usize {
        self.server.used.load(Ordering::Acquire)
    }
}

/// Where the gRPC framing of a request stands.
#[derive(Debug, Default)]
struct Framing {
    header: [u8; HEADER],
    /// Bytes of `header` received.
    header_len: usize,
    /// Bytes of the current message body still to come.
    remaining: usize,
    /// Bytes received of the current, unfinished message (header included).
    partial: usize,
}

impl Framing {
    /// Follows `chunk`; fails when a header announces more than `max` bytes.
    fn feed(&mut self, mut chunk: &[u8], max: usize) -> Result<(), RequestLimitError> {
        while !chunk.is_empty() {
            if self.header_len < HEADER {
                let n = (HEADER - self.header_len).min(chunk.len());
                self.header[self.header_len..self.header_len + n].copy_from_slice(&chunk[..n]);
                self.header_len += n;
                self.partial += n;
                chunk = &chunk[n..];
                if self.header_len == HEADER {
                    let len = u32::from_be_bytes([
                        self.header[1],
                        self.header[2],
                        self.header[3],
                        self.header[4],
                    ]) as usize;
                    if len > max {
                        return Err(RequestLimitError::TooLarge { len, limit: max });
                    }
                    self.remaining = len;
                }
            } else {
                let n = self.remaining.min(chunk.len());
                self.remaining -= n;
                self.partial += n;
                chunk = &chunk[n..];
            }
            if self.header_len == HEADER && self.remaining == 0 {
                // A whole message: tonic decodes it now, nothing of it stays buffered.
                self.header_len = 0;
                self.partial = 0;
            }
        }
        Ok(())
    }
}

/// A request body whose unfinished message bytes are charged to [`RequestBudgets`].
pub struct LimitedBody<B> {
    inner: B,
    budgets: RequestBudgets,
    framing: Framing,
    /// What this body has charged to the budgets.
    charged: usize,
    watch: Option<Arc<StreamWatch>>,
    failed: bool,
}

impl<B> LimitedBody<B> {
    /// Wraps `inner`; `watch` (the call's stall watch, if served by [`crate::transport`]) is told
    /// while the body waits for the rest of a message.
    pub fn new(inner: B, budgets: RequestBudgets, watch: Option<Arc<StreamWatch>>) -> Self {
        Self {
            inner,
            budgets,
            framing: Framing::default(),
            charged: 0,
            watch,
            failed: false,
        }
    }

    /// Follows a data chunk and charges or releases the difference in unfinished bytes.
    fn account(&mut self, data: &[u8]) -> Result<(), RequestLimitError> {
        self.framing.feed(data, self.budgets.max_message)?;
        let partial = self.framing.partial;
        if partial > self.charged {
            self.budgets.try_charge(partial - self.charged)?;
        } else {
            self.budgets.release(self.charged - partial);
        }
        self.charged = partial;
        Ok(())
    }
}

impl<B> Drop for LimitedBody<B> {
    fn drop(&mut self) {
        self.budgets.release(self.charged);
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if let Some(w) = &self.watch
            && w.cancelled(cx.waker())
        {
            self.failed = true;
            let why = "the call waited for its client longer than the stall timeout";
            return Poll::Ready(Some(Err(Box::new(Status::cancelled(why)))));
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let waiting = matches!(polled, Poll::Pending) && self.framing.partial > 0;
        if let Some(watch) = &self.watch {
            watch.set_receiving(waiting);
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(e) = self.account(data.chunk())
                {
                    self.failed = true;
                    return Poll::Ready(Some(Err(Box::new(Status::from(e)))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn framed(len: u32, body: usize) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&len.to_be_bytes());
        v.resize(5 + body, b'x');
        v
    }

    #[test]
    fn framing_tracks_partial_messages_across_chunks() {
        let mut f = Framing::default();
        let msg = framed(10, 10);
        f.feed(&msg[..3], 100).unwrap();
        assert_eq!(f.partial, 3);
        f.feed(&msg[3..9], 100).unwrap();
        assert_eq!(f.partial, 9);
        // The rest of the first message and the start of a second one.
        let mut rest = msg[9..].to_vec();
        rest.extend_from_slice(&framed(4, 2));
        f.feed(&rest, 100).unwrap();
        assert_eq!(f.partial, 7);
        f.feed(b"yy", 100).unwrap();
        assert_eq!(f.partial, 0);
        // Empty messages are whole at once.
        f.feed(&framed(0, 0), 100).unwrap();
        assert_eq!(f.partial, 0);
        assert_eq!(
            f.feed(&framed(101, 0), 100),
            Err(RequestLimitError::TooLarge {
                len: 101,
                limit: 100
            })
        );
    }

    type Frames = std::vec::IntoIter<Result<Frame<Bytes>, std::convert::Infallible>>;

    fn body(chunks: Vec<Vec<u8>>) -> http_body_util::StreamBody<futures::stream::Iter<Frames>> {
        let frames: Vec<_> = chunks
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::from(c))))
            .collect();
        http_body_util::StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn partial_messages_are_charged_until_complete_and_released_on_drop() {
        let server = ServerRequestBudget::new(100, 20, 30);
        let a = server.connection();
        let msg = framed(50, 50);
        let mut first = LimitedBody::new(body(vec![msg[..15].to_vec()]), a.clone(), None);
        first.frame().await.unwrap().unwrap();
        assert_eq!((a.connection_used(), server.used()), (15, 15));
        // The connection's budget refuses the next unfinished bytes.
        let mut second = LimitedBody::new(body(vec![msg[..10].to_vec()]), a.clone(), None);
        let err = second.frame().await.unwrap().unwrap_err();
        let status = err.downcast::<Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.message().contains("connection"), "{status:?}");
        assert!(second.frame().await.is_none());
        drop(second);
        assert_eq!(a.connection_used(), 15);
        // Another connection: the server's budget (30) refuses beyond 15 more.
        let b = server.connection();
        let mut third = LimitedBody::new(body(vec![msg[..16].to_vec()]), b.clone(), None);
        let err = third.frame().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("server"), "{err}");
        // Whole messages are never charged, even when the budgets are used up.
        let mut whole = LimitedBody::new(body(vec![framed(60, 60)]), b.clone(), None);
        whole.frame().await.unwrap().unwrap();
        assert_eq!(server.used(), 15);
        drop(first);
        assert_eq!((a.connection_used(), server.used()), (0, 0));
    }

    #[tokio::test]
    async fn completing_a_message_gives_its_bytes_back() {
        let server = ServerRequestBudget::new(100, 100, 100);
        let c = server.connection();
        let msg = framed(40, 40);
        let mut b = LimitedBody::new(
            body(vec![msg[..30].to_vec(), msg[30..].to_vec()]),
            c.clone(),
            None,
        );
        b.frame().await.unwrap().unwrap();
        assert_eq!(server.used(), 30);
        b.frame().await.unwrap().unwrap();
        assert_eq!(server.used(), 0);
    }
}
