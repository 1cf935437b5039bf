//! The open connections of a port, whose they are and what each is doing: in
//! its TLS handshake, idle between requests, or serving requests. Bounds
//! what one peer (a source address) can hold: `--max-connections-per-peer`
//! connections and `--max-requests-per-peer` requests in flight; a peer at
//! its connection limit makes room only among its own connections.
//!
//! At a limit, a new connection evicts an unproductive one, as nginx reuses
//! its idle keep-alive connections. What a connection has shown of itself
//! decides, least first: it has not sent a byte; it is in its TLS
//! handshake; it has not sent a request; every request it has in flight is
//! waiting for a body that has made no progress for `--body-stall-timeout`; it
//! is idle between requests. A connection that has had a review answered
//! comes after every one that has not, so the API server's keep-alive
//! connections, idle for milliseconds between reviews, stay ahead of
//! strangers. Among equals, the peer holding the most connections goes
//! first, then the one unproductive the longest. So a flood of silent or
//! stalled connections evicts itself. When nothing is evictable the new
//! connection is closed at once. A request being answered (its body read)
//! is never cut; a stalled one is, with its connection: the client sends it
//! again on another.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::webhook::metrics::{Eviction, Metrics, Refusal};

/// Requests in flight on a connection: the low bits of its state.
const IN_FLIGHT: u64 = 0x00ff_ffff;
/// Set until the TLS handshake completes.
const HANDSHAKE: u64 = 1 << 24;
/// Set once evicted: no request may start, the connection closes now.
const EVICTED: u64 = 1 << 25;
/// Set once asked to close gracefully (shutdown): the requests in flight finish.
const CLOSING: u64 = 1 << 26;
/// Set until the first byte arrives.
const SILENT: u64 = 1 << 27;
/// Set once a request has started.
const SERVED: u64 = 1 << 28;
/// Set once a request's body was read whole and answered.
const ANSWERED: u64 = 1 << 29;
/// One request in flight still waiting for (the rest of) its body: these
/// count in the high half of the state.
const READING_ONE: u64 = 1 << 32;
const READING: u64 = IN_FLIGHT << 32;

/// The limits of a registry.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max: usize,
    /// Connections open at once from one source address.
    pub per_peer: usize,
    /// Requests in flight at once from one source address.
    pub requests_per_peer: usize,
    /// How long the requests of a connection may wait for their bodies with
    /// no byte arriving before the connection may be evicted.
    pub stalled_after: Duration,
}

/// Why a new connection or request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every connection is busy at the limit of connections.
    Connections,
    /// Every connection of its peer is busy at the limit per peer.
    PeerConnections,
    /// Its peer has as many requests in flight as it may.
    PeerRequests,
    /// Shutting down.
    ShuttingDown,
    /// Its connection was evicted.
    Evicted,
}

/// The registry of open connections.
pub struct Connections {
    limits: ConnectionLimits,
    /// Where evictions and refusals are counted (the admission port's).
    metrics: Option<Arc<Metrics>>,
    inner: Mutex<Inner>,
    /// Notified when the last connection goes.
    emptied: Notify,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// By age: ids grow.
    open: BTreeMap<u64, Arc<Conn>>,
    /// The peers with a connection open, and how many each has.
    peers: HashMap<IpAddr, (Arc<Peer>, usize)>,
    shutting_down: bool,
}

impl Inner {
    /// Takes connection `id` out, if it is still in.
    fn forget(&mut self, id: u64) -> Option<Arc<Conn>> {
        let conn = self.open.remove(&id)?;
        if let Some((_, held)) = self.peers.get_mut(&conn.peer.addr) {
            *held -= 1;
            if *held == 0 {
                self.peers.remove(&conn.peer.addr);
            }
        }
        Some(conn)
    }

    fn held_by(&self, addr: &IpAddr) -> usize {
        self.peers.get(addr).map_or(0, |(_, held)| *held)
    }
}

