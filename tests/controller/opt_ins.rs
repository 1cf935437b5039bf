//! A Namespace whose opt-in annotations are written wrong, as the NAD controller sees it: an
//! `InvalidOptIn` Warning Event on the Namespace, in the words of the render and the webhook,
//! written once for what the annotations hold; no NAD while the value is not `enabled`; the
//! NAD, and no further Event, once it is fixed.

use super::harness::{BOUND, Controller, eventually, labelled_by_controller, setup};

#[test]
fn a_namespace_written_wrong_gets_one_warning_event_and_its_nad_once_fixed() {
    let s = setup();
    let controller = Controller::start(&s, "only", &s.kubeconfig());
    eventually("leading", BOUND, || controller.leader() == Some(1.0));
    let namespace = s.plane.namespace(
        "enable",
        &[
            ("linkerd.io/multus", "enable"),
            ("multus.linkerd.io/restart-on-config-change", "yes"),
        ],
    );
    let invalid = || {
        s.events_about("default", &namespace)
            .into_iter()
            .filter(|e| e["reason"] == "InvalidOptIn")
            .collect::<Vec<_>>()
    };
    eventually("the InvalidOptIn Event", BOUND, || !invalid().is_empty());
    let events = invalid();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["regarding"]["kind"], "Namespace");
    assert_eq!(
        events[0]["note"],
        "metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?; metadata.annotations.multus.linkerd.io/restart-on-config-change is \"yes\", neither enabled nor disabled: the namespace is treated as not opted in, so the NAD controller restarts none of its workloads when its NAD's config changes, but those whose pod templates say enabled; did you mean enabled?"
    );
    assert_eq!(s.nad(&namespace), None, "not enabled: no NAD");

    // Fixed: the NAD is made, and nothing more is said.
    s.plane.kubectl(&[
        "annotate",
        "namespace",
        &namespace,
        "--overwrite",
        "linkerd.io/multus=enabled",
        "multus.linkerd.io/restart-on-config-change-",
    ]);
    eventually("the controller's NAD", BOUND, || {
        s.nad(&namespace)
            .is_some_and(|n| labelled_by_controller(&n))
    });
    let events = invalid();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0]["series"].is_null(), "said once: {events:?}");
}
