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
//! This module is the pure part: from the networks a pod selects in its own namespace (their
//! IPAM, read by [`crate::multus::ipam`]; another namespace's NAD is only warned about), the
//! subnets to skip ([`secondary_subnets`]), refused when they would open the mesh; and the
//! pod's new annotations ([`merge`]), which carry over the value Linkerd-CNI would otherwise
//! use and record what they added, so that a later render takes exactly that back. The rule
//! on one pod, which the render and the webhook call, puts them together ([`plan()`], in
//! `skip_subnets/plan.rs`). `check --proxy` reads a live pod with the same vocabulary: the list
//! Linkerd-CNI uses for it ([`effective`], with [`plugin_settings`]) and the subnets it leaves
//! out ([`uncovered`]).

use std::collections::HashSet;

use ipnet::IpNet;

use super::settings::Settings;
use crate::multus::ipam::{Ipam, IpamError};
use crate::work::{self, Distinct};

mod plan;
mod plugin;

pub use plan::{Change, Context, Planned, Problem, plan, reads_nads};
pub use plugin::{PluginSettings, effective, linkerd_cni_settings, plugin_settings, uncovered};

/// The annotation Linkerd-CNI reads.
pub const ANNOTATION: &str = "config.linkerd.io/skip-subnets";
/// What the rules added to [`ANNOTATION`], so that they can take it back (reversible): the
/// entries of the value the pod's own value did not hold.
pub const ADDED_ANNOTATION: &str = "multus.linkerd.io/skip-subnets";
/// The opt-in, on a pod (template) or its namespace: `enabled` or `disabled`; the pod's wins,
/// then the namespace's, then the `skipSecondarySubnets` setting.
pub const OPT_IN_ANNOTATION: &str = "multus.linkerd.io/skip-secondary-subnets";
/// The upstream issue behind the IPv6 refusal.
pub const IPV6_ISSUE: &str = "https://github.com/linkerd/linkerd2-proxy-init/issues/696";

/// The most distinct subnets the rule writes into one pod's [`ANNOTATION`] (the subnets cap):
/// Linkerd-CNI adds an iptables RETURN rule for each, which every inbound packet walks before
/// the redirect. One NAD at every cap of its IPAM (`multus::ipam`: ranges, addresses, routes)
/// with a selection's `ips` fits; a pod whose networks bring more is refused.
pub const MAX_SUBNETS: usize = 256;
/// The work budget of the rule on one pod: the ranges it examines, each NAD's subnets and
/// routes and each selection's `ips`, summed over the distinct networks the pod selects
/// (`multus::networks` caps the selections at 64). It holds the 8 largest NADs the caps allow
/// with room to spare, and far more than real pods select; past it the pod is refused
/// before any range is examined, so one review's work stays a few milliseconds.
pub const WORK_BUDGET: usize = 4096;

/// One network a pod selects: its NAD (`namespace/name`), what its IPAM says, and the
/// addresses the pod's selection asks for.
#[derive(Debug, Clone)]
pub struct Network<'a> {
    /// The NAD, as `namespace/name`.
    pub nad: &'a str,
    /// Its IPAM, or why it cannot be read.
    pub ipam: &'a Result<Ipam, IpamError>,
    /// The selection's `ips` (a static IPAM with the `ips` capability takes its addresses
    /// from there).
    pub ips: &'a [IpNet],
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
    /// A range that overlaps a protected network: the nodes', a load-balancer pool.
    #[error(
        "NetworkAttachmentDefinition {nad} brings {range}, which overlaps the protected network {protected}: skipping it would take traffic from that network away from the proxy (no mTLS, no policy); give the secondary network a range of its own, or correct the protectedCIDRs setting"
    )]
    Protected {
        /// The NAD.
        nad: String,
        /// The range.
        range: IpNet,
        /// The protected network it overlaps.
        protected: IpNet,
    },
    /// More ranges to examine than [`WORK_BUDGET`].
    #[error(
        "the pod's secondary networks bring {units} ranges to examine (the subnets and routes of each NAD and the ips of each selection, summed over the networks it selects); at most {WORK_BUDGET} are examined for one pod (the work budget): select fewer networks, or give their NADs fewer ranges and routes"
    )]
    OverBudget {
        /// The ranges to examine.
        units: usize,
    },
    /// More distinct subnets to write than [`MAX_SUBNETS`].
    #[error(
        "the pod's secondary networks bring more than {MAX_SUBNETS} distinct subnets to skip (NetworkAttachmentDefinition {nad} brings the one past it); at most {MAX_SUBNETS} are written to {ANNOTATION} (the subnets cap): Linkerd-CNI adds an iptables rule for each; summarize the networks' ranges and routes in fewer, wider ones"
    )]
    TooManySubnets {
        /// The NAD that brings the subnet past the cap.
        nad: String,
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

/// The networks no skipped subnet may overlap.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guarded<'a> {
    /// The cluster's pod and service networks (the `clusterCIDRs` setting).
    pub cluster: &'a [IpNet],
    /// Other networks that stay meshed: the nodes', load-balancer pools (the
    /// `protectedCIDRs` setting).
    pub protected: &'a [IpNet],
}

