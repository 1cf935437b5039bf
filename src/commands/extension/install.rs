//! `linkerd multus install` and `uninstall`: their flags (the settings of a
//! `LinkerdMultusInstall` file, which they override) and what they print.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};

use super::{KubeFlags, go};
use crate::commands::outcome::{Error, Outcome};
use crate::extension::install::exclusions::Platform;
use crate::extension::install::options::{Certs, FailurePolicy, Options, OptionsError, Settings};
use crate::extension::{install, uninstall};

/// What `install --help` shows after the flags: how to apply the output, an
/// example for OpenShift, and the private key it holds.
pub const INSTALL_EXAMPLES: &str = "\
Examples:
  # What install needs, then install: apply server-side, with this field manager every time
  # (a second apply, or the output of a later install, then changes only what changed).
  linkerd multus check --pre
  linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -

  # OpenShift, from a mirror registry, with the NAD controller:
  linkerd multus install --platform openshift --manage-nads \\
      --image mirror.example:5000/linkerd/multus:v0.1.0 \\
      --webhook-excluded-namespace 'legacy-apps,batch-*' \\
    | kubectl apply --server-side --field-manager=linkerd-multus-install -f -

  # The same settings kept in a LinkerdMultusInstall file, for the next upgrade:
  linkerd multus install --config install.yaml \\
    | kubectl apply --server-side --field-manager=linkerd-multus-install -f -

The output holds the webhook's private key (the Secret linkerd-multus-webhook-tls, unless
--certs cert-manager or openshift-service-ca): pipe it to kubectl. Do not commit it to Git; if
you redirect it to a file, keep that file private and delete it once applied. Run install again to upgrade or to
renew the certificate: it keeps the certificates it made while they are good.";

/// The flags that choose which objects `install` prints, and where: shared
/// with `check --pre`, which asks for the rights to make them.
#[derive(Debug, Clone, Args)]
pub struct PartsFlags {
    /// A LinkerdMultusInstall file (multus.linkerd.io/v1alpha1) with these
    /// settings under spec; the flags given win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also run the NAD controller, which makes the linkerd-cni NAD in each
    /// enabled namespace: a Deployment apart from the webhook's, with its
    /// own ServiceAccount and rights [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    manage_nads: Option<bool>,
    /// The namespace of the Linkerd-CNI ConfigMap the NAD controller reads
    /// (with --manage-nads) [default: linkerd-cni].
    #[arg(long, value_name = "NAMESPACE")]
    cni_namespace: Option<String>,
    /// The NAD controller also restarts the workloads that opted in
    /// (multus.linkerd.io/restart-on-config-change) whose pods run an older
    /// Linkerd-CNI config, paced, with the rights to read and patch them
    /// and the ValidatingAdmissionPolicy that narrows those rights (Kubernetes
    /// 1.30 or later); only with --manage-nads [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    restart_stale_workloads: Option<bool>,
    /// Also run the network-resources rules (device-plugin resources and node
    /// selectors from the NADs a pod selects), with their settings and rights [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    network_resources: Option<bool>,
    /// Where the webhook's certificate comes from [default: generate].
    #[arg(long, value_enum, value_name = "SOURCE")]
    certs: Option<Certs>,
}

impl PartsFlags {
    /// The settings of `--config`, overridden by these flags and `more`
    /// (the command's other flags): the install's options.
    pub fn options(&self, more: Settings) -> Result<Options, OptionsError> {
        let file = match &self.config {
            Some(path) => Settings::from_file(path)?,
            None => Settings::default(),
        };
        let flags = Settings {
            manage_nads: self.manage_nads,
            cni_namespace: self.cni_namespace.clone(),
            restart_stale_workloads: self.restart_stale_workloads,
            network_resources: self.network_resources,
            certs: self.certs,
            ..more
        };
        file.overridden_by(flags).resolve()
    }
}

