//! The Kubernetes vocabulary every rule set and front speaks: resources and
//! their references, the ResourceList and its results, workload kinds and
//! their pod templates, namespaces, NetworkAttachmentDefinitions, the Multus
//! networks annotation, interface names, settings objects, JSON Patch and
//! the checks of a CNI configuration. It knows no rule set.

pub mod cni_config;
pub mod interface_name;
pub mod json_patch;
pub mod nad;
pub mod namespace;
pub mod networks;
pub mod resource;
pub mod resource_list;
pub mod results;
pub mod settings_object;
pub mod workload;