impl<'a> Guarded<'a> {
    /// The networks the settings guard.
    pub fn of(settings: &'a Settings) -> Self {
        Guarded {
            cluster: &settings.cluster_cidrs,
            protected: &settings.protected_cidrs,
        }
    }
}

/// The subnets `networks` bring, for a pod whose Linkerd-CNI has IPv6 `ipv6`, in a cluster
/// whose pod and service networks, and other networks that stay meshed, are `guarded`. With
/// IPv6 off, Linkerd-CNI sets up iptables only: IPv6 subnets are left out (its IPv6 traffic
/// is not redirected at all). With IPv6 on, any subnet is refused ([`Refusal::Ipv6`]).
pub fn secondary_subnets(
    networks: &[Network<'_>],
    guarded: Guarded<'_>,
    ipv6: bool,
) -> Result<Subnets, Refusal> {
    work::count(networks.len());
    let units: usize = networks
        .iter()
        .map(|network| match network.ipam {
            Ok(Ipam::Subnets { subnets, routes }) => {
                subnets.len() + routes.len() + network.ips.len()
            }
            _ => 0,
        })
        .sum();
    if units > WORK_BUDGET {
        return Err(Refusal::OverBudget { units });
    }
    let mut out = Subnets::default();
    let mut written = Distinct::default();
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
        let ips = network.ips.iter().map(IpNet::trunc);
        for range in subnets
            .iter()
            .copied()
            .chain(ips)
            .chain(routes.iter().copied())
        {
            let range = &range;
            // With IPv6 off, Linkerd-CNI redirects no IPv6 traffic: nothing of it to skip.
            if !ipv6 && matches!(range, IpNet::V6(_)) {
                continue;
            }
            if range.prefix_len() == 0 {
                return Err(Refusal::Everything { nad, range: *range });
            }
            work::count(guarded.cluster.len() + guarded.protected.len());
            if let Some(cluster) = guarded.cluster.iter().find(|c| overlap(c, range)) {
                return Err(Refusal::Overlap {
                    nad,
                    range: *range,
                    cluster: *cluster,
                });
            }
            if let Some(protected) = guarded.protected.iter().find(|p| overlap(p, range)) {
                return Err(Refusal::Protected {
                    nad,
                    range: *range,
                    protected: *protected,
                });
            }
            if ipv6 {
                return Err(Refusal::Ipv6 { nad, range: *range });
            }
            if written.insert(*range) && written.len() > MAX_SUBNETS {
                return Err(Refusal::TooManySubnets { nad });
            }
        }
    }
    out.subnets = written.into_vec();
    Ok(out)
}

/// Whether two networks share an address.
fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
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
                .map(|e| {
                    work::count(1);
                    e.to_string()
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let ours: HashSet<String> = entries(added).into_iter().collect();
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
    let mut present: HashSet<String> = value.iter().cloned().collect();
    for subnet in subnets {
        work::count(1);
        let text = subnet.to_string();
        if present.insert(text.clone()) {
            value.push(text);
        }
    }
    let own: HashSet<&String> = own.iter().collect();
    let record: Vec<String> = value.iter().filter(|e| !own.contains(e)).cloned().collect();
    Annotations {
        value: joined(&value),
        added: joined(&record),
    }
}

/// The IPAM of the NADs a front knows: those of a package, or the webhook's cache.
pub trait NadIpams {
    /// The IPAM of NAD `name` in `namespace`, or why it cannot be read; `None` when the NAD
    /// is not known.
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>>;
}

#[cfg(test)]
#[path = "skip_subnets_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "skip_subnets/bounds_tests.rs"]
mod bounds_tests;

#[cfg(test)]
#[path = "skip_subnets/scope_tests.rs"]
mod scope_tests;

#[cfg(test)]
#[path = "skip_subnets/plan_tests.rs"]
mod plan_tests;
