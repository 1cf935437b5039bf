//! `linkerd-multus webhook`: its flags, the settings they give, and the
//! webhook (with `--manage-nads`, its NAD controller) run with them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use clap::builder::PossibleValue;

use crate::admission::{MissingNad, OnError};
use crate::commands::flags::{NadSettings, PodSettings};
use crate::commands::outcome::Error;
use crate::controller;
use crate::linkerd_cni;
use crate::network_resources;
use crate::pipeline::FunctionConfig;
use crate::pipeline::environment::{self, Environment, NETWORK_RESOURCES_VARIABLE};
use crate::pipeline::settings::{self, Given, Sources, Takes};
use crate::webhook;

/// The webhook's flags and its settings.
#[derive(Args)]
pub struct WebhookArgs {
    #[command(flatten)]
    args: webhook::Args,
    #[command(flatten)]
    controller: ControllerArgs,
    /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: PodSettings,
    #[command(flatten)]
    nad: NadSettings,
}

impl WebhookArgs {
    /// Runs the webhook until SIGTERM or SIGINT; `env` reads environment variables.
    pub fn run(self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
        let mut flags = self.settings.flags();
        flags.extend(self.nad.flags());
        let settings = settings(self.config.as_deref(), flags, env)?;
        let network_resources = network_resources(self.args.network_resources.as_deref(), env)?;
        let controller = self.controller.options(env, self.args.api_timeout)?;
        let companion = controller.map(|options| nad_controller(settings.clone(), options));
        webhook::run(self.args, settings, network_resources, companion).map_err(Error::Webhook)
    }
}

/// The NAD controller of `--manage-nads`, run beside the webhook's server.
fn nad_controller(
    settings: linkerd_cni::settings::Settings,
    options: controller::Options,
) -> webhook::Companion {
    Box::new(move |clients, registry, stop| {
        let metrics = Arc::new(controller::Metrics::register(registry));
        Box::pin(controller::run(
            clients.client,
            clients.once,
            settings,
            options,
            metrics,
            stop,
        ))
    })
}

/// The NAD controller's flags, on `linkerd-multus webhook`.
#[derive(Debug, Clone, Args)]
#[group(id = "nad_controller")]
pub struct ControllerArgs {
    /// Also keeps the Linkerd-CNI NAD in every namespace that needs it
    /// (annotated linkerd.io/multus: enabled, and the control-plane
    /// namespace), built from the live Linkerd-CNI ConfigMap: the Go
    /// operator's namespace controller. One replica writes, through a Lease.
    /// `--manage-nads=false` (the packages' setter) leaves it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    manage_nads: bool,
    /// The Lease that elects the replica which writes NADs.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "linkerd-multus-nad-controller"
    )]
    lease_name: String,
    /// Namespace of the Lease [default: $POD_NAMESPACE, the webhook's own].
    #[arg(long, value_name = "NAMESPACE")]
    lease_namespace: Option<String>,
    /// How long the Lease holds without a renewal: the longest a new leader
    /// waits after the old one died without releasing it. The leader renews
    /// every 2/15 of it and stops writing when it has not renewed within 2/3
    /// of it (client-go's 2 s and 10 s of 15 s).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// This replica's name in the Lease [default: $POD_NAME, else the host name].
    #[arg(long, value_name = "NAME")]
    identity: Option<String>,
    /// With --manage-nads: restart the workloads whose pods run an older
    /// Linkerd-CNI config than their namespace's NAD holds, where the pod
    /// template or the namespace says multus.linkerd.io/restart-on-config-change:
    /// enabled (docs/config-rollouts.md). Needs the rights of ../deploy-restarts.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    restart_stale_workloads: bool,
    /// How many workloads roll to a new config at once.
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u16).range(1..))]
    restart_concurrency: u16,
    /// How long one workload may roll before its namespace's restarts halt.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    restart_deadline: Duration,
}

