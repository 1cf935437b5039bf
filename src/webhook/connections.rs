//! The open connections of the admission port and what each is doing: in
//! its TLS handshake, idle between requests, or serving requests. At
//! `--max-connections` a new connection evicts an unproductive one (in its
//! handshake, or idle with no request in flight), as nginx reuses its idle
//! keep-alive connections, longest idle first. What a connection has shown
//! of itself comes first: one that has not sent a byte goes before one in
//! its TLS handshake, which goes before one that has not sent a request
//! since, which goes before one idle between the requests it serves; among
//! equals, the one unproductive the longest. So a flood of silent
//! connections evicts itself, not the API server's handshakes or its
//! keep-alive connections, idle for milliseconds between reviews. When
//! every connection has a request in flight, the new one is closed at once.
//! Requests in flight are never cut.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::webhook::metrics::{Eviction, Metrics, Refusal};

/// Requests in flight on a connection: the low bits of its state.
const IN_FLIGHT: u32 = 0x00ff_ffff;
/// Set until the TLS handshake completes.
const HANDSHAKE: u32 = 1 << 24;
/// Set until the first byte arrives.
const SILENT: u32 = 1 << 27;
/// Set once a request has started.
const SERVED: u32 = 1 << 28;
/// Set once evicted: no request may start, the connection closes now.
const EVICTED: u32 = 1 << 25;
/// Set once asked to close gracefully (shutdown): the requests in flight finish.
const CLOSING: u32 = 1 << 26;

/// The registry of open connections.
pub struct Connections {
    max: usize,
    metrics: Arc<Metrics>,
    inner: Mutex<Inner>,
    /// Notified when the last connection goes.
    emptied: Notify,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// By age: ids grow.
    open: BTreeMap<u64, Arc<Conn>>,
    shutting_down: bool,
}

impl Connections {
    /// A registry of at most `max` connections, counted in `metrics`.
    pub fn new(max: usize, metrics: Arc<Metrics>) -> Arc<Connections> {
        Arc::new(Connections {
            max,
            metrics,
            inner: Mutex::new(Inner::default()),
            emptied: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new connection, in its handshake; at the limit, evicts
    /// the oldest unproductive one first. `None` (counted as a refusal) when
    /// every connection has a request in flight.
    pub fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut inner = self.lock();
        if inner.shutting_down {
            return None;
        }
        if inner.open.len() >= self.max {
            let Some((id, before)) = evict(&inner.open) else {
                drop(inner);
                self.metrics.refused(Refusal::ConnectionLimit);
                return None;
            };
            let conn = inner.open.remove(&id).expect("chosen from the map");
            conn.signal.notify_one();
            self.metrics.evicted(if before & HANDSHAKE != 0 {
                Eviction::Handshake
            } else {
                Eviction::Idle
            });
        }
        let id = inner.next;
        inner.next += 1;
        let conn = Arc::new(Conn::new());
        inner.open.insert(id, conn.clone());
        self.metrics.connections(inner.open.len());
        Some(Ticket {
            registry: self.clone(),
            id,
            conn,
        })
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

/// Marks evicted the connection unproductive the longest: its id and its
/// state before; `None` when every one has a request in flight.
fn evict(open: &BTreeMap<u64, Arc<Conn>>) -> Option<(u64, u32)> {
    loop {
        let candidates = open.iter().map(|(&id, conn)| {
            let state = conn.state.load(Ordering::Acquire);
            (id, state, conn.idle_for().unwrap_or_default())
        });
        let id = choose(candidates)?;
        // A request may have started meanwhile: then choose again.
        if let Some(before) = open[&id].try_evict() {
            return Some((id, before));
        }
    }
}

/// Of the connections (id, state, how long unproductive), the one to evict:
/// no request in flight; the least shown of itself (no byte, in its
/// handshake, no request yet, idle between requests); of those, the one
/// unproductive the longest; the oldest of equals.
fn choose(candidates: impl Iterator<Item = (u64, u32, Duration)>) -> Option<u64> {
    let shown = |state: u32| {
        if state & SILENT != 0 {
            0
        } else if state & HANDSHAKE != 0 {
            1
        } else if state & SERVED == 0 {
            2
        } else {
            3
        }
    };
    candidates
        .filter(|&(_, state, _)| state & (IN_FLIGHT | EVICTED) == 0)
        .min_by_key(|&(id, state, unproductive)| {
            (shown(state), std::cmp::Reverse(unproductive), id)
        })
        .map(|(id, _, _)| id)
}

/// One connection's state, shared by its task and its requests.
pub struct Conn {
    opened: Instant,
    /// Requests in flight and the flags above.
    state: AtomicU32,
    /// When the last request ended (or the handshake), in ms since `opened`.
    active_ms: AtomicU64,
    /// Wakes the connection's task when evicted or asked to close.
    signal: Notify,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            opened: Instant::now(),
            state: AtomicU32::new(SILENT | HANDSHAKE),
            active_ms: AtomicU64::new(0),
            signal: Notify::new(),
        }
    }

    /// Marks it evicted if it is unproductive (no request in flight, not
    /// evicted yet): its state before, or `None`.
    fn try_evict(&self) -> Option<u32> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & (IN_FLIGHT | EVICTED) == 0).then_some(state | EVICTED)
            })
            .ok()
    }

    /// Its first byte arrived: its TLS handshake starts.
    pub fn first_byte(&self) {
        self.state.fetch_and(!SILENT, Ordering::AcqRel);
    }

    /// Its handshake is over: idle from now.
    pub fn serving(&self) {
        self.touch();
        self.state
            .fetch_and(!(SILENT | HANDSHAKE), Ordering::AcqRel);
    }

    fn touch(&self) {
        let ms = self.opened.elapsed().as_millis();
        self.active_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// A request starts; `None` once the connection is evicted.
    pub fn enter(self: &Arc<Self>) -> Option<InFlight> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & EVICTED == 0 && state & IN_FLIGHT < IN_FLIGHT)
                    .then_some((state + 1) | SERVED)
            })
            .ok()
            .map(|_| InFlight { conn: self.clone() })
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
        let since = Duration::from_millis(self.active_ms.load(Ordering::Acquire));
        Some(self.opened.elapsed().saturating_sub(since))
    }

    /// Waits until it is evicted or asked to close.
    pub async fn signalled(&self) {
        self.signal.notified().await;
    }
}