/// A source address: its requests in flight, across its connections.
pub struct Peer {
    addr: IpAddr,
    requests: AtomicUsize,
    max_requests: usize,
}

impl Connections {
    /// A registry within `limits`, counted in `metrics` when given.
    pub fn new(limits: ConnectionLimits, metrics: Option<Arc<Metrics>>) -> Arc<Connections> {
        Arc::new(Connections {
            limits,
            metrics,
            inner: Mutex::new(Inner::default()),
            emptied: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, f: impl FnOnce(&Metrics)) {
        if let Some(metrics) = &self.metrics {
            f(metrics);
        }
    }

    /// Registers a new connection from `addr`, in its handshake. A peer at
    /// its limit evicts its own most unproductive connection first, a new
    /// connection at the limit of all the most unproductive of all. Refused
    /// (and counted) when there is nothing to evict.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Result<Ticket, Full> {
        let addr = addr.to_canonical();
        let mut inner = self.lock();
        if inner.shutting_down {
            return Err(Full::ShuttingDown);
        }
        let full = if inner.held_by(&addr) >= self.limits.per_peer {
            Some((Full::PeerConnections, Some(addr)))
        } else if inner.open.len() >= self.limits.max {
            Some((Full::Connections, None))
        } else {
            None
        };
        if let Some((full, among)) = full {
            let Some((id, eviction)) = evict(&inner, among, Instant::now()) else {
                drop(inner);
                self.count(|m| {
                    m.refused(match full {
                        Full::PeerConnections => Refusal::PeerConnectionLimit,
                        _ => Refusal::ConnectionLimit,
                    })
                });
                return Err(full);
            };
            let conn = inner.forget(id).expect("chosen from the map");
            conn.signal.notify_one();
            self.count(|m| m.evicted(eviction));
        }
        let id = inner.next;
        inner.next += 1;
        let peer = match inner.peers.get_mut(&addr) {
            Some((peer, held)) => {
                *held += 1;
                peer.clone()
            }
            None => {
                let peer = Arc::new(Peer {
                    addr,
                    requests: AtomicUsize::new(0),
                    max_requests: self.limits.requests_per_peer,
                });
                inner.peers.insert(addr, (peer.clone(), 1));
                peer
            }
        };
        let conn = Arc::new(Conn::new(peer, self.limits.stalled_after));
        inner.open.insert(id, conn.clone());
        let open = inner.open.len();
        self.count(|m| m.connections(open));
        Ok(Ticket {
            registry: self.clone(),
            id,
            conn,
        })
    }

    /// Evicts every connection whose requests all wait for bodies that have
    /// stalled: what they hold of the body budget is wanted. How many.
    pub fn evict_stalled(&self) -> usize {
        self.evict_stalled_at(Instant::now())
    }

    fn evict_stalled_at(&self, now: Instant) -> usize {
        let mut inner = self.lock();
        let stalled: Vec<u64> = inner
            .open
            .iter()
            .filter(|(_, conn)| conn.stalled(now) && conn.try_evict(true).is_some())
            .map(|(&id, _)| id)
            .collect();
        for &id in &stalled {
            if let Some(conn) = inner.forget(id) {
                conn.signal.notify_one();
                self.count(|m| m.evicted(Eviction::Stalled));
            }
        }
        let open = inner.open.len();
        self.count(|m| m.connections(open));
        stalled.len()
    }

    /// Asks every connection to close gracefully and admits no more.
    pub fn shut_down(&self) {
        let mut inner = self.lock();
        inner.shutting_down = true;
        for conn in inner.open.values() {
            conn.state.fetch_or(CLOSING, Ordering::AcqRel);
            conn.signal.notify_one();
        }
    }

    /// The connections open now.
    pub fn len(&self) -> usize {
        self.lock().open.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until no connection is open.
    pub async fn emptied(&self) {
        loop {
            let notified = self.emptied.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_empty() {
                return;
            }
            notified.await;
        }
    }
}

/// What a connection has shown of itself, least first: the order of eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Shown {
    Silent,
    Handshake,
    NoRequest,
    Stalled,
    Idle,
    StalledAfterAnswers,
    IdleAfterAnswers,
}

impl Shown {
    /// What a connection in `state` has shown; `None` when it may not be
    /// evicted (evicted already, or a request in flight that is not stalled).
    fn of(state: u64, stalled: bool) -> Option<Shown> {
        let answered = state & ANSWERED != 0;
        Some(if state & EVICTED != 0 {
            return None;
        } else if state & IN_FLIGHT != 0 {
            match (stalled, answered) {
                (false, _) => return None,
                (true, false) => Shown::Stalled,
                (true, true) => Shown::StalledAfterAnswers,
            }
        } else if state & SILENT != 0 {
            Shown::Silent
        } else if state & HANDSHAKE != 0 {
            Shown::Handshake
        } else if state & SERVED == 0 {
            Shown::NoRequest
        } else if answered {
            Shown::IdleAfterAnswers
        } else {
            Shown::Idle
        })
    }

