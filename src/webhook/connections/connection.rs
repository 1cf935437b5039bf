//! One connection's state, shared by its task, its requests and the registry:
//! what it is doing (its handshake, idle, a request reading its body or
//! waiting for a watch, answering) in one atomic word, and its peer's
//! requests in flight across the peer's connections. The registry
//! ([`super::Connections`]) admits and evicts; this says what each holds.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::webhook::eviction::Doing;

use super::Full;

/// Requests in flight on a connection: the low 16 bits of its state.
pub(super) const IN_FLIGHT: u64 = 0xffff;
/// Of those, one still waiting for (the rest of) its body: the next 16 bits.
pub(super) const READING_ONE: u64 = 1 << 16;
pub(super) const READING: u64 = IN_FLIGHT << 16;
/// Of those, one waiting for a cache's watch: the next 16 bits.
pub(super) const AWAITING_ONE: u64 = 1 << 32;
pub(super) const AWAITING: u64 = IN_FLIGHT << 32;
/// Set until the TLS handshake completes.
pub(super) const HANDSHAKE: u64 = 1 << 48;
/// Set once evicted: no request may start, the connection closes now.
pub(super) const EVICTED: u64 = 1 << 49;
/// Set once asked to close gracefully (shutdown): the requests in flight finish.
pub(super) const CLOSING: u64 = 1 << 50;
/// Set until the first byte arrives.
pub(super) const SILENT: u64 = 1 << 51;
/// Set once a request has started.
pub(super) const SERVED: u64 = 1 << 52;
/// Set once a review for objects that exist was answered: the connection is proven.
pub(super) const ANSWERED: u64 = 1 << 53;

/// A source address: its requests in flight, across its connections.
pub struct Peer {
    pub(super) addr: IpAddr,
    pub(super) requests: AtomicUsize,
    pub(super) max_requests: usize,
    /// Notified when one of its requests ends.
    pub(super) freed: Notify,
}

/// One connection's state, shared by its task and its requests.
pub struct Conn {
    pub(super) opened: Instant,
    pub(super) peer: Arc<Peer>,
    /// How long its bodies may make no progress before they count as stalled.
    pub(super) stalled_after: Duration,
    /// Requests in flight, those of them reading their bodies or waiting for
    /// a watch, and the flags above.
    pub(super) state: AtomicU64,
    /// When the last request ended (or the handshake), in ms since `opened`.
    pub(super) active_ms: AtomicU64,
    /// When a request last started, a body byte last arrived or a body was
    /// read whole, in ms since `opened`.
    pub(super) progress_ms: AtomicU64,
    /// Wakes the connection's task when evicted or asked to close.
    pub(super) signal: Notify,
}

/// Whether a request may start on a connection in `state`: it is proven, or
/// has none in flight.
fn has_turn(state: u64) -> bool {
    state & ANSWERED != 0 || state & IN_FLIGHT == 0
}

/// Whether a request in flight in `state` is being answered: neither
/// reading its body nor waiting for a watch.
fn answering(state: u64) -> bool {
    let in_flight = state & IN_FLIGHT;
    let waiting = ((state & READING) >> 16) + ((state & AWAITING) >> 32);
    in_flight > waiting
}

impl Conn {
    pub(super) fn new(peer: Arc<Peer>, stalled_after: Duration) -> Conn {
        Conn {
            opened: Instant::now(),
            peer,
            stalled_after,
            state: AtomicU64::new(SILENT | HANDSHAKE),
            active_ms: AtomicU64::new(0),
            progress_ms: AtomicU64::new(0),
            signal: Notify::new(),
        }
    }

    pub(super) fn ms_since_opened(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.opened).as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn since(&self, ms: &AtomicU64, now: Instant) -> Duration {
        let at = Duration::from_millis(ms.load(Ordering::Acquire));
        now.saturating_duration_since(self.opened)
            .saturating_sub(at)
    }

    /// Its state, what it is doing and how long it has been unproductive
    /// (idle, owing its caller's bytes, or waiting), at `now`.
    pub(super) fn standing(&self, now: Instant) -> (u64, Doing, Duration) {
        let state = self.state.load(Ordering::Acquire);
        let (doing, unproductive) = if state & IN_FLIGHT == 0 {
            let doing = if state & SILENT != 0 {
                Doing::Silent
            } else if state & HANDSHAKE != 0 {
                Doing::Handshake
            } else {
                Doing::Idle
            };
            (doing, self.since(&self.active_ms, now))
        } else if answering(state) {
            (Doing::Working, Duration::ZERO)
        } else {
            let waiting = self.since(&self.progress_ms, now);
            let doing = if state & AWAITING != 0 {
                Doing::Waiting
            } else {
                Doing::Reading {
                    stalled: waiting >= self.stalled_after,
                }
            };
            (doing, waiting)
        };
        (state, doing, unproductive)
    }