/// `install`'s flags, each overriding the same setting of `--config`.
#[derive(Debug, Args)]
pub struct InstallFlags {
    #[command(flatten)]
    kube: KubeFlags,
    #[command(flatten)]
    parts: PartsFlags,
    /// The extension's namespace: one that does not exist yet, or that
    /// install made [default: linkerd-multus].
    #[arg(long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The image of the webhook's containers, pinned by a tag or a digest: a
    /// mirror's for a disconnected cluster (REGISTRY/PATH:TAG or
    /// REGISTRY/PATH@sha256:DIGEST) [default: ghcr.io/linkerd-multus/linkerd-multus:v0.1.0].
    #[arg(long, value_name = "REFERENCE")]
    image: Option<String>,
    /// The platform: openshift keeps the openshift and openshift-* namespaces
    /// away from the webhook, and lets openshift-monitoring and
    /// openshift-user-workload-monitoring scrape its metrics unless
    /// --metrics-namespace says otherwise [default: kubernetes].
    #[arg(long, value_enum, value_name = "PLATFORM")]
    platform: Option<Platform>,
    /// A namespace whose pods the API server never sends to the webhook (they
    /// are admitted unattached, even while it is down): a name, or a prefix
    /// ending in '*' (openshift-*), repeated or comma-separated; beside
    /// kube-system, kube-public, kube-node-lease, cert-manager and the
    /// extension's namespace, always kept away [default: none].
    #[arg(long = "webhook-excluded-namespace", value_name = "NAME|PREFIX*")]
    webhook_excluded_namespaces: Vec<String>,
    /// The webhook's replicas [default: 2].
    #[arg(long, value_name = "N")]
    replicas: Option<u32>,
    /// With --restart-stale-workloads: how many workloads roll to a new
    /// Linkerd-CNI config at once [default: 1].
    #[arg(long, value_name = "N", value_parser = |t: &str| install::options::restart_concurrency(t, "--restart-concurrency"))]
    restart_concurrency: Option<u16>,
    /// With --restart-stale-workloads: how long one workload may roll before
    /// the restarts of its namespace halt, e.g. 10m or 1h [default: 10m].
    #[arg(long, value_name = "DURATION", value_parser = |t: &str| install::options::restart_deadline(t, "--restart-deadline"))]
    restart_deadline: Option<std::time::Duration>,
    /// What the API server does with a pod while no replica answers: Fail
    /// rejects it (its controller retries), Ignore admits it unattached [default: Fail].
    #[arg(long, value_enum, value_name = "POLICY")]
    failure_policy: Option<FailurePolicy>,
    /// The webhook pods' PriorityClass [default: system-cluster-critical].
    #[arg(long, value_name = "NAME")]
    priority_class_name: Option<String>,
    /// Read nothing from the cluster: the namespace is not checked, and with
    /// --certs generate, new certificates are made every time; otherwise a
    /// namespace that exists without install's mark is refused, and the
    /// certificates install made are kept while they are good [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    ignore_cluster: Option<bool>,
    /// A range the API server calls the webhook from (ADDRESS/PREFIX), repeated
    /// or comma-separated: the NetworkPolicy admits the webhook's port 8443 from
    /// these only [default: on OpenShift, host-network traffic; elsewhere the
    /// API server's addresses the cluster lists, or every address, with a
    /// warning].
    #[arg(long = "api-server-cidr", value_name = "CIDR")]
    api_server_cidrs: Vec<String>,
    /// Meshed pods skip the subnets of their Multus secondary networks
    /// (config.linkerd.io/skip-subnets) unless they or their namespace say
    /// otherwise (multus.linkerd.io/skip-secondary-subnets); enabled needs
    /// --cluster-cidr [default: disabled].
    #[arg(long, value_name = "enabled|disabled",
          value_parser = PossibleValuesParser::new(["enabled", "disabled"]).map(|v| v == "enabled"))]
    skip_secondary_subnets: Option<bool>,
    /// The cluster's pod and service networks (ADDRESS/PREFIX), repeated or
    /// comma-separated: the webhook never skips a secondary subnet that
    /// overlaps them. Without them, a pod that opts in and has subnets to skip
    /// gets the webhook's --on-error answer [default: none].
    #[arg(long = "cluster-cidr", value_name = "CIDR")]
    cluster_cidrs: Vec<String>,
    /// Other networks whose traffic stays meshed, such as the nodes' networks
    /// and load-balancer pools (ADDRESS/PREFIX), repeated or comma-separated:
    /// the webhook never skips a secondary subnet that overlaps them either
    /// [default: none].
    #[arg(long = "protected-cidr", value_name = "CIDR")]
    protected_cidrs: Vec<String>,
    /// A namespace allowed to scrape the ops port 9090, repeated or
    /// comma-separated (on OpenShift, openshift-monitoring and
    /// openshift-user-workload-monitoring) [default: monitoring; with
    /// --platform openshift, those two].
    #[arg(long = "metrics-namespace", value_name = "NAMESPACE")]
    metrics_namespaces: Vec<String>,
    #[command(flatten)]
    day2: super::day2::Day2Flags,
    /// Also print a ServiceMonitor of the metrics Services, a PrometheusRule with
    /// the alerts of docs/monitoring.md and a Grafana dashboard ConfigMap (label
    /// grafana_dashboard: "1"); they need prometheus-operator's CRDs [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    monitoring: Option<bool>,
}

