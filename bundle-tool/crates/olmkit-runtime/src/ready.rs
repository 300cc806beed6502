//! Waiting for caches to fill, with every waiter woken.
//!
//! A reconcile must not read a child cache before its first list completes (it would conclude
//! that nothing exists and apply needlessly). kube-runtime's `Store::wait_until_ready` looks
//! like the tool for it, but in kube-runtime 5.0 every clone of a store shares one
//! `DelayedInit` whose state is a single `futures::channel::oneshot::Receiver`, and a oneshot
//! receiver keeps **one** waker: when several reconciles await readiness at once, each poll
//! replaces the previous waker, so when the cache fills only the last poller is woken and the
//! others stay pending forever. The controller never starts a second reconcile for an object
//! whose reconcile is in flight, so those objects were never reconciled again (and, once
//! deleted, kept their finalizer) until the process restarted. A new leader, which starts its
//! controllers with every object queued at once, hit it on nearly every takeover.
//!
//! [`CachesReady`] awaits the stores once, inside a [`futures::future::Shared`], which keeps a
//! waker per clone and wakes all of them. The test below pins the upstream behaviour that
//! makes it necessary.

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::WriterDropped;

/// Resolves once every given cache has completed its first list; cheap to clone, and every
/// clone is woken.
#[derive(Clone)]
pub struct CachesReady(Shared<BoxFuture<'static, bool>>);

impl std::fmt::Debug for CachesReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CachesReady").finish_non_exhaustive()
    }
}

/// One store's readiness, type-erased so stores of different kinds can be awaited together.
pub type ReadyFuture = BoxFuture<'static, Result<(), WriterDropped>>;

/// The readiness of `store`, for [`CachesReady::all`].
pub fn store_ready<K>(store: &Store<K>) -> ReadyFuture
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let store = store.clone();
    async move { store.wait_until_ready().await }.boxed()
}

impl CachesReady {
    /// Ready when all of `waits` are.
    pub fn all(waits: Vec<ReadyFuture>) -> Self {
        let all = async move {
            futures::future::join_all(waits)
                .await
                .iter()
                .all(Result::is_ok)
        };
        Self(all.boxed().shared())
    }

    /// Waits until every cache is ready. False when a cache's writer went away first (the
    /// controller is stopping).
    pub async fn wait(&self) -> bool {
        self.0.clone().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    const WAITERS: usize = 16;

    /// Spawns `WAITERS` tasks awaiting `wait`, marks the store ready, and counts the tasks that
    /// finished half a second later.
    async fn woken<F, Fut>(wait: F) -> usize
    where
        F: Fn(Store<ConfigMap>, CachesReady) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (reader, mut writer) = reflector::store::<ConfigMap>();
        let gate = CachesReady::all(vec![store_ready(&reader)]);
        let tasks: Vec<_> = (0..WAITERS)
            .map(|_| tokio::spawn(wait(reader.clone(), gate.clone())))
            .collect();
        // Let every task poll (and park) before the cache fills.
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let done = tasks.iter().filter(|t| t.is_finished()).count();
        tasks.iter().for_each(tokio::task::JoinHandle::abort);
        done
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_wakes() {
        let done = woken(|_, gate| async move {
            assert!(gate.wait().await);
        })
        .await;
        assert_eq!(done, WAITERS);
    }

    /// Upstream's behaviour this module exists for. If this fails, kube-runtime wakes every
    /// waiter of `wait_until_ready` and [`CachesReady`] could go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upstream_wait_until_ready_wakes_only_some_waiters() {
        let done = woken(|store, _| async move {
            let _ = store.wait_until_ready().await;
        })
        .await;
        assert!(
            done < WAITERS,
            "kube-runtime woke all {WAITERS} waiters of Store::wait_until_ready"
        );
    }

    #[tokio::test]
    async fn a_dropped_writer_is_not_ready() {
        let (reader, writer) = reflector::store::<ConfigMap>();
        let gate = CachesReady::all(vec![store_ready(&reader)]);
        drop(writer);
        assert!(!gate.wait().await);
    }
}