    fn eviction(self) -> Eviction {
        match self {
            Shown::Silent | Shown::Handshake => Eviction::Handshake,
            Shown::Stalled | Shown::StalledAfterAnswers => Eviction::Stalled,
            Shown::NoRequest | Shown::Idle | Shown::IdleAfterAnswers => Eviction::Idle,
        }
    }
}

/// One connection as [`choose`] weighs it.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: u64,
    shown: Shown,
    /// Connections its peer holds.
    peer_holds: usize,
    /// How long it has been unproductive.
    unproductive: Duration,
}

/// Marks evicted the connection to evict among those of `among` (all when
/// `None`): its id and what it was doing; `None` when none may be evicted.
fn evict(inner: &Inner, among: Option<IpAddr>, now: Instant) -> Option<(u64, Eviction)> {
    let mut skipped = Vec::new();
    loop {
        let candidates = inner
            .open
            .iter()
            .filter(|(id, conn)| {
                among.is_none_or(|addr| conn.peer.addr == addr) && !skipped.contains(*id)
            })
            .filter_map(|(&id, conn)| {
                let (state, unproductive, stalled) = conn.standing(now);
                Some(Candidate {
                    id,
                    shown: Shown::of(state, stalled)?,
                    peer_holds: inner.held_by(&conn.peer.addr),
                    unproductive,
                })
            });
        let chosen = choose(candidates)?;
        // A request may have started, or a body moved, meanwhile: then choose again.
        let stalled = matches!(chosen.shown, Shown::Stalled | Shown::StalledAfterAnswers);
        if inner.open[&chosen.id].try_evict(stalled).is_some() {
            return Some((chosen.id, chosen.shown.eviction()));
        }
        skipped.push(chosen.id);
    }
}

/// Of the candidates, the one to evict: the least shown of itself; of
/// those, the one whose peer holds the most connections, then the one
/// unproductive the longest, then the oldest.
fn choose(candidates: impl Iterator<Item = Candidate>) -> Option<Candidate> {
    candidates.min_by_key(|c| {
        (
            c.shown,
            std::cmp::Reverse(c.peer_holds),
            std::cmp::Reverse(c.unproductive),
            c.id,
        )
    })
}

/// One connection's state, shared by its task and its requests.
pub struct Conn {
    opened: Instant,
    peer: Arc<Peer>,
    /// How long its bodies may make no progress before it may be evicted.
    stalled_after: Duration,
    /// Requests in flight, those of them reading their bodies, and the flags above.
    state: AtomicU64,
    /// When the last request ended (or the handshake), in ms since `opened`.
    active_ms: AtomicU64,
    /// When a request last started or a body byte last arrived, in ms since `opened`.
    progress_ms: AtomicU64,
    /// Wakes the connection's task when evicted or asked to close.
    signal: Notify,
}

