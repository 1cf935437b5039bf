//! The NAD controller (`linkerd-multus controller`) against a real
//! kube-apiserver (tests/common/kube_apiserver.rs), with exactly the rights of
//! its package (deploy-nad-controller/rbac.yaml), none of the webhook's. The
//! controller acts on every namespace, so each test has an API server of its
//! own (`ControlPlane::own`). Here its life with one replica and a simple
//! failover; what it owns in `ownership`, how it meets Git's apply in `git`, the Go
//! operator's NADs it adopts in a migration off the operator in `migration`, what it says of
//! opt-in annotations written wrong in `opt_ins`, failovers with renewals failing in
//! `failover`, its retries under a persistent refusal in `retries`; its restarts in
//! `restarts`, fair to every tenant in `fairness`, as `preview` says they will be, Git's and
//! Helm's workloads in `preview`; the alerts, on a real Prometheus scraping it and the webhook
//! while faults are planted, in `prometheus`.

#[path = "controller/audit.rs"]
mod audit;
use crate::common;
#[path = "controller/failover.rs"]
mod failover;
#[path = "controller/fairness.rs"]
mod fairness;
#[path = "controller/git.rs"]
mod git;
#[path = "controller/harness.rs"]
mod harness;
#[path = "controller/migration.rs"]
mod migration;
#[path = "controller/opt_ins.rs"]
mod opt_ins;
#[path = "controller/ownership.rs"]
mod ownership;
#[path = "controller/preview.rs"]
mod preview;
#[path = "controller/prometheus.rs"]
mod prometheus;
#[path = "controller/proxy.rs"]
mod proxy;
#[path = "controller/restarts.rs"]
mod restarts;
#[path = "controller/retries.rs"]
mod retries;
#[path = "controller/startup.rs"]
mod startup;

use std::time::Duration;

use harness::{BOUND, CONFIG_MAP, Controller, Setup, eventually, labelled_by_controller, setup};
use proxy::DelayProxy;

/// The controller's whole life with one replica: NADs made, updated by a
/// ConfigMap change in one pass, kept through an invalid ConfigMap, removed
/// when switched off; a rendered NAD and a user's are never touched.
#[test]
fn namespaces_get_the_nad_kept_in_step_with_the_config_map_and_only_its_own_change() {
    let s = setup();
    let enabled = s
        .plane
        .namespace("enabled", &[("linkerd.io/multus", "enabled")]);
    let plain = s.plane.namespace("plain", &[]);
    let user = s
        .plane
        .namespace("user", &[("linkerd.io/multus", "enabled")]);
    let rendered = s
        .plane
        .namespace("rendered", &[("linkerd.io/multus", "enabled")]);
    s.put_nad(&user, None);
    s.put_nad(&rendered, Some("linkerd-multus"));
    let untouched = [
        (user.clone(), s.version(&user).unwrap()),
        (rendered.clone(), s.version(&rendered).unwrap()),
    ];
    let controller = Controller::start(&s, "only", &s.kubeconfig());
    // Created after the controller started: it sees it through its watch.
    s.plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n",
        s.control_plane
    ));

    let want = s.rendered_config(CONFIG_MAP);
    for namespace in [&enabled, &s.control_plane] {
        the_nad_is_the_controllers(&s, namespace, &want);
    }
    assert!(s.nad(&plain).is_none());
    untouched_still(&s, &untouched);
    the_first_writes_are_counted_and_told(&s, &controller, &enabled);

    // The ConfigMap edited: every NAD the controller made follows, in one
    // write each, and no other NAD changes.
    let edited = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
    assert_ne!(edited, CONFIG_MAP, "the fixture's log_level is edited");
    let want = s.rendered_config(&edited);
    s.put_config_map(&edited);
    for namespace in [&enabled, &s.control_plane] {
        eventually(&format!("the NAD in {namespace} updated"), BOUND, || {
            s.nad(namespace).unwrap()["spec"]["config"].as_str() == Some(want.as_str())
        });
    }
    assert_eq!(
        controller.metric("linkerd_multus_nad_writes_total "),
        Some(4.0)
    );
    untouched_still(&s, &untouched);

    an_invalid_config_map_changes_nothing(&s, &controller, &enabled, &edited);

    // Switched off: the controller's NAD goes; the user's and the rendered
    // one, switched off too, stay.
    for namespace in [&enabled, &user, &rendered] {
        s.annotate(namespace, "disabled");
    }
    eventually(
        "the NAD of the namespace switched off removed",
        BOUND,
        || s.nad(&enabled).is_none(),
    );
    std::thread::sleep(Duration::from_secs(1));
    untouched_still(&s, &untouched);
    eventually("the Events of the NAD's life", BOUND, || {
        let reasons = s.event_reasons(&enabled);
        ["NADCreated", "NADUpdated", "NADRemoved"]
            .iter()
            .all(|r| reasons.contains(&r.to_string()))
    });
    assert_eq!(
        controller.metric("linkerd_multus_nad_writes_total "),
        Some(6.0)
    );
}

