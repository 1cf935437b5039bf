use std::net::Ipv4Addr;

use super::connection::*;
use super::*;
use crate::webhook::metrics::Eviction;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

const STALLED_AFTER: Duration = Duration::from_secs(1);

fn limits(max: usize, per_peer: usize) -> ConnectionLimits {
    ConnectionLimits {
        max,
        per_peer,
        requests_per_peer: 64,
        stalled_after: STALLED_AFTER,
        grace: Duration::ZERO,
    }
}

/// What a connection is doing when a new one arrives at the limit.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Set {
    Handshake,
    /// Idle after a review answered for objects that exist.
    Proven,
    /// A request whose body is read, being answered.
    Answering,
}
use Set::*;

fn evictions(metrics: &Metrics, label: Eviction) -> String {
    let label = match label {
        Eviction::Handshake => "handshake",
        Eviction::Idle => "idle",
        Eviction::Stalled => "stalled",
        Eviction::Reading => "reading",
        Eviction::Waiting => "waiting",
    };
    let text = metrics.encode(None, None);
    text.lines()
        .find(|l| {
            l.starts_with(&format!(
                "linkerd_multus_http_evictions_total{{state=\"{label}\"}}"
            ))
        })
        .unwrap_or_default()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn at_the_limit_a_connection_not_answering_is_evicted() {
    // (the open connections, oldest first; the one evicted, if any)
    let cases: [(&[Set], Option<usize>); 6] = [
        (&[Proven, Handshake, Answering], Some(1)),
        (&[Answering, Answering, Handshake], Some(2)),
        (&[Answering, Answering, Proven], Some(2)),
        (&[Handshake, Proven, Proven], Some(0)),
        (&[Answering, Answering, Answering], None),
        (&[Answering], None),
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
                    let mut request = ticket.conn().enter().expect("not evicted");
                    request.read();
                    if what == Proven {
                        request.answered();
                    } else {
                        requests.push(request);
                    }
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
        let (handshake, idle, refused) = match want.map(|i| doing[i]) {
            Some(Handshake) => ("1", "0", 0),
            Some(_) => ("0", "1", 0),
            None => ("0", "0", 1),
        };
        assert_eq!(
            evictions(&metrics, Eviction::Handshake),
            handshake,
            "{doing:?}"
        );
        assert_eq!(evictions(&metrics, Eviction::Idle), idle, "{doing:?}");
        let text = metrics.encode(None, None);
        for line in [
            format!("linkerd_multus_http_refusals_total{{reason=\"connection_limit\"}} {refused}"),
            format!("linkerd_multus_http_connections {}", doing.len()),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{doing:?}: {line} not in\n{text}"
            );
        }
    }
}

