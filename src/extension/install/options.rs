//! The one configuration of the cluster side: what `install`'s flags set, or
//! the same settings in a `LinkerdMultusInstall` file (`--config`), flags
//! winning; checked into [`Options`], each problem naming the file, the field
//! and what to do.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use crate::k8s::image;
use crate::k8s::names::{is_dns1123_label, nearest};
use crate::krm::function_config::API_VERSION;
use crate::yaml::{Map, Node, parse_document};

use super::super::DEFAULT_NAMESPACE;
use super::super::ownership;
use super::exclusions::{self, Platform};

/// The kind of the settings file.
pub const KIND: &str = "LinkerdMultusInstall";

/// The settings keys of the file's `spec`, in the order the docs list them.
pub const KEYS: &[&str] = &[
    "namespace",
    "linkerdNamespace",
    "image",
    "platform",
    "replicas",
    "failurePolicy",
    "priorityClassName",
    "manageNADs",
    "cniNamespace",
    "restartStaleWorkloads",
    "restartConcurrency",
    "restartDeadline",
    "networkResources",
    "skipSecondarySubnets",
    "clusterCIDRs",
    "certs",
    "ignoreCluster",
    "apiServerCIDRs",
    "metricsNamespaces",
    "webhookExcludedNamespaces",
];

/// The image of the webhook's containers unless told otherwise: the packages' own.
pub const DEFAULT_IMAGE: &str = "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0";

/// What the API server does with a pod while the webhook cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Rejects the pod: its controller retries until the webhook answers.
    #[value(name = "Fail")]
    Fail,
    /// Admits the pod unchanged, without its attachment.
    #[value(name = "Ignore")]
    Ignore,
}

impl FailurePolicy {
    /// As the MutatingWebhookConfiguration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// Where the webhook's serving certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Certs {
    /// Made by `install` (or kept from the cluster): a Secret and the caBundle.
    Generate,
    /// Issued by cert-manager, its CA injected by cainjector.
    CertManager,
}

impl Certs {
    fn as_str(self) -> &'static str {
        match self {
            Certs::Generate => "generate",
            Certs::CertManager => "cert-manager",
        }
    }
}

/// The settings given, by the flags or the file: `None` where not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The extension's namespace.
    pub namespace: Option<String>,
    /// The Linkerd control plane's namespace.
    pub linkerd_namespace: Option<String>,
    /// The image of the webhook's containers.
    pub image: Option<String>,
    /// The platform, whose namespaces the defaults follow.
    pub platform: Option<Platform>,
    /// The webhook's replicas.
    pub replicas: Option<u32>,
    /// The webhook's failure policy.
    pub failure_policy: Option<FailurePolicy>,
    /// The webhook pods' priority class.
    pub priority_class_name: Option<String>,
    /// Whether the NAD controller runs.
    pub manage_nads: Option<bool>,
    /// The namespace of the Linkerd-CNI ConfigMap.
    pub cni_namespace: Option<String>,
    /// Whether the NAD controller restarts the opted-in workloads that run an older config.
    pub restart_stale_workloads: Option<bool>,
    /// How many workloads it restarts at once.
    pub restart_concurrency: Option<u16>,
    /// How long one may roll before the restarts of its namespace halt.
    pub restart_deadline: Option<Duration>,
    /// Whether the network-resources rules run.
    pub network_resources: Option<bool>,
    /// Whether meshed pods skip their secondary networks' subnets by default.
    pub skip_secondary_subnets: Option<bool>,
    /// The cluster's pod and service networks, which no skipped subnet may overlap.
    pub cluster_cidrs: Option<Vec<String>>,
    /// Where the certificates come from.
    pub certs: Option<Certs>,
    /// Whether to read nothing from the cluster.
    pub ignore_cluster: Option<bool>,
    /// The API server's addresses, allowed to call the webhook's port.
    pub api_server_cidrs: Option<Vec<String>>,
    /// The namespaces allowed to scrape the ops port.
    pub metrics_namespaces: Option<Vec<String>>,
    /// The namespaces (names, and prefixes ending in `*`) kept away from the webhook.
    pub webhook_excluded_namespaces: Option<Vec<String>>,
}

