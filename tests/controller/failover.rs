//! Failovers with the leader's renewals failing while NAD writes keep
//! flowing, read from the API servers' audit logs: the leader stops writing
//! before its Lease can expire, the other replica takes over after it does,
//! no second sees writes of both, and the old leader never writes again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::audit::{self, Request, seconds};
use super::harness::{BOUND, Controller, Setup, eventually, setup};

/// The Lease of these tests, and the renew deadline it implies (2/3).
const LEASE: &str = "6s";
const LEASE_SECONDS: f64 = 6.0;
const RENEW_DEADLINE: f64 = 4.0;
/// What a request may take between its sending and its receipt.
const LATENCY: f64 = 0.5;

/// Namespaces switched on and off every 200 ms: a NAD to create or delete
/// for whoever leads. Stops when dropped.
struct Flow {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Flow {
    fn start(s: &Setup) -> Flow {
        let namespaces: Vec<String> = (0..4).map(|_| s.plane.namespace("flow", &[])).collect();
        let plane = s.plane;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut turn = 0usize;
            while !stopped.load(Ordering::Relaxed) {
                let namespace = &namespaces[turn % namespaces.len()];
                let value = if (turn / namespaces.len()).is_multiple_of(2) {
                    "enabled"
                } else {
                    "disabled"
                };
                plane.annotate_namespace(namespace, "linkerd.io/multus", value);
                turn += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Flow {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

/// What the audit logs say of one failover from A to B.
struct Failover {
    a_writes: Vec<Timestamp>,
    b_writes: Vec<Timestamp>,
    a_last_renewal: Timestamp,
    b_acquired: Timestamp,
}

impl Failover {
    fn read(a: &[Request], b: &[Request]) -> Failover {
        let writes = |r: &[Request]| -> Vec<Timestamp> {
            r.iter()
                .filter(|r| r.is_nad_write())
                .map(|r| r.received)
                .collect()
        };
        let a_writes = writes(a);
        let b_writes = writes(b);
        let b_first = *b_writes.first().expect("B wrote NADs");
        let a_last_renewal = a
            .iter()
            .filter(|r| r.is_lease_written() && r.received < b_first)
            .map(|r| r.done)
            .next_back()
            .expect("A held the Lease");
        let b_acquired = b
            .iter()
            .find(|r| r.is_lease_written())
            .map(|r| r.received)
            .expect("B took the Lease");
        Failover {
            a_writes,
            b_writes,
            a_last_renewal,
            b_acquired,
        }
    }

    /// Each second from 3 s before A's last renewal to 3 s after B's first
    /// write: `±N:aA/bB`, A's and B's NAD writes in it.
    fn timeline(&self) -> String {
        let start = self.a_last_renewal.as_second() - 3;
        let end = self.b_writes[0].as_second() + 3;
        let count = |writes: &[Timestamp], second: i64| {
            writes.iter().filter(|t| t.as_second() == second).count()
        };
        (start..=end)
            .map(|second| {
                format!(
                    "{:+}:{}A/{}B",
                    second - start - 3,
                    count(&self.a_writes, second),
                    count(&self.b_writes, second)
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Checks every promise and prints the figures.
    fn check(&self, what: &str) {
        let a_last = *self.a_writes.last().expect("A wrote NADs");
        let b_first = *self.b_writes.first().unwrap();
        let before = |t: Timestamp, around: Timestamp| seconds(t, around) < 10.0 && t <= around;
        eprintln!(
            "{what}: A wrote {} NADs ({} in its last 10 s), B {} ({} in its first 10 s); A's last write {:.2} s after its last renewal (renew deadline {RENEW_DEADLINE} s, Lease {LEASE_SECONDS} s); B took the Lease {:.2} s after it; gap between A's last write and B's first: {:.2} s",
            self.a_writes.len(),
            self.a_writes.iter().filter(|t| before(**t, a_last)).count(),
            self.b_writes.len(),
            self.b_writes
                .iter()
                .filter(|t| before(b_first, **t))
                .count(),
            seconds(self.a_last_renewal, a_last),
            seconds(self.a_last_renewal, self.b_acquired),
            seconds(a_last, b_first),
        );
        eprintln!(
            "{what}: NAD writes per second, from A's last renewal: {}",
            self.timeline()
        );
        assert!(
            seconds(self.a_last_renewal, a_last) < RENEW_DEADLINE + LATENCY,
            "A wrote after its renew deadline"
        );
        assert!(
            seconds(self.a_last_renewal, a_last) < LEASE_SECONDS,
            "A wrote after its Lease could expire"
        );
        assert!(
            seconds(self.a_last_renewal, self.b_acquired) >= LEASE_SECONDS - 0.05,
            "B took the Lease before it expired by its clock"
        );
        assert!(
            self.a_writes.iter().all(|t| *t < b_first),
            "A wrote after B started writing"
        );
        assert!(
            seconds(a_last, b_first) >= 1.0,
            "A and B wrote within a second"
        );
        let a_seconds: Vec<i64> = self.a_writes.iter().map(|t| t.as_second()).collect();
        assert!(
            self.b_writes
                .iter()
                .all(|t| !a_seconds.contains(&t.as_second())),
            "A and B wrote in the same second"
        );
    }
}

/// Waits until `controller` has sent `more` NAD writes beyond `from`.
fn writes_flow(controller: &Controller, from: f64, more: f64, what: &str) {
    eventually(what, BOUND, || controller.writes() >= from + more);
}

/// Starts replica A, then B once A leads, and the flow of writes, until A
/// has written some.
fn start_writing(s: &Setup, a: &Path, b: &Path) -> (Controller, Controller, Flow) {
    let a = Controller::start_with(s, "replica-a", a, LEASE);
    eventually("A leads", BOUND, || a.leader() == Some(1.0));
    let b = Controller::start_with(s, "replica-b", b, LEASE);
    eventually("B follows", BOUND, || b.leader() == Some(0.0));
    let flow = Flow::start(s);
    writes_flow(&a, 0.0, 5.0, "A writing");
    (a, b, flow)
}

/// (a) Replica A's rights on the Lease revoked: its renewals fail with 403.
#[test]
fn a_leader_whose_lease_rights_are_revoked_stops_writing_and_the_other_takes_over() {
    let s = setup();
    let b_account = s.plane.unique_name("controller-b");
    s.grant(&b_account);
    let audited = s.audited_server();
    let (a, b, flow) = start_writing(
        &s,
        &s.kubeconfig_on(&audited.server, &s.account),
        &s.kubeconfig_on(&audited.server, &b_account),
    );
    s.plane.kubectl(&[
        "delete",
        "rolebinding",
        &format!("linkerd-multus-nad-controller-lease-{}", s.account),
        "-n",
        &s.home,
    ]);
    eventually("B leads", BOUND, || b.leader() == Some(1.0));
    assert_eq!(a.leader(), Some(0.0), "{}", a.log());
    writes_flow(&b, 0.0, 5.0, "B writing");
    drop(flow);
    // A stays a candidate that cannot read the Lease: it never leads again.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(a.leader(), Some(0.0));
    let a_requests = audit::requests(&audited.log, &audit::service_account(&s.home, &s.account));
    let b_requests = audit::requests(&audited.log, &audit::service_account(&s.home, &b_account));
    let refused = a_requests
        .iter()
        .filter(|r| r.resource == "leases" && r.code == 403)
        .count();
    eprintln!("A's Lease requests refused since: {refused}");
    Failover::read(&a_requests, &b_requests).check("Lease rights revoked");
}

/// (b) Replica A's API server stopped (A and B on API servers of their own
/// over one etcd), then started again: A never writes again.
#[test]
fn a_leader_whose_api_server_stops_stops_writing_and_never_writes_again() {
    let s = setup();
    let a_server = s.audited_server();
    let b_server = s.audited_server();
    let (a, b, flow) = start_writing(
        &s,
        &s.kubeconfig_on(&a_server.server, &s.account),
        &s.kubeconfig_on(&b_server.server, &s.account),
    );
    a_server.server.stop();
    eventually("B leads", BOUND, || b.leader() == Some(1.0));
    eventually("A stops leading", BOUND, || a.leader() == Some(0.0));
    writes_flow(&b, 0.0, 5.0, "B writing");
    s.plane.start_ready(&a_server.server);
    let restarted = Timestamp::now();
    // A reads the Lease again while the writes go on, for more than a Lease.
    let b_writes = b.writes();
    writes_flow(
        &b,
        b_writes,
        10.0,
        "B writing after A's API server returned",
    );
    std::thread::sleep(Duration::from_secs(8));
    drop(flow);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(a.leader(), Some(0.0), "{}", a.log());
    let user = audit::service_account(&s.home, &s.account);
    let a_requests = audit::requests(&a_server.log, &user);
    let b_requests = audit::requests(&b_server.log, &user);
    let a_after: Vec<&Request> = a_requests
        .iter()
        .filter(|r| r.received > restarted)
        .collect();
    eprintln!(
        "A's requests after its API server returned: {} ({} reads of the Lease), none a write",
        a_after.len(),
        a_after.iter().filter(|r| r.resource == "leases").count()
    );
    assert!(
        a_after.iter().any(|r| r.resource == "leases"),
        "A reads the Lease again: {}",
        a.log()
    );
    assert!(
        !a_after
            .iter()
            .any(|r| r.is_nad_write() || r.is_lease_written()),
        "A wrote after its API server returned"
    );
    Failover::read(&a_requests, &b_requests).check("API server stopped");
}