    /// Marks it evicted unless it is evicted already or answering a request;
    /// whether it did.
    pub(super) fn try_evict(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & EVICTED == 0 && !answering(state)).then_some(state | EVICTED)
            })
            .is_ok()
    }

    /// Its first byte arrived: its TLS handshake starts.
    pub fn first_byte(&self) {
        self.state.fetch_and(!SILENT, Ordering::AcqRel);
    }

    /// Its handshake is over (or it has none): idle from now.
    pub fn serving(&self) {
        self.touch(&self.active_ms);
        self.state
            .fetch_and(!(SILENT | HANDSHAKE), Ordering::AcqRel);
    }

    pub(super) fn touch(&self, ms: &AtomicU64) {
        ms.store(self.ms_since_opened(Instant::now()), Ordering::Release);
    }

    /// A request starts, waiting for its body: refused once the connection
    /// is evicted, when its peer has `--max-requests-per-peer` in flight, or
    /// when the connection is unproven and has a request in flight already
    /// (so a peer's strangers hold at most one request per connection).
    pub fn enter(self: &Arc<Self>) -> Result<InFlight, Full> {
        let peer = &self.peer;
        if !has_turn(self.state.load(Ordering::Acquire)) {
            return Err(Full::Unproven);
        }
        peer.requests
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < peer.max_requests).then_some(n + 1)
            })
            .map_err(|_| Full::PeerRequests)?;
        self.touch(&self.progress_ms);
        let entered = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & EVICTED == 0 && state & IN_FLIGHT < IN_FLIGHT && has_turn(state))
                    .then_some((state + 1 + READING_ONE) | SERVED)
            });
        if let Err(state) = entered {
            peer.requests.fetch_sub(1, Ordering::AcqRel);
            peer.freed.notify_waiters();
            return Err(match state & EVICTED {
                0 => Full::Unproven,
                _ => Full::Evicted,
            });
        }
        Ok(InFlight {
            conn: self.clone(),
            reading: true,
        })
    }

    /// [`Conn::enter`], waiting up to `wait` for the connection's turn while
    /// it is unproven and has a request in flight.
    pub async fn enter_in_turn(self: &Arc<Self>, wait: Duration) -> Result<InFlight, Full> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let freed = self.peer.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.enter() {
                Err(Full::Unproven) => {
                    if tokio::time::timeout_at(deadline, freed).await.is_err() {
                        return Err(Full::Unproven);
                    }
                }
                entered => return entered,
            }
        }
    }

    /// Whether it was evicted: it closes at once.
    pub fn evicted(&self) -> bool {
        self.state.load(Ordering::Acquire) & EVICTED != 0
    }

    /// Whether it was asked to close gracefully.
    pub fn closing(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSING != 0
    }

    /// How long it has had no request in flight; `None` while it has one.
    pub fn idle_for(&self) -> Option<Duration> {
        if self.state.load(Ordering::Acquire) & IN_FLIGHT != 0 {
            return None;
        }
        Some(self.since(&self.active_ms, Instant::now()))
    }

    /// Waits until it is evicted or asked to close.
    pub async fn signalled(&self) {
        self.signal.notified().await;
    }
}

/// A request in flight on a connection; it ends when dropped.
pub struct InFlight {
    conn: Arc<Conn>,
    /// Still waiting for (the rest of) its body.
    reading: bool,
}

impl InFlight {
    /// Bytes of its body arrived: not stalled.
    pub fn progressed(&self) {
        self.conn.touch(&self.conn.progress_ms);
    }

    /// Its body is read whole, or will not be read: being answered from now.
    pub fn read(&mut self) {
        if std::mem::take(&mut self.reading) {
            self.progressed();
            self.conn.state.fetch_sub(READING_ONE, Ordering::AcqRel);
        }
    }

    /// Its review waits for a cache's watch, not for its caller: until the
    /// guard is dropped, the request may be cut with its connection.
    pub fn waiting(&self) -> Waiting<'_> {
        self.conn.state.fetch_add(AWAITING_ONE, Ordering::AcqRel);
        Waiting(&self.conn)
    }

    /// A review for objects that exist was answered: the connection is
    /// proven, and goes after every unproven one.
    pub fn answered(&self) {
        self.conn.state.fetch_or(ANSWERED, Ordering::AcqRel);
    }

    /// The connection it is on.
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Touched first: the connection is never seen idle since long ago.
        self.conn.touch(&self.conn.active_ms);
        let reading = if self.reading { READING_ONE } else { 0 };
        self.conn.state.fetch_sub(1 + reading, Ordering::AcqRel);
        self.conn.peer.requests.fetch_sub(1, Ordering::AcqRel);
        self.conn.peer.freed.notify_waiters();
    }
}

/// A request's wait for a cache's watch, from [`InFlight::waiting`].
pub struct Waiting<'a>(&'a Conn);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.state.fetch_sub(AWAITING_ONE, Ordering::AcqRel);
    }
}
