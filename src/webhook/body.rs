//! Request bodies: the budget of body bytes held at once across all requests
//! (`--max-body-bytes-in-flight`), and reading a body into one buffer.
//!
//! A request reserves its declared `Content-Length` before any byte of its
//! body is read, and a body without a length reserves as it grows; a request
//! the budget cannot take is answered at once, unread. Bodies over
//! [`LARGE_BODY_BYTES`] may not take the last quarter of the budget, so that
//! ordinary reviews (a few KB) are still answered while large bodies hold
//! the rest.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::webhook::metrics::Metrics;

/// Bodies larger than this may not take the last quarter of the budget: a
/// review of an ordinary pod is a few KB, tens with large specs.
pub const LARGE_BODY_BYTES: usize = 64 * 1024;

/// Where a reservation may bring the bytes held: the whole budget for a body
/// of `body` bytes at most [`LARGE_BODY_BYTES`], three quarters for a larger one.
fn ceiling(limit: usize, body: usize) -> usize {
    if body > LARGE_BODY_BYTES {
        limit - limit / 4
    } else {
        limit
    }
}

/// The largest body the budget `limit` can ever take.
pub fn largest_body(limit: usize) -> usize {
    ceiling(limit, usize::MAX)
}

/// The bytes of request bodies held at once, and their limit.
pub struct Budget {
    limit: usize,
    held: AtomicUsize,
    metrics: Arc<Metrics>,
}

impl Budget {
    /// A budget of `limit` bytes, its use shown in `metrics`.
    pub fn new(limit: usize, metrics: Arc<Metrics>) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            held: AtomicUsize::new(0),
            metrics,
        })
    }

    /// Reserves `bytes` for a body of that size; `None` when over budget.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        self.take(bytes, bytes).then(|| Reservation {
            budget: self.clone(),
            bytes,
        })
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Takes `more` bytes for a body that then holds `body` bytes.
    fn take(&self, more: usize, body: usize) -> bool {
        let ceiling = ceiling(self.limit, body);
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(more).filter(|&after| after <= ceiling)
            })
            .is_ok();
        if taken {
            self.metrics.body_bytes(more as i64);
        }
        taken
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        self.metrics.body_bytes(-(bytes as i64));
    }
}

/// Bytes of the budget held for one body, given back when dropped.
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// Grows the reservation to `bytes`; false (and unchanged) when over budget.
    pub fn grow_to(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        let grown = self.budget.take(bytes - self.bytes, bytes);
        if grown {
            self.bytes = bytes;
        }
        grown
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// Why a body was not read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is longer than the largest body accepted.
    TooLarge,
    /// Growing its reservation would go over the budget.
    OverBudget,
    /// More bytes than its `Content-Length` announced.
    Overlong,
    /// The connection failed.
    Read(hyper::Error),
}

/// Reads `body` whole into one buffer, growing `reservation` with it: a
/// body of known length into a buffer of that size (reserved before), one
/// without a length doubling as it grows, up to `max` bytes.
pub async fn read(
    mut body: Incoming,
    declared: Option<usize>,
    max: usize,
    reservation: &mut Reservation,
) -> Result<Bytes, BodyError> {
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else {
            continue; // trailers
        };
        let needed = buffer.len() + data.len();
        if declared.is_some_and(|declared| needed > declared) {
            return Err(BodyError::Overlong);
        }
        if needed > max {
            return Err(BodyError::TooLarge);
        }
        if needed > buffer.capacity() {
            let capacity = needed.max(2 * buffer.capacity()).max(8 * 1024).min(max);
            if !reservation.grow_to(capacity) {
                return Err(BodyError::OverBudget);
            }
            buffer.reserve_exact(capacity - buffer.len());
        }
        buffer.extend_from_slice(&data);
    }
    Ok(Bytes::from(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;
    const LIMIT: usize = 1024 * KIB;

    /// `bytes` held by other requests, in small bodies.
    fn hold(budget: &Arc<Budget>, bytes: usize) -> Vec<Reservation> {
        let mut held = Vec::new();
        let mut left = bytes;
        while left > 0 {
            let body = left.min(LARGE_BODY_BYTES);
            held.push(budget.reserve(body).expect("room for small bodies"));
            left -= body;
        }
        held
    }

    #[test]
    fn large_bodies_leave_the_last_quarter_to_small_ones() {
        // (held before, body size, whether it is taken)
        let cases = [
            (0, 4 * KIB, true),
            (0, LIMIT, false),
            (0, 768 * KIB, true),
            (0, 768 * KIB + 1, false),
            (700 * KIB, 68 * KIB, true),
            (700 * KIB, 68 * KIB + 1, false),
            // Past three quarters only small bodies, up to the whole budget.
            (768 * KIB, LARGE_BODY_BYTES + 1, false),
            (768 * KIB, LARGE_BODY_BYTES, true),
            (LIMIT - 4 * KIB, 4 * KIB, true),
            (LIMIT - 4 * KIB, 4 * KIB + 1, false),
            (LIMIT, 0, true),
            (LIMIT, 1, false),
        ];
        for (held, body, want) in cases {
            let budget = Budget::new(LIMIT, Arc::new(Metrics::new()));
            let holder = hold(&budget, held);
            let reservation = budget.reserve(body);
            assert_eq!(reservation.is_some(), want, "{held} held, body of {body}");
            let expected = held + if want { body } else { 0 };
            assert_eq!(budget.held(), expected);
            drop((holder, reservation));
            assert_eq!(budget.held(), 0, "all given back");
        }
    }

    #[test]
    fn a_growing_body_becomes_large_when_it_passes_the_threshold() {
        // (held by others, the body's reservation before, grown to, whether it grows)
        let cases = [
            (0, 0, 8 * KIB, true),
            (0, 8 * KIB, LARGE_BODY_BYTES, true),
            // Over three quarters once the body has grown large.
            (740 * KIB, 32 * KIB, LARGE_BODY_BYTES, true),
            (740 * KIB, 32 * KIB, LARGE_BODY_BYTES + 1, false),
            (600 * KIB, 32 * KIB, 168 * KIB, true),
            (600 * KIB, 32 * KIB, 168 * KIB + 1, false),
            (900 * KIB, 32 * KIB, LARGE_BODY_BYTES, true),
            (LIMIT - 8 * KIB, 8 * KIB, 8 * KIB, true),
            (LIMIT - 8 * KIB, 8 * KIB, 8 * KIB + 1, false),
        ];
        for (others, before, after, want) in cases {
            let budget = Budget::new(LIMIT, Arc::new(Metrics::new()));
            let _others = hold(&budget, others);
            let mut reservation = budget.reserve(before).unwrap();
            assert_eq!(
                reservation.grow_to(after),
                want,
                "{others} + {before} -> {after}"
            );
            let expected = others + if want { after } else { before };
            assert_eq!(budget.held(), expected);
        }
    }

    #[test]
    fn the_largest_body_is_three_quarters_of_the_budget() {
        assert_eq!(largest_body(16 * LIMIT), 12 * LIMIT);
    }
}
