//! The flags of the Linkerd-CNI settings that more than one command takes:
//! the NAD's name and the control plane's namespace (`render`, `webhook` and
//! `controller`), those that decide a pod (`render` and `webhook`) and those
//! that make a NAD's config (`render` and `controller`); and the settings they
//! give, resolved with a `--config` file and the environment. Each is also
//! read from `LINKERD_MULTUS_<NAME>`; flags win.

use std::path::Path;

use clap::Args;

use crate::linkerd_cni;
use crate::pipeline::FunctionConfig;
use crate::pipeline::environment::{self, Environment};
use crate::pipeline::settings::{self, Given, Sources, Takes};

/// The NAD's name and the namespace whose pods are always attached.
#[derive(Args)]
pub struct NameSettings {
    /// The Linkerd control-plane namespace [default: linkerd].
    #[arg(long, value_name = "NAMESPACE")]
    linkerd_namespace: Option<String>,
    /// Name of the NetworkAttachmentDefinition [default: linkerd-cni].
    #[arg(long, value_name = "NAME")]
    nad_name: Option<String>,
}

impl NameSettings {
    /// The flags given, by settings key.
    pub fn flags(self) -> Vec<(&'static str, String)> {
        given([
            ("linkerdNamespace", self.linkerd_namespace),
            ("nadName", self.nad_name),
        ])
    }
}

/// The settings that decide a pod.
#[derive(Args)]
pub struct PodSettings {
    #[command(flatten)]
    names: NameSettings,
    /// Namespace annotation holding the OpenShift UID range.
    #[arg(long, value_name = "KEY")]
    uid_range_annotation: Option<String>,
    /// Offset of the proxy UID in that range [default: 2102].
    #[arg(long, value_name = "N")]
    proxy_uid_offset: Option<String>,
    /// Meshed pods skip the subnets of their secondary networks
    /// (config.linkerd.io/skip-subnets) unless they or their namespace say
    /// otherwise (multus.linkerd.io/skip-secondary-subnets): enabled or
    /// disabled [default: disabled]
    #[arg(long, value_name = "enabled|disabled")]
    skip_secondary_subnets: Option<String>,
    /// The cluster's pod and service CIDRs, comma-separated: no skipped
    /// subnet may overlap them (10.244.0.0/16,10.96.0.0/12)
    #[arg(long, value_name = "CIDRS")]
    cluster_cidrs: Option<String>,
    /// Other networks that stay meshed (node networks, load-balancer pools),
    /// comma-separated: no skipped subnet may overlap them either
    #[arg(long, value_name = "CIDRS")]
    protected_cidrs: Option<String>,
}

impl PodSettings {
    /// The flags given, by settings key.
    pub fn flags(self) -> Vec<(&'static str, String)> {
        let mut flags = self.names.flags();
        flags.extend(given([
            ("uidRangeAnnotation", self.uid_range_annotation),
            ("proxyUIDOffset", self.proxy_uid_offset),
            ("skipSecondarySubnets", self.skip_secondary_subnets),
            ("clusterCIDRs", self.cluster_cidrs),
            ("protectedCIDRs", self.protected_cidrs),
        ]));
        flags
    }
}

/// The settings that make a NAD's config from the Linkerd-CNI ConfigMap.
#[derive(Args)]
pub struct NadSettings {
    /// Namespace of the Linkerd-CNI ConfigMap [default: linkerd-cni].
    #[arg(long, value_name = "NAMESPACE")]
    cni_namespace: Option<String>,
    /// Kubeconfig path the CNI plugin uses [default: from the ConfigMap].
    #[arg(long, value_name = "PATH")]
    cni_kubeconfig: Option<String>,
    /// cniVersion added to NAD configs that have none [default: 0.3.0].
    #[arg(long, value_name = "VERSION")]
    cni_version: Option<String>,
}

impl NadSettings {
    /// The flags given, by settings key.
    pub fn flags(self) -> Vec<(&'static str, String)> {
        given([
            ("cniNamespace", self.cni_namespace),
            ("cniKubeconfig", self.cni_kubeconfig),
            ("cniVersion", self.cni_version),
        ])
    }
}

/// The flags among `flags` that were given.
pub fn given<const N: usize>(
    flags: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    flags
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect()
}

/// The Linkerd-CNI settings of `webhook` and `controller`: `--config`, then
/// `LINKERD_MULTUS_*`, then the flags, each naming itself in errors.
pub fn linkerd_cni_settings(
    config: Option<&Path>,
    flags: Vec<(&'static str, String)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<linkerd_cni::settings::Settings, settings::Error> {
    let mut sources = Sources::new(Takes::LinkerdMultus);
    if let Some(path) = config {
        sources.given = Given::File {
            source: "--config",
            path,
        };
    }
    sources.environment = Some(Environment {
        read: env,
        argocd: false,
        namespace_variables: &[],
    });
    sources.flags = environment::flags(flags);
    match settings::resolve(sources)? {
        FunctionConfig::LinkerdMultus(settings) => Ok(settings),
        _ => unreachable!("--config takes LinkerdMultus settings only"),
    }
}
