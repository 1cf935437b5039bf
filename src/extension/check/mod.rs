//! `linkerd multus check`: what is wrong in a live cluster, and what to do.
//! Each check names the objects it found wrong and gives a hint with the fix;
//! [`report`] prints them as `linkerd check` does.
//!
//! Three sets, by flag: the installed extension (its objects, the
//! certificate, a probe through the API server; the CNI side; the NADs), the
//! data plane (`--proxy`: [`proxy`]) and what `install` needs (`--pre`:
//! [`pre`]). Each kind is read once per pass ([`snapshot`]); failures that
//! may mend themselves are retried until `--wait` has passed ([`wait`]).

pub mod certificate;
pub mod cni;
pub mod controller;
pub mod deployment;
pub mod extension;
pub mod nads;
pub mod network_policy;
pub mod opt_ins;
pub mod pre;
pub mod probe;
pub mod proxy;
pub mod report;
pub mod rollouts;
pub mod snapshot;
pub mod wait;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;
pub use report::{Category, Check, Outcome, Report};
use wait::{Pass, Retry};

use super::client::{Target, anyhow_text};
use super::install::options::Options as InstallOptions;

/// The category of the extension's own objects.
pub const EXTENSION: &str = "linkerd-multus";
/// The category of the CNI side: the CRD and the Linkerd-CNI ConfigMap.
pub const CNI: &str = "linkerd-multus-cni";
/// The category of the NADs.
pub const NADS: &str = "linkerd-multus-nads";
/// The category of `--proxy`.
pub const DATA_PLANE: &str = "linkerd-multus-data-plane";
/// The category of `--pre`.
pub const PRE: &str = "linkerd-multus-pre";

/// The hint of what only installing mends.
pub const INSTALL_HINT: &str = "install the extension: linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -";

/// How many objects an error names before `and N more`.
pub const NAMED: usize = 10;

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
    /// What `install` will be run with, for `--pre`: its options, or why
    /// they are not valid.
    pub install: Result<InstallOptions, String>,
}

/// Runs the checks the options choose against the target's API server,
/// again while a failure that may mend itself remains, until `--wait` has passed.
pub async fn run(target: &Target, options: &Options) -> Report {
    let first = match (options.pre, options.proxy) {
        (true, _) => PRE,
        (false, true) => DATA_PLANE,
        _ => EXTENSION,
    };
    let description = "can initialize the client";
    let client = match target.client().await {
        Ok(client) => client,
        Err(e) => {
            let mut pass = Pass::default();
            let hint = "pass --kubeconfig, --context or --api-addr for the cluster to check";
            pass.add(
                first,
                Check::error(description, anyhow_text(&e), hint),
                Retry::No,
            );
            return pass.report;
        }
    };
    let pass = || async {
        let mut pass = Pass::default();
        pass.add(first, Check::success(description), Retry::No);
        match (options.pre, options.proxy) {
            (true, _) => pre::check(&client, options, &mut pass).await,
            (false, true) => proxy::check(&client, options, &mut pass).await,
            _ => installed(&client, options, &mut pass).await,
        }
        pass
    };
    // On stderr: stdout holds the table or the JSON alone.
    let waiting = |checks: &[String], left| eprintln!("{}", wait::waiting_line(checks, left));
    wait::until(options.wait, pass, waiting).await
}

/// The installed extension: its objects, the CNI side, the NADs.
async fn installed(client: &Client, options: &Options, pass: &mut Pass) {
    let namespaces = snapshot::namespaces(client).await;
    let installed =
        match extension::namespace_and_deployment(client, options, &namespaces, pass).await {
            Some((mut installed, webhook_args)) => {
                controller::check(client, &mut installed, &webhook_args, pass).await;
                network_policy::check(client, &installed.namespace, &webhook_args, pass).await;
                Some(installed)
            }
            None => None,
        };
    let settings = installed
        .as_ref()
        .map(|i| i.settings.clone())
        .unwrap_or_else(|| extension::default_settings(options));
    let crd = cni::crd_served(client).await;
    let nads = match crd {
        Ok(true) => snapshot::nads(client, &settings.nad_name).await.map(Some),
        _ => Ok(None),
    };
    let config_map = cni::config_map(client, &settings).await;
    if let (Some(installed), Ok(all)) = (&installed, &namespaces)
        && let Some(config) = extension::webhook_configuration(client, installed, pass).await
    {
        certificate::check(client, installed, &config, pass).await;
        let empty = BTreeMap::new();
        let nads = nads
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .unwrap_or(&empty);
        probe::check(client, installed, &config, all, nads, pass).await;
    }
    let (check, retry) = cni::crd_check(&crd);
    pass.add(CNI, check, retry);
    let config = cni::config_map_checks(CNI, &config_map, &settings, pass);
    let installed = installed.unwrap_or_else(|| extension::Installed {
        namespace: super::DEFAULT_NAMESPACE.into(),
        settings,
        manage_nads: false,
        restarts: None,
    });
    match (&namespaces, &nads) {
        (Ok(all), Ok(Some(nads))) => nads::check(&installed, all, nads, config.as_deref(), pass),
        (Ok(_), Ok(None)) => {}
        (Err(e), _) | (_, Err(e)) => {
            let description = "the NADs can be read";
            let check = extension::read_error(description, "Namespaces and NADs", e);
            pass.add(NADS, check, Retry::Yes);
        }
    }
    if let Ok(all) = &namespaces {
        opt_ins::check(all, pass);
    }
}

/// `names` joined by commas, the first [`NAMED`] of them and `and N more`.
pub fn capped(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(NAMED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_capped() {
        let names: Vec<String> = (0..13).map(|i| format!("ns-{i:02}")).collect();
        assert_eq!(capped(&names[..2]), "ns-00, ns-01");
        assert_eq!(
            capped(&names),
            "ns-00, ns-01, ns-02, ns-03, ns-04, ns-05, ns-06, ns-07, ns-08, ns-09 and 3 more"
        );
    }
}