/// The checked configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The extension's namespace (default `linkerd-multus`).
    pub namespace: String,
    /// The Linkerd control plane's namespace (default `linkerd`).
    pub linkerd_namespace: String,
    /// The image of every container (default [`DEFAULT_IMAGE`]).
    pub image: String,
    /// The platform (default [`Platform::Kubernetes`]).
    pub platform: Platform,
    /// The webhook's replicas (default 2).
    pub replicas: u32,
    /// What the API server does while no replica answers (default [`FailurePolicy::Fail`]).
    pub failure_policy: FailurePolicy,
    /// The webhook's and the NAD controller's pods' PriorityClass (default
    /// `system-cluster-critical`).
    pub priority_class_name: String,
    /// The NAD controller, in a Deployment of its own (default off).
    pub manage_nads: bool,
    /// The Linkerd-CNI ConfigMap's namespace (default `linkerd-cni`).
    pub cni_namespace: String,
    /// The NAD controller restarts the opted-in workloads whose pods run an
    /// older Linkerd-CNI config, with the rights of `deploy-restarts/`
    /// (default off; only with [`Options::manage_nads`]).
    pub restart_stale_workloads: bool,
    /// How many workloads the restarts roll at once (default 1).
    pub restart_concurrency: u16,
    /// How long one workload may roll before the restarts of its namespace halt
    /// (default 10 minutes).
    pub restart_deadline: Duration,
    /// The network-resources rules (default off).
    pub network_resources: bool,
    /// Meshed pods skip their secondary networks' subnets unless they or their
    /// namespace say otherwise (default off: only those that opt in).
    pub skip_secondary_subnets: bool,
    /// The cluster's pod and service networks, canonical (default none).
    pub cluster_cidrs: Vec<String>,
    /// Where the certificates come from (default [`Certs::Generate`]).
    pub certs: Certs,
    /// Read nothing from the cluster (default off).
    pub ignore_cluster: bool,
    /// The CIDRs allowed to call the webhook's port, canonical (default none: every address).
    pub api_server_cidrs: Vec<String>,
    /// The namespaces allowed to scrape the ops port (default the platform's: `monitoring`).
    pub metrics_namespaces: Vec<String>,
    /// The namespaces kept away from the webhook beside the package's own
    /// exclusions: the platform's, then those given (default none).
    pub webhook_excluded_namespaces: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespace: DEFAULT_NAMESPACE.into(),
            linkerd_namespace: "linkerd".into(),
            image: DEFAULT_IMAGE.into(),
            platform: Platform::Kubernetes,
            replicas: 2,
            failure_policy: FailurePolicy::Fail,
            priority_class_name: "system-cluster-critical".into(),
            manage_nads: false,
            cni_namespace: "linkerd-cni".into(),
            restart_stale_workloads: false,
            restart_concurrency: 1,
            restart_deadline: Duration::from_secs(600),
            network_resources: false,
            skip_secondary_subnets: false,
            cluster_cidrs: Vec::new(),
            certs: Certs::Generate,
            ignore_cluster: false,
            api_server_cidrs: Vec::new(),
            metrics_namespaces: strings(Platform::Kubernetes.metrics_namespaces()),
            webhook_excluded_namespaces: Vec::new(),
        }
    }
}

/// A problem with the configuration, saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// The file cannot be read or is not a `LinkerdMultusInstall`.
    #[error("--config {path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it, naming the field.
        problem: String,
    },
    /// A value or a combination that cannot be installed.
    #[error("{0}")]
    Invalid(String),
}

/// The error for the keys of `spec` that are not settings, every one at once,
/// each with the setting it is nearest to when one is close.
fn unknown_keys(spec: &Map) -> Result<(), String> {
    let unknown: Vec<String> = (spec.entries.iter())
        .map(|(key, _)| key.as_str().unwrap_or_default())
        .filter(|key| !KEYS.contains(key))
        .map(|key| match nearest(key, KEYS.iter().copied()) {
            Some(meant) => format!("spec.{key} (did you mean spec.{meant}?)"),
            None => format!("spec.{key}"),
        })
        .collect();
    let phrase = match unknown.as_slice() {
        [] => return Ok(()),
        [one] => format!("unknown setting {one}"),
        [first @ .., last] => format!("unknown settings {} and {last}", first.join(", ")),
    };
    Err(format!("{phrase}; valid settings are {}", KEYS.join(", ")))
}

