//! `linkerd-multus webhook`: its flags, the settings they give, and the
//! webhook (with `--manage-nads`, its NAD controller) run with them.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;

use crate::commands::flags::{NadSettings, PodSettings};
use crate::commands::{read_config, read_settings_file};
use crate::environment::{self, NETWORK_RESOURCES_VARIABLE};
use crate::krm::function_config;
use crate::linkerd_cni::settings::{self as core_settings, Settings};
use crate::network_resources;
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
        let settings = settings(self.config.as_deref(), &flags, env)?;
        let network_resources =
            network_resources_settings(self.args.network_resources.as_deref(), env)?;
        webhook::run(self.args, settings, network_resources)
    }
}

/// The core settings for the webhook: `--config`, then `LINKERD_MULTUS_*`,
/// then the flags, each naming itself in errors.
fn settings(
    config: Option<&Path>,
    flags: &[(&'static str, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Settings> {
    let mut settings = match config {
        None => Settings::default(),
        Some(path) => {
            let node = read_config(path).map_err(|e| anyhow!(e))?;
            if is_network_resources(&node) {
                return Err(anyhow!(
                    "--config {path}: is a {kind}: the webhook takes it as --network-resources {path} (--config holds the {lm} settings)",
                    path = path.display(),
                    kind = network_resources::settings::KIND,
                    lm = core_settings::KIND,
                ));
            }
            Settings::from_function_config(Some(&node))
                .map_err(|e| anyhow!("--config {}: {e}", path.display()))?
        }
    };
    let mut values = environment::prefixed(env, environment::PREFIX);
    values.extend(environment::flags(flags));
    environment::apply(&mut settings, &values).map_err(|e| anyhow!(e))?;
    Ok(settings)
}

fn is_network_resources(node: &crate::yaml::Node) -> bool {
    node.as_map().is_some_and(|m| {
        m.get_text("apiVersion") == Some(function_config::API_VERSION)
            && m.get_text("kind") == Some(network_resources::settings::KIND)
    })
}

/// The settings of the network-resources rules: the file of
/// `--network-resources`, else of `LINKERD_MULTUS_NETWORK_RESOURCES`; `None`
/// when neither is set (the rules are off). Errors name the file and setting.
fn network_resources_settings(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<network_resources::settings::Settings>> {
    let (path, source) = match (flag, env(NETWORK_RESOURCES_VARIABLE)) {
        (Some(path), _) => (path.to_path_buf(), "--network-resources".to_string()),
        (None, Some(path)) if !path.is_empty() => (
            PathBuf::from(path),
            format!("environment variable {NETWORK_RESOURCES_VARIABLE}"),
        ),
        (None, _) => return Ok(None),
    };
    let node = read_settings_file(&source, &path).map_err(|e| anyhow!(e))?;
    let at = format!("{source} {}", path.display());
    if node.as_map().and_then(|m| m.get_text("kind")) == Some(core_settings::KIND) {
        return Err(anyhow!(
            "{at}: is a {}: give it as --config; {source} takes a {} ({}) or a ConfigMap",
            core_settings::KIND,
            network_resources::settings::KIND,
            function_config::API_VERSION,
        ));
    }
    network_resources::settings::read_network_resources(&node)
        .map(Some)
        .map_err(|e| anyhow!("{at}: {e}"))
}
