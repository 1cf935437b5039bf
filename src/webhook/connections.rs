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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::webhook::eviction::{self, Candidate, Doing};
use crate::webhook::metrics::{Metrics, Refusal};

mod connection;

use connection::{ANSWERED, CLOSING, IN_FLIGHT};
pub use connection::{Conn, InFlight, Peer, Waiting};

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
