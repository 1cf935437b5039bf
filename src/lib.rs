//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
#![forbid(unsafe_code)]

pub mod admission;
pub mod attach;
pub mod cni_config;
pub mod diff;
pub mod environment;
pub mod k8s;
pub mod krm;
pub mod manifests;
pub mod network_resources;
pub mod render;
pub mod renderer;
pub mod rollout;
pub mod settings;
pub mod validate;
pub mod validator;
pub mod webhook;
pub mod yaml;