impl Conn {
    fn new(peer: Arc<Peer>, stalled_after: Duration) -> Conn {
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

    fn ms_since_opened(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.opened).as_millis()).unwrap_or(u64::MAX)
    }

    fn since(&self, ms: &AtomicU64, now: Instant) -> Duration {
        let at = Duration::from_millis(ms.load(Ordering::Acquire));
        now.saturating_duration_since(self.opened)
            .saturating_sub(at)
    }

    /// Its state, how long it has been unproductive (idle, or its bodies
    /// stalled) and whether its requests are all stalled, at `now`.
    fn standing(&self, now: Instant) -> (u64, Duration, bool) {
        let state = self.state.load(Ordering::Acquire);
        if state & IN_FLIGHT == 0 {
            return (state, self.since(&self.active_ms, now), false);
        }
        let waiting = self.since(&self.progress_ms, now);
        let stalled = all_reading(state) && waiting >= self.stalled_after;
        (state, waiting, stalled)
    }

    fn stalled(&self, now: Instant) -> bool {
        self.standing(now).2
    }

    /// Marks it evicted if it is unproductive (no request in flight, or,
    /// when `stalled` is allowed, every one still reading its body) and not
    /// evicted yet: its state before, or `None`.
    fn try_evict(&self, stalled: bool) -> Option<u64> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                let unproductive = state & IN_FLIGHT == 0 || (stalled && all_reading(state));
                (state & EVICTED == 0 && unproductive).then_some(state | EVICTED)
            })
            .ok()
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

    fn touch(&self, ms: &AtomicU64) {
        ms.store(self.ms_since_opened(Instant::now()), Ordering::Release);
    }

    /// A request starts, waiting for its body: refused once the connection
    /// is evicted, or when its peer has `--max-requests-per-peer` in flight.
    pub fn enter(self: &Arc<Self>) -> Result<InFlight, Full> {
        let peer = &self.peer;
        peer.requests
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < peer.max_requests).then_some(n + 1)
            })
            .map_err(|_| Full::PeerRequests)?;
        self.touch(&self.progress_ms);
        let entered = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & EVICTED == 0 && state & IN_FLIGHT < IN_FLIGHT)
                    .then_some((state + 1 + READING_ONE) | SERVED)
            });
        if entered.is_err() {
            peer.requests.fetch_sub(1, Ordering::AcqRel);
            return Err(Full::Evicted);
        }
        Ok(InFlight {
            conn: self.clone(),
            reading: true,
        })
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

