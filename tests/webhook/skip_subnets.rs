//! The secondary-network rule through the real API server: in a namespace opted in, the pods
//! the API server stores skip the subnets of the secondary networks they select, read from
//! the NADs the webhook watches; a NAD whose range changes gives the pods created after it
//! the new range; a network that overlaps the cluster's is not written (the `--on-error`
//! answer: admitted unchanged, as the packages ship it), nor one past a cap, whose warning
//! names it.

use super::config_hash::{Registration, created, pod, wait_for_annotation};
use super::*;

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const OWNED: &str = "multus.linkerd.io/owned";
const HASH: &str = "multus.linkerd.io/config-hash";
const SKIP: &str = "config.linkerd.io/skip-subnets";
const RECORD: &str = "multus.linkerd.io/skip-subnets";
const OPT_IN: &str = "multus.linkerd.io/skip-secondary-subnets";

fn whereabouts(range: &str) -> String {
    format!(
        r#"{{"cniVersion": "0.3.1", "type": "macvlan", "master": "eth1", "ipam": {{"type": "whereabouts", "range": "{range}", "routes": [{{"dst": "172.20.0.0/16"}}]}}}}"#
    )
}

/// Waits until a pod selecting `storage` created now (dry run) would skip `value`: the API
/// server has loaded the registration and the webhook's cache holds the NAD as it is now.
fn wait_for_skip(c: &Cluster, namespace: &str, value: &str) {
    let probe = pod(namespace, "probe", json!({NETWORKS: "storage"}));
    wait_for_annotation(c, &probe, SKIP, value);
}

#[test]
fn stored_pods_skip_the_subnets_of_their_secondary_networks() {
    let c = cluster();
    let namespace = c.plane.namespace(
        "secondary",
        &[
            (MULTUS, "enabled"),
            (INJECT, "enabled"),
            (OPT_IN, "enabled"),
        ],
    );
    c.put_nad(&namespace, "linkerd-cni", &[]);
    c.put_nad_config(&namespace, "storage", &[], &whereabouts("10.10.0.0/24"));
    c.put_nad_config(&namespace, "wide", &[], &whereabouts("10.244.128.0/17"));
    let ca = Ca::new("skip-subnets CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--cluster-cidrs=10.244.0.0/16,10.96.0.0/12"],
    );
    let _registration = Registration::new(c.plane, &namespace, &webhook.addr, &ca.pem);
    wait_for_skip(&c, &namespace, "10.10.0.0/24,172.20.0.0/16");

    let annotations = created(
        &c,
        &pod(&namespace, "first", json!({NETWORKS: "storage"})),
        false,
    );
    assert_eq!(
        annotations,
        json!({
            NETWORKS: "storage,linkerd-cni",
            OWNED: "network=appended",
            SKIP: "10.10.0.0/24,172.20.0.0/16",
            RECORD: "10.10.0.0/24,172.20.0.0/16",
            HASH: NAD_HASH,
        })
    );
    // The pod's own value is kept first, and only what was added is recorded.
    let own = json!({NETWORKS: "storage", SKIP: "203.0.113.0/24"});
    let annotations = created(&c, &pod(&namespace, "own", own), false);
    assert_eq!(
        annotations[SKIP],
        "203.0.113.0/24,10.10.0.0/24,172.20.0.0/16"
    );
    assert_eq!(annotations[RECORD], "10.10.0.0/24,172.20.0.0/16");
    // A pod opting out gets no skip-subnets.
    let out = json!({NETWORKS: "storage", OPT_IN: "disabled"});
    let annotations = created(&c, &pod(&namespace, "out", out), false);
    assert_eq!(annotations.get(SKIP), None, "{annotations}");

    // A network that overlaps the cluster's: admitted unchanged (--on-error allow).
    let warned = "linkerd_multus_admission_requests_total{outcome=\"warned\"}";
    let before = webhook.metric(warned);
    let wide = json!({NETWORKS: "wide"});
    let annotations = created(&c, &pod(&namespace, "wide", wide.clone()), false);
    assert_eq!(annotations, wide);
    assert!(
        webhook.metric(warned) >= before + 1.0,
        "the CREATE's answer"
    );

    // The NAD's range changes: pods created from now on skip the new one.
    c.put_nad_config(&namespace, "storage", &[], &whereabouts("10.11.0.0/24"));
    wait_for_skip(&c, &namespace, "10.11.0.0/24,172.20.0.0/16");
    let annotations = created(
        &c,
        &pod(&namespace, "second", json!({NETWORKS: "storage"})),
        false,
    );
    assert_eq!(annotations[RECORD], "10.11.0.0/24,172.20.0.0/16");
}

/// A pod or NAD past a cap gets the `--on-error` answer (admitted unchanged, as the packages
/// ship it), its warning naming the cap, the field and the count; one at the cap is written.
#[test]
fn a_pod_past_a_cap_gets_the_on_error_answer_naming_it() {
    let c = cluster();
    let namespace = c.plane.namespace(
        "capped",
        &[
            (MULTUS, "enabled"),
            (INJECT, "enabled"),
            (OPT_IN, "enabled"),
        ],
    );
    let routes = |n: usize| -> String {
        let routes: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"dst": "172.20.{}.{}/32"}}"#, i / 256, i % 256))
            .collect();
        format!(
            r#"{{"cniVersion": "0.3.1", "type": "macvlan", "master": "eth1", "ipam": {{"type": "static", "addresses": [{{"address": "10.10.0.5/24"}}], "routes": [{}]}}}}"#,
            routes.join(", ")
        )
    };
    c.put_nad(&namespace, "linkerd-cni", &[]);
    c.put_nad_config(&namespace, "storage", &[], &whereabouts("10.10.0.0/24"));
    c.put_nad_config(&namespace, "at-cap", &[], &routes(128));
    c.put_nad_config(&namespace, "past-cap", &[], &routes(129));
    let ca = Ca::new("caps CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--cluster-cidrs=10.244.0.0/16,10.96.0.0/12"],
    );
    let _registration = Registration::new(c.plane, &namespace, &webhook.addr, &ca.pem);
    wait_for_skip(&c, &namespace, "10.10.0.0/24,172.20.0.0/16");
    // A NAD at the routes cap: each route written, beside its address's subnet.
    let at = created(
        &c,
        &pod(&namespace, "at", json!({NETWORKS: "at-cap"})),
        true,
    );
    assert_eq!(
        at[SKIP].as_str().map(|v| v.split(',').count()),
        Some(129),
        "{at}"
    );

    let refused = |name: &str, networks: String, warning: &str| {
        let annotations = json!({NETWORKS: networks});
        let out = c.plane.kubectl_input(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            &pod(&namespace, name, annotations.clone()),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let stored: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            stored["metadata"]["annotations"], annotations,
            "{name}: admitted unchanged"
        );
        assert!(
            stderr.contains("Warning: ") && stderr.contains(warning),
            "{name}: {stderr:?} does not name {warning:?}"
        );
    };
    refused(
        "routes",
        "past-cap".into(),
        "\"ipam.routes\" lists 129 routes; at most 128 are read (the routes cap)",
    );
    refused(
        "selections",
        vec!["storage"; 65].join(","),
        "selects 65 networks; at most 64 are read (the selections cap)",
    );
    refused(
        "full",
        vec!["storage"; 64].join(","),
        "selects 64 networks, the most that are read (the selections cap)",
    );
}
