//! The `linkerd-multus` command.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use linkerd_multus::environment;
use linkerd_multus::files::manifests::Input;
use linkerd_multus::files::render::{self, Mode, Options};
use linkerd_multus::files::validate;
use linkerd_multus::krm::{self, Outcome};
use linkerd_multus::webhook;

/// Attaches Linkerd-CNI to workloads through Multus, at render time.
///
/// With no subcommand it is a KRM function: it reads a ResourceList on stdin
/// and writes one on stdout (kpt fn render, kpt fn eval, kustomize).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Renders manifest files, directories or stdin (-) to a YAML stream on
    /// stdout: for Argo CD plugins, kustomize exec plugins and scripts.
    Render {
        /// Files and directories (walked recursively; hidden ones, Kptfiles and
        /// local-config objects are left out), or - for stdin.
        #[arg(value_name = "PATH|-", default_value = "-")]
        paths: Vec<String>,
        /// Prints a unified diff of what rendering changes instead of the result.
        #[arg(long)]
        diff: bool,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// Exits 1 with a unified diff when rendering would change the files, 0
    /// when they are already rendered, 2 when they cannot be checked: a CI
    /// gate for GitOps repositories.
    #[command(after_help = CHECK_EXIT_CODES)]
    Check {
        /// Files and directories, as for render.
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// A Helm post-renderer: Helm's manifests on stdin, rendered on stdout.
    /// Helm does not tell a post-renderer the release namespace: pass it as
    /// --default-namespace (Helm leaves most resources without one).
    PostRender {
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// Checks manifests without changing them and prints one line per problem:
    /// NAD configs that are not valid CNI JSON, networks annotations Multus
    /// would reject, selections across namespaces under namespace isolation.
    /// Exits 1 when there is an error, 0 when there is none: a CI gate.
    Validate {
        /// Files and directories, as for render, or - for stdin. A Validation
        /// object among them holds the settings, as --config does.
        #[arg(value_name = "PATH|-", required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        settings: ValidateSettings,
    },
    /// The mutating admission webhook for pods created outside Git: the same
    /// rules over HTTPS, with namespaces from a watch of the cluster.
    Webhook {
        #[command(flatten)]
        args: Box<linkerd_multus::webhook::Args>,
        /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        settings: PodSettings,
        #[command(flatten)]
        nad: NadSettings,
    },
}

/// What `post-render` says when workloads have no namespace and none is set.
const POST_RENDER_NAMESPACE_HINT: &str = "Helm does not tell a post-renderer the release namespace; pass it as --post-renderer-args=--default-namespace=NAMESPACE (the namespace of helm -n), so that the namespace's linkerd.io/multus and linkerd.io/inject annotations count and the NAD is generated in it";

/// What `check` exits with, as its help shows it.
const CHECK_EXIT_CODES: &str = "\
Exit codes:
  0  every file is rendered
  1  rendering would change a file: the diff is on stdout
  2  the files could not be checked (an input or a setting is wrong, or the rules found an error: stderr says which), or the command line is wrong";

/// The settings of `validate`; flags win over the config file.
#[derive(Args)]
struct ValidateSettings {
    /// A file holding the settings: a Validation object (or a ConfigMap).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Pods may select NADs only in their own namespace and the global ones,
    /// as Multus with namespaceIsolation (OpenShift) allows [default: false].
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    namespace_isolation: Option<String>,
    /// A namespace whose NADs any pod may select under namespace isolation;
    /// repeat it or give a comma-separated list. Replaces the default list
    /// [default: default,openshift-multus,openshift-sriov-network-operator].
    #[arg(long, value_name = "NAMESPACE", value_delimiter = ',')]
    global_namespace: Vec<String>,
    /// Workload kinds beyond the built-in ones, as YAML or JSON:
    /// '[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]'.
    #[arg(long, value_name = "YAML")]
    workload_kinds: Option<String>,
    /// Namespace of resources without metadata.namespace.
    #[arg(long, value_name = "NAMESPACE")]
    default_namespace: Option<String>,
}

impl ValidateSettings {
    fn into_options(self, inputs: Vec<Input>) -> validate::Options {
        let global = (!self.global_namespace.is_empty()).then(|| self.global_namespace.join(","));
        let flags = [
            (
                "namespace-isolation",
                "namespaceIsolation",
                self.namespace_isolation,
            ),
            ("global-namespace", "globalNamespaces", global),
            ("workload-kinds", "workloadKinds", self.workload_kinds),
            (
                "default-namespace",
                "defaultNamespace",
                self.default_namespace,
            ),
        ]
        .into_iter()
        .filter_map(|(flag, key, value)| Some((flag, key, value?)))
        .collect();
        validate::Options {
            inputs,
            config: self.config,
            flags,
        }
    }
}

/// The renderer's settings and inputs.
#[derive(Args)]
struct SettingsArgs {
    /// Files or directories read to decide but not printed: the Linkerd-CNI
    /// ConfigMap, Namespaces, NADs already in the cluster.
    #[arg(long, value_name = "PATH")]
    context: Vec<PathBuf>,
    /// Succeeds with empty output when the inputs hold no resources.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    core: CoreSettings,
}

/// The core's settings that decide a pod: the webhook's, and the renderer's
/// with [`CoreSettings`]; each also read from `LINKERD_MULTUS_<NAME>` (flags win).
#[derive(Args)]
struct PodSettings {
    /// The Linkerd control-plane namespace [default: linkerd].
    #[arg(long, value_name = "NAMESPACE")]
    linkerd_namespace: Option<String>,
    /// Name of the NetworkAttachmentDefinition [default: linkerd-cni].
    #[arg(long, value_name = "NAME")]
    nad_name: Option<String>,
    /// Namespace annotation holding the OpenShift UID range.
    #[arg(long, value_name = "KEY")]
    uid_range_annotation: Option<String>,
    /// Offset of the proxy UID in that range [default: 2102].
    #[arg(long, value_name = "N")]
    proxy_uid_offset: Option<String>,
}

/// The core's settings that make a NAD's config from the Linkerd-CNI
/// ConfigMap: the renderer's, and the webhook's NAD controller's
/// (`--manage-nads`); each also read from `LINKERD_MULTUS_<NAME>`.
#[derive(Args)]
struct NadSettings {
    /// Namespace of the Linkerd-CNI ConfigMap [default: linkerd-cni].
    #[arg(long, value_name = "NAMESPACE")]
    cni_namespace: Option<String>,
    /// Kubeconfig path the CNI plugin uses [default: from the ConfigMap].
    #[arg(long, value_name = "PATH")]
    cni_kubeconfig: Option<String>,
    /// cniVersion added to NAD configs that have none [default: 0.3.0].
    #[arg(long, value_name = "VERSION")]
    cni_version: Option<String>,
}

impl NadSettings {
    /// The flags given, by settings key.
    fn flags(self) -> Vec<(&'static str, String)> {
        given([
            ("cniNamespace", self.cni_namespace),
            ("cniKubeconfig", self.cni_kubeconfig),
            ("cniVersion", self.cni_version),
        ])
    }
}

/// The core's settings for rendering files: those of a pod and those of the
/// NADs, namespaces and workloads of a package.
#[derive(Args)]
struct CoreSettings {
    /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
    /// A LinkerdMultus among the inputs is read the same way. For `render`, a
    /// NetworkResources object runs the network-resources rules instead.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    pod: PodSettings,
    #[command(flatten)]
    nad: NadSettings,
    /// Annotations of namespaces not in the input, as YAML or JSON:
    /// '{demo: {annotations: {linkerd.io/multus: enabled}}}'.
    #[arg(long, value_name = "YAML")]
    namespaces: Option<String>,
    /// Workload kinds beyond the built-in ones, as YAML or JSON:
    /// '[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]'.
    #[arg(long, value_name = "YAML")]
    workload_kinds: Option<String>,
    /// Namespace of resources without metadata.namespace (helm -n, Argo CD's
    /// destination).
    #[arg(long, value_name = "NAMESPACE")]
    default_namespace: Option<String>,
    /// Stamp the hash of their NAD config on attached pod templates, so a
    /// changed config rolls them: off, all, or labelled (only those labelled
    /// config.linkerd.io/reconcile: auto) [default: off].
    #[arg(long, value_name = "MODE")]
    config_rollout: Option<String>,
}

impl PodSettings {
    /// The flags given, by settings key.
    fn flags(self) -> Vec<(&'static str, String)> {
        given([
            ("linkerdNamespace", self.linkerd_namespace),
            ("nadName", self.nad_name),
            ("uidRangeAnnotation", self.uid_range_annotation),
            ("proxyUIDOffset", self.proxy_uid_offset),
        ])
    }
}

impl CoreSettings {
    /// The flags given, by settings key.
    fn flags(self) -> Vec<(&'static str, String)> {
        let mut flags = self.pod.flags();
        flags.extend(self.nad.flags());
        flags.extend(given([
            ("namespaces", self.namespaces),
            ("workloadKinds", self.workload_kinds),
            ("defaultNamespace", self.default_namespace),
            ("configRollout", self.config_rollout),
        ]));
        flags
    }
}

/// The flags among `flags` that were given.
fn given<const N: usize>(
    flags: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    flags
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect()
}

impl SettingsArgs {
    fn into_options(self, inputs: Vec<Input>, mode: Mode) -> Options {
        Options {
            inputs,
            context: self.context.into_iter().map(Input::Path).collect(),
            config: self.core.config.clone(),
            flags: self.core.flags(),
            mode,
            allow_empty: self.allow_empty,
            namespace_variables: &[],
            namespace_hint: None,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn read_stdin() -> std::io::Result<String> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    Ok(input)
}

fn run(command: Option<Command>) -> anyhow::Result<ExitCode> {
    let env = |name: &str| std::env::var(name).ok();
    // The renderer's fronts read LINKERD_MULTUS_*; the webhook logs its own warnings.
    if matches!(
        command,
        Some(Command::Render { .. } | Command::Check { .. } | Command::PostRender { .. })
    ) {
        for warning in environment::unknown_variables_here() {
            eprintln!("warning: {warning}");
        }
    }
    let outcome = match command {
        None => {
            let input = read_stdin().context("reading the ResourceList from stdin")?;
            krm::run(&input)
        }
        Some(Command::Render {
            paths,
            diff,
            settings,
        }) => {
            let mode = if diff { Mode::Diff } else { Mode::Stream };
            let inputs = paths.iter().map(|p| Input::from_arg(p)).collect();
            let mut options = settings.into_options(inputs, mode);
            // Argo CD applies resources without a namespace in the application's
            // destination namespace.
            options.namespace_variables = &["ARGOCD_APP_NAMESPACE"];
            render::run(&options, &env, read_stdin)
        }
        Some(Command::Check { paths, settings }) => {
            let inputs = paths.iter().map(|p| Input::from_arg(p)).collect();
            render::run(
                &settings.into_options(inputs, Mode::Check),
                &env,
                read_stdin,
            )
        }
        Some(Command::Validate { paths, settings }) => {
            let inputs = paths.iter().map(|p| Input::from_arg(p)).collect();
            validate::run(&settings.into_options(inputs), read_stdin)
        }
        Some(Command::PostRender { settings }) => {
            let mut options = settings.into_options(vec![Input::Stdin], Mode::Stream);
            options.namespace_hint = Some(POST_RENDER_NAMESPACE_HINT);
            render::run(&options, &env, read_stdin)
        }
        Some(Command::Webhook {
            args,
            config,
            settings,
            nad,
        }) => {
            let mut flags = settings.flags();
            flags.extend(nad.flags());
            let settings = webhook::settings(config.as_deref(), &flags, &env)?;
            let network_resources =
                webhook::network_resources_settings(args.network_resources.as_deref(), &env)?;
            webhook::run(*args, settings, network_resources)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    print(&outcome)
}

fn print(outcome: &Outcome) -> anyhow::Result<ExitCode> {
    std::io::stdout()
        .lock()
        .write_all(outcome.stdout.as_bytes())
        .context("writing to stdout")?;
    std::io::stderr().write_all(outcome.stderr.as_bytes()).ok();
    Ok(ExitCode::from(u8::try_from(outcome.code).unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks of the command line (unique names and groups, ...),
    /// which otherwise run only when a subcommand is parsed.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
