//! The Kubernetes vocabulary every layer above speaks: resources and their
//! references, names, container image references, workload kinds and their pod templates, namespaces
//! (and those reserved to the platforms and Linkerd) and JSON Patch. It knows no rule set, nor KRM's or Multus's own objects.

pub mod image;
pub mod json_patch;
pub mod names;
pub mod namespace;
pub mod reserved;
pub mod resource;
pub mod workload;
