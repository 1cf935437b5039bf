//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
#![forbid(unsafe_code)]

pub mod yaml;
