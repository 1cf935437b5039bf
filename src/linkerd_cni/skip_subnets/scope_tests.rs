//! Where the subnets come from and what they may not touch: only the NADs of the pod's own
//! namespace give subnets (another namespace's is warned about, naming it and nothing of its
//! IPAM, and never read), and a subnet that overlaps a protected network is refused as one
//! that overlaps the cluster's is.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::*;
use crate::linkerd_cni::attach::Edit;
use crate::multus::ipam;

const OWN: &str = r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "172.20.0.0/16"}]}}"#;
/// Another namespace's NAD: none of these ranges may reach the pod, nor its warnings.
const FOREIGN: &str = r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "192.168.77.0/24"}], [{"subnet": "fd77::/64"}]], "routes": [{"dst": "198.18.0.0/15"}]}}"#;
const FOREIGN_RANGES: &[&str] = &["192.168.77.", "fd77:", "198.18."];
const CLUSTER: &[&str] = &["10.244.0.0/16", "10.96.0.0/12"];
const OWN_VALUE: &str = "10.10.0.0/24,172.20.0.0/16";

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|n| n.parse().unwrap()).collect()
}

/// The NADs a front knows, in `demo` and `other`, and every NAD the rule asked for.
struct Nads {
    known: Vec<(&'static str, &'static str, Result<Ipam, IpamError>)>,
    asked: RefCell<Vec<String>>,
}

impl NadIpams for Nads {
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.asked.borrow_mut().push(format!("{namespace}/{name}"));
        (self.known.iter())
            .find(|(ns, n, _)| *ns == namespace && *n == name)
            .map(|(_, _, ipam)| ipam)
    }
}

fn nads() -> Nads {
    Nads {
        known: vec![
            ("demo", "storage", ipam::read(OWN)),
            ("other", "data", ipam::read(FOREIGN)),
            ("other", "linkerd-cni", ipam::read(FOREIGN)),
        ],
        asked: RefCell::new(Vec::new()),
    }
}

/// The warning for NAD `nad` of namespace `namespace`, selected by a pod of `demo`.
fn foreign(nad: &str, namespace: &str) -> String {
    format!(
        "NetworkAttachmentDefinition {nad} is in namespace {namespace}, not the pod's namespace demo: only the NADs of the pod's own namespace give subnets to skip, so none of it is skipped and inbound TCP on that network is still sent to the proxy, which refuses it; select a NAD of namespace demo for that network"
    )
}

/// (what, the pod's networks annotation, the skip-subnets written, the NADs of another
/// namespace warned about, in order).
#[allow(clippy::type_complexity)]
const SCOPES: &[(&str, &str, Option<&str>, &[(&str, &str)])] = &[
    (
        "another namespace's NAD alone: a warning, nothing written",
        "other/data,linkerd-cni",
        None,
        &[("other/data", "other")],
    ),
    (
        "the JSON form's namespace: the same",
        r#"[{"name": "data", "namespace": "other"}, {"name": "linkerd-cni"}]"#,
        None,
        &[("other/data", "other")],
    ),
    (
        "beside a NAD of its own: only its own subnets",
        "storage,other/data,linkerd-cni",
        Some(OWN_VALUE),
        &[("other/data", "other")],
    ),
    (
        "selected twice, on two interfaces: warned once",
        "other/data,other/data@net2,linkerd-cni",
        None,
        &[("other/data", "other")],
    ),
    (
        "another namespace's NAD that is not known: the same warning as one that is",
        "other/gone,linkerd-cni",
        None,
        &[("other/gone", "other")],
    ),
    (
        "another namespace's Linkerd-CNI NAD is not the pod's",
        "other/linkerd-cni,linkerd-cni",
        None,
        &[("other/linkerd-cni", "other")],
    ),
    (
        "the pod's own namespace, named: read as its own",
        "demo/storage,linkerd-cni",
        Some(OWN_VALUE),
        &[],
    ),
];

