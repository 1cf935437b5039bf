//! The command line: each command beside its flags. With no subcommand the
//! binary is the KRM function ([`function`]); [`render`] is `render`, `render
//! --diff`, `diff` and `post-render`; [`validate`] the `validate` command;
//! [`from_injector`] `from-injector`, network-resources-injector's settings as
//! a `NetworkResources` object;
//! [`webhook`] the webhook; [`controller`] the NAD controller; [`extension`] the Linkerd
//! extension's `install`, `uninstall`, `check` and `preview`. What the file commands share:
//! reading manifests ([`manifests`]), unified diffs ([`diff`]) and the
//! Linkerd-CNI settings flags ([`flags`]); what every command shares: what it
//! prints, why it could not run and the exit code that makes ([`outcome`]);
//! the headings of every command's `--help` ([`help`]).

#[cfg(feature = "webhook")]
pub mod controller;
pub mod diff;
#[cfg(feature = "webhook")]
pub mod extension;
pub mod flags;
pub mod from_injector;
pub mod function;
pub mod help;
pub mod manifests;
pub mod outcome;
pub mod render;
pub mod validate;
#[cfg(feature = "webhook")]
pub mod webhook;

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use outcome::{Error, Outcome};

/// Attaches Linkerd-CNI to workloads through Multus, at render time.
///
/// With no subcommand it is a KRM function: it reads a ResourceList on stdin
/// and writes one on stdout (kpt fn render, kpt fn eval, kustomize).
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Renders manifest files, directories or stdin (-) to a YAML stream on
    /// stdout: for Argo CD plugins, kustomize exec plugins and scripts.
    Render(render::RenderArgs),
    /// Exits 1 with a unified diff when rendering would change the files, 0
    /// when they are already rendered, 2 when they cannot be checked: a CI
    /// gate for GitOps repositories (kubectl diff's exit codes).
    #[command(after_help = render::DIFF_EXIT_CODES)]
    Diff(render::DiffArgs),
    /// A Helm post-renderer: Helm's manifests on stdin, rendered on stdout.
    /// Helm does not tell a post-renderer the release namespace: pass it as
    /// --default-namespace (Helm leaves most resources without one).
    PostRender(render::PostRenderArgs),
    /// Checks manifests without changing them and prints one line per problem:
    /// NAD configs that are not valid CNI JSON, networks annotations Multus
    /// would reject, selections across namespaces under namespace isolation.
    /// Exits 1 when there is an error, 0 when there is none: a CI gate.
    Validate(validate::ValidateArgs),
    /// Prints the NetworkResources object equivalent to a running
    /// network-resources-injector: its nri-control-switches ConfigMap and its
    /// flags (after --), with a note where the two differ.
    FromInjector(from_injector::FromInjectorArgs),
    /// The mutating admission webhook for pods created outside Git: the same
    /// rules over HTTPS, with namespaces from a watch of the cluster.
    #[cfg(feature = "webhook")]
    Webhook(Box<webhook::WebhookArgs>),
    /// The NAD controller, apart from the webhook: keeps the Linkerd-CNI NAD
    /// in every namespace that needs it, from the live Linkerd-CNI ConfigMap,
    /// and restarts the workloads that opted in when it changes. One replica
    /// writes, through a Lease; it listens on its operations port alone.
    #[cfg(feature = "webhook")]
    Controller(Box<controller::ControllerArgs>),
    /// The Linkerd extension's check (`linkerd multus check`, which `linkerd
    /// check` runs): what is wrong with linkerd-multus in a live cluster, and
    /// what to do. Exits 0 when no check failed, 1 when one did.
    #[cfg(feature = "webhook")]
    Check(Box<extension::check::CheckArgs>),
    /// The Linkerd extension's install (`linkerd multus install`): prints the
    /// cluster side, for `kubectl apply --server-side
    /// --field-manager=linkerd-multus-install -f -`, from one configuration
    /// (these flags, or the same settings in a --config file): the Namespace
    /// labelled linkerd.io/extension=multus, the webhook, optionally the NAD
    /// controller and the network-resources rules, and the webhook's
    /// certificates with their private key (kept from the cluster while they
    /// are good).
    #[cfg(feature = "webhook")]
    #[command(after_help = extension::install::INSTALL_EXAMPLES)]
    Install(Box<extension::install::InstallArgs>),
    /// The Linkerd extension's uninstall (`linkerd multus uninstall`): prints
    /// what `kubectl delete -f -` needs to remove the extension: its objects
    /// outside its namespace and the namespace. Never a
    /// NetworkAttachmentDefinition.
    #[cfg(feature = "webhook")]
    Uninstall(Box<extension::install::UninstallArgs>),
    /// What the NAD controller will do once a new Linkerd-CNI ConfigMap (-f FILE) is
    /// applied, read from the live cluster, changing nothing: the NADs it writes, the
    /// workloads it restarts in its order and pacing, the pods it evicts, and those it
    /// leaves to you or that did not opt in.
    #[cfg(feature = "webhook")]
    Preview(Box<extension::preview::PreviewArgs>),
}