#[test]
fn what_a_connection_is_doing_and_for_how_long() {
    let registry = Connections::new(limits(8, 8), None);
    let ticket = registry.admit(A).unwrap();
    let conn = ticket.conn();
    let at = |ms: u64| conn.opened + Duration::from_millis(ms);
    // (state, ms of the last progress, ms now; what it is doing, ms unproductive)
    let cases = [
        (SILENT | HANDSHAKE, 0, 30, Doing::Silent, 30),
        (HANDSHAKE, 0, 30, Doing::Handshake, 30),
        (SERVED | ANSWERED, 0, 30, Doing::Idle, 30),
        (
            SERVED | 1 | READING_ONE,
            10,
            30,
            Doing::Reading { stalled: false },
            20,
        ),
        (
            SERVED | 1 | READING_ONE,
            10,
            1_010,
            Doing::Reading { stalled: true },
            1_000,
        ),
        (
            SERVED | 2 | READING_ONE | AWAITING_ONE,
            10,
            30,
            Doing::Waiting,
            20,
        ),
        (SERVED | 1 | AWAITING_ONE, 10, 30, Doing::Waiting, 20),
        // One request read whole and being answered: the connection is answering.
        (SERVED | 2 | READING_ONE, 10, 5_000, Doing::Working, 0),
        (SERVED | 1, 10, 5_000, Doing::Working, 0),
    ];
    for (state, progress, now, want, unproductive) in cases {
        conn.state.store(state, Ordering::Release);
        conn.progress_ms.store(progress, Ordering::Release);
        conn.active_ms.store(0, Ordering::Release);
        let (_, doing, waited) = conn.standing(at(now));
        assert_eq!(doing, want, "{state:#x}");
        assert_eq!(waited, Duration::from_millis(unproductive), "{state:#x}");
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
    // Both of A's answering: A's third is refused, though there is room and B's is idle.
    assert_eq!(registry.admit(A).err(), Some(Full::PeerConnections));
    assert!(!other.conn().evicted());
    // Both idle again, the second proven: A's next evicts the first, never B's.
    busy[1].answered();
    drop(busy);
    let third = registry.admit(A).unwrap();
    assert!(first.conn().evicted() && !second.conn().evicted());
    assert!(!other.conn().evicted());
    assert_eq!(registry.len(), 3);
    // An IPv4 peer is one peer however it is written: at its limit
    // again, it evicts its own unproven one in its handshake.
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
    for ticket in [&one, &two] {
        prove(ticket);
    }
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

/// A review answered on `ticket`'s connection, for objects that exist.
fn prove(ticket: &Ticket) {
    let mut review = ticket.conn().enter().unwrap();
    review.read();
    review.answered();
}

#[tokio::test]
async fn an_unproven_connection_carries_one_request_at_a_time() {
    let registry = Connections::new(limits(8, 8), None);
    let ticket = registry.admit(A).unwrap();
    let first = ticket.conn().enter().unwrap();
    assert_eq!(ticket.conn().enter().err(), Some(Full::Unproven));
    // The next waits its turn: it enters once the first has ended ...
    let conn = ticket.conn().clone();
    let next = tokio::spawn(async move {
        conn.enter_in_turn(Duration::from_secs(60))
            .await
            .map(|_| ())
    });
    tokio::task::yield_now().await;
    drop(first);
    assert_eq!(next.await.unwrap(), Ok(()));
    // ... or gives up after its wait.
    let _first = ticket.conn().enter().unwrap();
    assert_eq!(
        ticket
            .conn()
            .enter_in_turn(Duration::from_millis(10))
            .await
            .err(),
        Some(Full::Unproven)
    );
    // A proven connection carries as many as its peer may have.
    let proven = registry.admit(A).unwrap();
    prove(&proven);
    let _held = [
        proven.conn().enter().unwrap(),
        proven.conn().enter().unwrap(),
    ];
}

#[tokio::test]
async fn a_peer_at_its_request_limit_cuts_its_own_waiting_connection_not_an_answering_one() {
    let metrics = Arc::new(Metrics::new());
    let registry = Connections::new(
        ConnectionLimits {
            requests_per_peer: 2,
            ..limits(8, 8)
        },
        Some(metrics.clone()),
    );
    let (waiting, answering, new, other) = (
        registry.admit(A).unwrap(),
        registry.admit(A).unwrap(),
        registry.admit(A).unwrap(),
        registry.admit(B).unwrap(),
    );
    let _others = other.conn().enter().unwrap();
    let stalled = waiting.conn().enter().unwrap();
    let mut read = answering.conn().enter().unwrap();
    read.read();
    assert_eq!(new.conn().enter().err(), Some(Full::PeerRequests));
    // The stalled body's connection goes; its request ends when its task drops it.
    let conn = waiting.conn().clone();
    let dropper = tokio::spawn(async move {
        conn.signalled().await;
        drop(stalled);
    });
    assert!(
        registry
            .room_for_request(new.conn(), Duration::from_secs(5))
            .await
    );
    dropper.await.unwrap();
    assert!(waiting.conn().evicted() && !answering.conn().evicted());
    assert!(!other.conn().evicted(), "another peer's are its own");
    let _entered = new.conn().enter().expect("room was made");
    assert_eq!(evictions(&metrics, Eviction::Reading), "1");
    // Now both of A's requests are answering or its own: nothing to cut.
    assert!(
        !registry
            .room_for_request(new.conn(), Duration::from_millis(10))
            .await
    );
    assert!(!answering.conn().evicted());
}

#[test]
fn a_request_waiting_for_a_watch_may_be_cut_one_answering_may_not() {
    let registry = Connections::new(limits(2, 2), None);
    let (waiting, answering) = (registry.admit(A).unwrap(), registry.admit(B).unwrap());
    for ticket in [&waiting, &answering] {
        ticket.conn().serving();
    }
    let mut review = waiting.conn().enter().unwrap();
    review.read();
    review.answered();
    let mut read = answering.conn().enter().unwrap();
    read.read();
    let inner = registry.lock();
    assert_eq!(
        evict(&inner, Among::All, Instant::now(), Duration::ZERO),
        None
    );
    drop(inner);
    let guard = review.waiting();
    let inner = registry.lock();
    // Proven, but waiting for the watch: it may go; the one answering never.
    assert_eq!(
        evict(&inner, Among::All, Instant::now(), Duration::ZERO),
        Some((0, Doing::Waiting))
    );
    assert!(waiting.conn().evicted() && !answering.conn().evicted());
    drop(inner);
    drop(guard);
    assert_eq!(
        waiting.conn().state.load(Ordering::Acquire) & AWAITING,
        0,
        "the wait ended"
    );
}

#[test]
fn a_body_still_arriving_may_be_cut_once_its_caller_owes_it_a_body_read_never() {
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
    assert_eq!(
        evict(&inner, Among::All, later, Duration::ZERO),
        Some((0, Doing::Reading { stalled: true }))
    );
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
fn an_evicted_connection_starts_no_request_and_an_answering_one_is_not_evicted() {
    let registry = Connections::new(limits(1, 1), None);
    let first = registry.admit(A).unwrap();
    first.conn().serving();
    let mut request = first.conn().enter().unwrap();
    request.read();
    assert!(registry.admit(A).is_err(), "answering: not evicted");
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
fn a_connection_is_kept_for_its_grace() {
    let registry = Connections::new(
        ConnectionLimits {
            grace: Duration::from_secs(60),
            ..limits(1, 1)
        },
        None,
    );
    let first = registry.admit(A).unwrap();
    assert_eq!(registry.admit(A).err(), Some(Full::PeerConnections));
    assert!(!first.conn().evicted());
    let inner = registry.lock();
    let later = Instant::now() + Duration::from_secs(61);
    assert_eq!(
        evict(&inner, Among::All, later, Duration::from_secs(60)),
        Some((0, Doing::Silent))
    );
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