fn opted_in() -> Settings {
    Settings {
        skip_secondary_subnets: true,
        cluster_cidrs: nets(CLUSTER),
        protected_cidrs: nets(&["192.168.0.0/16"]),
        ..Settings::default()
    }
}

#[test]
fn only_the_pods_own_namespace_gives_subnets() {
    let settings = opted_in();
    let plugin = PluginSettings::default();
    let namespace = BTreeMap::<String, String>::new();
    for (what, networks, value, warned) in SCOPES {
        let nads = nads();
        let cx = Context {
            settings: &settings,
            pod_namespace: "demo",
            namespace: &namespace,
            nads: Some(&nads),
            plugin: Some(&plugin),
        };
        let pod = BTreeMap::<String, String>::new();
        let planned =
            plan(&pod, Some(networks), true, &cx).unwrap_or_else(|e| panic!("{what}: {e}"));
        let want: Vec<Edit> = match value {
            Some(v) => vec![
                (ANNOTATION, Some((*v).into())),
                (ADDED_ANNOTATION, Some((*v).into())),
            ],
            None => Vec::new(),
        };
        assert_eq!(planned.edits, want, "{what}");
        let warnings: Vec<String> = warned.iter().map(|(n, ns)| foreign(n, ns)).collect();
        assert_eq!(planned.warnings, warnings, "{what}");
        for warning in &planned.warnings {
            for range in FOREIGN_RANGES {
                assert!(!warning.contains(range), "{what}: {warning}");
            }
        }
        let asked = nads.asked.borrow();
        assert!(
            asked.iter().all(|nad| nad.starts_with("demo/")),
            "{what}: asked for {asked:?}"
        );
    }
}

/// A pod that selects only other namespaces' NADs needs no NAD read: a front that reads none,
/// or a namespace without its Linkerd-CNI NAD yet, gives the warning, not a problem.
#[test]
fn another_namespaces_nad_needs_no_read() {
    let settings = opted_in();
    let namespace = BTreeMap::<String, String>::new();
    let cx = Context {
        settings: &settings,
        pod_namespace: "demo",
        namespace: &namespace,
        nads: None,
        plugin: None,
    };
    let planned = plan(
        &BTreeMap::<String, String>::new(),
        Some("other/data"),
        true,
        &cx,
    );
    assert_eq!(
        planned,
        Ok(Planned {
            warnings: vec![foreign("other/data", "other")],
            ..Planned::default()
        })
    );
}

