//! The open connections of a port, whose they are and what each is doing: in
//! its TLS handshake, idle between requests, waiting for a body or a cache's
//! watch, or answering. Bounds what one peer (a source address) can hold:
//! `--max-connections-per-peer` connections and `--max-requests-per-peer`
//! requests in flight; a peer at a limit makes room only among its own
//! connections.
//!
//! At a limit, a new connection (or a peer's new request) evicts a connection
//! that is not answering a request, as nginx reuses its idle keep-alive
//! connections; [`crate::webhook::eviction`] says which. When every candidate
//! is answering, the new connection is closed at once (the request gets 503).
//! A request being answered (its body read, its review being decided) is
//! never cut; one waiting for its body or for a watch is, with its
//! connection: the client sends it again on another.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::webhook::eviction::{self, Candidate, Doing};
use crate::webhook::metrics::{Metrics, Refusal};

/// Requests in flight on a connection: the low 16 bits of its state.
const IN_FLIGHT: u64 = 0xffff;
/// Of those, one still waiting for (the rest of) its body: the next 16 bits.
const READING_ONE: u64 = 1 << 16;
const READING: u64 = IN_FLIGHT << 16;
/// Of those, one waiting for a cache's watch: the next 16 bits.
const AWAITING_ONE: u64 = 1 << 32;
const AWAITING: u64 = IN_FLIGHT << 32;
/// Set until the TLS handshake completes.
const HANDSHAKE: u64 = 1 << 48;
/// Set once evicted: no request may start, the connection closes now.
const EVICTED: u64 = 1 << 49;
/// Set once asked to close gracefully (shutdown): the requests in flight finish.
const CLOSING: u64 = 1 << 50;
/// Set until the first byte arrives.
const SILENT: u64 = 1 << 51;
/// Set once a request has started.
const SERVED: u64 = 1 << 52;
/// Set once a review for objects that exist was answered: the connection is proven.
const ANSWERED: u64 = 1 << 53;

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
    /// no byte arriving before they count as stalled.
    pub stalled_after: Duration,
    /// How long a connection is kept, unproductive, before it may make room
    /// ([`eviction::GRACE`]).
    pub grace: Duration,
}

/// Why a new connection or request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every connection is answering at the limit of connections.
    Connections,
    /// Every connection of its peer is answering at the limit per peer.
    PeerConnections,
    /// Its peer has as many requests in flight as it may.
    PeerRequests,
    /// Its connection has had no review answered and has a request in flight:
    /// until one is answered, a connection carries one request at a time.
    Unproven,
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
    /// Notified when one of its requests ends.
    freed: Notify,
}