/// The metrics after the first two NADs, and the Event of one.
fn the_first_writes_are_counted_and_told(s: &Setup, controller: &Controller, enabled: &str) {
    eventually("the gauge of NADs managed", BOUND, || {
        controller.metric("linkerd_multus_nads_managed ") == Some(2.0)
    });
    assert_eq!(
        controller.metric("linkerd_multus_nad_writes_total "),
        Some(2.0),
        "{}",
        controller.log()
    );
    assert_eq!(
        controller.metric("linkerd_multus_nad_controller_leader "),
        Some(1.0)
    );
    assert_eq!(
        controller.metric("linkerd_multus_cni_config_map_valid "),
        Some(1.0)
    );
    eventually("the Event of the NAD created", BOUND, || {
        s.event_reasons(enabled).contains(&"NADCreated".to_string())
    });
}

/// The NAD in `namespace` comes, labelled, built by the function's own code, written by the
/// controller alone.
fn the_nad_is_the_controllers(s: &Setup, namespace: &str, want: &str) {
    let took = eventually(&format!("the NAD in {namespace}"), BOUND, || {
        s.nad(namespace).is_some()
    });
    let nad = s.nad(namespace).unwrap();
    assert!(labelled_by_controller(&nad), "{nad}");
    assert_eq!(
        nad["spec"]["config"].as_str(),
        Some(want),
        "built by the function's own code"
    );
    let managers: Vec<&str> = nad["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["linkerd-multus-controller"], "{nad}");
    eprintln!("NAD in {namespace} after {took:?}");
}

/// An invalid ConfigMap changes nothing, and is reported; a namespace enabled meanwhile gets
/// its NAD once the ConfigMap is fixed.
fn an_invalid_config_map_changes_nothing(
    s: &Setup,
    controller: &Controller,
    enabled: &str,
    edited: &str,
) {
    // An invalid ConfigMap changes nothing, and is reported.
    let versions = [s.version(enabled), s.version(&s.control_plane)];
    s.put_config_map(&edited.replace("\"log_level\"", "\"log_level"));
    eventually("the invalid ConfigMap seen", BOUND, || {
        controller.metric("linkerd_multus_cni_config_map_valid ") == Some(0.0)
    });
    eventually("the Event on the invalid ConfigMap", BOUND, || {
        let out = s
            .plane
            .kubectl(&["get", "events.events.k8s.io", "-n", &s.cni, "-o", "json"]);
        out.contains("InvalidConfig") && out.contains("is not valid JSON")
    });
    // A namespace enabled meanwhile gets no NAD until the ConfigMap is fixed.
    let later = s
        .plane
        .namespace("later", &[("linkerd.io/multus", "enabled")]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!([s.version(enabled), s.version(&s.control_plane)], versions);
    assert!(s.nad(&later).is_none());
    assert_eq!(
        controller.metric("linkerd_multus_nad_writes_total "),
        Some(4.0)
    );
    s.put_config_map(edited);
    eventually("the NAD in the namespace enabled meanwhile", BOUND, || {
        s.nad(&later).is_some()
    });
    assert_eq!([s.version(enabled), s.version(&s.control_plane)], versions);
}

/// Git brings a rendered NAD where the controller made one: the controller
/// hands it over and never writes it again, even when the ConfigMap changes
/// or the namespace is switched off.
#[test]
fn a_rendered_nad_taken_over_from_the_controller_is_never_touched_again() {
    let (s, namespace, controller) = harness::with_one_nad("taken");
    // Argo CD applies the rendered NAD with force, as it does server-side.
    s.plane.kubectl_ok(
        &["apply", "--server-side", "--force-conflicts", "--field-manager=argocd-controller", "-f", "-"],
        &format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/managed-by: linkerd-multus\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"from-git\", \"type\": \"linkerd-cni\"}}'\n"
        ),
    );
    // From when the controller's cache holds the taken-over NAD (no NAD is its own any more):
    // a write sent from the older copy, on a loaded machine whose watch lags, is refused by
    // the API server (its precondition fails) but would be counted below.
    eventually(
        "the controller's cache sees the NAD taken over",
        BOUND,
        || controller.metric("linkerd_multus_nads_managed ") == Some(0.0),
    );
    let version = s.version(&namespace).unwrap();
    let writes = controller.metric("linkerd_multus_nad_writes_total ");
    let edited = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
    s.put_config_map(&edited);
    s.annotate(&namespace, "disabled");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(s.version(&namespace), Some(version));
    assert_eq!(
        controller.metric("linkerd_multus_nad_writes_total "),
        writes
    );
}

/// Two replicas: one writes; killed, the other takes over within the Lease's duration.
#[test]
fn two_replicas_elect_one_writer_and_the_other_takes_over() {
    let s = setup();
    let kubeconfig = s.kubeconfig();
    let a = Controller::start(&s, "replica-a", &kubeconfig);
    let b = Controller::start(&s, "replica-b", &kubeconfig);
    let leader = |c: &Controller| c.metric("linkerd_multus_nad_controller_leader ");
    eventually("one leader", BOUND, || {
        let (la, lb) = (leader(&a), leader(&b));
        la.is_some() && lb.is_some() && la.unwrap() + lb.unwrap() == 1.0
    });
    let first = s
        .plane
        .namespace("first", &[("linkerd.io/multus", "enabled")]);
    eventually("the first NAD", BOUND, || s.nad(&first).is_some());
    let writes = |c: &Controller| c.metric("linkerd_multus_nad_writes_total ").unwrap();
    let mut replicas = [a, b];
    let first_leader = replicas
        .iter()
        .position(|c| leader(c) == Some(1.0))
        .expect("a leader");
    let follower = 1 - first_leader;
    assert_eq!(
        writes(&replicas[follower]),
        0.0,
        "the follower never writes"
    );
    assert!(writes(&replicas[first_leader]) >= 1.0);
    // Kill -9: no release; the Lease expires.
    replicas[first_leader].kill();
    let took = eventually("the follower to take over", Duration::from_secs(15), || {
        leader(&replicas[follower]) == Some(1.0)
    });
    assert!(
        took <= Duration::from_secs(3 + 3),
        "took {took:?}: more than the 3 s lease and a renewal"
    );
    let second = s
        .plane
        .namespace("second", &[("linkerd.io/multus", "enabled")]);
    eventually("the NAD written by the new leader", BOUND, || {
        s.nad(&second).is_some()
    });
    assert!(writes(&replicas[follower]) >= 1.0);
    // SIGTERM: the leader releases the Lease on its way out.
    let holder = || s.lease(&["spec", "holderIdentity"]);
    assert_eq!(holder(), ["replica-a", "replica-b"][follower]);
    replicas[follower].terminate();
    assert_eq!(holder(), "", "the Lease is released");
}

/// A SIGTERM while a renewal is on its way: the renewal lands, its answer does not reach the
/// leader before it stops (the proxy holds the API server's answers back 3 s), yet the
/// Lease is released, read afresh, not written over the record seen before the renewal
/// (which the API server refuses with 409, leaving the Lease held for its whole duration).
#[test]
fn a_stop_during_a_renewal_still_releases_the_lease() {
    let s = setup();
    let proxy = DelayProxy::start(s.plane.url());
    let mut leader = Controller::start_behind(&s, &proxy.address);
    eventually("leading", BOUND, || leader.leader() == Some(1.0));
    assert_eq!(s.lease(&["spec", "holderIdentity"]), "only");
    proxy.set_delay(Duration::from_secs(3));
    let version = || s.lease(&["metadata", "resourceVersion"]);
    let before = version();
    // The Lease of 45 s is renewed every 6 s (7.2 s with the jitter).
    eventually("a renewal written", BOUND, || version() != before);
    leader.terminate();
    assert_eq!(s.lease(&["spec", "holderIdentity"]), "", "{}", leader.log());
}

/// The NADs of `untouched` (namespace, resourceVersion) are as they were.
fn untouched_still(s: &Setup, untouched: &[(String, String)]) {
    for (namespace, version) in untouched {
        assert_eq!(s.version(namespace).as_ref(), Some(version), "{namespace}");
    }
}
