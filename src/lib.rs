//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
#![forbid(unsafe_code)]

pub mod admission;
pub mod attach;
pub mod cni_config;
pub mod diff;
pub mod environment;
pub mod interface_name;
pub mod json_patch;
pub mod krm;
pub mod manifests;
pub mod nad;
pub mod namespace;
pub mod network_resources;
pub mod networks;
pub mod render;
pub mod renderer;
pub mod resource;
pub mod resource_list;
pub mod results;
pub mod rollout;
pub mod settings;
pub mod validate;
pub mod validator;
pub mod webhook;
pub mod workload;
pub mod yaml;
