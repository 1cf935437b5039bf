//! Why a pod template cannot get its network resources.

use super::nads::NODE_SELECTOR_ANNOTATION;
use crate::multus::interface_name::InterfaceNameError;
use crate::multus::networks::{DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, NetworksError};

/// Why a pod template cannot get its network resources. Nothing changes then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A networks annotation Multus would reject.
    #[error("annotation {annotation}: {source}")]
    Networks {
        /// The annotation.
        annotation: &'static str,
        /// What is wrong.
        source: NetworksError,
    },
    /// The default-network annotation selects more or fewer than one network.
    #[error("annotation {DEFAULT_NETWORK_ANNOTATION}: selects {0} networks; it takes exactly one")]
    DefaultNetworkCount(usize),
    /// Selected NADs that do not exist.
    #[error("{}", missing(.0))]
    MissingNads(Vec<String>),
    /// A NAD's node selector is malformed.
    #[error(
        "NetworkAttachmentDefinition {nad}: annotation {NODE_SELECTOR_ANNOTATION} {value:?} has more than one \"=\""
    )]
    NodeSelector {
        /// The NAD, `namespace/name`.
        nad: String,
        /// The annotation's value.
        value: String,
    },
    /// Two sources want different values for one node label.
    #[error(
        "spec.nodeSelector {key}: {first} asks for {first_value:?} but {second} for {second_value:?}"
    )]
    NodeSelectorConflict {
        /// The node label.
        key: String,
        /// Where the first value comes from.
        first: String,
        /// The first value.
        first_value: String,
        /// Where the second value comes from.
        second: String,
        /// The second value.
        second_value: String,
    },
    /// Two injections set one annotation to different values.
    #[error(
        "injections {first} and {second} set annotation {key} to different values; the pod has both labels"
    )]
    InjectionConflict {
        /// The annotation.
        key: String,
        /// The first injection's label.
        first: String,
        /// The second injection's label.
        second: String,
    },
    /// Interfaces cannot be named deterministically.
    #[error("annotation {NETWORKS_ANNOTATION}: {0}{hint}", hint = interface_hint(.0))]
    InterfaceNames(InterfaceNameError),
    /// A pod-template annotation of these rules has a value they do not take.
    #[error("annotation {annotation} {message}")]
    Annotation {
        /// The annotation.
        annotation: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// The container chosen for the resources is not in the pod template.
    #[error(
        "annotation {annotation} names container {name:?}, which the pod template does not have (its containers: {})",
        .containers.join(", ")
    )]
    UnknownContainer {
        /// The annotation that names it.
        annotation: &'static str,
        /// The name chosen.
        name: String,
        /// The names of the template's containers.
        containers: Vec<String>,
    },
    /// A field has the wrong shape.
    #[error("{0}")]
    Shape(String),
}

fn interface_hint(e: &InterfaceNameError) -> &'static str {
    match e {
        InterfaceNameError::Collision { .. } => {
            " (interfaceNames: deterministic hashes the network name only); give one of them an explicit interface"
        }
        _ => "",
    }
}

fn missing(nads: &[String]) -> String {
    match nads {
        [one] => format!("selects NetworkAttachmentDefinition {one}, which does not exist"),
        [rest @ .., last] => format!(
            "selects NetworkAttachmentDefinitions {} and {last}, which do not exist",
            rest.join(", ")
        ),
        [] => "selects no missing NetworkAttachmentDefinition".into(),
    }
}
