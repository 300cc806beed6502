//! A small, fixed set of threads that convert large reviews off the async workers.
//!
//! Why not tokio's blocking pool: it grows a thread per concurrent task and picks any idle
//! thread for the next one, and glibc gives every thread that allocates its own malloc arena,
//! keeping freed memory there for reuse by that thread only. Conversions spread over many
//! threads therefore left the peak RSS well above the memory in use at any one time. Two
//! threads reuse two arenas; admission ([`super::admission`]) already bounds how many reviews
//! wait for them.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Threads converting reviews. Dropping the last clone stops the threads once idle.
#[derive(Clone, Debug)]
pub struct ConvertPool {
    jobs: SyncSender<Job>,
}

/// The pool could not run the job (its threads are gone: a bug, or the process is ending).
#[derive(Debug, thiserror::Error)]
#[error("the conversion threads are not running")]
pub struct PoolGone;

impl ConvertPool {
    /// `threads` threads (at least one) and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> Self {
        let (jobs, rx) = sync_channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("convert-{i}"))
                .spawn(move || work(&rx));
            if let Err(e) = spawned {
                tracing::error!("cannot start a conversion thread: {e}");
            }
        }
        Self { jobs }
    }

    /// Runs `f` on a pool thread and waits for its result. When the queue is full (more jobs
    /// than admission lets in: not expected), the job runs on tokio's blocking pool instead.
    pub async fn run<T, F>(&self, f: F) -> Result<T, PoolGone>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        match self.jobs.try_send(job) {
            Ok(()) => rx.await.map_err(|_| PoolGone),
            Err(TrySendError::Full(job)) => {
                tokio::task::spawn_blocking(job)
                    .await
                    .map_err(|_| PoolGone)?;
                rx.await.map_err(|_| PoolGone)
            }
            Err(TrySendError::Disconnected(_)) => Err(PoolGone),
        }
    }
}

fn work(rx: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, not while running it.
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            // A panicking job drops its result sender; the caller sees `PoolGone`.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_and_overflows_to_the_blocking_pool() {
        let pool = ConvertPool::new(1, 1);
        let results = futures::future::join_all((0..8).map(|i| pool.run(move || i * 2))).await;
        let results: Vec<i32> = results.into_iter().map(Result::unwrap).collect();
        assert_eq!(results, vec![0, 2, 4, 6, 8, 10, 12, 14]);
    }

    #[tokio::test]
    async fn a_panicking_job_is_reported_and_the_pool_keeps_working() {
        let pool = ConvertPool::new(1, 4);
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }
}
