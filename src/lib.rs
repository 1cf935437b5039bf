//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
#![forbid(unsafe_code)]

pub mod yaml;
pub mod networks;
pub mod resource;
pub mod results;
pub mod settings;
pub mod workload;
pub mod attach;
pub mod cni_config;
pub mod namespace;
pub mod krm;
pub mod nad;
pub mod render;
pub mod resource_list;
