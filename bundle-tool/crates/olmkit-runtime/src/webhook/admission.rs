//! Admission control of `/convert`: how many reviews are handled at once and how much memory
//! they hold, so the webhook's memory has a ceiling whatever the API server (or anyone else
//! reaching port 9443) sends.
//!
//! An attack found each concurrent 2 MiB ConversionReview costing about 7 MB (the body, its
//! parsed form and the converted answer), 60 at once 515 MB, in a manager limited to 128 MiB
//! that also runs the controller; later ones found reviews of failing objects costing 14 times
//! their size, and bodies of tiny objects far more. Two budgets bound that:
//!
//! - a number of requests (`--webhook-max-concurrent-requests`): a request that finds none free
//!   is answered `429 Too Many Requests` at once;
//! - a number of bytes (`--webhook-max-inflight-bytes`) that the reviews being handled may
//!   hold: a request is charged [`super::review::base_cost`] of its declared `Content-Length`
//!   (its body and room for its answer) before its body is read, or chunk by chunk when it
//!   declares none; while it is converted, more as [`super::review::answer_within`] asks (an
//!   answer larger than its room, the parsed form of the largest object so far); and it keeps
//!   the charge until hyper has taken the last byte of its answer. A request that cannot be
//!   charged is answered `429` as well.
//!
//! Every 429 carries `Retry-After: 1` and a `meta/v1` Status body with the reason. The API
//! server's REST client (client-go `rest.Request`, whose `checkWait` treats 429 and 5xx with an
//! integer `Retry-After` as "wait and retry") retries such answers, so a burst is spread out
//! instead of failing conversions.
//!
//! Rejected requests still have their body read and thrown away (bounded, without keeping it):
//! an HTTP/1.1 client writes its whole body before reading the answer and would otherwise see a
//! broken pipe instead of the 429, and over HTTP/2 some clients report the stream reset that
//! follows an early answer instead of the answer. At most four bodies per request slot are
//! drained at once, each up to four times the request limit; beyond that the answer goes out at
//! once (an HTTP/1.1 connection is then closed after it).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bodies drained at once per request slot.
pub const DRAINS_PER_REQUEST: usize = 4;

/// Bytes charged at a time to a body of unknown length.
pub const CHARGE_STEP: usize = 64 * 1024;

/// The shared budgets. Cloning shares them.
#[derive(Clone, Debug)]
pub struct Admission {
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    drains: Arc<Semaphore>,
    max_requests: usize,
    max_bytes: usize,
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// All request slots are taken.
    #[error(
        "the conversion webhook is handling {limit} requests already (--webhook-max-concurrent-requests); retry shortly"
    )]
    Requests {
        /// The limit.
        limit: usize,
    },
    /// The byte budget cannot hold this review now.
    #[error(
        "the conversion webhook holds too much for other reviews to give this one the {wanted} bytes it needs (limit {limit} bytes in flight, --webhook-max-inflight-bytes); retry shortly"
    )]
    Bytes {
        /// Bytes the review would hold in all.
        wanted: usize,
        /// The limit.
        limit: usize,
    },
}

/// What an admitted request holds; released when dropped.
#[derive(Debug)]
pub struct Ticket {
    _request: OwnedSemaphorePermit,
    bytes: Vec<OwnedSemaphorePermit>,
    charged: usize,
    /// The body declared its length, which was charged up front.
    exact: bool,
    budget: Arc<Semaphore>,
    max_bytes: usize,
}

impl Ticket {
    /// Makes sure `total` body bytes are charged, charging more in [`CHARGE_STEP`]s if needed.
    pub fn charge_up_to(&mut self, total: usize) -> Result<(), Refused> {
        while self.charged < total {
            // Whole steps spare the semaphore, but never more than the budget could give.
            let needed = total - self.charged;
            // A declared length is charged exactly; a body of unknown length in whole steps
            // (fewer semaphore operations), as far as the budget allows.
            let step = if self.exact {
                needed
            } else {
                needed
                    .max(CHARGE_STEP)
                    .min(self.budget.available_permits().max(needed))
            };
            let n = u32::try_from(step).unwrap_or(u32::MAX);
            let permit =
                self.budget
                    .clone()
                    .try_acquire_many_owned(n)
                    .map_err(|_| Refused::Bytes {
                        wanted: total,
                        limit: self.max_bytes,
                    })?;
            self.bytes.push(permit);
            self.charged += n as usize;
        }
        Ok(())
    }

