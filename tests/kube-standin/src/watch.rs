//! The watch hub of one resource: a bounded history of change events (so a watch can resume
//! from a resourceVersion, or get `410 Gone` when it is too old) and a broadcast channel that
//! fans events out to watchers without ever blocking the writer.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

/// ADDED / MODIFIED / DELETED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, with the object as stored (storage version) after it.
#[derive(Debug)]
pub struct StoredEvent {
    pub kind: EventType,
    pub rv: u64,
    pub object: Arc<Value>,
    /// The object before a MODIFIED, so selector watches can turn it into ADDED/DELETED.
    pub prev: Option<Arc<Value>>,
}

const BROADCAST_CAPACITY: usize = 16_384;

/// History and live fan-out for one resource.
#[derive(Debug)]
pub struct Hub {
    history: VecDeque<Arc<StoredEvent>>,
    capacity: usize,
    /// Events at or below this resourceVersion are no longer in the history.
    compacted: u64,
    tx: broadcast::Sender<Arc<StoredEvent>>,
}

impl Hub {
    pub fn new(capacity: usize, created_at: u64) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Hub {
            history: VecDeque::new(),
            capacity: capacity.max(1),
            compacted: created_at,
            tx,
        }
    }

    /// Records and broadcasts an event (never waits for watchers).
    pub fn publish(&mut self, ev: StoredEvent) {
        let ev = Arc::new(ev);
        if self.history.len() >= self.capacity
            && let Some(old) = self.history.pop_front()
        {
            self.compacted = old.rv;
        }
        self.history.push_back(ev.clone());
        let _ = self.tx.send(ev);
    }

    /// Events after `rv`, or `Err(oldest available)` when `rv` is older than the history.
    pub fn since(&self, rv: u64) -> Result<Vec<Arc<StoredEvent>>, u64> {
        if rv < self.compacted {
            return Err(self.compacted + 1);
        }
        let start = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.iter().skip(start).cloned().collect())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.tx.subscribe()
    }

    /// Forgets the history, as etcd compaction does.
    pub fn compact(&mut self, rv: u64) {
        self.history.clear();
        self.compacted = rv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(rv: u64) -> StoredEvent {
        StoredEvent {
            kind: EventType::Added,
            rv,
            object: Arc::new(Value::Null),
            prev: None,
        }
    }

    #[test]
    fn history_is_bounded_and_too_old_is_gone() {
        let mut h = Hub::new(3, 0);
        for rv in [2, 4, 6, 8] {
            h.publish(ev(rv));
        }
        assert_eq!(h.since(1).err(), Some(3));
        assert_eq!(h.since(2).map(|v| v.len()), Ok(3));
        assert_eq!(
            h.since(6)
                .map(|v| v.iter().map(|e| e.rv).collect::<Vec<_>>()),
            Ok(vec![8])
        );
        assert_eq!(h.since(100).map(|v| v.len()), Ok(0));
    }
}
