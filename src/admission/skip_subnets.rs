//! The secondary-network rule in the webhook: on CREATE, a pod the Linkerd-CNI rules attach
//! and that opted in skips the subnets of its secondary networks, read from the NAD cache
//! ([`skip_subnets::plan()`], as the render does). On UPDATE the annotation is left as it is:
//! Linkerd-CNI read it when the pod's sandbox was made, and a new value would not change the
//! rules the pod runs with.

use super::{NadCheck, Refusal, Request};
use crate::k8s::namespace::Lookup;
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::{self, Context, NadIpams, Planned};
use crate::multus::ipam::{Ipam, IpamError};

use super::NadConfigs;

/// The NADs of the missing-NAD check, each asked for as the check asks (so that a NAD the
/// cache lacks is waited for or read live), then for its IPAM.
struct Ipams<'a>(&'a dyn NadConfigs);

impl NadIpams for Ipams<'_> {
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.0.annotations(namespace, name)?;
        self.0.ipam(namespace, name)
    }
}

/// The rule on a pod of `request` whose annotations are `annotations` and whose networks
/// annotation after the Linkerd-CNI rules is `networks`. Its NAD reads go through `check`;
/// without one (`--missing-nad ignore`) a pod that needs them is a problem.
pub(super) fn plan(
    request: &Request,
    annotations: &dyn Lookup,
    networks: Option<&str>,
    attached: bool,
    (namespace, settings, check): (&dyn Lookup, &Settings, Option<&NadCheck<'_>>),
) -> Result<Planned, Refusal> {
    if request.operation != "CREATE" {
        return Ok(Planned::default());
    }
    let pod_namespace = &*request.namespace;
    let ipams = check.map(|c| Ipams(c.nads));
    // Asked only for an attached pod whose annotations the rule acts on (its Linkerd-CNI NAD,
    // which the missing-NAD check reads anyway): what the NAD's config says is kept apart from
    // its cache entry, one more read from memory no other review makes.
    let plugin = check
        .filter(|_| {
            attached && skip_subnets::reads_nads(annotations, namespace, settings, attached)
        })
        .and_then(|c| {
            c.nads.annotations(pod_namespace, &settings.nad_name)?;
            c.nads.plugin_settings(pod_namespace, &settings.nad_name)
        });
    let cx = Context {
        settings,
        pod_namespace,
        namespace,
        nads: ipams.as_ref().map(|i| i as &dyn NadIpams),
        plugin,
    };
    skip_subnets::plan(annotations, networks, attached, &cx)
        .map_err(|e| Refusal::Problem(e.to_string()))
}