impl ControllerArgs {
    /// The controller's options; `None` without `--manage-nads`. Errors say
    /// which flag or variable to set.
    fn options(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        api_timeout: Duration,
    ) -> Result<Option<controller::Options>, Error> {
        if !self.manage_nads {
            if self.restart_stale_workloads {
                return Err(Error::RestartsWithoutNadController);
            }
            return Ok(None);
        }
        let lease_namespace = self
            .lease_namespace
            .clone()
            .or_else(|| env("POD_NAMESPACE").filter(|n| !n.is_empty()))
            .ok_or(Error::NoLeaseNamespace)?;
        let lease_seconds = self.lease_duration.as_secs();
        if lease_seconds < 3 {
            let given = humantime::format_duration(self.lease_duration).to_string();
            return Err(Error::LeaseTooShort(given));
        }
        let identity = self
            .identity
            .clone()
            .or_else(|| env("POD_NAME").filter(|n| !n.is_empty()))
            .or_else(|| env("HOSTNAME").filter(|n| !n.is_empty()))
            .unwrap_or_else(|| format!("linkerd-multus-{}", std::process::id()));
        Ok(Some(controller::Options {
            lease_name: self.lease_name.clone(),
            lease_namespace,
            lease_seconds,
            identity,
            api_timeout,
            restarts: self
                .restart_stale_workloads
                .then_some(controller::restarts::Options {
                    concurrency: self.restart_concurrency.into(),
                    deadline: self.restart_deadline,
                }),
        }))
    }
}

/// `--on-error`: the admission policy as the command line names it.
impl clap::ValueEnum for OnError {
    fn value_variants<'a>() -> &'a [Self] {
        &[OnError::Allow, OnError::Deny]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            OnError::Allow => {
                PossibleValue::new("allow").help("Admit it unchanged, with a warning")
            }
            OnError::Deny => PossibleValue::new("deny").help("Deny it, saying why"),
        })
    }
}

/// `--missing-nad`: the policy as the command line names it.
impl clap::ValueEnum for MissingNad {
    fn value_variants<'a>() -> &'a [Self] {
        &[MissingNad::Deny, MissingNad::Attach, MissingNad::Ignore]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            MissingNad::Deny => PossibleValue::new("deny")
                .help("Deny it, naming the namespace, the NAD and the ways out"),
            MissingNad::Attach => PossibleValue::new("attach")
                .help("Attach it with a warning; kubelet retries its sandbox until the NAD exists"),
            MissingNad::Ignore => PossibleValue::new("ignore").help(
                "Do not look: attach it without a warning (and the webhook needs no NAD watch)",
            ),
        })
    }
}

/// The Linkerd-CNI settings: `--config`, then `LINKERD_MULTUS_*`, then the
/// flags, each naming itself in errors.
fn settings(
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

/// The settings of the network-resources rules: the file of
/// `--network-resources`, else of `LINKERD_MULTUS_NETWORK_RESOURCES`; `None`
/// when neither is set, or either is empty (the rules are off).
fn network_resources(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<network_resources::settings::Settings>, settings::Error> {
    let variable = format!("environment variable {NETWORK_RESOURCES_VARIABLE}");
    let (path, source) = match (flag, env(NETWORK_RESOURCES_VARIABLE)) {
        (Some(path), _) if path.as_os_str().is_empty() => return Ok(None),
        (Some(path), _) => (path.to_path_buf(), "--network-resources"),
        (None, Some(path)) if !path.is_empty() => (PathBuf::from(path), variable.as_str()),
        (None, _) => return Ok(None),
    };
    let mut sources = Sources::new(Takes::NetworkResources);
    sources.given = Given::File {
        source,
        path: &path,
    };
    match settings::resolve(sources)? {
        FunctionConfig::NetworkResources(settings) => Ok(Some(settings)),
        _ => unreachable!("--network-resources takes NetworkResources settings only"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        controller: ControllerArgs,
    }

    /// The packages' setter writes `--manage-nads=false` or `=true`; the bare flag still works.
    #[test]
    fn manage_nads_takes_a_value_the_setter_writes() {
        for (args, want) in [
            (&[][..], false),
            (&["--manage-nads"][..], true),
            (&["--manage-nads=true"][..], true),
            (&["--manage-nads=false"][..], false),
        ] {
            let mut all = vec!["webhook"];
            all.extend(args);
            assert_eq!(
                Cli::parse_from(all).controller.manage_nads,
                want,
                "{args:?}"
            );
        }
    }

    /// An empty `--network-resources` (the packages' default) is off, whatever the variable says.
    #[test]
    fn an_empty_network_resources_file_is_off() {
        let env = |_: &str| Some("/nonexistent".to_string());
        assert_eq!(network_resources(Some(Path::new("")), &env).unwrap(), None);
        assert!(network_resources(None, &env).is_err());
    }
}
