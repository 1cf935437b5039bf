//! The function pipeline: reads the `functionConfig` (its kind names the
//! rule set), identifies the items, and hands the package to that one rule
//! set. The only module that knows all three rule sets.

use crate::k8s::resource::{InputError, identify};
use crate::krm::function_config::{API_VERSION, SettingsError};
use crate::krm::results::FnResult;
use crate::linkerd_cni::{self, settings::Settings};
use crate::network_resources::{self, settings::read_network_resources};
use crate::validation;
use crate::yaml::Node;

/// What a functionConfig asks the function to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionConfig {
    /// Attach Linkerd-CNI (a `LinkerdMultus`, a ConfigMap, or no config).
    LinkerdMultus(Settings),
    /// Apply the network-resources rules (a `NetworkResources`).
    NetworkResources(network_resources::settings::Settings),
    /// Check the package and change nothing (a `Validation`).
    Validation(validation::settings::Settings),
}

impl FunctionConfig {
    /// Reads a functionConfig: its kind says which rules run.
    pub fn read(config: Option<&Node>) -> Result<Self, SettingsError> {
        let typed = |node: &Node, kind: &str| {
            node.as_map().is_some_and(|map| {
                map.get_text("apiVersion") == Some(API_VERSION)
                    && map.get_text("kind") == Some(kind)
            })
        };
        match config {
            Some(node) if typed(node, network_resources::settings::KIND) => {
                read_network_resources(node).map(FunctionConfig::NetworkResources)
            }
            Some(node) if typed(node, validation::settings::KIND) => {
                validation::settings::Settings::from_config(node).map(FunctionConfig::Validation)
            }
            _ => Settings::from_function_config(config).map(FunctionConfig::LinkerdMultus),
        }
    }
}

/// Renders the package with the rules the functionConfig's kind names: the
/// items are identified first; an item that is not a resource fails the input.
pub fn render_with(
    items: &mut Vec<Node>,
    config: &FunctionConfig,
) -> Result<Vec<FnResult>, InputError> {
    let refs = identify(items)?;
    Ok(match config {
        FunctionConfig::LinkerdMultus(settings) => {
            linkerd_cni::package::render(items, &refs, settings)
        }
        FunctionConfig::NetworkResources(settings) => {
            network_resources::package::render(items, &refs, settings)
        }
        FunctionConfig::Validation(settings) => {
            validation::package::validate(items, &refs, settings)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    #[test]
    fn a_wrong_kind_names_every_rule_set() {
        let config = parse_document("apiVersion: v1\nkind: Secret\n").unwrap();
        let err = FunctionConfig::read(Some(&config)).unwrap_err().to_string();
        for kind in [
            linkerd_cni::settings::KIND,
            network_resources::settings::KIND,
            validation::settings::KIND,
        ] {
            assert!(err.contains(kind), "{err}");
        }
    }
}
