//! Secondary networks beside the mesh: the `config.linkerd.io/skip-subnets` a meshed pod needs
//! so that inbound TCP from the networks its Multus interfaces join reaches the application.
//!
//! Linkerd-CNI redirects every inbound TCP packet, on any interface, to the proxy, which refuses
//! a target address that is not the pod's own (`status.podIPs`): a connection to a secondary
//! address is redirected, then refused (linkerd2#9840, #2926). What Linkerd-CNI does read when
//! it sets a pod up is `config.linkerd.io/skip-subnets`: the pod's value when it has one, else
//! its namespace's, else the plugin's own `subnets-to-ignore`, split at commas as written. Each
//! subnet gets a RETURN before the redirect.
//!
//! This module is the pure part: from the networks a pod selects (their IPAM, read by
//! [`crate::multus::ipam`]), the subnets to skip ([`secondary_subnets`]), refused when they
//! would open the mesh; and the pod's new annotations ([`merge`]), which carry over the value
//! Linkerd-CNI would otherwise use and record what they added, so that a later render takes
//! exactly that back. `check --proxy` reads a live pod with the same vocabulary: the list
//! Linkerd-CNI uses for it ([`effective`], with [`plugin_settings`]) and the subnets it leaves
//! out ([`uncovered`]).

use ipnet::IpNet;

use super::cni_config::PLUGIN_TYPE;
use crate::multus::ipam::{Ipam, IpamError};

/// The annotation Linkerd-CNI reads.
pub const ANNOTATION: &str = "config.linkerd.io/skip-subnets";
/// What the rules added to [`ANNOTATION`], so that they can take it back (reversible): the
/// entries of the value the pod's own value did not hold.
pub const ADDED_ANNOTATION: &str = "multus.linkerd.io/skip-subnets";
/// The upstream issue behind the IPv6 refusal.
pub const IPV6_ISSUE: &str = "https://github.com/linkerd/linkerd2-proxy-init/issues/696";

/// One network a pod selects: its NAD (`namespace/name`) and what its IPAM says.
#[derive(Debug, Clone)]
pub struct Network<'a> {
    /// The NAD, as `namespace/name`.
    pub nad: &'a str,
    /// Its IPAM, or why it cannot be read.
    pub ipam: &'a Result<Ipam, IpamError>,
}

/// Why the subnets of a pod's networks are not written: each would open the mesh, or fail
/// the pod's sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A NAD's IPAM that cannot be read.
    #[error("NetworkAttachmentDefinition {nad}: its spec.config {error}")]
    Unreadable {
        /// The NAD.
        nad: String,
        /// Why.
        error: IpamError,
    },
    /// Every address: traffic from anywhere would skip the proxy.
    #[error(
        "NetworkAttachmentDefinition {nad} brings {range}, every address: skipping it would take all inbound traffic away from the proxy; remove that route or range from the NAD's IPAM, or leave this pod out of the secondary-networks rule"
    )]
    Everything {
        /// The NAD.
        nad: String,
        /// The range.
        range: IpNet,
    },
    /// A range that overlaps the cluster's pod or service network.
    #[error(
        "NetworkAttachmentDefinition {nad} brings {range}, which overlaps the cluster network {cluster}: skipping it would take meshed traffic away from the proxy (no mTLS, no policy); give the secondary network a range of its own, or correct the clusterCIDRs setting"
    )]
    Overlap {
        /// The NAD.
        nad: String,
        /// The range.
        range: IpNet,
        /// The cluster network it overlaps.
        cluster: IpNet,
    },
    /// IPv6 on in Linkerd-CNI, with a subnet to write.
    #[error(
        "NetworkAttachmentDefinition {nad} brings {range}, and Linkerd-CNI runs with ipv6 on: it passes the same skip-subnets to iptables and ip6tables, so a subnet of either family fails the pod's sandbox ({IPV6_ISSUE}); turn the secondary-networks rule off for this pod, or IPv6 off in Linkerd-CNI"
    )]
    Ipv6 {
        /// The NAD.
        nad: String,
        /// The first range that would be written.
        range: IpNet,
    },
}

/// The subnets to skip for `networks`, and a warning for each network whose inbound TCP stays
/// refused (DHCP, or no IPAM: its addresses are not known before the pod starts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subnets {
    /// The subnets, then the routes' destinations, of every network, each once, in order.
    pub subnets: Vec<IpNet>,
    /// What the user should know.
    pub warnings: Vec<String>,
}

/// The subnets `networks` bring, for a pod whose Linkerd-CNI has IPv6 `ipv6`, in a cluster
/// whose pod and service networks are `cluster`. With IPv6 off, Linkerd-CNI sets up iptables
/// only: IPv6 subnets are left out (its IPv6 traffic is not redirected at all). With IPv6 on,
/// any subnet is refused ([`Refusal::Ipv6`]).
pub fn secondary_subnets(
    networks: &[Network<'_>],
    cluster: &[IpNet],
    ipv6: bool,
) -> Result<Subnets, Refusal> {
    let mut out = Subnets::default();
    for network in networks {
        let nad = network.nad.to_string();
        let (subnets, routes) = match network.ipam {
            Err(error) => {
                return Err(Refusal::Unreadable {
                    nad,
                    error: error.clone(),
                });
            }
            Ok(Ipam::Dhcp) => {
                out.warnings.push(format!(
                    "NetworkAttachmentDefinition {nad} gets its addresses by DHCP when the pod starts: they cannot be skipped ahead, so inbound TCP on that network is still sent to the proxy, which refuses it"
                ));
                continue;
            }
            Ok(Ipam::None) => {
                out.warnings.push(format!(
                    "NetworkAttachmentDefinition {nad} has no IPAM: no subnet of its can be skipped, so inbound TCP on that network is still sent to the proxy, which refuses it"
                ));
                continue;
            }
            Ok(Ipam::Subnets { subnets, routes }) => (subnets, routes),
        };
        for range in subnets.iter().chain(routes) {
            if range.prefix_len() == 0 {
                return Err(Refusal::Everything { nad, range: *range });
            }
            if let Some(cluster) = cluster.iter().find(|c| overlap(c, range)) {
                return Err(Refusal::Overlap {
                    nad,
                    range: *range,
                    cluster: *cluster,
                });
            }
            if ipv6 {
                return Err(Refusal::Ipv6 { nad, range: *range });
            }
            if matches!(range, IpNet::V4(_)) && !out.subnets.contains(range) {
                out.subnets.push(*range);
            }
        }
    }
    Ok(out)
}

/// Whether two networks share an address.
fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// What Linkerd-CNI's own settings say (the `linkerd` section of its plugin in the NAD config):
/// its `subnets-to-ignore`, which a pod or namespace [`ANNOTATION`] replaces, and `ipv6`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginSettings {
    /// `subnets-to-ignore`, as written.
    pub subnets_to_ignore: Vec<String>,
    /// `ipv6`.
    pub ipv6: bool,
}

