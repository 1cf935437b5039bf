//! The plan of a pod: which of its secondary networks' subnets it skips, from
//! its annotations, its namespace's, the setting and the plugin's own list;
//! the edits, or the problem and its warnings.

use super::tests::{CLUSTER, DUAL, STATIC, nets, subnets};
use super::*;
use crate::linkerd_cni::attach::Edit;
use crate::multus::ipam;

/// The NADs of the [`plan`] cases, in namespace `demo` unless named.
struct TestNads(Vec<(&'static str, &'static str, Result<Ipam, IpamError>)>);

impl NadIpams for TestNads {
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.0
            .iter()
            .find(|(ns, n, _)| *ns == namespace && *n == name)
            .map(|(_, _, ipam)| ipam)
    }
}

fn test_nads() -> TestNads {
    TestNads(vec![
        ("demo", "storage", ipam::read(STATIC)),
        ("demo", "data", ipam::read(DUAL)),
        ("other", "data", ipam::read(DUAL)),
        (
            "demo",
            "lease",
            ipam::read(r#"{"type": "macvlan", "ipam": {"type": "dhcp"}}"#),
        ),
        (
            "demo",
            "fixed",
            ipam::read(r#"{"type": "macvlan", "ipam": {"type": "static"}}"#),
        ),
    ])
}

/// One [`plan`] case: the pod's annotations (the networks among them), whether the rules
/// attach it, its namespace's annotations, the setting, and the outcome: the edits, or the
/// start of the problem.
struct PlanCase {
    what: &'static str,
    pod: &'static [(&'static str, &'static str)],
    attached: bool,
    namespace: &'static [(&'static str, &'static str)],
    setting: bool,
    cluster: &'static [&'static str],
    plugin: Option<&'static [&'static str]>,
    want: Result<&'static [(&'static str, Option<&'static str>)], &'static str>,
}

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const ON: (&str, &str) = (OPT_IN_ANNOTATION, "enabled");
const OFF: (&str, &str) = (OPT_IN_ANNOTATION, "disabled");

