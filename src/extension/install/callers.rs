//! Who may reach the webhook's port 8443: the `from` of the NetworkPolicy's `https` rule. The
//! API server alone, where `install` can tell where it calls from: the ranges given
//! (`--api-server-cidr`); on OpenShift, host-network traffic (its API server runs on the
//! host's network); elsewhere, the addresses the cluster lists for the API server (the
//! EndpointSlice `default/kubernetes`, [`super::cluster::api_server_addresses`]). Where none is
//! known, every address, and a warning that says so.

use std::net::IpAddr;

use super::exclusions::Platform;
use super::options::Options;
use crate::yaml::Node;

/// The namespace label OpenShift's network plugins match host-network traffic by (the
/// `namespaceSelector` of a NetworkPolicy that admits it).
pub const HOST_NETWORK_LABEL: &str = "policy-group.network.openshift.io/host-network";

/// Where the object the API server lists its own addresses in is.
pub const API_SERVER_ENDPOINTS: &str = "EndpointSlice default/kubernetes";

/// Where the webhook's callers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callers {
    /// The ranges given (`--api-server-cidr`, `apiServerCIDRs`).
    Given(Vec<String>),
    /// OpenShift: host-network traffic, which the API server's is.
    HostNetwork,
    /// The API server's addresses as the cluster lists them, one block each.
    Listed(Vec<IpAddr>),
    /// Every address: nothing narrower is known.
    Everyone(Unknown),
}

/// Why no narrower source is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// The cluster was not read (`--ignore-cluster`, or a rendering with no cluster).
    NotRead,
    /// Reading it failed: why.
    Unreadable(String),
    /// It lists no address for the API server (e.g. one on a loopback address).
    Unlisted,
}

impl Callers {
    /// The callers the options alone tell; `None` when the cluster must be read.
    pub fn given(options: &Options) -> Option<Callers> {
        if !options.api_server_cidrs.is_empty() {
            return Some(Callers::Given(options.api_server_cidrs.clone()));
        }
        (options.platform == Platform::OpenShift).then_some(Callers::HostNetwork)
    }

    /// The callers of the options, the cluster unread.
    pub fn unread(options: &Options) -> Callers {
        Callers::given(options).unwrap_or(Callers::Everyone(Unknown::NotRead))
    }

    /// The callers from what reading the cluster gave.
    pub fn read(addresses: anyhow::Result<Vec<IpAddr>>) -> Callers {
        match addresses {
            Ok(addresses) if addresses.is_empty() => Callers::Everyone(Unknown::Unlisted),
            Ok(addresses) => Callers::Listed(addresses),
            Err(e) => Callers::Everyone(Unknown::Unreadable(
                crate::extension::client::anyhow_text(&e),
            )),
        }
    }

    /// Whether every address may reach the port.
    pub fn everyone(&self) -> bool {
        match self {
            Callers::Given(cidrs) => cidrs.iter().any(|c| c.ends_with("/0")),
            Callers::HostNetwork | Callers::Listed(_) => false,
            Callers::Everyone(_) => true,
        }
    }

    /// The note or warning for stderr, if any.
    pub fn note(&self) -> Option<String> {
        const PASS: &str = "pass --api-server-cidr (apiServerCIDRs) with your control plane's addresses, once for each range, to admit only the API server";
        const OPEN: &str =
            "warning: the NetworkPolicy admits the webhook's port 8443 from every address";
        match self {
            Callers::Given(_) if !self.everyone() => None,
            Callers::Given(_) | Callers::Everyone(Unknown::NotRead) => {
                Some(format!("{OPEN}: {PASS}"))
            }
            Callers::HostNetwork => None,
            Callers::Listed(addresses) => Some(format!(
                "note: the NetworkPolicy admits the webhook's port 8443 only from the API server's addresses, as the {API_SERVER_ENDPOINTS} lists them ({}); if it calls webhooks from other addresses (several control-plane networks, a konnectivity agent, the tunnel address some network plugins give the host's traffic), pass --api-server-cidr with their ranges, once for each",
                cidrs(addresses).join(", ")
            )),
            Callers::Everyone(Unknown::Unlisted) => Some(format!(
                "{OPEN}: the {API_SERVER_ENDPOINTS} lists no address of the API server; {PASS}"
            )),
            Callers::Everyone(Unknown::Unreadable(why)) => Some(format!(
                "{OPEN}: reading the API server's addresses from the {API_SERVER_ENDPOINTS} failed ({why}); {PASS}"
            )),
        }
    }

