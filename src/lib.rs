//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
#![forbid(unsafe_code)]

pub mod admission;
pub mod diff;
pub mod environment;
pub mod k8s;
pub mod krm;
pub mod linkerd_cni;
pub mod manifests;
pub mod network_resources;
pub mod pipeline;
pub mod renderer;
pub mod validation;
pub mod validator;
pub mod webhook;
pub mod yaml;