impl Settings {
    /// The settings of `self`, each overridden by `flags` where they are given.
    pub fn overridden_by(self, flags: Settings) -> Settings {
        Settings {
            namespace: flags.namespace.or(self.namespace),
            linkerd_namespace: flags.linkerd_namespace.or(self.linkerd_namespace),
            image: flags.image.or(self.image),
            platform: flags.platform.or(self.platform),
            replicas: flags.replicas.or(self.replicas),
            failure_policy: flags.failure_policy.or(self.failure_policy),
            priority_class_name: flags.priority_class_name.or(self.priority_class_name),
            manage_nads: flags.manage_nads.or(self.manage_nads),
            cni_namespace: flags.cni_namespace.or(self.cni_namespace),
            restart_stale_workloads: flags
                .restart_stale_workloads
                .or(self.restart_stale_workloads),
            restart_concurrency: flags.restart_concurrency.or(self.restart_concurrency),
            restart_deadline: flags.restart_deadline.or(self.restart_deadline),
            network_resources: flags.network_resources.or(self.network_resources),
            skip_secondary_subnets: flags.skip_secondary_subnets.or(self.skip_secondary_subnets),
            cluster_cidrs: flags.cluster_cidrs.or(self.cluster_cidrs),
            certs: flags.certs.or(self.certs),
            ignore_cluster: flags.ignore_cluster.or(self.ignore_cluster),
            api_server_cidrs: flags.api_server_cidrs.or(self.api_server_cidrs),
            metrics_namespaces: flags.metrics_namespaces.or(self.metrics_namespaces),
            webhook_excluded_namespaces: flags
                .webhook_excluded_namespaces
                .or(self.webhook_excluded_namespaces),
        }
    }