/// The [`PluginSettings`] of the Linkerd-CNI NAD config `config` (a configuration list or a
/// single configuration whose type is [`PLUGIN_TYPE`]); the defaults when it has none.
pub fn plugin_settings(config: &str) -> PluginSettings {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(config) else {
        return PluginSettings::default();
    };
    let plugins = match value.get("plugins").and_then(|p| p.as_array()) {
        Some(plugins) => plugins.iter().collect::<Vec<_>>(),
        None => vec![&value],
    };
    let Some(linkerd) = plugins
        .iter()
        .find(|p| p.get("type").and_then(|t| t.as_str()) == Some(PLUGIN_TYPE))
        .and_then(|p| p.get("linkerd"))
    else {
        return PluginSettings::default();
    };
    PluginSettings {
        subnets_to_ignore: linkerd
            .get("subnets-to-ignore")
            .and_then(|s| s.as_array())
            .map(|list| {
                list.iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        ipv6: linkerd
            .get("ipv6")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
    }
}

/// The skip-subnets Linkerd-CNI uses for a pod: its [`ANNOTATION`] when set, else its
/// namespace's, else the plugin's list; each entry as written.
pub fn effective<'a>(
    pod: Option<&'a str>,
    namespace: Option<&'a str>,
    plugin: &'a [String],
) -> Vec<&'a str> {
    match pod
        .filter(|v| !v.is_empty())
        .or(namespace.filter(|v| !v.is_empty()))
    {
        Some(value) => value.split(',').filter(|e| !e.is_empty()).collect(),
        None => plugin.iter().map(String::as_str).collect(),
    }
}

/// Of `subnets`, those no entry of `skipped` covers (an entry that is not a CIDR covers
/// nothing: iptables would refuse it).
pub fn uncovered(subnets: &[IpNet], skipped: &[&str]) -> Vec<IpNet> {
    let skipped: Vec<IpNet> = skipped.iter().filter_map(|e| e.parse().ok()).collect();
    subnets
        .iter()
        .filter(|s| !skipped.iter().any(|k| k.contains(*s)))
        .copied()
        .collect()
}

/// A pod's skip-subnets annotations after the rule: [`ANNOTATION`] and [`ADDED_ANNOTATION`],
/// each `None` when it is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotations {
    /// The value Linkerd-CNI reads.
    pub value: Option<String>,
    /// What the rules added to it.
    pub added: Option<String>,
}

/// The pod's annotations with `subnets` skipped, from what it has now (`pod`: its
/// [`ANNOTATION`], `added`: its [`ADDED_ANNOTATION`]), its namespace's [`ANNOTATION`] and the
/// plugin's own `subnets-to-ignore`.
///
/// The pod's own entries are its value without what the rules added before. A pod value
/// replaces the namespace's and the plugin's, so the new value is the list Linkerd-CNI would
/// use without it (the pod's own entries, else the namespace's, else the plugin's), then each
/// subnet not in it; and the record is every entry the pod did not hold itself. With no subnet
/// to skip, the pod gets back its own entries (none: the annotation goes, and Linkerd-CNI
/// reads the namespace's or the plugin's again). The same input gives the same output, and the
/// output as input gives itself.
pub fn merge(
    pod: Option<&str>,
    added: Option<&str>,
    namespace: Option<&str>,
    plugin: &[String],
    subnets: &[IpNet],
) -> Annotations {
    let entries = |text: Option<&str>| -> Vec<String> {
        text.map(|t| {
            t.split(',')
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
    };
    let ours = entries(added);
    let own: Vec<String> = entries(pod)
        .into_iter()
        .filter(|e| !ours.contains(e))
        .collect();
    let joined = |list: &[String]| (!list.is_empty()).then(|| list.join(","));
    if subnets.is_empty() {
        return Annotations {
            value: joined(&own),
            added: None,
        };
    }
    let mut value = if !own.is_empty() {
        own.clone()
    } else if let Some(namespace) = namespace.filter(|n| !n.is_empty()) {
        entries(Some(namespace))
    } else {
        plugin.to_vec()
    };
    for subnet in subnets {
        let text = subnet.to_string();
        if !value.contains(&text) {
            value.push(text);
        }
    }
    let record: Vec<String> = value.iter().filter(|e| !own.contains(e)).cloned().collect();
    Annotations {
        value: joined(&value),
        added: joined(&record),
    }
}

#[cfg(test)]
mod tests {
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
            .map(|(nad, ipam)| Network { nad, ipam })
            .collect();
        secondary_subnets(&networks, &nets(cluster), ipv6)
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
}
