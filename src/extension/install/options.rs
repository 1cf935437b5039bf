//! The one configuration of the cluster side: what `install`'s flags set, or
//! the same settings in a `LinkerdMultusInstall` file (`--config`), flags
//! winning (`file.rs` reads the file); checked into [`Options`] (`checks.rs`),
//! each problem naming the file, the field and what to do.

use std::time::Duration;

use crate::krm::function_config::API_VERSION;

use super::super::DEFAULT_NAMESPACE;
use super::exclusions::Platform;

mod checks;
mod day2;
mod file;

pub use day2::{
    Day2, Day2Settings, MissingNad, OnError, Pairs, Resources, is_quantity, pair, resources,
};

pub use file::{duration_text, restart_concurrency, restart_deadline};

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
    "protectedCIDRs",
    "certs",
    "ignoreCluster",
    "apiServerCIDRs",
    "metricsNamespaces",
    "webhookExcludedNamespaces",
    "webhookResources",
    "controllerResources",
    "logLevel",
    "onError",
    "missingNAD",
    "podLabels",
    "podAnnotations",
    "serviceLabels",
    "serviceAnnotations",
    "webhookConfigurationLabels",
    "webhookConfigurationAnnotations",
    "monitoring",
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
    /// Issued by OpenShift's service CA operator, asked by annotations of the
    /// Service and the MutatingWebhookConfiguration, which it renews.
    #[value(name = "openshift-service-ca")]
    OpenShiftServiceCa,
}

impl Certs {
    fn as_str(self) -> &'static str {
        match self {
            Certs::Generate => "generate",
            Certs::CertManager => "cert-manager",
            Certs::OpenShiftServiceCa => "openshift-service-ca",
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
    /// Other networks that stay meshed, which no skipped subnet may overlap either.
    pub protected_cidrs: Option<Vec<String>>,
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
    /// The day-2 settings: resources, logs, the webhook's answers, labels and annotations.
    pub day2: Day2Settings,
    /// Whether to render the ServiceMonitor, PrometheusRule and Grafana dashboard.
    pub monitoring: Option<bool>,
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
    /// Other networks that stay meshed (the nodes', load-balancer pools), canonical
    /// (default none).
    pub protected_cidrs: Vec<String>,
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
    /// The day-2 settings (default: the packages').
    pub day2: Day2,
    /// The ServiceMonitor, PrometheusRule and Grafana dashboard ConfigMap of
    /// docs/monitoring.md (default off: they need prometheus-operator's CRDs).
    pub monitoring: bool,
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
            protected_cidrs: Vec::new(),
            certs: Certs::Generate,
            ignore_cluster: false,
            api_server_cidrs: Vec::new(),
            metrics_namespaces: strings(Platform::Kubernetes.metrics_namespaces()),
            webhook_excluded_namespaces: Vec::new(),
            day2: Day2::default(),
            monitoring: false,
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
            protected_cidrs: flags.protected_cidrs.or(self.protected_cidrs),
            certs: flags.certs.or(self.certs),
            ignore_cluster: flags.ignore_cluster.or(self.ignore_cluster),
            api_server_cidrs: flags.api_server_cidrs.or(self.api_server_cidrs),
            metrics_namespaces: flags.metrics_namespaces.or(self.metrics_namespaces),
            webhook_excluded_namespaces: flags
                .webhook_excluded_namespaces
                .or(self.webhook_excluded_namespaces),
            day2: self.day2.overridden_by(flags.day2),
            monitoring: flags.monitoring.or(self.monitoring),
        }
    }
}

impl Options {
    /// The options as a `LinkerdMultusInstall` file would give them.
    pub fn to_file(&self) -> String {
        let list = |items: &[String]| format!("[{}]", items.join(", "));
        let head = format!(
            "apiVersion: {API_VERSION}\nkind: {KIND}\nspec:\n  namespace: {}\n  linkerdNamespace: {}\n  image: {}\n  platform: {}\n  replicas: {}\n  failurePolicy: {}\n  priorityClassName: {}\n  manageNADs: {}\n  cniNamespace: {}\n  restartStaleWorkloads: {}\n  restartConcurrency: {}\n  restartDeadline: {}\n  networkResources: {}\n  skipSecondarySubnets: {}\n  clusterCIDRs: {}\n  protectedCIDRs: {}\n  certs: {}\n  ignoreCluster: {}\n  apiServerCIDRs: {}\n  metricsNamespaces: {}\n  webhookExcludedNamespaces: {}\n  monitoring: {}\n",
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
            duration_text(self.restart_deadline),
            self.network_resources,
            switch_text(self.skip_secondary_subnets),
            list(&self.cluster_cidrs),
            list(&self.protected_cidrs),
            self.certs.as_str(),
            self.ignore_cluster,
            list(&self.api_server_cidrs),
            list(&self.metrics_namespaces),
            list(&self.webhook_excluded_namespaces),
            self.monitoring,
        );
        head + &self.day2.file_lines()
    }
}

/// `enabled` or `disabled`, as the webhook's switches are written.
pub fn switch_text(on: bool) -> &'static str {
    if on { "enabled" } else { "disabled" }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
