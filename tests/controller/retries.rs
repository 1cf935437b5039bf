//! A persistent refusal at scale: the controller's account may not create or
//! patch NADs (403), 1,000 namespaces need one. Each namespace backs off
//! (src/controller/backoff.rs, whose unit tests hold the whole schedule to its
//! cap): in its first 66 s it is tried at least 7 times (the longest waits,
//! 1, 2, … 32 s, add up to 63 s) and at most 8 (the shortest, 0.5, 1, … 32 s,
//! add up to 63.5 s; the next comes at 127.5 s), one more if the start
//! reconciled it twice; its Warning Events fold into one series written at
//! most once a minute.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::audit::{self, Request, seconds};
use super::harness::{BOUND, Controller, eventually, setup_with};

const NAMESPACES: usize = 1000;
/// How long each namespace is watched, from its first try.
const WINDOW: f64 = 66.0;
/// The most tries in the window: 8 by the schedule, one more for a
/// namespace the start reconciled twice (the namespace watch and the
/// ConfigMap's first read both ask for every namespace).
const MOST_TRIES: usize = 9;
/// The fewest: the longest waits allow 7 (the 7th at 63 s); a loaded
/// machine may delay a few past the window.
const FEWEST_TRIES: usize = 5;
/// The most Event writes: a create and a series write a minute.
const MOST_EVENT_WRITES: usize = 1 + 2;

#[test]
fn a_persistent_403_on_nad_writes_backs_off_per_namespace() {
    let s = setup_with(|rbac| {
        let without = rbac.replacen(
            "  - network-attachment-definitions\n  verbs:\n  - create\n  - patch\n",
            "  - network-attachment-definitions\n  verbs:\n",
            1,
        );
        assert_ne!(
            without, rbac,
            "the NAD rule of deploy-nad-controller/rbac.yaml"
        );
        without
    });
    let prefix = s.plane.unique_name("bulk");
    let names: Vec<String> = (0..NAMESPACES).map(|i| format!("{prefix}-{i}")).collect();
    let yaml: Vec<String> = names
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n  annotations:\n    linkerd.io/multus: enabled\n"))
        .collect();
    // kubectl's client-side validation costs about 70 ms of CPU an object (a
    // minute for these); these namespaces are the test's own, plain objects.
    s.plane.kubectl_ok(
        &["create", "--validate=false", "-f", "-"],
        &yaml.join("---\n"),
    );
    let audited = s.audited_server();
    let kubeconfig = s.kubeconfig_on(&audited.server, &s.account);
    let controller = Controller::start_with(&s, "only", &kubeconfig, "15s");
    eventually("every namespace refused once", BOUND, || {
        controller
            .metric("linkerd_multus_nad_reconciles_total{outcome=\"error\"}")
            .is_some_and(|n| n >= NAMESPACES as f64)
    });
    // Watch until every namespace has had its window.
    std::thread::sleep(Duration::from_secs_f64(WINDOW + 2.0));
    let requests = audit::requests(&audited.log, &audit::service_account(&s.home, &s.account));
    let tally = Tally::of(&requests, &names);
    tally.report(&requests);
    assert!(
        tally
            .tries
            .iter()
            .all(|t| (FEWEST_TRIES..=MOST_TRIES).contains(t)),
        "{:?}",
        tally.tries
    );
    assert!(
        tally
            .events
            .iter()
            .all(|e| (1..=MOST_EVENT_WRITES).contains(e)),
        "{:?}",
        tally.events
    );
}

/// Each namespace's NAD writes and Event writes in its window.
struct Tally {
    tries: Vec<usize>,
    events: Vec<usize>,
}

impl Tally {
    fn of(requests: &[Request], names: &[String]) -> Tally {
        let nad_writes = by_namespace(requests.iter().filter(|r| r.is_nad_write()), |r| {
            r.namespace.clone()
        });
        // An Event about a Namespace is named after it: `<namespace>.<hex>`.
        let event_writes = by_namespace(requests.iter().filter(|r| r.is_event_write()), |r| {
            r.name
                .rsplit_once('.')
                .map(|(n, _)| n.to_string())
                .unwrap_or_default()
        });
        let within = |times: &[Timestamp], from: Timestamp| {
            times
                .iter()
                .filter(|t| seconds(from, **t) <= WINDOW)
                .count()
        };
        let mut tally = Tally {
            tries: Vec::new(),
            events: Vec::new(),
        };
        for name in names {
            let writes = nad_writes
                .get(name)
                .unwrap_or_else(|| panic!("no write in {name}"));
            assert!(
                requests
                    .iter()
                    .any(|r| r.namespace == *name && r.code == 403)
            );
            tally.tries.push(within(writes, writes[0]));
            let events = event_writes.get(name).map_or(&[][..], |e| e);
            tally.events.push(within(events, writes[0]));
        }
        tally
    }

    fn report(&self, requests: &[Request]) {
        let nad_writes = requests.iter().filter(|r| r.is_nad_write()).count();
        let first = requests.iter().map(|r| r.received).min().unwrap();
        let last = requests.iter().map(|r| r.received).max().unwrap();
        let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
        eprintln!(
            "403 on NAD writes, {NAMESPACES} namespaces, {:.0} s: tries per namespace in its first {WINDOW} s min {} max {} mean {:.2}; Event writes per namespace max {} mean {:.2}; {} requests in all ({nad_writes} NAD writes, {:.1}/s)",
            seconds(first, last),
            self.tries.iter().min().unwrap(),
            self.tries.iter().max().unwrap(),
            mean(&self.tries),
            self.events.iter().max().unwrap(),
            mean(&self.events),
            requests.len(),
            nad_writes as f64 / seconds(first, last),
        );
    }
}

/// The times of `requests`, by the namespace `namespace_of` says each is about.
fn by_namespace<'a>(
    requests: impl Iterator<Item = &'a Request>,
    namespace_of: impl Fn(&Request) -> String,
) -> BTreeMap<String, Vec<Timestamp>> {
    let mut by: BTreeMap<String, Vec<Timestamp>> = BTreeMap::new();
    for r in requests {
        by.entry(namespace_of(r)).or_default().push(r.received);
    }
    by
}
