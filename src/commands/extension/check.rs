//! `linkerd multus check`: its flags (those of EXTENSIONS.md; any other is
//! ignored, for the flags a later `linkerd check` may pass on), and the
//! message for the old `check PATH...`, the CI gate over files, now `diff`.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::install::PartsFlags;
use super::{KubeFlags, go};
use crate::commands::outcome::Outcome;
use crate::extension::check::{self, Options};
use crate::extension::install::options::Settings;

/// `check`'s flags.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    kube: KubeFlags,
    /// With --proxy, the namespace of the checks [default: every namespace];
    /// with --pre, the extension's namespace, as install's --namespace
    /// [default: linkerd-multus].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// With --pre, the parts install will print: the rights asked are those
    /// of exactly its objects.
    #[command(flatten)]
    parts: PartsFlags,
    /// The output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Output,
    /// Only the checks of what `install` needs, before installing.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go::parse_bool)]
    pre: bool,
    /// Only the data plane's checks: the meshed pods (all namespaces, or -n).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go::parse_bool)]
    proxy: bool,
    /// How long failing checks are retried before they are reported.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = go::parse_duration)]
    wait: Duration,
    /// The files of the old `check PATH...`, which is now `diff PATH...`.
    #[arg(hide = true, value_name = "PATH")]
    paths: Vec<String>,
}

/// How `check` prints what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// `linkerd check`'s table.
    Table,
    /// The JSON `linkerd check` reads from extensions.
    Json,
}

/// What the old `check PATH...` says now.
pub fn moved(paths: &[String]) -> String {
    format!(
        "`linkerd-multus check` now checks a live cluster, as `linkerd multus check` (see --help). The CI gate over files moved: run `linkerd-multus diff {}` (its --context is now --reference; the exit codes are the same)",
        paths.join(" ")
    )
}

impl CheckArgs {
    /// Runs the checks; exit 0 when none failed, 1 when one did.
    pub fn run(self) -> Outcome {
        if !self.paths.is_empty() {
            return Outcome {
                stdout: String::new(),
                stderr: format!("error: {}\n", moved(&self.paths)),
                code: 2,
            };
        }
        self.kube.init_logging();
        let namespace = self.namespace.filter(|n| !n.is_empty());
        let install = self
            .parts
            .options(Settings {
                namespace: namespace.clone().filter(|_| self.pre),
                linkerd_namespace: Some(self.kube.linkerd_namespace.clone()),
                ..Settings::default()
            })
            .map_err(|e| e.to_string());
        let options = Options {
            linkerd_namespace: self.kube.linkerd_namespace.clone(),
            namespace,
            pre: self.pre,
            proxy: self.proxy,
            wait: self.wait,
            install,
        };
        let target = self.kube.target();
        let report = match super::runtime() {
            Ok(runtime) => runtime.block_on(check::run(&target, &options)),
            Err(e) => {
                return Outcome {
                    stdout: String::new(),
                    stderr: format!("error: starting the runtime: {e}\n"),
                    code: 1,
                };
            }
        };
        Outcome {
            stdout: match self.output {
                Output::Table => report.table(),
                Output::Json => report.json(),
            },
            stderr: String::new(),
            code: report.code(),
        }
    }
}

/// The arguments of `check` without the flags it does not know, which
/// EXTENSIONS.md asks an extension to ignore: `--name`, `--name=value` and
/// `-x` that `command` does not define are left out, and so is the value
/// after an unknown `--name` without `=`. Everything after `--` is kept.
pub fn known_flags_only(command: &clap::Command, args: Vec<OsString>) -> Vec<OsString> {
    let takes_value = |arg: &clap::Arg| {
        arg.get_num_args()
            .map(|n| n.takes_values() && n.min_values() > 0)
            .unwrap_or(true)
            && !matches!(
                arg.get_action(),
                clap::ArgAction::SetTrue
                    | clap::ArgAction::SetFalse
                    | clap::ArgAction::Count
                    | clap::ArgAction::Help
                    | clap::ArgAction::HelpShort
                    | clap::ArgAction::HelpLong
                    | clap::ArgAction::Version
            )
    };
    let long = |name: &str| {
        command
            .get_arguments()
            .find(|a| {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&name))
            })
            .map(takes_value)
            .or((name == "help").then_some(false))
    };
    let short = |c: char| {
        command
            .get_arguments()
            .find(|a| a.get_short() == Some(c))
            .map(takes_value)
            .or((c == 'h').then_some(false))
    };
    let mut kept = Vec::with_capacity(args.len());
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str().map(str::to_string) else {
            kept.push(arg);
            continue;
        };
        if text == "--" {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        let (known, has_inline_value) = if let Some(flag) = text.strip_prefix("--") {
            let (name, value) = match flag.split_once('=') {
                Some((name, _)) => (name, true),
                None => (flag, false),
            };
            (long(name), value)
        } else if let Some(flags) = text.strip_prefix('-').filter(|f| !f.is_empty()) {
            let first = flags.chars().next().unwrap_or('-');
            (short(first), flags.chars().count() > 1)
        } else {
            kept.push(arg);
            continue;
        };
        match known {
            Some(takes_value) => {
                kept.push(arg);
                if takes_value && !has_inline_value {
                    kept.extend(args.next());
                }
            }
            None => {
                let next_is_value = !has_inline_value
                    && text.starts_with("--")
                    && args
                        .peek()
                        .and_then(|a| a.to_str())
                        .is_some_and(|a| !a.starts_with('-'));
                if next_is_value {
                    args.next();
                }
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        check: CheckArgs,
    }

    fn parse(args: &[&str]) -> CheckArgs {
        let command = Cli::command();
        let args = known_flags_only(&command, args.iter().map(OsString::from).collect());
        let mut all = vec![OsString::from("check")];
        all.extend(args);
        Cli::try_parse_from(all).unwrap().check
    }

    /// What `linkerd check` passes on (getExtensionCheckFlags), with flags of a later Linkerd.
    #[test]
    fn reads_what_linkerd_check_passes_and_ignores_the_rest() {
        let args = parse(&[
            "--as-group=[]",
            "--context=kind-a",
            "--linkerd-namespace=linkerd",
            "--verbose=false",
            "--proxy=false",
            "--wait=5m0s",
            "--output=json",
            "--future-flag=1",
            "--crds",
            "--another",
            "value",
            "-z",
        ]);
        assert_eq!(args.output, Output::Json);
        assert_eq!(args.wait, Duration::from_secs(300));
        assert!(!args.proxy && !args.kube.verbose && !args.pre);
        assert!(args.paths.is_empty());
        let target = args.kube.target();
        assert_eq!(target.context.as_deref(), Some("kind-a"));
        assert!(target.impersonate_groups.is_empty());
    }

    #[test]
    fn reads_the_short_and_spaced_forms() {
        let args = parse(&[
            "-n",
            "demo",
            "-o",
            "json",
            "--proxy",
            "-L",
            "l5d",
            "--as-group",
            "a,b",
        ]);
        assert_eq!(args.namespace.as_deref(), Some("demo"));
        assert!(args.proxy);
        assert_eq!(args.kube.linkerd_namespace, "l5d");
        assert_eq!(args.kube.target().impersonate_groups, ["a", "b"]);
    }

    #[test]
    fn the_old_form_says_where_the_gate_went() {
        let args = parse(&["manifests/", "--context", "cm.yaml"]);
        assert_eq!(args.paths, ["manifests/"]);
        let out = args.run();
        assert_eq!(out.code, 2);
        assert!(
            out.stderr.contains("linkerd-multus diff manifests/"),
            "{}",
            out.stderr
        );
    }
}