/// Whether every request in flight in `state` is still reading its body.
fn all_reading(state: u64) -> bool {
    (state & READING) >> 32 == state & IN_FLIGHT
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

    /// Its body is read whole, or will not be read: never evicted from now.
    pub fn read(&mut self) {
        if std::mem::take(&mut self.reading) {
            self.conn.state.fetch_sub(READING_ONE, Ordering::AcqRel);
        }
    }

    /// A review was answered: the connection goes after strangers'.
    pub fn answered(&self) {
        self.conn.state.fetch_or(ANSWERED, Ordering::AcqRel);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Touched first: the connection is never seen idle since long ago.
        self.conn.touch(&self.conn.active_ms);
        let reading = if self.reading { READING_ONE } else { 0 };
        self.conn.state.fetch_sub(1 + reading, Ordering::AcqRel);
        self.conn.peer.requests.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's place in the registry, given up when dropped.
pub struct Ticket {
    registry: Arc<Connections>,
    id: u64,
    conn: Arc<Conn>,
}

impl Ticket {
    /// The connection's shared state.
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        // An evicted connection has already left.
        inner.forget(self.id);
        let open = inner.open.len();
        drop(inner);
        self.registry.count(|m| m.connections(open));
        if open == 0 {
            self.registry.emptied.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    const STALLED_AFTER: Duration = Duration::from_secs(1);

    fn limits(max: usize, per_peer: usize) -> ConnectionLimits {
        ConnectionLimits {
            max,
            per_peer,
            requests_per_peer: 64,
            stalled_after: STALLED_AFTER,
        }
    }

    /// What a connection is doing when a new one arrives at the limit.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Doing {
        Handshake,
        Idle,
        Serving,
    }
    use Doing::*;

    #[test]
    fn at_the_limit_an_unproductive_connection_is_evicted() {
        // (the open connections, oldest first; the one evicted, if any)
        let cases: [(&[Doing], Option<usize>); 7] = [
            (&[Handshake, Idle, Serving], Some(0)),
            (&[Idle, Handshake, Serving], Some(1)),
            (&[Serving, Idle, Handshake], Some(2)),
            (&[Serving, Serving, Handshake], Some(2)),
            (&[Serving, Serving, Idle], Some(2)),
            (&[Serving, Serving, Serving], None),
            (&[Serving], None),
        ];
        for (doing, want) in cases {
            let metrics = Arc::new(Metrics::new());
            let registry = Connections::new(limits(doing.len(), 64), Some(metrics.clone()));
            let mut requests = Vec::new();
            let tickets: Vec<Ticket> = doing
                .iter()
                .map(|&what| {
                    let ticket = registry.admit(A).expect("room");
                    if what != Handshake {
                        ticket.conn().serving();
                    }
                    if what == Serving {
                        let mut request = ticket.conn().enter().expect("not evicted");
                        request.read();
                        requests.push(request);
                    }
                    ticket
                })
                .collect();
            let new = registry.admit(B);
            let evicted: Vec<usize> = (0..tickets.len())
                .filter(|&i| tickets[i].conn().evicted())
                .collect();
            assert_eq!(evicted, Vec::from_iter(want), "{doing:?}");
            assert_eq!(new.is_ok(), want.is_some(), "{doing:?}");
            assert_eq!(
                registry.len(),
                doing.len(),
                "{doing:?}: never over the limit"
            );
            let text = metrics.encode(None, None);
            let count = |line: &str| text.lines().any(|l| l == line);
            let (handshake, idle, refused) = match want.map(|i| doing[i]) {
                Some(Handshake) => (1, 0, 0),
                Some(_) => (0, 1, 0),
                None => (0, 0, 1),
            };
            for line in [
                format!("linkerd_multus_http_evictions_total{{state=\"handshake\"}} {handshake}"),
                format!("linkerd_multus_http_evictions_total{{state=\"idle\"}} {idle}"),
                format!(
                    "linkerd_multus_http_refusals_total{{reason=\"connection_limit\"}} {refused}"
                ),
                format!("linkerd_multus_http_connections {}", doing.len()),
            ] {
                assert!(count(&line), "{doing:?}: {line} not in\n{text}");
            }
        }
    }

    #[test]
    fn the_connection_least_shown_then_of_the_busiest_peer_then_unproductive_the_longest_goes() {
        use Shown::*;
        let c = |shown, peer_holds, ms| (shown, peer_holds, Duration::from_millis(ms));
        // (the candidates, oldest first: what each has shown, the connections
        // its peer holds, how long unproductive; the one chosen)
        type Weighed = (Shown, usize, Duration);
        let cases: Vec<(Vec<Weighed>, Option<u64>)> = vec![
            // One that has not sent a byte goes first, however young.
            (
                vec![c(Idle, 1, 9_000), c(Handshake, 1, 3_000), c(Silent, 1, 1)],
                Some(2),
            ),
            // Then one in its handshake, then one that has asked nothing yet.
            (
                vec![
                    c(Idle, 1, 9_000),
                    c(NoRequest, 1, 2_000),
                    c(Handshake, 1, 5),
                ],
                Some(2),
            ),
            (vec![c(Idle, 1, 9_000), c(NoRequest, 1, 2_000)], Some(1)),
            // A stalled body goes before an idle stranger; a stranger before
            // a connection that has had reviews answered, stalled or idle.
            (vec![c(Idle, 1, 9_000), c(Stalled, 1, 1_000)], Some(1)),
            (
                vec![c(StalledAfterAnswers, 1, 9_000), c(Idle, 1, 1)],
                Some(1),
            ),
            (
                vec![
                    c(IdleAfterAnswers, 1, 9_000),
                    c(StalledAfterAnswers, 1, 1_000),
                ],
                Some(1),
            ),
            // Among equals, the peer holding the most goes first ...
            (vec![c(Silent, 1, 4_000), c(Silent, 30, 1)], Some(1)),
            // ... then the longest unproductive, then the oldest.
            (vec![c(Idle, 2, 40), c(Idle, 2, 900)], Some(1)),
            (vec![c(Idle, 2, 10), c(Idle, 2, 10)], Some(0)),
            (vec![], None),
        ];
        for (candidates, want) in cases {
            let chosen = choose(candidates.iter().enumerate().map(
                |(id, &(shown, peer_holds, unproductive))| Candidate {
                    id: id as u64,
                    shown,
                    peer_holds,
                    unproductive,
                },
            ));
            assert_eq!(chosen.map(|c| c.id), want, "{candidates:?}");
        }
    }

    #[test]
    fn what_a_connection_has_shown_and_whether_it_may_go() {
        // (state, all its requests stalled, what it has shown)
        let cases = [
            (SILENT | HANDSHAKE, false, Some(Shown::Silent)),
            (HANDSHAKE, false, Some(Shown::Handshake)),
            (0, false, Some(Shown::NoRequest)),
            (SERVED, false, Some(Shown::Idle)),
            (SERVED | ANSWERED, false, Some(Shown::IdleAfterAnswers)),
            (SERVED | 1 | READING_ONE, true, Some(Shown::Stalled)),
            (
                SERVED | ANSWERED | 2 | (2 * READING_ONE),
                true,
                Some(Shown::StalledAfterAnswers),
            ),
            // A request in flight that is not stalled is never cut.
            (SERVED | 1 | READING_ONE, false, None),
            (SERVED | 1, false, None),
            (SERVED | EVICTED, false, None),
            (SERVED | CLOSING, false, Some(Shown::Idle)),
        ];
        for (state, stalled, want) in cases {
            assert_eq!(Shown::of(state, stalled), want, "{state:#x} {stalled}");
        }
        // All reading: every request in flight waits for its body.
        for (state, want) in [
            (1 | READING_ONE, true),
            (2 | READING_ONE, false),
            (2 | (2 * READING_ONE), true),
            (0, true),
        ] {
            assert_eq!(all_reading(state), want, "{state:#x}");
        }
    }

    #[test]
    fn a_peer_at_its_limit_makes_room_only_among_its_own() {
        let metrics = Arc::new(Metrics::new());
        let registry = Connections::new(limits(8, 2), Some(metrics.clone()));
        let other = registry.admit(B).unwrap();
        other.conn().serving();
        let first = registry.admit(A).unwrap();
        let second = registry.admit(A).unwrap();
        first.conn().serving();
        second.conn().serving();
        let mut busy = [&first, &second].map(|t| t.conn().enter().unwrap());
        busy.iter_mut().for_each(InFlight::read);
        // Both of A's busy: A's third is refused, though there is room and B's is idle.
        assert_eq!(registry.admit(A).err(), Some(Full::PeerConnections));
        assert!(!other.conn().evicted());
        // One of A's idle again: A's next evicts it, never B's older idle one.
        drop(busy);
        let third = registry.admit(A).unwrap();
        assert!(first.conn().evicted() && !second.conn().evicted());
        assert!(!other.conn().evicted());
        assert_eq!(registry.len(), 3);
        // An IPv4 peer is one peer however it is written: at its limit
        // again, it evicts its own in its handshake.
        let mapped = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().into();
        let _fourth = registry.admit(mapped).unwrap();
        assert!(third.conn().evicted() && !second.conn().evicted());
        let text = metrics.encode(None, None);
        for line in [
            "linkerd_multus_http_refusals_total{reason=\"peer_connection_limit\"} 1",
            "linkerd_multus_http_evictions_total{state=\"idle\"} 1",
            "linkerd_multus_http_evictions_total{state=\"handshake\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn a_peer_has_at_most_its_requests_in_flight_across_its_connections() {
        let registry = Connections::new(
            ConnectionLimits {
                requests_per_peer: 3,
                ..limits(8, 8)
            },
            None,
        );
        let (one, two, other) = (
            registry.admit(A).unwrap(),
            registry.admit(A).unwrap(),
            registry.admit(B).unwrap(),
        );
        let mut held = vec![
            one.conn().enter().unwrap(),
            one.conn().enter().unwrap(),
            two.conn().enter().unwrap(),
        ];
        assert_eq!(two.conn().enter().err(), Some(Full::PeerRequests));
        assert!(other.conn().enter().is_ok(), "another peer's are its own");
        held.pop();
        assert!(two.conn().enter().is_ok(), "given back when a request ends");
    }

    #[test]
    fn a_connection_whose_bodies_stall_may_be_evicted_one_answering_may_not() {
        let registry = Connections::new(limits(2, 2), None);
        let stalling = registry.admit(A).unwrap();
        let answering = registry.admit(B).unwrap();
        for ticket in [&stalling, &answering] {
            ticket.conn().serving();
        }
        let _waiting = stalling.conn().enter().unwrap();
        let mut read = answering.conn().enter().unwrap();
        read.read();
        let later = Instant::now() + STALLED_AFTER + Duration::from_millis(10);
        let inner = registry.lock();
        // Within the stall timeout of its last byte, a request is never cut.
        assert_eq!(evict(&inner, None, Instant::now()), None);
        assert_eq!(evict(&inner, None, later), Some((0, Eviction::Stalled)));
        assert!(stalling.conn().evicted() && !answering.conn().evicted());
        assert!(
            stalling.conn().enter().is_err(),
            "no request after eviction"
        );
        drop(inner);
        drop(stalling);
        assert_eq!(registry.len(), 1);
    }

    #[test]
    fn stalled_bodies_are_evicted_for_the_budget_they_hold() {
        let registry = Connections::new(limits(4, 4), None);
        let (stalled, moving) = (registry.admit(A).unwrap(), registry.admit(B).unwrap());
        let _requests = [&stalled, &moving].map(|t| {
            t.conn().serving();
            t.conn().enter().unwrap()
        });
        let later = Instant::now() + STALLED_AFTER + Duration::from_millis(10);
        // The moving one's body has just made progress, later.
        moving
            .conn()
            .progress_ms
            .store(moving.conn().ms_since_opened(later), Ordering::Release);
        assert_eq!(registry.evict_stalled_at(later), 1);
        assert!(stalled.conn().evicted() && !moving.conn().evicted());
    }

    #[test]
    fn an_evicted_connection_starts_no_request_and_a_busy_one_is_not_evicted() {
        let registry = Connections::new(limits(1, 1), None);
        let first = registry.admit(A).unwrap();
        first.conn().serving();
        let mut request = first.conn().enter().unwrap();
        request.read();
        assert!(registry.admit(A).is_err(), "busy: not evicted");
        assert_eq!(first.conn().idle_for(), None);
        drop(request);
        assert!(first.conn().idle_for().is_some());
        let second = registry.admit(A).unwrap();
        assert!(first.conn().evicted());
        assert!(first.conn().enter().is_err(), "no request after eviction");
        drop(first);
        assert_eq!(registry.len(), 1, "the evicted one left at once");
        drop(second);
        assert!(registry.is_empty());
    }

    #[test]
    fn shutting_down_asks_each_to_close_and_admits_no_more() {
        let registry = Connections::new(limits(4, 4), None);
        let ticket = registry.admit(A).unwrap();
        registry.shut_down();
        assert!(ticket.conn().closing());
        assert!(!ticket.conn().evicted());
        assert_eq!(registry.admit(A).err(), Some(Full::ShuttingDown));
    }
}
