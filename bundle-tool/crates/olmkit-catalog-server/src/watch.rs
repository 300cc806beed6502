//! What each call (HTTP/2 stream) of the catalog server waits for from its client
//! ([`StreamWatch`]): the body wrappers of the transport and of the request limits set it, the
//! transport's executor reads it to time out a stalled call. Its own module so that both can
//! use it without depending on each other.

use futures::task::AtomicWaker;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

tokio::task_local! {
    /// The watch of the call whose task is being polled.
    pub(crate) static WATCH: Arc<StreamWatch>;
}

/// What one call (HTTP/2 stream) is waiting for from its client, if anything: the body
/// wrappers set it, the executor's [`Watched`] task reads it.
#[derive(Debug)]
pub struct StreamWatch {
    born: Instant,
    /// Milliseconds after `born` (plus one; zero: not waiting) since a response chunk waits to
    /// be sent.
    sending: AtomicU64,
    /// The same, since part of a request message waits for its rest.
    receiving: AtomicU64,
    /// The call's task, woken when a wait starts outside it (a handler may read its request
    /// in a task of its own, as reflection does), so it arms its timer.
    task: AtomicWaker,
    /// Set when the call is cancelled; whoever reads its request body is woken to see it.
    /// Dropping the call's task is not enough when a handler's own task still holds the
    /// request: h2 resets a stream only once nothing refers to it.
    cancelled: AtomicBool,
    reader: AtomicWaker,
}

impl StreamWatch {
    pub(crate) fn new() -> Self {
        Self {
            born: Instant::now(),
            sending: AtomicU64::new(0),
            receiving: AtomicU64::new(0),
            task: AtomicWaker::new(),
            cancelled: AtomicBool::new(false),
            reader: AtomicWaker::new(),
        }
    }

    /// Whether the call was cancelled; if not, the request reader polling now is woken when it
    /// is.
    pub fn cancelled(&self, reader: &std::task::Waker) -> bool {
        self.reader.register(reader);
        self.cancelled.load(Ordering::Acquire)
    }

    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.reader.wake();
    }

    fn mark(&self, slot: &AtomicU64, waiting: bool) {
        if !waiting {
            slot.store(0, Ordering::Relaxed);
        } else if slot.load(Ordering::Relaxed) == 0 {
            let ms = self.born.elapsed().as_millis() as u64 + 1;
            slot.store(ms, Ordering::Relaxed);
            // Inside the call's own task the watch is looked at right after this poll anyway.
            let inside = WATCH
                .try_with(|w| std::ptr::eq(Arc::as_ptr(w), self))
                .unwrap_or(false);
            if !inside {
                self.task.wake();
            }
        }
    }

    /// Registers the call's task, woken when a wait starts outside it.
    pub(crate) fn register_task(&self, waker: &std::task::Waker) {
        self.task.register(waker);
    }

    /// Whether a response chunk now waits for the client to take it.
    pub fn set_sending(&self, waiting: bool) {
        self.mark(&self.sending, waiting);
    }

    /// Whether part of a request message now waits for the client to send the rest.
    pub fn set_receiving(&self, waiting: bool) {
        self.mark(&self.receiving, waiting);
    }

    /// Since when the call has been waiting for its client, if it is.
    pub(crate) fn stalled_since(&self) -> Option<Instant> {
        [&self.sending, &self.receiving]
            .into_iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&ms| ms > 0)
            .min()
            .map(|ms| self.born + Duration::from_millis(ms - 1))
    }
}

/// The watch of the call being polled, when it is served by this transport.
pub fn current_watch() -> Option<Arc<StreamWatch>> {
    WATCH.try_with(Arc::clone).ok()
}
