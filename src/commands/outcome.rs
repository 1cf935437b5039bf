//! What a command prints and how it exits, and why a command could not run
//! ([`Error`]): the one place a failure becomes an exit code.

use std::io;

use crate::commands::manifests::ReadError;
use crate::k8s::resource::InputError;
use crate::krm::resource_list::ResourceListError;
use crate::pipeline::settings;

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What goes to stdout, empty when the command could not run.
    pub stdout: String,
    /// Messages for people; the first line says what is wrong.
    pub stderr: String,
    /// 0 on success; what else a command exits with, its help says.
    pub code: i32,
}

impl Outcome {
    /// A command that could not run: the error on stderr, nothing on stdout;
    /// exit 2 for `diff` (whose 1 says the files are not rendered), 1 for
    /// every other command.
    pub fn failed(error: &Error, check: bool) -> Self {
        Outcome {
            stdout: String::new(),
            stderr: format!("error: {error}\n"),
            code: if check { 2 } else { 1 },
        }
    }
}

/// What ran the file renderer, as its environment and command tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// kustomize, as an exec plugin (`KUSTOMIZE_PLUGIN_CONFIG_ROOT`: the
    /// kustomization's directory).
    KustomizePlugin(String),
    /// An Argo CD config-management plugin (`ARGOCD_APP_NAME`: the application).
    ArgoCd(String),
    /// Helm, as a post-renderer (`post-render`).
    Helm,
    /// A person or a script.
    CommandLine,
}

impl Host {
    /// The host of a run of the renderer: `post_render` for `post-render`,
    /// `env` reads the environment.
    pub fn of(post_render: bool, env: &dyn Fn(&str) -> Option<String>) -> Host {
        if let Some(root) = env("KUSTOMIZE_PLUGIN_CONFIG_ROOT") {
            Host::KustomizePlugin(root)
        } else if post_render {
            Host::Helm
        } else if let Some(app) = env("ARGOCD_APP_NAME") {
            Host::ArgoCd(app)
        } else {
            Host::CommandLine
        }
    }

    /// What to do about inputs without a resource, in this host.
    fn empty_input_fix(&self) -> String {
        match self {
            Host::KustomizePlugin(root) => format!(
                "kustomize gave the exec plugin no resources, as it gives a generator: list the settings file (kind LinkerdMultus) under transformers: in the kustomization of {root}, not under generators:; a transformer renders the resources listed under resources:"
            ),
            Host::ArgoCd(app) => format!(
                "Argo CD would prune every resource of the application {app}; check that the Application's source path holds its manifests, or add --allow-empty to the plugin's generate command if an empty application is what you want"
            ),
            Host::Helm => "Helm gave the post-renderer no manifests: the chart rendered none with these values (helm template shows what it renders); add --post-renderer-args=--allow-empty if an empty release is what you want".to_string(),
            Host::CommandLine => "pass --allow-empty if an empty output is what you want".to_string(),
        }
    }
}

/// Why a command could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input of the KRM function is not a ResourceList.
    #[error(transparent)]
    ResourceList(#[from] ResourceListError),
    /// A manifest file or stdin could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The settings could not be resolved.
    #[error(transparent)]
    Settings(#[from] settings::Error),
    /// An item is not a resource.
    #[error("the input is malformed: {0}")]
    Malformed(#[from] InputError),
    /// `--reference -`.
    #[error("--reference reads files and directories, not stdin")]
    ContextFromStdin,
    /// A file given both as an input and as `--reference`.
    #[error("{0} is given both as an input and as --reference")]
    InputAndContext(String),
    /// Inputs without a resource, without `--allow-empty`: what to do
    /// depends on the host that ran the renderer.
    #[error("no Kubernetes objects in {inputs}: {}", host.empty_input_fix())]
    NoObjects {
        /// The inputs, as given.
        inputs: String,
        /// What ran the renderer.
        host: Host,
    },
    /// Stdin could not be read.
    #[error("reading the ResourceList from stdin: {0}")]
    Stdin(io::Error),
    /// Stdout could not be written.
    #[error("writing to stdout: {0}")]
    Stdout(io::Error),
    /// `controller` without the Lease's namespace.
    #[error(
        "controller needs the Lease's namespace: set --lease-namespace, or POD_NAMESPACE from the downward API (metadata.namespace)"
    )]
    NoLeaseNamespace,
    /// A flag of the NAD controller given to `webhook`, which no longer runs it.
    #[error(
        "webhook {0}: the NAD controller runs apart from the webhook now, as `linkerd-multus controller` with its own Deployment and ServiceAccount (deploy-nad-controller/, or linkerd multus install --manage-nads); take {0} and the controller's other flags there, and give the webhook --missing-nad=attach"
    )]
    MovedToController(&'static str),
    /// A `--lease-duration` too short to renew in.
    #[error(
        "--lease-duration {0}: must be at least 3s (the leader must renew within two thirds of it, trying every 2/15)"
    )]
    LeaseTooShort(String),
    /// The webhook failed to start or stopped with an error.
    #[error("{0:#}")]
    Webhook(anyhow::Error),
    /// The NAD controller failed to start or stopped with an error.
    #[error("{0:#}")]
    Controller(anyhow::Error),
    /// `install` could not print the extension.
    #[cfg(feature = "webhook")]
    #[error(transparent)]
    Install(#[from] crate::extension::install::Error),
    /// `uninstall` could not find what to remove.
    #[cfg(feature = "webhook")]
    #[error(transparent)]
    Uninstall(#[from] crate::extension::uninstall::Error),
    /// The runtime of a command's calls to the API server did not start.
    #[error("starting the runtime: {0}")]
    Runtime(io::Error),
}
