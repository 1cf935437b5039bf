//! The secondary-network rule: the webhook that reads the NADs writes a pod's
//! `config.linkerd.io/skip-subnets` exactly as the function writes a template's, given the
//! NADs of the function's output (what the cluster holds once the package is applied): over
//! pods and namespaces opted in or out, networks of each IPAM shape (one that overlaps the
//! cluster, DHCP, an unknown NAD), values the pod and its namespace already have, a record of
//! an older render, and Linkerd-CNI with its own list and with IPv6 on.

use linkerd_multus::linkerd_cni::skip_subnets::{ADDED_ANNOTATION, ANNOTATION, OPT_IN_ANNOTATION};
use linkerd_multus::yaml;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

use super::stamp::{ClusterNads, Stamp};
use super::{CONFIG_MAP, Case, case, function, pick, pod_of, webhook_answer_with};

/// The secondary NADs: name, namespace, config.
const NADS: &[(&str, &str, &str)] = &[
    (
        "storage",
        "demo",
        r#"{"cniVersion":"0.3.1","type":"macvlan","ipam":{"type":"whereabouts","range":"10.10.0.0/24","exclude":["10.10.0.0/28"],"routes":[{"dst":"172.20.0.0/16"}]}}"#,
    ),
    (
        "data",
        "other",
        r#"{"cniVersion":"0.3.1","type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"192.168.50.0/24"}],[{"subnet":"fd10::/64"}]]}}"#,
    ),
    (
        "fixed",
        "demo",
        r#"{"cniVersion":"0.3.1","type":"macvlan","capabilities":{"ips":true},"ipam":{"type":"static"}}"#,
    ),
    (
        "lease",
        "demo",
        r#"{"cniVersion":"0.3.1","type":"macvlan","ipam":{"type":"dhcp"}}"#,
    ),
    (
        "wide",
        "demo",
        r#"{"cniVersion":"0.3.1","type":"macvlan","ipam":{"type":"host-local","subnet":"10.0.0.0/8"}}"#,
    ),
];