/// The binary: parses the command line, runs the command, prints what it
/// gives and exits with its code.
pub fn main() -> ExitCode {
    let matches =
        help::grouped(Cli::command()).get_matches_from(arguments(std::env::args_os().collect()));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let outcome = run(cli.command).unwrap_or_else(|e| Outcome::failed(&e, false));
    match print(&outcome) {
        Ok(code) => code,
        Err(e) => print(&Outcome::failed(&e, false)).unwrap_or(ExitCode::FAILURE),
    }
}

/// The command line, without the flags `check` does not know: a Linkerd
/// extension ignores those (EXTENSIONS.md), for what a later `linkerd check`
/// passes on.
#[cfg_attr(not(feature = "webhook"), allow(unused_mut))]
fn arguments(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    #[cfg(feature = "webhook")]
    if args.get(1).is_some_and(|a| a == "check") {
        let command = Cli::command();
        if let Some(check) = command.find_subcommand("check") {
            let rest = args.split_off(2);
            args.extend(extension::check::known_flags_only(check, rest));
        }
    }
    args
}

fn read_stdin() -> std::io::Result<String> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    Ok(input)
}

fn run(command: Option<Command>) -> Result<Outcome, Error> {
    let env = |name: &str| std::env::var(name).ok();
    // The renderer's commands read LINKERD_MULTUS_*; the webhook and the controller log their own warnings.
    if matches!(
        command,
        Some(Command::Render(_) | Command::Diff(_) | Command::PostRender(_))
    ) {
        for warning in crate::pipeline::environment::unknown_variables_here() {
            eprintln!("warning: {warning}");
        }
    }
    let outcome = match command {
        None => {
            let input = read_stdin().map_err(Error::Stdin)?;
            let (outcome, list) = function::run_keeping(input);
            // The process prints and exits next: the kernel takes the tree back
            // at once, where dropping it would free it node by node.
            std::mem::forget(list);
            outcome
        }
        Some(Command::Render(args)) => args.run(&env, read_stdin),
        Some(Command::Diff(args)) => args.run(&env, read_stdin),
        Some(Command::PostRender(args)) => args.run(&env, read_stdin),
        Some(Command::Validate(args)) => args.run(read_stdin),
        Some(Command::FromInjector(args)) => args.run(read_stdin),
        #[cfg(feature = "webhook")]
        Some(Command::Webhook(args)) => {
            args.run(&env)?;
            Outcome {
                stdout: String::new(),
                stderr: String::new(),
                code: 0,
            }
        }
        #[cfg(feature = "webhook")]
        Some(Command::Controller(args)) => {
            args.run(&env)?;
            Outcome {
                stdout: String::new(),
                stderr: String::new(),
                code: 0,
            }
        }
        #[cfg(feature = "webhook")]
        Some(Command::Check(args)) => args.run(),
        #[cfg(feature = "webhook")]
        Some(Command::Install(args)) => args.run()?,
        #[cfg(feature = "webhook")]
        Some(Command::Uninstall(args)) => args.run()?,
        #[cfg(feature = "webhook")]
        Some(Command::Preview(args)) => args.run(),
    };
    Ok(outcome)
}

/// Prints the outcome; its exit code.
fn print(outcome: &Outcome) -> Result<ExitCode, Error> {
    std::io::stdout()
        .lock()
        .write_all(outcome.stdout.as_bytes())
        .map_err(Error::Stdout)?;
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
