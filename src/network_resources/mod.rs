//! The network-resources rules (after network-resources-injector): what a pod
//! template gets from the NetworkAttachmentDefinitions it selects. Pure code,
//! shared by the KRM function, the renderer and the webhook.
//!
//! For every selection in `k8s.v1.cni.cncf.io/networks` and
//! `v1.multus-cni.io/default-network`, the selected NAD must exist. Each NAD's
//! resource name (one of the configured annotation keys) counts one; the
//! totals go into the requests and limits of the first container (or the one
//! the template names, [`pod_template::CONTAINER_ANNOTATION`]), leaving alone a
//! resource the user set in any container, or, with `honorResources`, added to
//! that container's own value; a template with `spec.resourceClaims` gets none
//! for resources whose devices come through its claims. A template can opt out
//! ([`pod_template::OPT_OUT_ANNOTATION`]). Each NAD's node selector is merged into
//! `spec.nodeSelector`. Optionally the `podnetinfo` downward-API volume
//! exposes labels, annotations and hugepages. Injections add annotations to
//! pods labelled `<label>: "true"`. With `interfaceNames: deterministic`, every
//! selection without an interface gets the Kaloom podagent name
//! ([`crate::multus::interface_name`]). What the rules add is recorded on the
//! workload ([`record::RECORD_ANNOTATION`]), so a later render changes or
//! removes exactly that.
//!
//! The rules for one pod template are in [`pod_template`], its edits in the
//! files below it (`injections`, `resources`, `node_selector` and
//! `downward_api`); the NADs they see are in [`nads`] and their errors in
//! [`error`]; [`package`] applies the rules to a whole package and
//! [`settings`] reads the `NetworkResources` kind; [`from_injector`] turns the
//! injector's own flags and ConfigMap into it.

pub mod error;
pub mod from_injector;
pub mod nads;
pub mod package;
pub mod pod_template;
pub mod record;
pub mod settings;

pub use error::Error;
#[cfg(test)]
pub(crate) use nads::nad_table;
pub use nads::{NODE_SELECTOR_ANNOTATION, NadTable, Nads, nad_annotation_keys};
pub use pod_template::workload;
