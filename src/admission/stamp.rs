//! The config-hash stamp of a pod: on CREATE, the webhook records in
//! [`HASH_ANNOTATION`] the hash of the config of the NAD the pod attaches in
//! its namespace, as the cluster holds it now: the config Multus gives the
//! pod's sandbox. `linkerd multus check --proxy` compares it with the config
//! of the live ConfigMap to name the pods started under an older one. The
//! rule is `configRollout: all`'s ([`rollout::wanted`]) with the hash of
//! [`rollout::config_hash`], so a rendered pod template and a pod the webhook
//! stamps carry the same value for the same config.

use std::collections::BTreeMap;

use compact_str::CompactString;

use super::{Edit, MissingNad, NadCheck, Request, Strings};
use crate::linkerd_cni::rollout::{self, Change, ConfigRollout, HASH_ANNOTATION, Unstamped};
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::PluginSettings;
use crate::multus::ipam::{Ipam, IpamError};
use crate::network_resources::{NadTable, Nads};

/// NADs with the hashes of their configs: what the missing-NAD check and the
/// config-hash stamp read.
pub trait NadConfigs: Nads {
    /// The [`rollout::config_hash`] of the `spec.config` of NAD `name` in
    /// `namespace`; `None` when it has none or does not exist.
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str>;
    /// What NAD `name` in `namespace` runs when its `spec.config` runs no
    /// Linkerd-CNI plugin ([`other_network`](crate::linkerd_cni::cni_config::other_network));
    /// `None` when it does, has no config, or does not exist.
    fn other_network(&self, namespace: &str, name: &str) -> Option<&str>;
    /// The IPAM of NAD `name` in `namespace` when it is not Linkerd-CNI's; `None` when it
    /// is, has no config, or does not exist.
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>>;
    /// Linkerd-CNI's settings in NAD `name` of `namespace`; `None` when it runs no
    /// Linkerd-CNI, has no config, or does not exist.
    fn plugin_settings(&self, namespace: &str, name: &str) -> Option<&PluginSettings>;
}

/// A table of annotations holds no config: its NADs have no hash.
impl NadConfigs for NadTable {
    fn config_hash(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn other_network(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn ipam(&self, _: &str, _: &str) -> Option<&Result<Ipam, IpamError>> {
        None
    }
    fn plugin_settings(&self, _: &str, _: &str) -> Option<&PluginSettings> {
        None
    }
}

/// The hash a pod should carry, or why it should carry none; `None` when the
/// webhook leaves the annotation as it is: on UPDATE (the pod runs under the
/// config it was created with, which an UPDATE does not change), and when it
/// reads no NAD (no check, or `--missing-nad ignore`). `attached` says
/// whether the rules attach the pod; its NAD is looked up only then.
pub(super) fn wanted(
    request: &Request,
    settings: &Settings,
    check: Option<&NadCheck<'_>>,
    attached: bool,
) -> Option<Result<CompactString, Unstamped>> {
    let check = check.filter(|c| c.policy != MissingNad::Ignore)?;
    if request.operation != "CREATE" {
        return None;
    }
    if !attached {
        return Some(Err(Unstamped::NotAttached));
    }
    let (namespace, nad) = (&*request.namespace, &*settings.nad_name);
    if check.nads.annotations(namespace, nad).is_none() {
        return Some(Err(Unstamped::NoNad));
    }
    let hash = check.nads.config_hash(namespace, nad);
    // `all` reads no label.
    let labels = BTreeMap::new();
    Some(rollout::wanted(ConfigRollout::All, true, &labels, hash))
}

/// The edit that brings the pod's annotation to `wanted`, and the change it
/// makes; `None` when it already is. What [`rollout::stamp`] does to a tree.
pub(super) fn edit(
    annotations: Option<&Strings>,
    wanted: Result<CompactString, Unstamped>,
) -> Option<(Edit, Change)> {
    let current = annotations.and_then(|a| a.get(HASH_ANNOTATION));
    match (wanted, current) {
        (Ok(hash), Some(member)) if member.text() == Some(hash.as_str()) => None,
        (Ok(hash), None) => Some(((HASH_ANNOTATION, Some(hash.clone())), Change::Set(hash))),
        (Ok(hash), Some(member)) => {
            let from = member.text().unwrap_or_default().into();
            let edit = (HASH_ANNOTATION, Some(hash.clone()));
            Some((edit, Change::Changed { from, to: hash }))
        }
        (Err(_), None) => None,
        (Err(why), Some(_)) => Some(((HASH_ANNOTATION, None), Change::Removed(why))),
    }
}
