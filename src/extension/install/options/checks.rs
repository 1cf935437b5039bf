//! The checks of the settings: the defaults where nothing is given, the
//! values (names, the image, the CIDRs in canonical form) and how they combine,
//! each refusal naming the flag, the file's field and what to do.

use std::net::IpAddr;

use crate::k8s::image;
use crate::k8s::names::is_dns1123_label;

use super::super::super::DEFAULT_NAMESPACE;
use super::super::super::ownership;
use super::super::exclusions;
use super::{DEFAULT_IMAGE, Options, OptionsError, Settings, strings};

impl Settings {
    /// The checked options: the defaults where nothing is given.
    pub fn resolve(self) -> Result<Options, OptionsError> {
        let defaults = Options::default();
        let cni_given = self.cni_namespace.is_some();
        let pacing_given = self.restart_concurrency.is_some() || self.restart_deadline.is_some();
        let cidrs = |texts: Option<Vec<String>>, option: &str| {
            (texts.unwrap_or_default().iter())
                .map(|text| cidr(text, option))
                .collect::<Result<Vec<_>, _>>()
                .map_err(OptionsError::Invalid)
        };
        let api_server_cidrs = cidrs(self.api_server_cidrs, API_SERVER_CIDR)?;
        let cluster_cidrs = cidrs(self.cluster_cidrs, CLUSTER_CIDR)?;
        let protected_cidrs = cidrs(self.protected_cidrs, PROTECTED_CIDR)?;
        let platform = self.platform.unwrap_or(defaults.platform);
        let mut webhook_excluded_namespaces = strings(platform.excluded_namespaces());
        for pattern in self.webhook_excluded_namespaces.unwrap_or_default() {
            if !webhook_excluded_namespaces.contains(&pattern) {
                webhook_excluded_namespaces.push(pattern);
            }
        }
        let options = Options {
            namespace: self.namespace.unwrap_or(defaults.namespace),
            linkerd_namespace: self.linkerd_namespace.unwrap_or(defaults.linkerd_namespace),
            image: self.image.unwrap_or(defaults.image),
            platform,
            replicas: self.replicas.unwrap_or(defaults.replicas),
            failure_policy: self.failure_policy.unwrap_or(defaults.failure_policy),
            priority_class_name: self
                .priority_class_name
                .unwrap_or(defaults.priority_class_name),
            manage_nads: self.manage_nads.unwrap_or(defaults.manage_nads),
            cni_namespace: self.cni_namespace.unwrap_or(defaults.cni_namespace),
            restart_stale_workloads: self
                .restart_stale_workloads
                .unwrap_or(defaults.restart_stale_workloads),
            restart_concurrency: self
                .restart_concurrency
                .unwrap_or(defaults.restart_concurrency),
            restart_deadline: self.restart_deadline.unwrap_or(defaults.restart_deadline),
            network_resources: self.network_resources.unwrap_or(defaults.network_resources),
            monitoring: self.monitoring.unwrap_or(defaults.monitoring),
            skip_secondary_subnets: self
                .skip_secondary_subnets
                .unwrap_or(defaults.skip_secondary_subnets),
            cluster_cidrs,
            protected_cidrs,
            certs: self.certs.unwrap_or(defaults.certs),
            ignore_cluster: self.ignore_cluster.unwrap_or(defaults.ignore_cluster),
            api_server_cidrs,
            metrics_namespaces: self
                .metrics_namespaces
                .unwrap_or_else(|| strings(platform.metrics_namespaces())),
            webhook_excluded_namespaces,
            day2: (self.day2)
                .resolve(self.manage_nads.unwrap_or(defaults.manage_nads))
                .map_err(OptionsError::Invalid)?,
        };
        options.check(cni_given, pacing_given)?;
        Ok(options)
    }
}

