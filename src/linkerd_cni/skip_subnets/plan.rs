//! The rule on one pod: whether it is on for the pod (its opt-in, else its namespace's, else
//! the setting, and the Linkerd-CNI rules attaching it), the subnets of the networks it
//! selects in its own namespace, and the edits of its annotations, or the problem.

use std::collections::HashSet;
use std::fmt;

use ipnet::IpNet;

use super::{
    ADDED_ANNOTATION, ANNOTATION, Guarded, NadIpams, Network, OPT_IN_ANNOTATION, PluginSettings,
    Refusal, Subnets, merge, secondary_subnets,
};
use crate::k8s::namespace::Lookup;
use crate::linkerd_cni::attach::Edit;
use crate::linkerd_cni::settings::Settings;
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks, NetworksError};
use crate::work;

/// What the rule reads besides the pod.
pub struct Context<'a> {
    /// The Linkerd-CNI settings: the default opt-in, the guarded networks, the NAD's name.
    pub settings: &'a Settings,
    /// The pod's namespace.
    pub pod_namespace: &'a str,
    /// Its namespace's annotations.
    pub namespace: &'a dyn Lookup,
    /// The NADs the front knows; `None` when it reads none.
    pub nads: Option<&'a dyn NadIpams>,
    /// The settings of the Linkerd-CNI NAD in the pod's namespace; `None` when there is none.
    pub plugin: Option<&'a PluginSettings>,
}

/// Why the rule cannot act on a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// An opt-in annotation that is neither `enabled` nor `disabled`.
    #[error(
        "annotation {OPT_IN_ANNOTATION} on {whose} is {value:?}, neither enabled nor disabled; write enabled to skip the subnets of the pod's secondary networks, or disabled"
    )]
    OptIn {
        /// `the pod` or `its namespace`.
        whose: &'static str,
        /// The value.
        value: String,
    },
    /// The subnets would open the mesh or fail the sandbox.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Subnets to skip, and no cluster networks to check them against.
    #[error(
        "the pod's secondary networks bring {subnets}, but the clusterCIDRs setting is not set: without the cluster's pod and service networks a subnet that overlaps them cannot be refused, so none is written; set clusterCIDRs (for example 10.244.0.0/16,10.96.0.0/12)"
    )]
    NoClusterCidrs {
        /// The subnets, as a list.
        subnets: String,
    },
    /// The networks annotation does not read.
    #[error("annotation {NETWORKS_ANNOTATION}: {0}")]
    Networks(#[from] NetworksError),
    /// The front reads no NAD.
    #[error(
        "{OPT_IN_ANNOTATION} is enabled, but this webhook reads no NetworkAttachmentDefinition (--missing-nad ignore, without the network-resources rules), so the subnets of the pod's secondary networks are unknown; run it with --missing-nad attach or deny"
    )]
    NoNads,
    /// No Linkerd-CNI NAD in the pod's namespace: its IPv6 and own list are unknown.
    #[error(
        "namespace {namespace} has no NetworkAttachmentDefinition {nad} yet, and its Linkerd-CNI config says which subnets it already skips and whether it runs with IPv6: the subnets of the pod's secondary networks cannot be written before it exists"
    )]
    NoPlugin {
        /// The pod's namespace.
        namespace: String,
        /// The Linkerd-CNI NAD's name.
        nad: String,
    },
}

/// What the rule changed on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// [`ANNOTATION`] set to this value.
    Set(String),
    /// [`ANNOTATION`] brought back to the pod's own value, or removed.
    TakenBack,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Set(value) => write!(
                f,
                "set {ANNOTATION} to {value} for the subnets of the secondary networks"
            ),
            Change::TakenBack => write!(
                f,
                "took the secondary networks' subnets back out of {ANNOTATION}"
            ),
        }
    }
}

/// What the rule does to one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planned {
    /// The annotation edits: [`ANNOTATION`], then [`ADDED_ANNOTATION`].
    pub edits: Vec<Edit>,
    /// What changed, if anything did.
    pub change: Option<Change>,
    /// What the user should know.
    pub warnings: Vec<String>,
}

/// Whether the rule is on for a pod: its [`OPT_IN_ANNOTATION`], else its namespace's, else
/// the setting. An empty value counts as unset.
fn opted_in(
    annotations: &dyn Lookup,
    namespace: &dyn Lookup,
    settings: &Settings,
) -> Result<bool, Problem> {
    for (lookup, whose) in [(annotations, "the pod"), (namespace, "its namespace")] {
        if let Some(value) = lookup.lookup(OPT_IN_ANNOTATION).filter(|v| !v.is_empty()) {
            return crate::k8s::namespace::switch(value).ok_or_else(|| Problem::OptIn {
                whose,
                value: value.to_string(),
            });
        }
    }
    Ok(settings.skip_secondary_subnets)
}

/// Whether the rule is on for a pod (it opted in and the Linkerd-CNI rules attach it), and
/// what the rule added to it before: [`plan`] changes nothing when neither.
fn state<'a>(
    annotations: &'a dyn Lookup,
    namespace: &dyn Lookup,
    settings: &Settings,
    attached: bool,
) -> Result<(bool, Option<&'a str>), Problem> {
    let on = opted_in(annotations, namespace, settings)? && attached;
    Ok((on, annotations.lookup(ADDED_ANNOTATION)))
}

