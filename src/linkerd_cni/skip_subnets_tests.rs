use super::*;
use crate::multus::ipam;

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|n| n.parse().unwrap()).collect()
}

fn subnets(configs: &[(&str, &str)], cluster: &[&str], ipv6: bool) -> Result<Subnets, Refusal> {
    let read: Vec<(String, Result<Ipam, IpamError>)> = configs
        .iter()
        .map(|(nad, config)| (nad.to_string(), ipam::read(config)))
        .collect();
    let networks: Vec<Network<'_>> = read
        .iter()
        .map(|(nad, ipam)| Network {
            nad,
            ipam,
            ips: &[],
        })
        .collect();
    let cluster = nets(cluster);
    let guarded = Guarded {
        cluster: &cluster,
        protected: &[],
    };
    secondary_subnets(&networks, guarded, ipv6)
}

const STATIC: &str = r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "172.20.0.0/16"}]}}"#;
const DUAL: &str = r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "192.168.50.0/24"}], [{"subnet": "fd10::/64"}]]}}"#;
const CLUSTER: &[&str] = &["10.244.0.0/16", "10.96.0.0/12"];

#[test]
fn the_networks_give_their_subnets_then_their_routes_ipv4_only_with_ipv6_off() {
    let got = subnets(
        &[("app/storage", STATIC), ("app/data", DUAL)],
        CLUSTER,
        false,
    )
    .unwrap();
    assert_eq!(
        got.subnets,
        nets(&["10.10.0.0/24", "172.20.0.0/16", "192.168.50.0/24"])
    );
    assert!(got.warnings.is_empty());
}

#[test]
fn dhcp_and_no_ipam_are_warned_about_not_written() {
    let got = subnets(
        &[
            (
                "app/lease",
                r#"{"type": "macvlan", "ipam": {"type": "dhcp"}}"#,
            ),
            ("app/bare", r#"{"type": "macvlan"}"#),
            ("app/storage", STATIC),
        ],
        CLUSTER,
        false,
    )
    .unwrap();
    assert_eq!(got.subnets, nets(&["10.10.0.0/24", "172.20.0.0/16"]));
    assert_eq!(got.warnings.len(), 2);
    assert!(
        got.warnings[0]
            .starts_with("NetworkAttachmentDefinition app/lease gets its addresses by DHCP")
    );
    assert!(got.warnings[1].starts_with("NetworkAttachmentDefinition app/bare has no IPAM"));
}

/// What opens the mesh, or fails the sandbox, and the start of the refusal each gets.
#[test]
fn what_would_open_the_mesh_is_refused_naming_the_nad_and_the_range() {
    for (config, cluster, ipv6, expected) in [
        (
            r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "0.0.0.0/0"}]}}"#,
            CLUSTER,
            false,
            "NetworkAttachmentDefinition app/net brings 0.0.0.0/0, every address",
        ),
        (
            r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "10.244.128.0/17"}}"#,
            CLUSTER,
            false,
            "NetworkAttachmentDefinition app/net brings 10.244.128.0/17, which overlaps the cluster network 10.244.0.0/16",
        ),
        (
            r#"{"type": "macvlan", "ipam": {"type": "host-local", "subnet": "10.0.0.0/8"}}"#,
            CLUSTER,
            false,
            "NetworkAttachmentDefinition app/net brings 10.0.0.0/8, which overlaps the cluster network 10.244.0.0/16",
        ),
        (
            STATIC,
            CLUSTER,
            true,
            "NetworkAttachmentDefinition app/net brings 10.10.0.0/24, and Linkerd-CNI runs with ipv6 on",
        ),
        (
            r#"{"type": "macvlan", "ipam": {"type": "calico-ipam"}}"#,
            CLUSTER,
            false,
            "NetworkAttachmentDefinition app/net: its spec.config \"ipam.type\" is \"calico-ipam\"",
        ),
    ] {
        let error = subnets(&[("app/net", config)], cluster, ipv6)
            .expect_err(config)
            .to_string();
        assert!(error.starts_with(expected), "{config}: {error}");
    }
    assert!(
        subnets(&[("app/net", STATIC)], CLUSTER, true)
            .unwrap_err()
            .to_string()
            .contains(IPV6_ISSUE)
    );
}

#[test]
fn with_ipv6_on_and_nothing_to_write_nothing_is_refused() {
    let got = subnets(
        &[(
            "app/lease",
            r#"{"type": "macvlan", "ipam": {"type": "dhcp"}}"#,
        )],
        CLUSTER,
        true,
    )
    .unwrap();
    assert!(got.subnets.is_empty());
}

#[test]
fn the_plugin_s_own_list_and_ipv6_are_read_from_its_nad_config() {
    let config = r#"{"cniVersion": "0.3.1", "plugins": [{"type": "linkerd-cni", "linkerd": {"subnets-to-ignore": ["192.0.2.0/24"], "ipv6": true}}]}"#;
    assert_eq!(
        plugin_settings(config),
        PluginSettings {
            subnets_to_ignore: vec!["192.0.2.0/24".into()],
            ipv6: true,
        }
    );
    for config in [
        r#"{"type": "linkerd-cni", "linkerd": {}}"#,
        r#"{"type": "macvlan"}"#,
        "not json",
    ] {
        assert_eq!(
            plugin_settings(config),
            PluginSettings::default(),
            "{config}"
        );
    }
}