/// `install`'s flags, and whether `-L` (or `LINKERD_NAMESPACE`) was given,
/// which only the parser knows: given, it wins over the file.
#[derive(Debug)]
pub struct InstallArgs {
    flags: InstallFlags,
    linkerd_namespace_given: bool,
}

fn linkerd_namespace_given(matches: &ArgMatches) -> bool {
    matches!(
        matches.value_source("linkerd_namespace"),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

impl FromArgMatches for InstallArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(InstallArgs {
            flags: InstallFlags::from_arg_matches(matches)?,
            linkerd_namespace_given: linkerd_namespace_given(matches),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches(matches)?;
        self.linkerd_namespace_given = linkerd_namespace_given(matches);
        Ok(())
    }
}

impl Args for InstallArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        InstallFlags::augment_args(command)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        InstallFlags::augment_args_for_update(command)
    }
}

impl InstallArgs {
    /// The settings the flags give but those of [`PartsFlags`].
    fn settings(&self) -> Settings {
        let f = &self.flags;
        let list = |values: &[String]| Some(go::string_slice(values)).filter(|v| !v.is_empty());
        Settings {
            namespace: f.namespace.clone(),
            linkerd_namespace: self
                .linkerd_namespace_given
                .then(|| f.kube.linkerd_namespace.clone()),
            image: f.image.clone(),
            platform: f.platform,
            webhook_excluded_namespaces: list(&f.webhook_excluded_namespaces),
            replicas: f.replicas,
            restart_concurrency: f.restart_concurrency,
            restart_deadline: f.restart_deadline,
            failure_policy: f.failure_policy,
            priority_class_name: f.priority_class_name.clone(),
            ignore_cluster: f.ignore_cluster,
            api_server_cidrs: list(&f.api_server_cidrs),
            skip_secondary_subnets: f.skip_secondary_subnets,
            cluster_cidrs: list(&f.cluster_cidrs),
            protected_cidrs: list(&f.protected_cidrs),
            metrics_namespaces: list(&f.metrics_namespaces),
            day2: f.day2.settings(),
            monitoring: f.monitoring,
            ..Settings::default()
        }
    }

    /// Prints the manifests; notes go to stderr.
    pub fn run(self) -> Result<Outcome, Error> {
        self.flags.kube.init_logging();
        let options = self
            .flags
            .parts
            .options(self.settings())
            .map_err(install::Error::from)?;
        let target = self.flags.kube.target();
        let runtime = super::runtime().map_err(Error::Runtime)?;
        let installed = runtime.block_on(install::install(&target, &options))?;
        Ok(Outcome {
            stdout: installed.yaml,
            stderr: installed.notes.iter().map(|n| format!("{n}\n")).collect(),
            code: 0,
        })
    }
}

/// `uninstall`'s flags.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    kube: KubeFlags,
}