const NETWORKS: &[Option<&str>] = &[
    None,
    Some("storage"),
    Some("storage, other/data"),
    Some(r#"[{"name": "fixed", "ips": ["10.30.0.7/24"]}, {"name": "storage"}]"#),
    Some("lease, storage"),
    Some("wide"),
    Some("gone, storage"),
    Some("linkerd-cni"),
    Some("storage, linkerd-cni"),
];
const OPT_IN: &[Option<&str>] = &[
    None,
    None,
    Some("enabled"),
    Some("enabled"),
    Some("disabled"),
    Some(""),
];
const NAMESPACE_OPT_IN: &[Option<&str>] = &[None, Some("enabled"), Some("disabled")];
const OWN: &[Option<&str>] = &[
    None,
    None,
    Some("203.0.113.0/24"),
    Some("10.10.0.0/24"),
    Some("203.0.113.0/24,10.99.0.0/24"),
];
/// A record of an earlier render: what it added (`10.99.0.0/24`: a range the NAD no longer has).
const RECORD: &[Option<&str>] = &[None, None, Some("10.99.0.0/24"), Some("10.10.0.0/24")];
const NAMESPACE_OWN: &[Option<&str>] = &[None, None, Some("198.51.100.0/24")];

/// One case: the linkerd-cni one underneath, the rule's annotations on it, and the settings.
#[derive(Debug, Clone)]
struct SkipCase {
    base: Case,
    /// The `skipSecondarySubnets` setting.
    setting: bool,
    /// Linkerd-CNI's own `subnets-to-ignore`.
    plugin_list: bool,
    /// Linkerd-CNI's `ipv6`.
    ipv6: bool,
}

fn skip_case() -> impl Strategy<Value = SkipCase> {
    let pod = (pick(NETWORKS), pick(OPT_IN), pick(OWN), pick(RECORD));
    let namespace = (pick(NAMESPACE_OPT_IN), pick(NAMESPACE_OWN));
    let settings = (
        proptest::bool::weighted(0.6),
        proptest::bool::weighted(0.3),
        proptest::bool::ANY,
        proptest::bool::weighted(0.15),
    );
    (case(), pod, namespace, settings).prop_map(
        |(
            base,
            (networks, opt_in, own, record),
            (ns_opt_in, ns_own),
            (meshed, setting, plugin_list, ipv6),
        )| {
            let mut base = Case {
                stamp: Stamp::None,
                ..base
            };
            let annotations = &mut base.pod["metadata"]["annotations"];
            if !annotations.is_object() {
                *annotations = json!({});
            }
            // Most pods attached, whatever the linkerd-cni case underneath says.
            if meshed {
                annotations["linkerd.io/multus"] = json!("enabled");
                annotations["linkerd.io/inject"] = json!("enabled");
            }
            for (key, value) in [
                ("k8s.v1.cni.cncf.io/networks", networks),
                (OPT_IN_ANNOTATION, opt_in),
                (ANNOTATION, own),
                (ADDED_ANNOTATION, record),
            ] {
                if let Some(value) = value {
                    annotations[key] = json!(value);
                }
            }
            if let Some(ns) = &mut base.namespace_annotations {
                for (key, value) in [(OPT_IN_ANNOTATION, ns_opt_in), (ANNOTATION, ns_own)] {
                    if let Some(value) = value {
                        ns.insert(key.to_string(), json!(value));
                    }
                }
            }
            SkipCase {
                base,
                setting,
                plugin_list,
                ipv6,
            }
        },
    )
}

/// The LinkerdMultus settings of a case.
fn settings_of(case: &SkipCase) -> Value {
    json!({
        "apiVersion": "multus.linkerd.io/v1alpha1",
        "kind": "LinkerdMultus",
        "metadata": {"name": "linkerd-multus"},
        "spec": {
            "configRollout": "all",
            "skipSecondarySubnets": if case.setting { "enabled" } else { "disabled" },
            "clusterCIDRs": ["10.244.0.0/16", "10.96.0.0/12"],
        }
    })
}

/// The Linkerd-CNI ConfigMap of a case: the fixture, with its own list and IPv6 as the case says.
fn config_map(case: &SkipCase) -> Value {
    let mut text = CONFIG_MAP.to_string();
    if case.plugin_list {
        text = text.replace(
            r#""simulate": false,"#,
            r#""subnets-to-ignore": ["192.0.2.0/24"], "simulate": false,"#,
        );
    }
    if case.ipv6 {
        text = text.replace(r#""ipv6": false"#, r#""ipv6": true"#);
    }
    yaml::parse_document(&text).unwrap().to_json()
}

/// The function's pod (`None`: an error on it) and the NADs of its output.
fn by_function(case: &SkipCase) -> (Option<Value>, ClusterNads) {
    let mut items = vec![config_map(case)];
    if let Some(annotations) = &case.base.namespace_annotations {
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": case.base.namespace, "annotations": annotations}
        }));
    }
    for (name, namespace, config) in NADS {
        items.push(json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"config": config}
        }));
    }
    items.push(case.base.pod.clone());
    let (items, refused) = function(items, Some(&settings_of(case)));
    ((!refused).then(|| pod_of(&items)), ClusterNads::of(&items))
}

fn by_webhook(case: &SkipCase, nads: &ClusterNads) -> Option<Value> {
    let config = settings_of(case);
    let settings = linkerd_multus::krm::function_config::SettingsKind::from_object(
        &yaml::parse_document(&config.to_string()).unwrap(),
    )
    .unwrap();
    webhook_answer_with(&case.base, None, Some(nads), &settings)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// The webhook reading the NADs writes skip-subnets as the function writes them.
    #[test]
    fn the_webhook_skips_the_subnets_the_function_skips(case in skip_case()) {
        let (function, nads) = by_function(&case);
        let webhook = by_webhook(&case, &nads);
        prop_assert_eq!(webhook, function, "{:?}", case);
    }
}

/// Guards the property against a generator that never writes, takes back or refuses.
#[test]
fn the_skip_subnets_generator_reaches_every_outcome() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut written, mut taken_back, mut refused) = (0, 0, 0);
    for _ in 0..300 {
        let case = skip_case().new_tree(&mut runner).unwrap().current();
        let (pod, _) = by_function(&case);
        let Some(pod) = pod else {
            refused += 1;
            continue;
        };
        let before = &case.base.pod["metadata"]["annotations"];
        let after = &pod["metadata"]["annotations"];
        match (before.get(ADDED_ANNOTATION), after.get(ADDED_ANNOTATION)) {
            (_, Some(new)) if before.get(ADDED_ANNOTATION) != Some(new) => written += 1,
            (Some(_), None) => taken_back += 1,
            _ => {}
        }
    }
    assert!(
        written > 20 && taken_back > 10 && refused > 10,
        "{written} {taken_back} {refused}"
    );
}
