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
use tokio::sync::Notify;

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

/// The smallest budget that can take a body of `body` bytes.
pub fn least_budget_for(body: usize) -> usize {
    if body > LARGE_BODY_BYTES {
        body.div_ceil(3) * 4
    } else {
        body
    }
}

/// Whether the budget `limit` can ever take a body of `body` bytes.
pub fn fits(limit: usize, body: usize) -> bool {
    body <= ceiling(limit, body)
}

/// The bytes of request bodies held at once, and their limit.
pub struct Budget {
    limit: usize,
    held: AtomicUsize,
    metrics: Arc<Metrics>,
    /// Notified when bytes are given back.
    freed: Notify,
}

impl Budget {
    /// A budget of `limit` bytes, its use shown in `metrics`.
    pub fn new(limit: usize, metrics: Arc<Metrics>) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            held: AtomicUsize::new(0),
            metrics,
            freed: Notify::new(),
        })
    }

    /// Reserves `bytes`, waiting until `deadline` for them to be given back
    /// when the budget cannot take them now; `None` if it still cannot.
    pub async fn reserve_by(
        self: &Arc<Self>,
        bytes: usize,
        deadline: tokio::time::Instant,
    ) -> Option<Reservation> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(reservation) = self.reserve(bytes) {
                return Some(reservation);
            }
            tokio::time::timeout_at(deadline, freed).await.ok()?;
        }
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
        self.freed.notify_waiters();
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
    /// No memory mapping for a large body.
    Memory(std::io::Error),
}

/// Bodies announcing this many bytes or more are read into an anonymous
/// memory mapping of their own, given back to the kernel as soon as the
/// reply is made: glibc's malloc, once it has freed a body this large,
/// serves the next from its heap and keeps up to twice as much there, so
/// the RSS would not come down after a flood of large bodies.
pub const MAPPED_FROM: usize = 256 * 1024;

/// Where a body is read to: a buffer of its announced size, or one that
/// grows (doubling) with a body of unknown size.
enum Buffer {
    Heap(Vec<u8>),
    Mapped { map: memmap2::MmapMut, len: usize },
}

impl Buffer {
    fn new(declared: Option<usize>) -> Result<Buffer, BodyError> {
        match declared {
            Some(n) if n >= MAPPED_FROM => {
                let map = memmap2::MmapMut::map_anon(n).map_err(BodyError::Memory)?;
                Ok(Buffer::Mapped { map, len: 0 })
            }
            Some(n) => Ok(Buffer::Heap(Vec::with_capacity(n))),
            None => Ok(Buffer::Heap(Vec::new())),
        }
    }

    fn len(&self) -> usize {
        match self {
            Buffer::Heap(vec) => vec.len(),
            Buffer::Mapped { len, .. } => *len,
        }
    }

    fn capacity(&self) -> usize {
        match self {
            Buffer::Heap(vec) => vec.capacity(),
            Buffer::Mapped { map, .. } => map.len(),
        }
    }

    /// Appends `data`; the caller made room.
    fn extend(&mut self, data: &[u8]) {
        match self {
            Buffer::Heap(vec) => vec.extend_from_slice(data),
            Buffer::Mapped { map, len } => {
                map[*len..*len + data.len()].copy_from_slice(data);
                *len += data.len();
            }
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Buffer::Heap(vec) => Bytes::from(vec),
            Buffer::Mapped { map, len } => Bytes::from_owner(map).slice(..len),
        }
    }
}

/// Reads `body` whole into one buffer, growing `reservation` with it: a
/// body of known length into a buffer of that size (reserved before), one
/// without a length doubling as it grows, up to `max` bytes. Calls
/// `progressed` as bytes arrive.
pub async fn read(
    mut body: Incoming,
    declared: Option<usize>,
    max: usize,
    reservation: &mut Reservation,
    mut progressed: impl FnMut(),
) -> Result<Bytes, BodyError> {
    let mut buffer = Buffer::new(declared)?;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else {
            continue; // trailers
        };
        progressed();
        let needed = buffer.len() + data.len();
        if declared.is_some_and(|declared| needed > declared) {
            return Err(BodyError::Overlong);
        }
        if needed > max {
            return Err(BodyError::TooLarge);
        }
        if let Buffer::Heap(vec) = &mut buffer
            && needed > vec.capacity()
        {
            let capacity = needed.max(2 * vec.capacity()).max(8 * 1024).min(max);
            if !reservation.grow_to(capacity) {
                return Err(BodyError::OverBudget);
            }
            vec.reserve_exact(capacity - vec.len());
        }
        buffer.extend(&data);
    }
    debug_assert!(buffer.capacity() <= reservation.bytes.max(declared.unwrap_or(0)));
    Ok(buffer.into_bytes())
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
    fn large_announced_bodies_are_mapped_and_read_whole() {
        let data: Vec<u8> = (0..MAPPED_FROM + 100).map(|i| (i % 251) as u8).collect();
        // (announced length, whether mapped)
        for (declared, mapped) in [
            (Some(data.len()), true),
            (Some(MAPPED_FROM - 1), false),
            (None, false),
        ] {
            let data = &data[..declared.unwrap_or(data.len())];
            let mut buffer = Buffer::new(declared).unwrap();
            assert_eq!(
                matches!(buffer, Buffer::Mapped { .. }),
                mapped,
                "{declared:?}"
            );
            for chunk in data.chunks(16 * KIB) {
                if let Buffer::Heap(vec) = &mut buffer {
                    vec.reserve(chunk.len());
                }
                buffer.extend(chunk);
            }
            assert_eq!(buffer.len(), data.len());
            assert_eq!(buffer.into_bytes(), data, "{declared:?}");
        }
    }

    #[test]
    fn a_small_body_fits_the_whole_budget_a_large_one_three_quarters() {
        // (budget, body, whether it can ever be read)
        for (limit, body, want) in [
            (8 * LIMIT, 6 * LIMIT, true),
            (8 * LIMIT, 6 * LIMIT + 1, false),
            (LARGE_BODY_BYTES, LARGE_BODY_BYTES, true),
            (LARGE_BODY_BYTES, LARGE_BODY_BYTES + 1, false),
            (4 * KIB, 4 * KIB, true),
        ] {
            assert_eq!(fits(limit, body), want, "{body} in {limit}");
            assert!(fits(least_budget_for(body), body), "{body}");
        }
    }
}