/// A subnet the pod would skip that was written for another namespace's NAD before is taken
/// back: the record says it was the rule's.
#[test]
fn what_another_namespaces_nad_gave_before_is_taken_back() {
    let settings = opted_in();
    let plugin = PluginSettings::default();
    let namespace = BTreeMap::<String, String>::new();
    let nads = nads();
    let cx = Context {
        settings: &settings,
        pod_namespace: "demo",
        namespace: &namespace,
        nads: Some(&nads),
        plugin: Some(&plugin),
    };
    let pod: BTreeMap<String, String> = [
        (ANNOTATION, "203.0.113.0/24,192.168.77.0/24"),
        (ADDED_ANNOTATION, "192.168.77.0/24"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let planned = plan(&pod, Some("other/data,linkerd-cni"), true, &cx).unwrap();
    assert_eq!(
        planned.edits,
        [
            (ANNOTATION, Some("203.0.113.0/24".into())),
            (ADDED_ANNOTATION, None),
        ]
    );
    assert_eq!(planned.change, Some(Change::TakenBack));
}

/// (what, the NAD's config, the selection's ips, the protected networks, IPv6, the subnets
/// or the refusal).
#[allow(clippy::type_complexity)]
const PROTECTED: &[(&str, &str, &[&str], &[&str], bool, Result<&[&str], &str>)] = &[
    (
        "a range inside a protected network",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "192.168.10.0/24"}}"#,
        &[],
        &["192.168.0.0/16"],
        false,
        Err(
            "NetworkAttachmentDefinition app/net brings 192.168.10.0/24, which overlaps the protected network 192.168.0.0/16: skipping it would take traffic from that network away from the proxy (no mTLS, no policy); give the secondary network a range of its own, or correct the protectedCIDRs setting",
        ),
    ),
    (
        "a route around a protected pool",
        r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "203.0.113.0/24"}]}}"#,
        &[],
        &["198.51.100.0/24", "203.0.113.128/25"],
        false,
        Err(
            "NetworkAttachmentDefinition app/net brings 203.0.113.0/24, which overlaps the protected network 203.0.113.128/25",
        ),
    ),
    (
        "a selection's ips in a protected network",
        r#"{"type": "macvlan", "ipam": {"type": "static"}}"#,
        &["192.168.4.7/24"],
        &["192.168.0.0/16"],
        false,
        Err(
            "NetworkAttachmentDefinition app/net brings 192.168.4.0/24, which overlaps the protected network 192.168.0.0/16",
        ),
    ),
    (
        "the cluster's networks are named first",
        r#"{"type": "macvlan", "ipam": {"type": "host-local", "subnet": "10.0.0.0/8"}}"#,
        &[],
        &["10.0.0.0/8"],
        false,
        Err(
            "NetworkAttachmentDefinition app/net brings 10.0.0.0/8, which overlaps the cluster network 10.244.0.0/16",
        ),
    ),
    (
        "beside the protected networks: written",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "10.10.0.0/24"}}"#,
        &[],
        &["192.168.0.0/16", "10.11.0.0/16"],
        false,
        Ok(&["10.10.0.0/24"]),
    ),
    (
        "an IPv6 range in an IPv6 protected network, IPv6 off: left out, not refused",
        r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.40.0.0/24"}], [{"subnet": "fd00:20::/64"}]]}}"#,
        &[],
        &["fd00:20::/48"],
        false,
        Ok(&["10.40.0.0/24"]),
    ),
];

#[test]
fn a_subnet_that_overlaps_a_protected_network_is_refused_naming_both() {
    let cluster = nets(CLUSTER);
    for (what, config, ips, protected, ipv6, want) in PROTECTED {
        let ipam = ipam::read(config);
        let ips = nets(ips);
        let network = Network {
            nad: "app/net",
            ipam: &ipam,
            ips: &ips,
        };
        let protected = nets(protected);
        let guarded = Guarded {
            cluster: &cluster,
            protected: &protected,
        };
        let got = secondary_subnets(&[network], guarded, *ipv6);
        match (got, want) {
            (Ok(found), Ok(subnets)) => assert_eq!(found.subnets, nets(subnets), "{what}"),
            (Err(refusal), Err(start)) => {
                let text = refusal.to_string();
                assert!(text.starts_with(start), "{what}: {text}");
            }
            (got, _) => panic!("{what}: got {got:?}"),
        }
    }
}

/// Through the rule on a pod, the protected networks refuse as the cluster's do: the pod is
/// refused, naming the NAD, the range and the network.
#[test]
fn the_rule_refuses_a_pod_whose_network_overlaps_a_protected_one() {
    let settings = opted_in();
    let plugin = PluginSettings::default();
    let namespace = BTreeMap::<String, String>::new();
    let nads = Nads {
        known: vec![(
            "demo",
            "nodes",
            ipam::read(
                r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "192.168.1.0/24"}}"#,
            ),
        )],
        asked: RefCell::new(Vec::new()),
    };
    let cx = Context {
        settings: &settings,
        pod_namespace: "demo",
        namespace: &namespace,
        nads: Some(&nads),
        plugin: Some(&plugin),
    };
    let got = plan(&BTreeMap::<String, String>::new(), Some("nodes"), true, &cx);
    assert_eq!(
        got,
        Err(Problem::Refused(Refusal::Protected {
            nad: "demo/nodes".into(),
            range: "192.168.1.0/24".parse().unwrap(),
            protected: "192.168.0.0/16".parse().unwrap(),
        }))
    );
}