/// Which connections an eviction chooses among.
#[derive(Clone, Copy)]
enum Among<'a> {
    /// Every connection.
    All,
    /// The connections of one peer.
    Peer(IpAddr),
    /// The connections of `conn`'s peer with requests in flight, but `conn`.
    RequestsBeside(&'a Conn),
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
    /// its limit evicts one of its own connections first, a new connection
    /// at the limit of all one of all ([`crate::webhook::eviction`]). Refused
    /// (and counted) when there is nothing to evict.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Result<Ticket, Full> {
        let addr = addr.to_canonical();
        let mut inner = self.lock();
        if inner.shutting_down {
            return Err(Full::ShuttingDown);
        }
        let full = if inner.held_by(&addr) >= self.limits.per_peer {
            Some((Full::PeerConnections, Among::Peer(addr)))
        } else if inner.open.len() >= self.limits.max {
            Some((Full::Connections, Among::All))
        } else {
            None
        };
        if let Some((full, among)) = full
            && !self.evict_one(&mut inner, among, Instant::now())
        {
            drop(inner);
            self.count(|m| {
                m.refused(match full {
                    Full::PeerConnections => Refusal::PeerConnectionLimit,
                    _ => Refusal::ConnectionLimit,
                })
            });
            return Err(full);
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
                    freed: Notify::new(),
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

    /// Evicts the connection [`eviction::choose`] picks among `among`, and
    /// counts it; whether there was one.
    fn evict_one(&self, inner: &mut Inner, among: Among<'_>, now: Instant) -> bool {
        let Some((id, doing)) = evict(inner, among, now, self.limits.grace) else {
            return false;
        };
        let conn = inner.forget(id).expect("chosen from the map");
        conn.signal.notify_one();
        self.count(|m| m.evicted(doing.eviction()));
        true
    }

    /// For a request of `conn`, whose peer has `--max-requests-per-peer` in
    /// flight: evicts another connection of that peer whose requests all
    /// wait (for their bodies or a watch), then waits up to `wait` for one
    /// of the peer's requests to end. Whether the request may try again.
    pub async fn room_for_request(&self, conn: &Conn, wait: Duration) -> bool {
        let freed = conn.peer.freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let evicted = self.evict_one(
            &mut self.lock(),
            Among::RequestsBeside(conn),
            Instant::now(),
        );
        if !evicted {
            return false;
        }
        if conn.peer.requests.load(Ordering::Acquire) < conn.peer.max_requests {
            return true;
        }
        tokio::time::timeout(wait, freed).await.is_ok()
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
            .filter(|(_, conn)| {
                conn.standing(now).1 == Doing::Reading { stalled: true } && conn.try_evict()
            })
            .map(|(&id, _)| id)
            .collect();
        for &id in &stalled {
            if let Some(conn) = inner.forget(id) {
                conn.signal.notify_one();
                self.count(|m| m.evicted(Doing::Reading { stalled: true }.eviction()));
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

/// Marks evicted the connection to evict among `among`: its id and what it
/// was doing; `None` when none may be evicted.
fn evict(inner: &Inner, among: Among<'_>, now: Instant, grace: Duration) -> Option<(u64, Doing)> {
    let mut skipped = Vec::new();
    loop {
        let candidates = inner
            .open
            .iter()
            .filter(|(id, conn)| {
                let ours = match among {
                    Among::All => true,
                    Among::Peer(addr) => conn.peer.addr == addr,
                    Among::RequestsBeside(beside) => {
                        conn.peer.addr == beside.peer.addr
                            && !std::ptr::eq(conn.as_ref(), beside)
                            && conn.state.load(Ordering::Acquire) & IN_FLIGHT != 0
                    }
                };
                ours && !skipped.contains(*id)
            })
            .map(|(&id, conn)| {
                let (state, doing, unproductive) = conn.standing(now);
                Candidate {
                    id,
                    proven: state & ANSWERED != 0,
                    doing,
                    peer_holds: inner.held_by(&conn.peer.addr),
                    unproductive,
                }
            });
        let chosen = eviction::choose(candidates, grace)?;
        // A request may have started being answered meanwhile: then choose again.
        if inner.open[&chosen.id].try_evict() {
            return Some((chosen.id, chosen.doing));
        }
        skipped.push(chosen.id);
    }
}

/// One connection's state, shared by its task and its requests.
pub struct Conn {
    opened: Instant,
    peer: Arc<Peer>,
    /// How long its bodies may make no progress before they count as stalled.
    stalled_after: Duration,
    /// Requests in flight, those of them reading their bodies or waiting for
    /// a watch, and the flags above.
    state: AtomicU64,
    /// When the last request ended (or the handshake), in ms since `opened`.
    active_ms: AtomicU64,
    /// When a request last started, a body byte last arrived or a body was
    /// read whole, in ms since `opened`.
    progress_ms: AtomicU64,
    /// Wakes the connection's task when evicted or asked to close.
    signal: Notify,
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

    /// Its state, what it is doing and how long it has been unproductive
    /// (idle, owing its caller's bytes, or waiting), at `now`.
    fn standing(&self, now: Instant) -> (u64, Doing, Duration) {
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
    fn try_evict(&self) -> bool {
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

    fn touch(&self, ms: &AtomicU64) {
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
#[path = "connections_tests.rs"]
mod tests;
