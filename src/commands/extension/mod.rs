//! The Linkerd extension's commands (`linkerd multus install | uninstall |
//! check | preview`) and the flags Linkerd's EXTENSIONS.md requires of each: the API
//! server's (`--api-addr`, `--context`, `--as`, `--as-group`, `--kubeconfig`),
//! `-L/--linkerd-namespace` and `--verbose`, read as the Linkerd CLI writes
//! them (`linkerd check` passes `--verbose=false`, `--as-group=[]`, `--wait=5m0s`).

pub mod check;
pub mod day2;
pub mod go;
pub mod install;
pub mod preview;

use std::path::PathBuf;

use clap::Args;

use crate::extension::client::Target;

/// The flags every command of the extension takes.
#[derive(Debug, Clone, Args)]
pub struct KubeFlags {
    /// Overrides the kubeconfig: talk to the API server at host:port (mostly for testing).
    #[arg(long, value_name = "HOST:PORT")]
    api_addr: Option<String>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// The user to impersonate for Kubernetes operations.
    #[arg(long = "as", value_name = "USER")]
    as_user: Option<String>,
    /// A group to impersonate for Kubernetes operations (repeat it, or separate by commas).
    #[arg(long = "as-group", value_name = "GROUP")]
    as_group: Vec<String>,
    /// The kubeconfig file [default: $KUBECONFIG, then ~/.kube/config, then in-cluster].
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// The namespace Linkerd's control plane is installed in.
    #[arg(
        short = 'L',
        long,
        value_name = "NAMESPACE",
        env = "LINKERD_NAMESPACE",
        default_value = "linkerd"
    )]
    pub linkerd_namespace: String,
    /// Debug logging, on stderr.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go::parse_bool)]
    pub verbose: bool,
}

impl KubeFlags {
    /// The API server and the identity the flags name. Empty values are
    /// unset, as the Linkerd CLI means them.
    pub fn target(&self) -> Target {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        Target {
            api_addr: given(&self.api_addr),
            context: given(&self.context),
            impersonate: given(&self.as_user),
            impersonate_groups: go::string_slice(&self.as_group),
            kubeconfig: self
                .kubeconfig
                .clone()
                .filter(|p| !p.as_os_str().is_empty()),
        }
    }

    /// Turns debug logging on, on stderr, when `--verbose` says so.
    pub fn init_logging(&self) {
        if self.verbose {
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_env_filter("linkerd_multus=debug,kube=debug")
                .try_init()
                .ok();
        }
    }
}

/// A runtime for one command's calls to the API server.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
