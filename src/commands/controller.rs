//! `linkerd-multus controller`: the NAD controller in a process of its own,
//! apart from the webhook (its own Deployment and ServiceAccount, in
//! `deploy-nad-controller/`): its flags, the settings they give, and the
//! controller run with them, listening on its operations port alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::commands::flags::{NadSettings, NameSettings, linkerd_cni_settings};
use crate::commands::outcome::Error;
use crate::controller;
use crate::webhook::LogFormat;
use crate::webhook::process::{self, ProcessArgs};

/// The controller's flags.
#[derive(Args)]
pub struct ControllerArgs {
    /// The Lease that elects the replica which writes.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "linkerd-multus-nad-controller"
    )]
    lease_name: String,
    /// Namespace of the Lease [default: $POD_NAMESPACE, the controller's own].
    #[arg(long, value_name = "NAMESPACE")]
    lease_namespace: Option<String>,
    /// How long the Lease holds without a renewal: the longest a new leader
    /// waits after the old one died without releasing it. The leader renews
    /// every 2/15 of it and stops writing when it has not renewed within 2/3
    /// of it (client-go's 2 s and 10 s of 15 s).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// This replica's name in the Lease [default: $POD_NAME, else the host name].
    #[arg(long, value_name = "NAME")]
    identity: Option<String>,
    /// Also restart the workloads whose pods run an older Linkerd-CNI config
    /// than their namespace's NAD holds, where the pod template or the
    /// namespace says multus.linkerd.io/restart-on-config-change: enabled
    /// (docs/config-rollouts.md); never in Kubernetes', OpenShift's, Linkerd's
    /// or Linkerd-CNI's namespaces. Needs the rights of ../deploy-restarts.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    restart_stale_workloads: bool,
    /// How many workloads roll to a new config at once.
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u16).range(1..))]
    restart_concurrency: u16,
    /// How long one workload may roll before its namespace's restarts halt.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    restart_deadline: Duration,
    /// Plain-HTTP address of /healthz, /readyz and /metrics, the only port it
    /// listens on; `[::]` takes IPv4 and IPv6.
    #[arg(long, value_name = "ADDR", default_value = "[::]:9090")]
    ops_listen: SocketAddr,
    /// Deadline of each call to the Kubernetes API other than a watch (which
    /// the API server ends itself every few minutes): lists, reads, writes,
    /// Events and the Lease.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    api_timeout: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value = "plain")]
    log_format: LogFormat,
    /// Log filter: a level (info, debug) or tracing directives; RUST_LOG wins when set.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    log_level: String,
    /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    names: NameSettings,
    #[command(flatten)]
    nad: NadSettings,
}

impl ControllerArgs {
    /// Runs the controller until SIGTERM or SIGINT; `env` reads environment variables.
    pub fn run(self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
        let options = self.options(env)?;
        let mut flags = self.names.flags();
        flags.extend(self.nad.flags());
        let settings = linkerd_cni_settings(self.config.as_deref(), flags, env)?;
        let args = ProcessArgs {
            ops_listen: self.ops_listen,
            api_timeout: self.api_timeout,
            log_format: self.log_format,
            log_level: self.log_level,
        };
        let task: process::Task = Box::new(move |clients, registry, stop| {
            let metrics = Arc::new(controller::Metrics::register(registry));
            let contact = controller::health::Contact::default();
            let (lease, within) = (options.lease(), self.lease_duration);
            let seen = contact.clone();
            let readiness: process::Readiness =
                Box::new(move || seen.not_ready(&lease, within, tokio::time::Instant::now()));
            let future = controller::run(
                clients.client,
                clients.once,
                settings,
                options,
                metrics,
                stop,
                contact,
            );
            (Box::pin(future), readiness)
        });
        process::run(args, task).map_err(Error::Controller)
    }

    /// The controller's options. Errors say which flag or variable to set.
    fn options(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<controller::Options, Error> {
        let lease_namespace = self
            .lease_namespace
            .clone()
            .or_else(|| env("POD_NAMESPACE").filter(|n| !n.is_empty()))
            .ok_or(Error::NoLeaseNamespace)?;
        let lease_seconds = self.lease_duration.as_secs();
        if lease_seconds < 3 {
            let given = humantime::format_duration(self.lease_duration).to_string();
            return Err(Error::LeaseTooShort(given));
        }
        let identity = self
            .identity
            .clone()
            .or_else(|| env("POD_NAME").filter(|n| !n.is_empty()))
            .or_else(|| env("HOSTNAME").filter(|n| !n.is_empty()))
            .unwrap_or_else(|| format!("linkerd-multus-{}", std::process::id()));
        Ok(controller::Options {
            lease_name: self.lease_name.clone(),
            lease_namespace,
            lease_seconds,
            identity,
            api_timeout: self.api_timeout,
            restarts: self
                .restart_stale_workloads
                .then_some(controller::restarts::Options {
                    concurrency: self.restart_concurrency.into(),
                    deadline: self.restart_deadline,
                }),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        controller: ControllerArgs,
    }

    fn options(args: &[&str], env: &[(&str, &str)]) -> Result<controller::Options, String> {
        let mut all = vec!["controller"];
        all.extend(args);
        let env = |name: &str| {
            env.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        Cli::parse_from(all)
            .controller
            .options(&env)
            .map_err(|e| e.to_string())
    }

    /// The Lease's namespace and the identity come from the flags, else the downward API.
    #[test]
    fn the_lease_and_identity_from_flags_or_the_pod() {
        let pod = [("POD_NAMESPACE", "lm"), ("POD_NAME", "controller-1")];
        let o = options(&[], &pod).unwrap();
        assert_eq!(
            (o.lease().as_str(), o.identity.as_str()),
            ("lm/linkerd-multus-nad-controller", "controller-1")
        );
        assert_eq!(o.restarts, None);
        let o = options(
            &["--lease-namespace=x", "--identity=me", "--lease-name=l"],
            &pod,
        )
        .unwrap();
        assert_eq!((o.lease().as_str(), o.identity.as_str()), ("x/l", "me"));
        let o = options(
            &["--restart-stale-workloads", "--restart-concurrency=3"],
            &pod,
        )
        .unwrap();
        assert_eq!(o.restarts.map(|r| r.concurrency), Some(3));
        assert_eq!(
            options(&[], &[]).unwrap_err(),
            "controller needs the Lease's namespace: set --lease-namespace, or POD_NAMESPACE from the downward API (metadata.namespace)"
        );
        assert!(
            options(&["--lease-duration=2s"], &pod)
                .unwrap_err()
                .contains("at least 3s")
        );
    }
}