#[test]
fn what_linkerd_cni_skips_and_what_it_does_not() {
    let plugin = vec!["192.0.2.0/24".to_string()];
    assert_eq!(
        effective(Some("10.0.0.0/8"), Some("198.51.100.0/24"), &plugin),
        ["10.0.0.0/8"]
    );
    assert_eq!(
        effective(Some(""), Some("198.51.100.0/24"), &plugin),
        ["198.51.100.0/24"]
    );
    assert_eq!(effective(None, None, &plugin), ["192.0.2.0/24"]);
    let subnets = nets(&["10.10.0.0/24", "172.20.0.0/16", "192.0.2.0/25"]);
    assert_eq!(
        uncovered(&subnets, &["10.0.0.0/8", " 172.20.0.0/16", "192.0.2.0/24"]),
        nets(&["172.20.0.0/16"]),
        "an entry with a space is not a CIDR to iptables"
    );
}

/// (what, the pod's value, its record, the namespace's, the plugin's, the subnets, the
/// new value, the new record).
#[allow(clippy::type_complexity)]
const MERGES: &[(
    &str,
    Option<&str>,
    Option<&str>,
    Option<&str>,
    &[&str],
    &[&str],
    Option<&str>,
    Option<&str>,
)] = &[
    (
        "nothing before",
        None,
        None,
        None,
        &[],
        &["10.10.0.0/24"],
        Some("10.10.0.0/24"),
        Some("10.10.0.0/24"),
    ),
    (
        "the pod's own value kept first",
        Some("203.0.113.0/24"),
        None,
        Some("198.51.100.0/24"),
        &["192.0.2.0/24"],
        &["10.10.0.0/24"],
        Some("203.0.113.0/24,10.10.0.0/24"),
        Some("10.10.0.0/24"),
    ),
    (
        "the namespace's value carried over",
        None,
        None,
        Some("198.51.100.0/24"),
        &["192.0.2.0/24"],
        &["10.10.0.0/24"],
        Some("198.51.100.0/24,10.10.0.0/24"),
        Some("198.51.100.0/24,10.10.0.0/24"),
    ),
    (
        "the plugin's list carried over",
        None,
        None,
        Some(""),
        &["192.0.2.0/24"],
        &["10.10.0.0/24"],
        Some("192.0.2.0/24,10.10.0.0/24"),
        Some("192.0.2.0/24,10.10.0.0/24"),
    ),
    (
        "a subnet the pod already skips is not added twice, nor recorded",
        Some("10.10.0.0/24"),
        None,
        None,
        &[],
        &["10.10.0.0/24", "172.20.0.0/16"],
        Some("10.10.0.0/24,172.20.0.0/16"),
        Some("172.20.0.0/16"),
    ),
    (
        "rendered again: the same",
        Some("203.0.113.0/24,10.10.0.0/24"),
        Some("10.10.0.0/24"),
        None,
        &[],
        &["10.10.0.0/24"],
        Some("203.0.113.0/24,10.10.0.0/24"),
        Some("10.10.0.0/24"),
    ),
    (
        "a NAD's range changed: the old one goes, the new one comes",
        Some("203.0.113.0/24,10.10.0.0/24"),
        Some("10.10.0.0/24"),
        None,
        &[],
        &["10.11.0.0/24"],
        Some("203.0.113.0/24,10.11.0.0/24"),
        Some("10.11.0.0/24"),
    ),
    (
        "the rule gone: the pod's own value back",
        Some("203.0.113.0/24,10.10.0.0/24"),
        Some("10.10.0.0/24"),
        None,
        &[],
        &[],
        Some("203.0.113.0/24"),
        None,
    ),
    (
        "the rule gone, nothing of the pod's: no annotation",
        Some("198.51.100.0/24,10.10.0.0/24"),
        Some("198.51.100.0/24,10.10.0.0/24"),
        Some("198.51.100.0/24"),
        &[],
        &[],
        None,
        None,
    ),
    (
        "no rule, a pod value of the user's: untouched",
        Some("203.0.113.0/24"),
        None,
        None,
        &[],
        &[],
        Some("203.0.113.0/24"),
        None,
    ),
];

#[test]
fn merge_carries_over_what_linkerd_cni_would_read_and_takes_back_what_it_added() {
    for (what, pod, added, namespace, plugin, subnets, value, record) in MERGES {
        let plugin: Vec<String> = plugin.iter().map(|s| s.to_string()).collect();
        let got = merge(*pod, *added, *namespace, &plugin, &nets(subnets));
        assert_eq!(
            got,
            Annotations {
                value: value.map(str::to_string),
                added: record.map(str::to_string),
            },
            "{what}"
        );
        // Idempotent: the output as input gives itself.
        let again = merge(
            got.value.as_deref(),
            got.added.as_deref(),
            *namespace,
            &plugin,
            &nets(subnets),
        );
        assert_eq!(again, got, "{what}: rendered again");
    }
}

/// The NADs of the [`plan`] cases, in namespace `demo` unless named.
pub(super) struct TestNads(Vec<(&'static str, &'static str, Result<Ipam, IpamError>)>);

impl NadIpams for TestNads {
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.0
            .iter()
            .find(|(ns, n, _)| *ns == namespace && *n == name)
            .map(|(_, _, ipam)| ipam)
    }
}

pub(super) fn test_nads() -> TestNads {
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
        match (&got, case.want) {
            (Ok(planned), Ok(edits)) => {
                let want: Vec<Edit> = edits
                    .iter()
                    .map(|(k, v)| (*k, v.map(str::to_string)))
                    .collect();
                assert_eq!(planned.edits, want, "{}", case.what);
                // Applied, the pod gets no further edit.
                let mut after = pod.clone();
                for (key, value) in &planned.edits {
                    match value {
                        Some(v) => after.insert(key.to_string(), v.clone()),
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