const PLANS: &[PlanCase] = &[
    PlanCase {
        what: "opted in on the pod: the subnets, the plugin's list carried over",
        pod: &[ON, (NETWORKS, "storage,linkerd-cni")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&["192.0.2.0/24"]),
        want: Ok(&[
            (ANNOTATION, Some("192.0.2.0/24,10.10.0.0/24,172.20.0.0/16")),
            (
                ADDED_ANNOTATION,
                Some("192.0.2.0/24,10.10.0.0/24,172.20.0.0/16"),
            ),
        ]),
    },
    PlanCase {
        what: "opted in on the namespace, a network named with its namespace, IPv4 only",
        pod: &[(NETWORKS, "demo/data,linkerd-cni")],
        attached: true,
        namespace: &[ON],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[
            (ANNOTATION, Some("192.168.50.0/24")),
            (ADDED_ANNOTATION, Some("192.168.50.0/24")),
        ]),
    },
    PlanCase {
        what: "the setting, the pod opting out: nothing",
        pod: &[OFF, (NETWORKS, "storage,linkerd-cni")],
        attached: true,
        namespace: &[ON],
        setting: true,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[]),
    },
    PlanCase {
        what: "an empty value on the pod counts as unset",
        pod: &[(OPT_IN_ANNOTATION, ""), (NETWORKS, "storage,linkerd-cni")],
        attached: true,
        namespace: &[OFF],
        setting: true,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[]),
    },
    PlanCase {
        what: "the selection's ips on a static IPAM without addresses",
        pod: &[
            ON,
            (
                NETWORKS,
                r#"[{"name": "fixed", "ips": ["10.30.0.7/24"]}, {"name": "linkerd-cni"}]"#,
            ),
        ],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[
            (ANNOTATION, Some("10.30.0.0/24")),
            (ADDED_ANNOTATION, Some("10.30.0.0/24")),
        ]),
    },
    PlanCase {
        what: "not attached: what was added is taken back, the pod's own value kept",
        pod: &[
            ON,
            (NETWORKS, "storage"),
            (ANNOTATION, "203.0.113.0/24,10.10.0.0/24"),
            (ADDED_ANNOTATION, "10.10.0.0/24"),
        ],
        attached: false,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: None,
        want: Ok(&[
            (ANNOTATION, Some("203.0.113.0/24")),
            (ADDED_ANNOTATION, None),
        ]),
    },
    PlanCase {
        what: "no secondary network: what was added is taken back",
        pod: &[
            ON,
            (NETWORKS, "linkerd-cni"),
            (ANNOTATION, "10.10.0.0/24"),
            (ADDED_ANNOTATION, "10.10.0.0/24"),
        ],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[(ANNOTATION, None), (ADDED_ANNOTATION, None)]),
    },
    PlanCase {
        what: "already as wanted: no edit",
        pod: &[
            ON,
            (NETWORKS, "storage,linkerd-cni"),
            (ANNOTATION, "10.10.0.0/24,172.20.0.0/16"),
            (ADDED_ANNOTATION, "10.10.0.0/24,172.20.0.0/16"),
        ],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Ok(&[]),
    },
    PlanCase {
        what: "DHCP and an unknown NAD: warnings, nothing written",
        pod: &[ON, (NETWORKS, "lease,gone,linkerd-cni")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: &[],
        plugin: Some(&[]),
        want: Ok(&[]),
    },
    PlanCase {
        what: "a value neither enabled nor disabled",
        pod: &[(OPT_IN_ANNOTATION, "yes"), (NETWORKS, "storage")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Err(
            "annotation multus.linkerd.io/skip-secondary-subnets on the pod is \"yes\", neither enabled nor disabled",
        ),
    },
    PlanCase {
        what: "the namespace's value neither enabled nor disabled",
        pod: &[(NETWORKS, "storage")],
        attached: true,
        namespace: &[(OPT_IN_ANNOTATION, "true")],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Err(
            "annotation multus.linkerd.io/skip-secondary-subnets on its namespace is \"true\"",
        ),
    },
    PlanCase {
        what: "subnets to write and no cluster networks",
        pod: &[ON, (NETWORKS, "storage,linkerd-cni")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: &[],
        plugin: Some(&[]),
        want: Err(
            "the pod's secondary networks bring 10.10.0.0/24, 172.20.0.0/16, but the clusterCIDRs setting is not set",
        ),
    },
    PlanCase {
        what: "no Linkerd-CNI NAD to read IPv6 and its list from",
        pod: &[ON, (NETWORKS, "storage,linkerd-cni")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: None,
        want: Err("namespace demo has no NetworkAttachmentDefinition linkerd-cni yet"),
    },
    PlanCase {
        what: "a networks annotation that does not read",
        pod: &[ON, (NETWORKS, "[{")],
        attached: true,
        namespace: &[],
        setting: false,
        cluster: CLUSTER,
        plugin: Some(&[]),
        want: Err("annotation k8s.v1.cni.cncf.io/networks: "),
    },
];

fn lookup(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn plan_cases() {
    let nads = test_nads();
    let (mut reading, mut not_reading) = (0, 0);
    for case in PLANS {
        let settings = Settings {
            skip_secondary_subnets: case.setting,
            cluster_cidrs: nets(case.cluster),
            ..Settings::default()
        };
        let plugin = case.plugin.map(|list| PluginSettings {
            subnets_to_ignore: list.iter().map(|s| s.to_string()).collect(),
            ipv6: false,
        });
        let namespace = lookup(case.namespace);
        let cx = Context {
            settings: &settings,
            pod_namespace: "demo",
            namespace: &namespace,
            nads: Some(&nads),
            plugin: plugin.as_ref(),
        };
        let pod = lookup(case.pod);
        let networks = pod.get(NETWORKS).map(String::as_str);
        let got = plan(&pod, networks, case.attached, &cx);
        // A pod for which `reads_nads` is false gets the same plan from a front that looked
        // neither the NADs nor the plugin's settings up.
        if reads_nads(&pod, &namespace, &settings, case.attached) {
            reading += 1;
        } else {
            let bare = Context {
                nads: None,
                plugin: None,
                ..cx
            };
            let without = plan(&pod, networks, case.attached, &bare);
            assert_eq!(format!("{without:?}"), format!("{got:?}"), "{}", case.what);
            not_reading += 1;
        }
        match (&got, case.want) {
            (Ok(planned), Ok(edits)) => {
                let want: Vec<Edit> = edits.iter().map(|(k, v)| (*k, v.map(Into::into))).collect();
                assert_eq!(planned.edits, want, "{}", case.what);
                // Applied, the pod gets no further edit.
                let mut after = pod.clone();
                for (key, value) in &planned.edits {
                    match value {
                        Some(v) => after.insert(key.to_string(), v.to_string()),
                        None => after.remove(*key),
                    };
                }
                let again = plan(&after, networks, case.attached, &cx).unwrap();
                assert!(again.edits.is_empty(), "{}: again {:?}", case.what, again);
            }
            (Err(problem), Err(start)) => {
                let text = problem.to_string();
                assert!(text.starts_with(start), "{}: {text}", case.what);
            }
            _ => panic!("{}: got {got:?}", case.what),
        }
    }
    assert!(reading > 0 && not_reading > 0, "{reading} / {not_reading}");
}

#[test]
fn warnings_name_the_nads_inbound_tcp_stays_refused_on() {
    let settings = Settings::default();
    let plugin = PluginSettings::default();
    let cx = Context {
        settings: &settings,
        pod_namespace: "demo",
        namespace: &lookup(&[ON]),
        nads: Some(&test_nads()),
        plugin: Some(&plugin),
    };
    let got = plan(&lookup(&[]), Some("lease,gone,linkerd-cni"), true, &cx).unwrap();
    assert_eq!(got.warnings.len(), 2, "{got:?}");
    assert!(got.warnings[0].starts_with(
        "NetworkAttachmentDefinition demo/gone is not known here, so its subnets are not skipped"
    ));
    assert!(
        got.warnings[1]
            .starts_with("NetworkAttachmentDefinition demo/lease gets its addresses by DHCP")
    );
}

/// A front that reads no NAD refuses a pod that needs them, and only such a pod.
#[test]
fn without_nads_only_a_pod_with_secondary_networks_is_refused() {
    let settings = Settings::default();
    let plugin = PluginSettings::default();
    let namespace = lookup(&[ON]);
    let cx = Context {
        settings: &settings,
        pod_namespace: "demo",
        namespace: &namespace,
        nads: None,
        plugin: Some(&plugin),
    };
    assert_eq!(
        plan(&lookup(&[]), Some("storage"), true, &cx),
        Err(Problem::NoNads)
    );
    assert_eq!(
        plan(&lookup(&[]), Some("linkerd-cni"), true, &cx),
        Ok(Planned::default())
    );
}

/// With IPv6 off nothing IPv6 is redirected, so an IPv6 default route or an IPv6 range that
/// overlaps an IPv6 cluster network opens nothing: left out, not refused.
#[test]
fn with_ipv6_off_ipv6_ranges_are_left_out_before_any_refusal() {
    let config = r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.40.0.0/24"}], [{"subnet": "fd00:10::/64"}]], "routes": [{"dst": "::/0"}]}}"#;
    let got = subnets(
        &[("app/dual", config)],
        &["10.244.0.0/16", "fd00:10::/56"],
        false,
    )
    .unwrap();
    assert_eq!(got.subnets, nets(&["10.40.0.0/24"]));
}