/// Whether [`plan`] reads more than the pod and its namespace for this pod: the plugin's
/// settings and the NADs it selects (a pod it finds a problem in counts too, so that `plan`
/// reports it). A front asks this before it looks the plugin's settings up.
pub fn reads_nads(
    annotations: &dyn Lookup,
    namespace: &dyn Lookup,
    settings: &Settings,
    attached: bool,
) -> bool {
    state(annotations, namespace, settings, attached)
        .map_or(true, |(on, added)| on || added.is_some())
}

/// The rule on one pod (template), whose annotations are `annotations` and whose networks
/// annotation, once the Linkerd-CNI rules are applied, is `networks`; `attached` says whether
/// they attach it. For an attached pod that opted in, [`ANNOTATION`] skips the subnets of
/// every network of its namespace it selects but Linkerd-CNI's ([`secondary_subnets`],
/// [`merge`]); for any other, what the rule added before is taken back. The KRM function, the
/// renderer and the webhook all call this.
pub fn plan(
    annotations: &dyn Lookup,
    networks: Option<&str>,
    attached: bool,
    cx: &Context<'_>,
) -> Result<Planned, Problem> {
    let (on, added) = state(annotations, cx.namespace, cx.settings, attached)?;
    if !on && added.is_none() {
        return Ok(Planned::default());
    }
    let mut planned = Planned::default();
    let mut subnets = Vec::new();
    if on {
        let found = secondary(networks, cx)?;
        if !found.subnets.is_empty() && cx.settings.cluster_cidrs.is_empty() {
            let subnets = found
                .subnets
                .iter()
                .map(IpNet::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Problem::NoClusterCidrs { subnets });
        }
        subnets = found.subnets;
        planned.warnings = found.warnings;
    }
    let no_list = Vec::new();
    let plugin_list = cx.plugin.map_or(&no_list, |p| &p.subnets_to_ignore);
    let current = annotations.lookup(ANNOTATION);
    let merged = merge(
        current,
        added,
        cx.namespace.lookup(ANNOTATION),
        plugin_list,
        &subnets,
    );
    if merged.value.as_deref() != current {
        planned.change = Some(match &merged.value {
            Some(value) if !subnets.is_empty() => Change::Set(value.clone()),
            _ => Change::TakenBack,
        });
        planned
            .edits
            .push((ANNOTATION, merged.value.map(Into::into)));
    }
    if merged.added.as_deref() != added {
        planned
            .edits
            .push((ADDED_ANNOTATION, merged.added.map(Into::into)));
    }
    Ok(planned)
}

/// The subnets of the networks `networks` selects in the pod's namespace but Linkerd-CNI's,
/// and the warnings (one for each NAD of another namespace).
pub(super) fn secondary(networks: Option<&str>, cx: &Context<'_>) -> Result<Subnets, Problem> {
    let networks = networks.map(Networks::parse).transpose()?;
    let selections = networks.as_ref().map_or(&[][..], Networks::selections);
    let nad_name = &cx.settings.nad_name;
    let mut read = Vec::new();
    let mut warnings = Vec::new();
    // A network selected twice (two interfaces on it) brings the same subnets: read it once.
    let mut seen = HashSet::new();
    let mut foreign = HashSet::new();
    for selection in selections {
        work::count(1);
        if selection.refers_to(nad_name, cx.pod_namespace) {
            continue;
        }
        let namespace = selection.namespace_or(cx.pod_namespace);
        let nad = format!("{namespace}/{}", selection.name);
        // Another namespace's NAD is not the pod's to trust: neither its subnets nor its
        // ranges (not even in the warning) come from it.
        if namespace != cx.pod_namespace {
            if foreign.insert(nad.clone()) {
                warnings.push(foreign_warning(&nad, namespace, cx.pod_namespace));
            }
            continue;
        }
        if !seen.insert((namespace, selection.name.as_str(), &selection.ips[..])) {
            continue;
        }
        let nads = cx.nads.ok_or(Problem::NoNads)?;
        match nads.ipam(namespace, &selection.name) {
            Some(ipam) => read.push((nad, ipam, &selection.ips[..])),
            None => warnings.push(format!(
                "NetworkAttachmentDefinition {nad} is not known here, so its subnets are not skipped and inbound TCP on that network is still sent to the proxy, which refuses it; put the NAD beside the workload"
            )),
        }
    }
    if read.is_empty() {
        return Ok(Subnets {
            subnets: Vec::new(),
            warnings,
        });
    }
    let plugin = cx.plugin.ok_or_else(|| Problem::NoPlugin {
        namespace: cx.pod_namespace.to_string(),
        nad: nad_name.clone(),
    })?;
    let networks: Vec<Network<'_>> = read
        .iter()
        .map(|(nad, ipam, ips)| Network { nad, ipam, ips })
        .collect();
    let mut found = secondary_subnets(&networks, Guarded::of(cx.settings), plugin.ipv6)?;
    warnings.append(&mut found.warnings);
    found.warnings = warnings;
    Ok(found)
}

/// The warning for a selection of NAD `nad` of `namespace`, not the pod's `pod_namespace`: it
/// names the NAD, and nothing of its IPAM.
fn foreign_warning(nad: &str, namespace: &str, pod_namespace: &str) -> String {
    format!(
        "NetworkAttachmentDefinition {nad} is in namespace {namespace}, not the pod's namespace {pod_namespace}: only the NADs of the pod's own namespace give subnets to skip, so none of it is skipped and inbound TCP on that network is still sent to the proxy, which refuses it; select a NAD of namespace {pod_namespace} for that network"
    )
}
