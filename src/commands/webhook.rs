//! `linkerd-multus webhook`: its flags, the settings they give, and the
//! webhook (with `--manage-nads`, its NAD controller) run with them.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::commands::flags::{NadSettings, PodSettings};
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
    pub fn run(self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let mut flags = self.settings.flags();
        flags.extend(self.nad.flags());
        let settings = settings(self.config.as_deref(), flags, env)?;
        let network_resources = network_resources(self.args.network_resources.as_deref(), env)?;
        webhook::run(self.args, settings, network_resources)
    }
}

/// The Linkerd-CNI settings: `--config`, then `LINKERD_MULTUS_*`, then the
/// flags, each naming itself in errors.
fn settings(
    config: Option<&Path>,
    flags: Vec<(&'static str, String)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<linkerd_cni::settings::Settings> {
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
/// when neither is set (the rules are off).
fn network_resources(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<network_resources::settings::Settings>> {
    let variable = format!("environment variable {NETWORK_RESOURCES_VARIABLE}");
    let (path, source) = match (flag, env(NETWORK_RESOURCES_VARIABLE)) {
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
