//! What the secondary networks give (their subnets, then their routes), what is
//! refused as opening the mesh, and the merge into the pod's annotation; the
//! plan of a pod is in `skip_subnets/plan_tests.rs`.

use super::*;
use crate::multus::ipam;

pub(super) fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|n| n.parse().unwrap()).collect()
}

pub(super) fn subnets(
    configs: &[(&str, &str)],
    cluster: &[&str],
    ipv6: bool,
) -> Result<Subnets, Refusal> {
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

pub(super) const STATIC: &str = r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "172.20.0.0/16"}]}}"#;
pub(super) const DUAL: &str = r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "192.168.50.0/24"}], [{"subnet": "fd10::/64"}]]}}"#;
pub(super) const CLUSTER: &[&str] = &["10.244.0.0/16", "10.96.0.0/12"];

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
