//! What Linkerd-CNI reads for a pod's skip-subnets: its own settings in a NAD's config
//! (`subnets-to-ignore`, `ipv6`), the list it uses for a pod, and which subnets that list
//! leaves out, as `check --proxy` and the rule read them.

use std::collections::{BTreeSet, HashSet};

use ipnet::IpNet;

use crate::linkerd_cni::cni_config::PLUGIN_TYPE;
use crate::work;

/// What Linkerd-CNI's own settings say (the `linkerd` section of its plugin in the NAD config):
/// its `subnets-to-ignore`, which a pod or namespace [`ANNOTATION`](super::ANNOTATION)
/// replaces, and `ipv6`.
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
    serde_json::from_str::<serde_json::Value>(config)
        .ok()
        .and_then(|value| linkerd_cni_settings(&value))
        .unwrap_or_default()
}

/// The [`PluginSettings`] of a parsed NAD config; `None` when no plugin of it is
/// [`PLUGIN_TYPE`].
pub fn linkerd_cni_settings(config: &serde_json::Value) -> Option<PluginSettings> {
    let plugins = match config.get("plugins").and_then(|p| p.as_array()) {
        Some(plugins) => plugins.iter().collect::<Vec<_>>(),
        None => vec![config],
    };
    let plugin = plugins
        .iter()
        .find(|p| p.get("type").and_then(|t| t.as_str()) == Some(PLUGIN_TYPE))?;
    let Some(linkerd) = plugin.get("linkerd") else {
        return Some(PluginSettings::default());
    };
    Some(PluginSettings {
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
    })
}

/// The skip-subnets Linkerd-CNI uses for a pod: its [`ANNOTATION`](super::ANNOTATION) when
/// set, else its namespace's, else the plugin's list; each entry as written.
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
/// nothing: iptables would refuse it). An entry covers a subnet when it holds the subnet's
/// network at the entry's own prefix length, so each subnet is looked up once per prefix
/// length the entries use: linear in both lists.
pub fn uncovered(subnets: &[IpNet], skipped: &[&str]) -> Vec<IpNet> {
    work::count(skipped.len());
    let entries: HashSet<IpNet> = skipped
        .iter()
        .filter_map(|e| e.parse::<IpNet>().ok())
        .map(|e| e.trunc())
        .collect();
    let lengths: BTreeSet<(bool, u8)> = entries
        .iter()
        .map(|e| (e.addr().is_ipv4(), e.prefix_len()))
        .collect();
    subnets
        .iter()
        .filter(|s| {
            !lengths.iter().any(|&(v4, len)| {
                work::count(1);
                v4 == s.addr().is_ipv4()
                    && len <= s.prefix_len()
                    && IpNet::new(s.addr(), len).is_ok_and(|at| entries.contains(&at.trunc()))
            })
        })
        .copied()
        .collect()
}
