//! Per-object exponential backoff for failed reconciles.
//!
//! A fixed requeue after an error either hammers the API server (short) or leaves a transient
//! failure unrepaired for long (long). Each object gets its own failure count: the delay
//! doubles from `base` up to `max`, with up to 10% jitter so objects that failed together (an
//! API-server hiccup) do not retry in lockstep, and the count is forgotten on the next success.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Failure counts per object key.
#[derive(Debug)]
pub struct Backoff<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash + Clone> Backoff<K> {
    /// A backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying.
    pub fn next_delay(&self, key: &K) -> Duration {
        let attempt = {
            let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            let n = failures.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let delay = delay_for(self.base, self.max, attempt);
        delay + jitter(delay)
    }

    /// Forgets the failures of `key` (after a successful reconcile or its deletion).
    pub fn reset(&self, key: &K) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// `base * 2^(attempt-1)`, capped at `max`; attempt 0 is treated as 1.
pub fn delay_for(base: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(31);
    base.checked_mul(1u32 << exp).unwrap_or(max).min(max)
}

/// Up to 10% of `delay`, from the clock's sub-second noise (good enough to spread retries; not
/// worth a random-number dependency).
fn jitter(delay: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    delay.mul_f64(f64::from(nanos % 1000) / 10_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_caps() {
        let b = Duration::from_millis(500);
        let m = Duration::from_secs(60);
        let got: Vec<_> = (1..=10).map(|a| delay_for(b, m, a).as_millis()).collect();
        assert_eq!(
            got,
            [
                500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000
            ]
        );
        assert_eq!(delay_for(b, m, u32::MAX), m);
    }

    #[test]
    fn per_object_and_reset_on_success() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        let a = "a".to_string();
        let b = "b".to_string();
        for _ in 0..3 {
            backoff.next_delay(&a);
        }
        let d = backoff.next_delay(&b);
        assert!(d >= Duration::from_secs(1) && d <= Duration::from_millis(1100));
        let d = backoff.next_delay(&a);
        assert!(d >= Duration::from_secs(8) && d <= Duration::from_millis(8800));
        assert_eq!(backoff.failures(&a), 4);
        backoff.reset(&a);
        assert_eq!(backoff.failures(&a), 0);
        assert_eq!(backoff.failures(&b), 1);
    }
}
