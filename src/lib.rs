//! linkerd-multus: attaches Linkerd-CNI to workloads through Multus, at render time.
//!
//! Layers, each importing only those before it: [`yaml`]; the Kubernetes
//! vocabulary [`k8s`]; three rule sets side by side, none importing another
//! ([`linkerd_cni`], [`network_resources`], [`validation`]); the function
//! [`pipeline`], which hands a package to one rule set; and the fronts
//! ([`commands`], [`admission`], [`controller`],
//! [`webhook`], and the binary's `main.rs`).
#![forbid(unsafe_code)]

pub mod admission;
pub mod commands;
#[cfg(feature = "webhook")]
pub mod controller;
pub mod k8s;
pub mod krm;
pub mod linkerd_cni;
pub mod multus;
pub mod network_resources;
pub mod pipeline;
pub mod validation;
#[cfg(feature = "webhook")]
pub mod webhook;
pub mod yaml;