    /// Bytes charged so far.
    pub fn charged(&self) -> usize {
        self.charged
    }
}

impl Admission {
    /// Budgets of `max_requests` requests and `max_bytes` bytes at once. `max_bytes` is raised
    /// to [`super::review::base_cost`] of `max_request_bytes` (the largest accepted body) so
    /// every acceptable request can be admitted.
    pub fn new(max_requests: usize, max_bytes: usize, max_request_bytes: usize) -> Self {
        let max_requests = max_requests.max(1);
        // Semaphore permits are counted in u32 per acquisition and usize in total.
        let max_bytes = max_bytes
            .max(super::review::base_cost(max_request_bytes))
            .min(Semaphore::MAX_PERMITS);
        Self {
            requests: Arc::new(Semaphore::new(max_requests)),
            bytes: Arc::new(Semaphore::new(max_bytes)),
            // Draining holds no body, only the request's headers and the connection's own
            // bounded buffers.
            drains: Arc::new(Semaphore::new(
                max_requests.saturating_mul(DRAINS_PER_REQUEST),
            )),
            max_requests,
            max_bytes,
        }
    }

    /// Admits a request, charging `charge` bytes now when its body declared its length (the
    /// charge is then exact; without it, the request is charged in [`CHARGE_STEP`]s later).
    pub fn admit(&self, charge: Option<usize>) -> Result<Ticket, Refused> {
        let request = self
            .requests
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Requests {
                limit: self.max_requests,
            })?;
        let mut ticket = Ticket {
            _request: request,
            bytes: Vec::new(),
            charged: 0,
            exact: charge.is_some(),
            budget: self.bytes.clone(),
            max_bytes: self.max_bytes,
        };
        if let Some(bytes) = charge {
            ticket.charge_up_to(bytes)?;
        }
        Ok(ticket)
    }

    /// A slot to drain a rejected body, if one is free.
    pub fn drain_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.drains.clone().try_acquire_owned().ok()
    }

    /// The byte budget.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes charged right now (for tests and logs).
    pub fn bytes_in_flight(&self) -> usize {
        self.max_bytes - self.bytes.available_permits()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn requests_beyond_the_limit_are_refused_until_one_ends() {
        let a = Admission::new(2, 1 << 20, 0);
        let t1 = a.admit(Some(10)).unwrap();
        let _t2 = a.admit(None).unwrap();
        assert_eq!(a.admit(None).unwrap_err(), Refused::Requests { limit: 2 });
        drop(t1);
        a.admit(None).unwrap();
    }

    #[test]
    fn bytes_are_charged_up_front_or_in_steps_and_given_back() {
        let a = Admission::new(8, 4 * CHARGE_STEP, 0);
        let big = a.admit(Some(3 * CHARGE_STEP)).unwrap();
        assert_eq!(a.bytes_in_flight(), 3 * CHARGE_STEP);
        let mut small = a.admit(None).unwrap();
        small.charge_up_to(10).unwrap();
        assert_eq!(small.charged(), CHARGE_STEP);
        assert!(matches!(
            small.charge_up_to(CHARGE_STEP + 1),
            Err(Refused::Bytes { .. })
        ));
        assert!(matches!(
            a.admit(Some(CHARGE_STEP)),
            Err(Refused::Bytes { .. })
        ));
        drop(big);
        drop(small);
        assert_eq!(a.bytes_in_flight(), 0);
    }

    #[test]
    fn the_byte_budget_always_fits_the_largest_accepted_review() {
        let a = Admission::new(1, 10, 3 << 20);
        assert_eq!(a.max_bytes(), 9 << 20);
        a.admit(Some(super::super::review::base_cost(3 << 20)))
            .unwrap();
    }
}