    /// Reads a `LinkerdMultusInstall` file.
    pub fn from_file(path: &Path) -> Result<Settings, OptionsError> {
        let file_error = |problem: String| OptionsError::File {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        Settings::from_text(&text).map_err(file_error)
    }

    /// Reads the text of a `LinkerdMultusInstall` object; the problem names the field.
    pub fn from_text(text: &str) -> Result<Settings, String> {
        let node = parse_document(text).map_err(|e| format!("not YAML: {e}"))?;
        let map = node
            .as_map()
            .ok_or_else(|| format!("is {}, not a {KIND} object", node.kind_name()))?;
        let kind = map.get_text("kind").unwrap_or_default();
        let api_version = map.get_text("apiVersion").unwrap_or_default();
        if (api_version, kind) != (API_VERSION, KIND) {
            return Err(format!(
                "must be a {KIND} ({API_VERSION}), not {kind:?} ({api_version:?}): start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`"
            ));
        }
        for (key, _) in &map.entries {
            let key = key.as_str().unwrap_or_default();
            if !matches!(key, "apiVersion" | "kind" | "metadata" | "spec") {
                return Err(format!(
                    "unexpected top-level field {key:?}: the settings go under spec"
                ));
            }
        }
        match map.get("spec") {
            None => Ok(Settings::default()),
            Some(spec) if spec.is_null() => Ok(Settings::default()),
            Some(Node::Map(spec)) => Settings::from_spec(spec),
            Some(other) => Err(format!("spec is {}, not a mapping", other.kind_name())),
        }
    }

    fn from_spec(spec: &Map) -> Result<Settings, String> {
        unknown_keys(spec)?;
        let mut settings = Settings::default();
        for (key, value) in &spec.entries {
            let key = key.as_str().unwrap_or_default();
            let field = format!("spec.{key}");
            let text = || {
                value
                    .as_text()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{field}: must be a string, not {}", value.kind_name()))
            };
            let boolean = || match value.as_text() {
                Some("true") => Ok(true),
                Some("false") => Ok(false),
                _ => Err(format!("{field}: must be true or false")),
            };
            let list = || match value {
                Node::Seq(seq) => seq
                    .items
                    .iter()
                    .map(|item| {
                        item.as_text().map(str::to_string).ok_or_else(|| {
                            format!(
                                "{field}: each item must be a string, not {}",
                                item.kind_name()
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>(),
                other => Err(format!(
                    "{field}: must be a list of strings, not {}",
                    other.kind_name()
                )),
            };
            match key {
                "namespace" => settings.namespace = Some(text()?),
                "linkerdNamespace" => settings.linkerd_namespace = Some(text()?),
                "image" => settings.image = Some(text()?),
                "platform" => settings.platform = Some(platform(&text()?)?),
                "replicas" => settings.replicas = Some(replicas(&text()?, &field)?),
                "failurePolicy" => settings.failure_policy = Some(failure_policy(&text()?)?),
                "priorityClassName" => settings.priority_class_name = Some(text()?),
                "manageNADs" => settings.manage_nads = Some(boolean()?),
                "cniNamespace" => settings.cni_namespace = Some(text()?),
                "restartStaleWorkloads" => settings.restart_stale_workloads = Some(boolean()?),
                "restartConcurrency" => {
                    settings.restart_concurrency = Some(restart_concurrency(&text()?, &field)?);
                }
                "restartDeadline" => {
                    settings.restart_deadline = Some(restart_deadline(&text()?, &field)?);
                }
                "networkResources" => settings.network_resources = Some(boolean()?),
                "skipSecondarySubnets" => {
                    settings.skip_secondary_subnets = Some(switch(&text()?)?);
                }
                "clusterCIDRs" => settings.cluster_cidrs = Some(list()?),
                "certs" => settings.certs = Some(certs(&text()?)?),
                "ignoreCluster" => settings.ignore_cluster = Some(boolean()?),
                "apiServerCIDRs" => settings.api_server_cidrs = Some(list()?),
                "metricsNamespaces" => settings.metrics_namespaces = Some(list()?),
                "webhookExcludedNamespaces" => settings.webhook_excluded_namespaces = Some(list()?),
                other => {
                    return Err(format!(
                        "unknown setting spec.{other}; valid settings are {}",
                        KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(settings)
    }

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
            skip_secondary_subnets: self
                .skip_secondary_subnets
                .unwrap_or(defaults.skip_secondary_subnets),
            cluster_cidrs,
            certs: self.certs.unwrap_or(defaults.certs),
            ignore_cluster: self.ignore_cluster.unwrap_or(defaults.ignore_cluster),
            api_server_cidrs,
            metrics_namespaces: self
                .metrics_namespaces
                .unwrap_or_else(|| strings(platform.metrics_namespaces())),
            webhook_excluded_namespaces,
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

    /// The options as a `LinkerdMultusInstall` file would give them.
    pub fn to_file(&self) -> String {
        let list = |items: &[String]| format!("[{}]", items.join(", "));
        format!(
            "apiVersion: {API_VERSION}\nkind: {KIND}\nspec:\n  namespace: {}\n  linkerdNamespace: {}\n  image: {}\n  platform: {}\n  replicas: {}\n  failurePolicy: {}\n  priorityClassName: {}\n  manageNADs: {}\n  cniNamespace: {}\n  restartStaleWorkloads: {}\n  restartConcurrency: {}\n  restartDeadline: {}\n  networkResources: {}\n  skipSecondarySubnets: {}\n  clusterCIDRs: {}\n  certs: {}\n  ignoreCluster: {}\n  apiServerCIDRs: {}\n  metricsNamespaces: {}\n  webhookExcludedNamespaces: {}\n",
            self.namespace,
            self.linkerd_namespace,
            self.image,
            self.platform.as_str(),
            self.replicas,
            self.failure_policy.as_str(),
            self.priority_class_name,
            self.manage_nads,
            self.cni_namespace,
            self.restart_stale_workloads,
            self.restart_concurrency,
            humantime::format_duration(self.restart_deadline),
            self.network_resources,
            switch_text(self.skip_secondary_subnets),
            list(&self.cluster_cidrs),
            self.certs.as_str(),
            self.ignore_cluster,
            list(&self.api_server_cidrs),
            list(&self.metrics_namespaces),
            list(&self.webhook_excluded_namespaces),
        )
    }
}

/// The option of the API server's CIDRs, as errors name it.
const API_SERVER_CIDR: &str = "--api-server-cidr (apiServerCIDRs)";
/// The option of the cluster's CIDRs, as errors name it.
const CLUSTER_CIDR: &str = "--cluster-cidr (clusterCIDRs)";

/// `enabled` or `disabled`, as the webhook's switches are written.
pub fn switch_text(on: bool) -> &'static str {
    if on { "enabled" } else { "disabled" }
}

fn switch(text: &str) -> Result<bool, String> {
    crate::k8s::namespace::switch(text).ok_or_else(|| {
        format!("spec.skipSecondarySubnets: must be enabled or disabled, not {text:?}")
    })
}

/// `text`, a value of `option`, as a CIDR in canonical form (`ADDRESS/PREFIX`,
/// no host bits set, IPv6 lower-case and shortened), as a NetworkPolicy's
/// `ipBlock` takes it; the error names the option and what to write instead.
fn cidr(text: &str, option: &str) -> Result<String, String> {
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

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn platform(text: &str) -> Result<Platform, String> {
    Platform::parse(text)
        .ok_or_else(|| format!("spec.platform: must be kubernetes or openshift, not {text:?}"))
}

fn replicas(text: &str, field: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("{field}: must be a whole number, not {text:?}"))
}

/// The restarts' concurrency: 1 to 65535, as the webhook's `--restart-concurrency` takes it.
pub fn restart_concurrency(text: &str, field: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{field}: must be a whole number from 1 to 65535 (workloads rolling at once), not {text:?}"
        )),
    }
}

/// The restarts' deadline: a positive duration such as `10m` or `1h30m`, as the webhook's
/// `--restart-deadline` takes it.
pub fn restart_deadline(text: &str, field: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{field}: must be a positive duration such as 10m or 1h30m, not {text:?}"
        )),
    }
}

fn failure_policy(text: &str) -> Result<FailurePolicy, String> {
    match text {
        "Fail" => Ok(FailurePolicy::Fail),
        "Ignore" => Ok(FailurePolicy::Ignore),
        other => Err(format!(
            "spec.failurePolicy: must be Fail or Ignore, not {other:?}"
        )),
    }
}

fn certs(text: &str) -> Result<Certs, String> {
    match text {
        "generate" => Ok(Certs::Generate),
        "cert-manager" => Ok(Certs::CertManager),
        other => Err(format!(
            "spec.certs: must be generate or cert-manager, not {other:?}"
        )),
    }
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\n";

    #[test]
    fn a_file_gives_every_setting() {
        let options = Options {
            namespace: "mesh-webhook".into(),
            linkerd_namespace: "l5d".into(),
            image: "mirror.example:5000/linkerd/multus:0.1.0".into(),
            platform: Platform::OpenShift,
            replicas: 3,
            failure_policy: FailurePolicy::Ignore,
            priority_class_name: "high.example".into(),
            manage_nads: true,
            cni_namespace: "cni".into(),
            restart_stale_workloads: true,
            restart_concurrency: 4,
            restart_deadline: Duration::from_secs(90 * 60),
            network_resources: true,
            skip_secondary_subnets: true,
            cluster_cidrs: vec!["10.128.0.0/14".into(), "172.30.0.0/16".into()],
            certs: Certs::CertManager,
            ignore_cluster: true,
            api_server_cidrs: vec!["10.0.0.0/24".into(), "fd00::/64".into()],
            metrics_namespaces: vec!["openshift-monitoring".into(), "prom".into()],
            webhook_excluded_namespaces: vec![
                "openshift".into(),
                "openshift-*".into(),
                "legacy".into(),
            ],
        };
        let read = Settings::from_text(&options.to_file()).unwrap();
        assert_eq!(read.resolve().unwrap(), options);
        let empty = Settings::from_text(&format!("{HEAD}metadata: {{name: x}}\n")).unwrap();
        assert_eq!(empty.resolve().unwrap(), Options::default());
    }

    /// `platform: openshift` adds OpenShift's namespaces to those kept away from the
    /// webhook, before the ones given, and gives OpenShift's Prometheus namespaces
    /// unless others are given.
    #[test]
    fn the_openshift_platform_adds_its_namespaces() {
        let read = |spec: &str| {
            Settings::from_text(&format!("{HEAD}spec:\n{spec}"))
                .unwrap()
                .resolve()
                .unwrap()
        };
        let openshift = read(
            "  platform: openshift\n  webhookExcludedNamespaces: [legacy, openshift-*, team-*]\n",
        );
        assert_eq!(
            openshift.webhook_excluded_namespaces,
            ["openshift", "openshift-*", "legacy", "team-*"]
        );
        assert_eq!(
            openshift.metrics_namespaces,
            ["openshift-monitoring", "openshift-user-workload-monitoring"]
        );
        let given = read("  platform: openshift\n  metricsNamespaces: [prom]\n");
        assert_eq!(given.metrics_namespaces, ["prom"]);
        let plain = read("  webhookExcludedNamespaces: [legacy]\n");
        assert_eq!(
            (plain.webhook_excluded_namespaces, plain.metrics_namespaces),
            (vec!["legacy".to_string()], vec!["monitoring".to_string()])
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let file = Settings::from_text(&format!(
            "{HEAD}spec:\n  replicas: 3\n  namespace: a\n  manageNADs: true\n"
        ))
        .unwrap();
        let flags = Settings {
            namespace: Some("b".into()),
            manage_nads: Some(false),
            ..Settings::default()
        };
        let options = file.overridden_by(flags).resolve().unwrap();
        assert_eq!(
            (
                options.replicas,
                options.namespace.as_str(),
                options.manage_nads
            ),
            (3, "b", false)
        );
    }

    #[test]
    fn a_bad_file_names_the_field_and_what_to_do() {
        for (spec, want) in [
            (
                "spec:\n  replica: 3\n",
                "unknown setting spec.replica (did you mean spec.replicas?); valid settings are namespace,",
            ),
            (
                "spec:\n  replica: 3\n  failurePolcy: Fail\n  colour: blue\n",
                "unknown settings spec.replica (did you mean spec.replicas?), spec.failurePolcy (did you mean spec.failurePolicy?) and spec.colour; valid settings are namespace,",
            ),
            (
                "spec:\n  replicas: two\n",
                "spec.replicas: must be a whole number, not \"two\"",
            ),
            (
                "spec:\n  failurePolicy: fail\n",
                "spec.failurePolicy: must be Fail or Ignore, not \"fail\"",
            ),
            (
                "spec:\n  manageNADs: yes\n",
                "spec.manageNADs: must be true or false",
            ),
            (
                "spec:\n  restartStaleWorkloads: 1\n",
                "spec.restartStaleWorkloads: must be true or false",
            ),
            (
                "spec:\n  restartConcurrency: 0\n",
                "spec.restartConcurrency: must be a whole number from 1 to 65535 (workloads rolling at once), not \"0\"",
            ),
            (
                "spec:\n  restartConcurrency: 70000\n",
                "spec.restartConcurrency: must be a whole number from 1 to 65535",
            ),
            (
                "spec:\n  restartDeadline: 10\n",
                "spec.restartDeadline: must be a positive duration such as 10m or 1h30m, not \"10\"",
            ),
            (
                "spec:\n  restartDeadline: 0s\n",
                "spec.restartDeadline: must be a positive duration",
            ),
            (
                "spec:\n  skipSecondarySubnets: true\n",
                "spec.skipSecondarySubnets: must be enabled or disabled, not \"true\"",
            ),
            (
                "spec:\n  clusterCIDRs: 10.244.0.0/16\n",
                "spec.clusterCIDRs: must be a list of strings, not a scalar",
            ),
            (
                "spec:\n  certs: vault\n",
                "spec.certs: must be generate or cert-manager",
            ),
            (
                "spec:\n  platform: OpenShift\n",
                "spec.platform: must be kubernetes or openshift, not \"OpenShift\"",
            ),
            (
                "spec:\n  webhookExcludedNamespaces: openshift-*\n",
                "spec.webhookExcludedNamespaces: must be a list of strings, not a scalar",
            ),
            (
                "spec:\n  namespace: [a]\n",
                "spec.namespace: must be a string, not a sequence",
            ),
            ("spec: 3\n", "spec is a scalar, not a mapping"),
            (
                "spec:\n  apiServerCIDRs: 10.0.0.0/8\n",
                "spec.apiServerCIDRs: must be a list of strings, not a scalar",
            ),
            (
                "spec:\n  metricsNamespaces: [[a]]\n",
                "spec.metricsNamespaces: each item must be a string, not a sequence",
            ),
            (
                "replicas: 3\n",
                "unexpected top-level field \"replicas\": the settings go under spec",
            ),
        ] {
            let err = Settings::from_text(&format!("{HEAD}{spec}")).unwrap_err();
            assert!(err.contains(want), "{spec:?}: {err}");
        }
        let err = Settings::from_text("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
        assert!(
            err.contains("must be a LinkerdMultusInstall (multus.linkerd.io/v1alpha1), not \"ConfigMap\" (\"v1\")"),
            "{err}"
        );
        let err = Settings::from_file(Path::new("/nonexistent/install.yaml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--config /nonexistent/install.yaml: "),
            "{err}"
        );
    }

    #[test]
    fn bad_values_and_conflicts_say_what_to_do() {
        for (settings, want) in [
            (
                Settings {
                    namespace: Some("Mesh".into()),
                    ..Settings::default()
                },
                "--namespace (namespace) \"Mesh\" is not a namespace name",
            ),
            (
                Settings {
                    linkerd_namespace: Some("l5d_".into()),
                    ..Settings::default()
                },
                "--linkerd-namespace (linkerdNamespace)",
            ),
            (
                Settings {
                    replicas: Some(0),
                    ..Settings::default()
                },
                "--replicas (replicas) 0",
            ),
            (
                Settings {
                    priority_class_name: Some("High".into()),
                    ..Settings::default()
                },
                "is not a PriorityClass name",
            ),
            (
                Settings {
                    namespace: Some("kube-system".into()),
                    ..Settings::default()
                },
                "--namespace (namespace) \"kube-system\" is Kubernetes's own: install puts linkerd-multus only in a namespace of its own, which uninstall deletes with everything in it; choose another (the default is linkerd-multus)",
            ),
            (
                Settings {
                    namespace: Some("l5d".into()),
                    linkerd_namespace: Some("l5d".into()),
                    ..Settings::default()
                },
                "--namespace (namespace) \"l5d\" is the Linkerd control plane's:",
            ),
            (
                Settings {
                    namespace: Some("cni".into()),
                    cni_namespace: Some("cni".into()),
                    manage_nads: Some(true),
                    ..Settings::default()
                },
                "--namespace (namespace) \"cni\" is Linkerd-CNI's:",
            ),
            (
                Settings {
                    api_server_cidrs: Some(vec!["10.0.0.1/24".into()]),
                    ..Settings::default()
                },
                "--api-server-cidr (apiServerCIDRs) \"10.0.0.1/24\" has host bits set: the network is 10.0.0.0/24",
            ),
            (
                Settings {
                    cluster_cidrs: Some(vec!["10.244.0.0/16".into(), "10.96.0.0".into()]),
                    ..Settings::default()
                },
                "--cluster-cidr (clusterCIDRs) \"10.96.0.0\" is not a CIDR: write ADDRESS/PREFIX",
            ),
            (
                Settings {
                    skip_secondary_subnets: Some(true),
                    ..Settings::default()
                },
                "--skip-secondary-subnets (skipSecondarySubnets) enabled needs --cluster-cidr (clusterCIDRs): without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy",
            ),
            (
                Settings {
                    metrics_namespaces: Some(vec![]),
                    ..Settings::default()
                },
                "--metrics-namespace (metricsNamespaces) is empty",
            ),
            (
                Settings {
                    metrics_namespaces: Some(vec!["Prom".into()]),
                    ..Settings::default()
                },
                "--metrics-namespace (metricsNamespaces) \"Prom\" is not a namespace name",
            ),
            (
                Settings {
                    cni_namespace: Some("cni".into()),
                    ..Settings::default()
                },
                "add --manage-nads",
            ),
            (
                Settings {
                    restart_stale_workloads: Some(true),
                    ..Settings::default()
                },
                "--restart-stale-workloads (restartStaleWorkloads) is for the NAD controller, which restarts the workloads after it updates their namespace's NAD: add --manage-nads (manageNADs: true), or leave it out",
            ),
            (
                Settings {
                    restart_stale_workloads: Some(true),
                    manage_nads: Some(false),
                    ..Settings::default()
                },
                "add --manage-nads (manageNADs: true)",
            ),
            (
                Settings {
                    manage_nads: Some(true),
                    restart_concurrency: Some(2),
                    ..Settings::default()
                },
                "--restart-concurrency (restartConcurrency) and --restart-deadline (restartDeadline) pace the NAD controller's restarts: add --restart-stale-workloads (restartStaleWorkloads: true), or leave them out",
            ),
            (
                Settings {
                    manage_nads: Some(true),
                    restart_stale_workloads: Some(false),
                    restart_deadline: Some(Duration::from_secs(60)),
                    ..Settings::default()
                },
                "add --restart-stale-workloads",
            ),
            (
                Settings {
                    image: Some("mirror.example:5000/linkerd/multus".into()),
                    ..Settings::default()
                },
                "--image (image) \"mirror.example:5000/linkerd/multus\" has neither a tag nor a digest",
            ),
            (
                Settings {
                    image: Some("mirror.example/linkerd/multus@sha256:abc".into()),
                    ..Settings::default()
                },
                "--image (image) \"mirror.example/linkerd/multus@sha256:abc\" has a digest \"sha256:abc\" whose sha256 is not 64 lower-case hex digits (3 given): write REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST",
            ),
            (
                Settings {
                    webhook_excluded_namespaces: Some(vec!["*".into()]),
                    ..Settings::default()
                },
                "--webhook-excluded-namespace (webhookExcludedNamespaces) \"*\" keeps every namespace away from the webhook",
            ),
            (
                Settings {
                    webhook_excluded_namespaces: Some(vec!["Legacy".into()]),
                    ..Settings::default()
                },
                "--webhook-excluded-namespace (webhookExcludedNamespaces) \"Legacy\" is neither a namespace name nor a prefix ending in '*'",
            ),
            (
                Settings {
                    webhook_excluded_namespaces: Some(vec!["linkerd*".into()]),
                    ..Settings::default()
                },
                "--webhook-excluded-namespace (webhookExcludedNamespaces) \"linkerd*\" keeps the Linkerd control plane's namespace linkerd away from the webhook",
            ),
            (
                Settings {
                    linkerd_namespace: Some("openshift-linkerd".into()),
                    platform: Some(Platform::OpenShift),
                    ..Settings::default()
                },
                "\"openshift-*\" (from --platform openshift) keeps the Linkerd control plane's namespace openshift-linkerd away",
            ),
        ] {
            let err = settings.clone().resolve().unwrap_err().to_string();
            assert!(err.contains(want), "{settings:?}: {err}");
        }
        let fine = Settings {
            cni_namespace: Some("cni".into()),
            manage_nads: Some(true),
            ..Settings::default()
        };
        assert_eq!(fine.resolve().unwrap().cni_namespace, "cni");
        let restarts = Settings {
            restart_stale_workloads: Some(true),
            manage_nads: Some(true),
            ..Settings::default()
        };
        assert!(restarts.resolve().unwrap().restart_stale_workloads);
        // The cluster's networks alone are fine: pods opt in by their annotation.
        let cidrs = Settings {
            cluster_cidrs: Some(vec!["FD00:10::/56".into()]),
            ..Settings::default()
        };
        assert_eq!(cidrs.resolve().unwrap().cluster_cidrs, ["fd00:10::/56"]);
    }

    #[test]
    fn cidrs_are_checked_and_written_canonically() {
        for (text, want) in [
            ("10.0.0.0/24", Ok("10.0.0.0/24")),
            ("10.0.0.5/32", Ok("10.0.0.5/32")),
            ("0.0.0.0/0", Ok("0.0.0.0/0")),
            ("FD00:0::/64", Ok("fd00::/64")),
            ("::/0", Ok("::/0")),
            (
                "10.0.0.5/24",
                Err(
                    "has host bits set: the network is 10.0.0.0/24; write that, or 10.0.0.5/32 for the one address",
                ),
            ),
            (
                "fd00::1/64",
                Err("has host bits set: the network is fd00::/64"),
            ),
            ("10.0.0.0", Err("is not a CIDR: write ADDRESS/PREFIX")),
            ("10.0.0.0/33", Err("the prefix must be 0 to 32")),
            ("fd00::/129", Err("the prefix must be 0 to 128")),
            ("10.0.0/8", Err("\"10.0.0\" is not an IP address")),
            ("10.0.0.0/x", Err("the prefix must be 0 to 32")),
        ] {
            match (cidr(text, API_SERVER_CIDR), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(got), Err(want)) => {
                    assert!(
                        got.starts_with(&format!("--api-server-cidr (apiServerCIDRs) {text:?} ")),
                        "{got}"
                    );
                    assert!(got.contains(want), "{text}: {got}");
                }
                (got, want) => panic!("{text}: {got:?}, not {want:?}"),
            }
        }
    }
}