/// A request in flight on a connection; it ends when dropped.
pub struct InFlight {
    conn: Arc<Conn>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Touched first: the connection is never seen idle since long ago.
        self.conn.touch();
        self.conn.state.fetch_sub(1, Ordering::AcqRel);
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
        inner.open.remove(&self.id);
        let open = inner.open.len();
        drop(inner);
        self.registry.metrics.connections(open);
        if open == 0 {
            self.registry.emptied.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let registry = Connections::new(doing.len(), metrics.clone());
            let mut requests = Vec::new();
            let tickets: Vec<Ticket> = doing
                .iter()
                .map(|&what| {
                    let ticket = registry.admit().expect("room");
                    if what != Handshake {
                        ticket.conn().serving();
                    }
                    if what == Serving {
                        requests.push(ticket.conn().enter().expect("not evicted"));
                    }
                    ticket
                })
                .collect();
            let new = registry.admit();
            let evicted: Vec<usize> = (0..tickets.len())
                .filter(|&i| tickets[i].conn().evicted())
                .collect();
            assert_eq!(evicted, Vec::from_iter(want), "{doing:?}");
            assert_eq!(new.is_some(), want.is_some(), "{doing:?}");
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
    fn the_connection_least_shown_then_unproductive_the_longest_is_chosen() {
        let ms = Duration::from_millis;
        let silent = |for_ms| (SILENT | HANDSHAKE, ms(for_ms));
        let handshake = |for_ms| (HANDSHAKE, ms(for_ms));
        let fresh = |for_ms| (0, ms(for_ms));
        let idle = |for_ms| (SERVED, ms(for_ms));
        let busy = |requests| (SERVED | requests, ms(0));
        // (the connections, oldest first: state and how long unproductive; the one chosen)
        type Connection = (u32, Duration);
        let cases: Vec<(Vec<Connection>, Option<u64>)> = vec![
            // One that has not sent a byte goes first, however young.
            (
                vec![idle(9_000), handshake(3_000), fresh(2_000), silent(1)],
                Some(3),
            ),
            // Then one in its handshake, then one that has asked nothing yet.
            (vec![idle(9_000), fresh(2_000), handshake(5)], Some(2)),
            (vec![idle(9_000), fresh(2_000), busy(1)], Some(1)),
            // Keep-alive connections between requests: the longest idle first.
            (vec![idle(40), idle(900), busy(1)], Some(1)),
            (vec![idle(10), idle(10), idle(10)], Some(0)),
            (vec![silent(100), silent(3_000)], Some(1)),
            (vec![busy(1), busy(2)], None),
            (vec![(SILENT | EVICTED, ms(5_000)), idle(1)], Some(1)),
            (vec![(SERVED | CLOSING, ms(2_000)), idle(1)], Some(0)),
            (vec![], None),
        ];
        for (connections, want) in cases {
            let candidates = connections
                .iter()
                .enumerate()
                .map(|(id, &(state, unproductive))| (id as u64, state, unproductive));
            assert_eq!(choose(candidates), want, "{connections:?}");
        }
    }

    #[test]
    fn an_evicted_connection_starts_no_request_and_a_busy_one_is_not_evicted() {
        let registry = Connections::new(1, Arc::new(Metrics::new()));
        let first = registry.admit().unwrap();
        first.conn().serving();
        let request = first.conn().enter().unwrap();
        assert!(registry.admit().is_none(), "busy: not evicted");
        assert_eq!(first.conn().idle_for(), None);
        drop(request);
        assert!(first.conn().idle_for().is_some());
        let second = registry.admit().unwrap();
        assert!(first.conn().evicted());
        assert!(first.conn().enter().is_none(), "no request after eviction");
        drop(first);
        assert_eq!(registry.len(), 1, "the evicted one left at once");
        drop(second);
        assert!(registry.is_empty());
    }

    #[test]
    fn shutting_down_asks_each_to_close_and_admits_no_more() {
        let registry = Connections::new(4, Arc::new(Metrics::new()));
        let ticket = registry.admit().unwrap();
        registry.shut_down();
        assert!(ticket.conn().closing());
        assert!(!ticket.conn().evicted());
        assert!(registry.admit().is_none());
    }
}