impl UninstallArgs {
    /// Prints what removes the extension; nothing, said on stderr, when it is not installed.
    pub fn run(self) -> Result<Outcome, Error> {
        self.kube.init_logging();
        let target = self.kube.target();
        let runtime = super::runtime().map_err(Error::Runtime)?;
        let removal =
            runtime.block_on(uninstall::objects(&target, &self.kube.linkerd_namespace))?;
        let mut stderr: String = removal.notes.iter().map(|n| format!("{n}\n")).collect();
        if removal.objects.is_empty() {
            stderr.push_str(
                "linkerd-multus is not installed: no object labelled linkerd.io/extension=multus\n",
            );
        }
        Ok(Outcome {
            stdout: uninstall::manifests(&removal.objects),
            stderr,
            code: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        install: InstallArgs,
    }

    fn settings(args: &[&str]) -> Settings {
        let mut all = vec!["install"];
        all.extend(args);
        let install = Cli::try_parse_from(all).unwrap().install;
        let parts = &install.flags.parts;
        Settings {
            manage_nads: parts.manage_nads,
            cni_namespace: parts.cni_namespace.clone(),
            restart_stale_workloads: parts.restart_stale_workloads,
            network_resources: parts.network_resources,
            certs: parts.certs,
            ..install.settings()
        }
    }

    #[test]
    fn flags_give_settings_only_where_given() {
        assert_eq!(settings(&[]), Settings::default());
        let given = settings(&[
            "--namespace=mesh",
            "-L",
            "l5d",
            "--replicas",
            "3",
            "--failure-policy",
            "Ignore",
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-concurrency=4",
            "--restart-deadline",
            "1h 30m",
            "--network-resources=false",
            "--certs=cert-manager",
            "--ignore-cluster=true",
            "--api-server-cidr=10.0.0.0/24,fd00::/64",
            "--api-server-cidr",
            "192.0.2.0/24",
            "--skip-secondary-subnets=enabled",
            "--cluster-cidr=10.244.0.0/16,10.96.0.0/12",
            "--protected-cidr=192.168.0.0/16",
            "--protected-cidr",
            "203.0.113.0/24,198.51.100.0/24",
            "--metrics-namespace=openshift-monitoring",
            "--metrics-namespace=openshift-user-workload-monitoring",
            "--image=mirror.example:5000/linkerd/multus:0.1.0",
            "--platform=openshift",
            "--webhook-excluded-namespace=legacy,team-*",
            "--webhook-excluded-namespace",
            "ops",
        ]);
        assert_eq!(
            given,
            Settings {
                namespace: Some("mesh".into()),
                linkerd_namespace: Some("l5d".into()),
                replicas: Some(3),
                failure_policy: Some(FailurePolicy::Ignore),
                manage_nads: Some(true),
                restart_stale_workloads: Some(true),
                restart_concurrency: Some(4),
                restart_deadline: Some(std::time::Duration::from_secs(90 * 60)),
                network_resources: Some(false),
                certs: Some(Certs::CertManager),
                ignore_cluster: Some(true),
                api_server_cidrs: Some(vec![
                    "10.0.0.0/24".into(),
                    "fd00::/64".into(),
                    "192.0.2.0/24".into()
                ]),
                skip_secondary_subnets: Some(true),
                cluster_cidrs: Some(vec!["10.244.0.0/16".into(), "10.96.0.0/12".into()]),
                protected_cidrs: Some(vec![
                    "192.168.0.0/16".into(),
                    "203.0.113.0/24".into(),
                    "198.51.100.0/24".into()
                ]),
                metrics_namespaces: Some(vec![
                    "openshift-monitoring".into(),
                    "openshift-user-workload-monitoring".into()
                ]),
                image: Some("mirror.example:5000/linkerd/multus:0.1.0".into()),
                platform: Some(Platform::OpenShift),
                webhook_excluded_namespaces: Some(vec![
                    "legacy".into(),
                    "team-*".into(),
                    "ops".into()
                ]),
                ..Settings::default()
            }
        );
    }

    #[test]
    fn bad_flag_values_are_refused_by_name() {
        for (args, want) in [
            (&["--replicas", "two"][..], "--replicas"),
            (&["--failure-policy", "fail"][..], "Fail, Ignore"),
            (
                &["--certs", "vault"][..],
                "generate, cert-manager, openshift-service-ca",
            ),
            (&["--manage-nads=maybe"][..], "--manage-nads"),
            (
                &["--restart-stale-workloads=maybe"][..],
                "--restart-stale-workloads",
            ),
            (&["--platform=OpenShift"][..], "kubernetes, openshift"),
            (&["--skip-secondary-subnets=true"][..], "enabled, disabled"),
        ] {
            let mut all = vec!["install"];
            all.extend(args);
            let err = Cli::try_parse_from(all).err().unwrap().to_string();
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}
