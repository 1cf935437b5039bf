//! `from-injector`: prints the `NetworkResources` object equivalent to a
//! running network-resources-injector, from its `nri-control-switches`
//! ConfigMap and its flags, to review and commit once (rather than the
//! function reading the injector's ConfigMap on every run).

use std::path::PathBuf;

use clap::Args;

use crate::commands::outcome::Outcome;
use crate::network_resources::from_injector::{self, CONFIG_MAP, config_json};
use crate::yaml::{Node, parse_document};

/// `from-injector`: the injector's ConfigMap and flags.
#[derive(Args)]
pub struct FromInjectorArgs {
    /// The injector's nri-control-switches ConfigMap, as `kubectl get
    /// configmap -n kube-system nri-control-switches -o yaml` prints it (- for
    /// stdin); without it, the flags alone, as when the injector finds none.
    #[arg(long, value_name = "FILE|-")]
    config_map: Option<PathBuf>,
    /// The name of the object printed.
    #[arg(long, value_name = "NAME", default_value = "network-resources")]
    name: String,
    /// The injector's flags (its webhook-server container's args), after --.
    #[arg(last = true, value_name = "INJECTOR_FLAGS", allow_hyphen_values = true)]
    injector_flags: Vec<String>,
}

/// Why the injector's settings could not be read.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{path}: {message}")]
    ConfigMap { path: String, message: String },
    #[error(transparent)]
    Flags(from_injector::Error),
}

impl FromInjectorArgs {
    /// Prints the object on stdout and the notes on stderr; exits 1 on bad input.
    pub fn run(self, read_stdin: impl FnOnce() -> std::io::Result<String>) -> Outcome {
        match self.translate(read_stdin) {
            Ok((stdout, notes)) => Outcome {
                stdout,
                stderr: notes.iter().map(|n| format!("note: {n}\n")).collect(),
                code: 0,
            },
            Err(e) => Outcome {
                stdout: String::new(),
                stderr: format!("error: {e}\n"),
                code: 1,
            },
        }
    }

    fn translate(
        &self,
        read_stdin: impl FnOnce() -> std::io::Result<String>,
    ) -> Result<(String, Vec<String>), Error> {
        let shown = self.config_map.as_ref().map(|p| p.display().to_string());
        let bad = |message: String| Error::ConfigMap {
            path: shown.clone().unwrap_or_default(),
            message,
        };
        let config_map = match &self.config_map {
            None => None,
            Some(path) => {
                let text = if path.as_os_str() == "-" {
                    read_stdin()
                } else {
                    std::fs::read_to_string(path)
                }
                .map_err(|e| bad(e.to_string()))?;
                let node = parse_document(&text).map_err(|e| bad(e.to_string()))?;
                Some(the_config_map(node).map_err(bad)?)
            }
        };
        let json = config_map.as_ref().and_then(config_json);
        let mut notes = Vec::new();
        if config_map.is_some() && json.is_none() {
            notes.push(format!(
                "the ConfigMap has no {}: the injector runs with its flags",
                from_injector::CONFIG_KEY
            ));
        }
        let translation =
            from_injector::translate(&self.injector_flags, json).map_err(|e| match e {
                from_injector::Error::Injection { .. } => bad(e.to_string()),
                e => Error::Flags(e),
            })?;
        notes.extend(translation.notes);
        let object = from_injector::to_object(&translation.settings, &self.name);
        Ok((object, notes))
    }
}

/// The injector's ConfigMap: the document itself, or the one of that name
/// in a `kind: List` (as `kubectl get -o yaml` prints several objects).
fn the_config_map(node: Node) -> Result<Node, String> {
    let kind = |n: &Node| {
        n.as_map()
            .and_then(|m| m.get_text("kind"))
            .unwrap_or_default()
            .to_string()
    };
    let name = |n: &Node| {
        n.as_map()
            .and_then(|m| m.get("metadata"))
            .and_then(Node::as_map)
            .and_then(|m| m.get_text("name"))
            .map(str::to_string)
    };
    match kind(&node).as_str() {
        "ConfigMap" => Ok(node),
        "List" => node
            .as_map()
            .and_then(|m| m.get("items"))
            .and_then(Node::as_seq)
            .and_then(|items| {
                items
                    .items
                    .iter()
                    .find(|i| kind(i) == "ConfigMap" && name(i).as_deref() == Some(CONFIG_MAP))
            })
            .cloned()
            .ok_or_else(|| format!("the List holds no ConfigMap {CONFIG_MAP}")),
        "" => Err("is not a Kubernetes object".into()),
        other => Err(format!(
            "is a {other}, not the injector's ConfigMap {CONFIG_MAP}"
        )),
    }
}
