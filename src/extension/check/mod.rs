//! `linkerd multus check`: what is wrong in a live cluster, and what to do.
//! Each check names the objects it found wrong and gives a hint with the fix;
//! [`report`] prints them as `linkerd check` does.

pub mod report;

use std::time::Duration;

pub use report::{Category, Check, Outcome, Report};

use super::client::Target;

/// What `check` checks, from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The Linkerd control plane's namespace (`-L`).
    pub linkerd_namespace: String,
    /// The namespace of the `--proxy` checks (`-n`) [default: every namespace].
    pub namespace: Option<String>,
    /// Only what `install` needs (`--pre`).
    pub pre: bool,
    /// Only the data plane (`--proxy`).
    pub proxy: bool,
    /// How long failing checks are retried (`--wait`).
    pub wait: Duration,
}

/// Runs the checks the options choose against the target's API server.
pub async fn run(target: &Target, options: &Options) -> Report {
    let _ = options;
    let description = "can initialize the client";
    let check = match target.client().await {
        Ok(_) => Check::success(description),
        Err(e) => Check::error(
            description,
            format!("{e:#}"),
            "pass --kubeconfig, --context or --api-addr for the cluster to check",
        ),
    };
    Report {
        categories: vec![Category {
            name: "linkerd-multus".into(),
            checks: vec![check],
        }],
    }
}
