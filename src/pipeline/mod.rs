//! The pipeline: the settings of a run resolved from every source
//! ([`settings`], over the text values of [`environment`]), and the package
//! handed to the one rule set they name ([`render`]). The only module that
//! knows all three rule sets.

pub mod environment;
pub mod settings;

use crate::k8s::resource::{InputError, identify};
use crate::krm::results::FnResult;
use crate::linkerd_cni;
use crate::network_resources;
use crate::validation;
use crate::yaml::Node;

pub use settings::FunctionConfig;

/// Renders the package with the rules the settings name: the items are
/// identified first; an item that is not a resource fails the input.
pub fn render(items: &mut Vec<Node>, config: &FunctionConfig) -> Result<Vec<FnResult>, InputError> {
    let refs = identify(items)?;
    Ok(match config {
        FunctionConfig::LinkerdMultus(settings) => {
            linkerd_cni::package::render(items, &refs, settings)
        }
        FunctionConfig::NetworkResources(settings) => {
            network_resources::package::render(items, &refs, settings)
        }
        FunctionConfig::Validation(settings) => {
            validation::package::validate(items, &refs, settings).into_results()
        }
    })
}
