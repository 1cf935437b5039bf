//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
//!
//! Layers, each importing only those below it and none beside it
//! (`tests/layering.rs`): the work meter [`work`]; [`yaml`]; the Kubernetes vocabulary [`k8s`]; the
//! KRM protocol [`krm`] and [`multus`]; three rule sets ([`linkerd_cni`],
//! [`network_resources`], [`validation`]); the [`pipeline`] (settings resolved
//! from every source, a package handed to one rule set) and [`admission`]
//! (the rules on one pod of an admission review); the cluster fronts
//! [`webhook`], [`controller`] and the Linkerd extension [`extension`]; the
//! command line [`commands`], which wires
//! them; and the binary's `main.rs`.
#![forbid(unsafe_code)]

pub mod admission;
pub mod commands;
#[cfg(feature = "webhook")]
pub mod controller;
#[cfg(feature = "webhook")]
pub mod extension;
pub mod k8s;
pub mod krm;
pub mod linkerd_cni;
pub mod multus;
pub mod network_resources;
pub mod pipeline;
pub mod validation;
#[cfg(feature = "webhook")]
pub mod webhook;
pub mod work;
pub mod yaml;