    /// The `from` of the NetworkPolicy's `https` rule; `None` keeps the package's (every
    /// address).
    pub fn from(&self) -> Option<Vec<Node>> {
        let block = |cidr: &str| {
            Node::mapping([("ipBlock", Node::mapping([("cidr", Node::string(cidr))]))])
        };
        match self {
            Callers::Given(cidrs) => Some(cidrs.iter().map(|c| block(c)).collect()),
            Callers::Listed(addresses) => Some(cidrs(addresses).iter().map(|c| block(c)).collect()),
            Callers::HostNetwork => Some(vec![Node::mapping([(
                "namespaceSelector",
                Node::mapping([(
                    "matchLabels",
                    Node::mapping([(HOST_NETWORK_LABEL, Node::string(""))]),
                )]),
            )])]),
            Callers::Everyone(_) => None,
        }
    }
}

/// One block for each address: `/32` or `/128`.
fn cidrs(addresses: &[IpAddr]) -> Vec<String> {
    addresses
        .iter()
        .map(|a| match a {
            IpAddr::V4(_) => format!("{a}/32"),
            IpAddr::V6(_) => format!("{a}/128"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(cidrs: &[&str], platform: Platform) -> Options {
        Options {
            api_server_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
            platform,
            ..Options::default()
        }
    }

    #[test]
    fn the_options_tell_the_callers_or_the_cluster_must_be_read() {
        use Platform::*;
        for (cidrs, platform, want) in [
            (&[][..], Kubernetes, None),
            (&[][..], OpenShift, Some(Callers::HostNetwork)),
            (
                &["10.0.0.0/24"][..],
                OpenShift,
                Some(Callers::Given(vec!["10.0.0.0/24".into()])),
            ),
            (
                &["10.0.0.0/24"][..],
                Kubernetes,
                Some(Callers::Given(vec!["10.0.0.0/24".into()])),
            ),
        ] {
            assert_eq!(Callers::given(&options(cidrs, platform)), want, "{cidrs:?}");
        }
    }

    #[test]
    fn who_may_reach_the_port_and_what_is_said() {
        let v4: IpAddr = "192.0.2.10".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let given = |c: &[&str]| Callers::Given(c.iter().map(|c| c.to_string()).collect());
        for (callers, everyone, from, note) in [
            (given(&["10.0.0.0/24"]), false, Some("10.0.0.0/24"), None),
            (
                given(&["10.0.0.0/24", "::/0"]),
                true,
                Some("10.0.0.0/24 ::/0"),
                Some(
                    "warning: the NetworkPolicy admits the webhook's port 8443 from every address: pass --api-server-cidr",
                ),
            ),
            (Callers::HostNetwork, false, Some(HOST_NETWORK_LABEL), None),
            (
                Callers::Listed(vec![v4, v6]),
                false,
                Some("192.0.2.10/32 2001:db8::1/128"),
                Some(
                    "note: the NetworkPolicy admits the webhook's port 8443 only from the API server's addresses, as the EndpointSlice default/kubernetes lists them (192.0.2.10/32, 2001:db8::1/128);",
                ),
            ),
            (
                Callers::Everyone(Unknown::NotRead),
                true,
                None,
                Some(
                    "warning: the NetworkPolicy admits the webhook's port 8443 from every address: pass --api-server-cidr",
                ),
            ),
            (
                Callers::read(Ok(vec![])),
                true,
                None,
                Some(
                    "from every address: the EndpointSlice default/kubernetes lists no address of the API server; pass --api-server-cidr",
                ),
            ),
            (
                Callers::read(Err(anyhow::anyhow!("forbidden"))),
                true,
                None,
                Some(
                    "from every address: reading the API server's addresses from the EndpointSlice default/kubernetes failed (forbidden); pass --api-server-cidr",
                ),
            ),
        ] {
            assert_eq!(callers.everyone(), everyone, "{callers:?}");
            let got = callers.from().map(|nodes| {
                nodes
                    .iter()
                    .map(|n| {
                        n.get_path(&["ipBlock", "cidr"])
                            .and_then(Node::as_str)
                            .map(str::to_string)
                            .unwrap_or_else(|| HOST_NETWORK_LABEL.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            assert_eq!(got.as_deref(), from, "{callers:?}");
            match (callers.note(), note) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{callers:?}: {got:?}, want {want:?}"),
            }
        }
    }
}
