//! `linkerd-multus webhook`: its flags, the settings they give, and the
//! webhook run with them. The NAD controller it once ran beside its server
//! (`--manage-nads`) is `linkerd-multus controller` now ([`super::controller`]):
//! the flags of an earlier release's manifests are still read, so that a new
//! image runs them, and `--manage-nads=true` is refused, naming the command
//! that runs the controller now.

use std::path::{Path, PathBuf};

use clap::Args;
use clap::builder::PossibleValue;

use crate::admission::{MissingNad, OnError};
use crate::commands::flags::{PodSettings, linkerd_cni_settings};
use crate::commands::outcome::Error;
use crate::network_resources;
use crate::pipeline::FunctionConfig;
use crate::pipeline::environment::NETWORK_RESOURCES_VARIABLE;
use crate::pipeline::settings::{self, Given, Sources, Takes};
use crate::webhook;

/// The webhook's flags and its settings.
#[derive(Args)]
pub struct WebhookArgs {
    #[command(flatten)]
    args: webhook::Args,
    /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: PodSettings,
    #[command(flatten)]
    moved: Moved,
}

impl WebhookArgs {
    /// Runs the webhook until SIGTERM or SIGINT; `env` reads environment variables.
    pub fn run(self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
        self.moved.check()?;
        let settings = linkerd_cni_settings(self.config.as_deref(), self.settings.flags(), env)?;
        let network_resources = network_resources(self.args.network_resources.as_deref(), env)?;
        webhook::run(self.args, settings, network_resources).map_err(Error::Webhook)
    }
}

/// The flags of the NAD controller that an earlier release's webhook took,
/// hidden: its manifests pass `--manage-nads=false` and `--cni-namespace`,
/// which change nothing here; the controller's own flags are refused, naming
/// `linkerd-multus controller`.
#[derive(Debug, Clone, Args)]
#[group(id = "moved_to_controller")]
pub struct Moved {
    #[arg(long, hide = true, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    manage_nads: bool,
    #[arg(long, hide = true, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    restart_stale_workloads: bool,
    #[arg(long, hide = true)]
    restart_concurrency: Option<String>,
    #[arg(long, hide = true)]
    restart_deadline: Option<String>,
    #[arg(long, hide = true)]
    lease_name: Option<String>,
    #[arg(long, hide = true)]
    lease_namespace: Option<String>,
    #[arg(long, hide = true)]
    lease_duration: Option<String>,
    #[arg(long, hide = true)]
    identity: Option<String>,
    #[arg(long, hide = true)]
    cni_namespace: Option<String>,
    #[arg(long, hide = true)]
    cni_kubeconfig: Option<String>,
    #[arg(long, hide = true)]
    cni_version: Option<String>,
}

impl Moved {
    /// The first of the controller's flags given: refused.
    fn check(&self) -> Result<(), Error> {
        let given = [
            ("--manage-nads", self.manage_nads),
            ("--restart-stale-workloads", self.restart_stale_workloads),
            ("--restart-concurrency", self.restart_concurrency.is_some()),
            ("--restart-deadline", self.restart_deadline.is_some()),
            ("--lease-name", self.lease_name.is_some()),
            ("--lease-namespace", self.lease_namespace.is_some()),
            ("--lease-duration", self.lease_duration.is_some()),
            ("--identity", self.identity.is_some()),
        ];
        match given.into_iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(Error::MovedToController(flag)),
            None => Ok(()),
        }
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
        moved: Moved,
    }

    /// An earlier release's manifests pass `--manage-nads=false` and the CNI
    /// flags: accepted; the controller's own flags are refused by name.
    #[test]
    fn the_controller_s_flags_are_refused_by_name() {
        for (args, refused) in [
            (&[][..], None),
            (
                &["--manage-nads=false", "--cni-namespace=linkerd-cni"][..],
                None,
            ),
            (&["--restart-stale-workloads=false"][..], None),
            (&["--manage-nads"][..], Some("--manage-nads")),
            (&["--manage-nads=true"][..], Some("--manage-nads")),
            (
                &["--restart-stale-workloads=true"][..],
                Some("--restart-stale-workloads"),
            ),
            (&["--lease-duration=15s"][..], Some("--lease-duration")),
            (&["--identity", "a"][..], Some("--identity")),
        ] {
            let mut all = vec!["webhook"];
            all.extend(args);
            let got = match Cli::parse_from(all).moved.check() {
                Err(Error::MovedToController(flag)) => Some(flag),
                Err(e) => panic!("{e}"),
                Ok(()) => None,
            };
            assert_eq!(got, refused, "{args:?}");
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