impl Options {
    /// Checks the values and how they combine; `cni_given` and `pacing_given` say
    /// whether the CNI namespace, and the restarts' concurrency or deadline, were set
    /// rather than defaulted.
    fn check(&self, cni_given: bool, pacing_given: bool) -> Result<(), OptionsError> {
        let invalid = |message: String| Err(OptionsError::Invalid(message));
        for (flag, key, value) in [
            ("--namespace", "namespace", &self.namespace),
            (
                "--linkerd-namespace",
                "linkerdNamespace",
                &self.linkerd_namespace,
            ),
            ("--cni-namespace", "cniNamespace", &self.cni_namespace),
        ] {
            if !is_dns1123_label(value) {
                return invalid(format!(
                    "{flag} ({key}) {value:?} is not a namespace name: lower-case letters, digits and '-', at most 63"
                ));
            }
        }
        if let Some(whose) = ownership::reserved(
            &self.namespace,
            &self.linkerd_namespace,
            &self.cni_namespace,
        ) {
            return invalid(format!(
                "--namespace (namespace) {:?} is {whose}: install puts linkerd-multus only in a namespace of its own, which uninstall deletes with everything in it; choose another (the default is {DEFAULT_NAMESPACE})",
                self.namespace
            ));
        }
        if let Err(why) = image::check_pinned(&self.image) {
            return invalid(format!(
                "--image (image) {:?} {why}: write REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST, e.g. mirror.example:5000/linkerd/multus:v0.1.0 (the default is {DEFAULT_IMAGE})",
                self.image
            ));
        }
        if self.metrics_namespaces.is_empty() {
            return invalid(
                "--metrics-namespace (metricsNamespaces) is empty: give the namespace of the Prometheus that scrapes the webhook (the default is monitoring; on OpenShift, openshift-monitoring and openshift-user-workload-monitoring, which --platform openshift sets)".into(),
            );
        }
        for name in &self.metrics_namespaces {
            if !is_dns1123_label(name) {
                return invalid(format!(
                    "--metrics-namespace (metricsNamespaces) {name:?} is not a namespace name: lower-case letters, digits and '-', at most 63"
                ));
            }
        }
        for pattern in &self.webhook_excluded_namespaces {
            if let Err(why) = exclusions::check(pattern) {
                return invalid(format!(
                    "--webhook-excluded-namespace (webhookExcludedNamespaces) {pattern:?} {why}"
                ));
            }
            if exclusions::excludes(pattern, &self.linkerd_namespace) {
                let from = match self
                    .platform
                    .excluded_namespaces()
                    .contains(&pattern.as_str())
                {
                    true => format!(" (from --platform {})", self.platform.as_str()),
                    false => String::new(),
                };
                return invalid(format!(
                    "--webhook-excluded-namespace (webhookExcludedNamespaces) {pattern:?}{from} keeps the Linkerd control plane's namespace {} away from the webhook: its pods would start without linkerd-cni; leave it out, or name the namespaces to keep away one by one",
                    self.linkerd_namespace
                ));
            }
        }
        if !is_dns1123_subdomain(&self.priority_class_name) {
            return invalid(format!(
                "--priority-class-name (priorityClassName) {:?} is not a PriorityClass name: lower-case letters, digits, '-' and '.', at most 253",
                self.priority_class_name
            ));
        }
        if self.replicas == 0 {
            return invalid(
                "--replicas (replicas) 0: with no replica the webhook answers nothing; give at least 1 (2 keeps it up through a node drain)".into(),
            );
        }
        if self.skip_secondary_subnets && self.cluster_cidrs.is_empty() {
            return invalid(format!(
                "--skip-secondary-subnets (skipSecondarySubnets) enabled needs {CLUSTER_CIDR}: without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy, so the webhook refuses to start; give them, e.g. --cluster-cidr=10.244.0.0/16,10.96.0.0/12, or leave it disabled (pods then opt in by the annotation multus.linkerd.io/skip-secondary-subnets)"
            ));
        }
        if cni_given && !self.manage_nads {
            return invalid(format!(
                "--cni-namespace (cniNamespace) {:?} is for the NAD controller: add --manage-nads (manageNADs: true), or leave it out",
                self.cni_namespace
            ));
        }
        if self.restart_stale_workloads && !self.manage_nads {
            return invalid(
                "--restart-stale-workloads (restartStaleWorkloads) is for the NAD controller, which restarts the workloads after it updates their namespace's NAD: add --manage-nads (manageNADs: true), or leave it out".into(),
            );
        }
        if pacing_given && !self.restart_stale_workloads {
            return invalid(
                "--restart-concurrency (restartConcurrency) and --restart-deadline (restartDeadline) pace the NAD controller's restarts: add --restart-stale-workloads (restartStaleWorkloads: true), or leave them out".into(),
            );
        }
        Ok(())
    }
}

/// The option of the API server's CIDRs, as errors name it.
pub(super) const API_SERVER_CIDR: &str = "--api-server-cidr (apiServerCIDRs)";
/// The option of the cluster's CIDRs, as errors name it.
const CLUSTER_CIDR: &str = "--cluster-cidr (clusterCIDRs)";
/// The option of the protected CIDRs, as errors name it.
const PROTECTED_CIDR: &str = "--protected-cidr (protectedCIDRs)";

/// `text`, a value of `option`, as a CIDR in canonical form (`ADDRESS/PREFIX`,
/// no host bits set, IPv6 lower-case and shortened), as a NetworkPolicy's
/// `ipBlock` takes it; the error names the option and what to write instead.
pub(super) fn cidr(text: &str, option: &str) -> Result<String, String> {
    let bad = |why: String| format!("{option} {text:?} {why}");
    let Some((address, prefix)) = text.split_once('/') else {
        return Err(bad(
            "is not a CIDR: write ADDRESS/PREFIX, e.g. 10.0.0.0/24, or 10.0.0.5/32 for one address"
                .into(),
        ));
    };
    let address: IpAddr = address
        .parse()
        .map_err(|_| bad(format!("is not a CIDR: {address:?} is not an IP address")))?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max)
        .ok_or_else(|| bad(format!("is not a CIDR: the prefix must be 0 to {max}")))?;
    let network = match address {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::from((u32::from(a) & mask).to_be_bytes())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::from((u128::from(a) & mask).to_be_bytes())
        }
    };
    if network != address {
        return Err(bad(format!(
            "has host bits set: the network is {network}/{prefix}; write that, or {address}/{max} for the one address"
        )));
    }
    Ok(format!("{network}/{prefix}"))
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}
