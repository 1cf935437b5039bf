//! `linkerd multus preview`: its flags, and the file of the new Linkerd-CNI ConfigMap read.

use std::io::Read;
use std::time::Duration;

use clap::Args;

use super::{KubeFlags, go};
use crate::commands::outcome::Outcome;
use crate::extension::preview::{self, Options};

/// `preview`'s flags.
#[derive(Debug, Args)]
pub struct PreviewArgs {
    #[command(flatten)]
    kube: KubeFlags,
    /// The new Linkerd-CNI ConfigMap (linkerd-cni-config), as YAML; - reads stdin.
    #[arg(short = 'f', long, value_name = "FILE")]
    filename: String,
    /// The restarts rolling at once [default: the installed NAD controller's].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    restart_concurrency: Option<u64>,
    /// How long a rollout may take before its slot frees [default: the installed NAD
    /// controller's].
    #[arg(long, value_name = "DURATION", value_parser = go::parse_duration)]
    restart_deadline: Option<Duration>,
}

impl PreviewArgs {
    /// Prints the preview; exit 0, or 1 when the file or the cluster cannot be read.
    pub fn run(self) -> Outcome {
        self.kube.init_logging();
        let failed = |e: String| Outcome {
            stdout: String::new(),
            stderr: format!("error: {e}\n"),
            code: 1,
        };
        let text = match self.filename.as_str() {
            "-" => {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text).map(|_| text)
            }
            path => std::fs::read_to_string(path),
        };
        let text = match text {
            Ok(text) => text,
            Err(e) => return failed(format!("reading {}: {e}", self.filename)),
        };
        let options = Options {
            file: self.filename.clone(),
            text,
            linkerd_namespace: self.kube.linkerd_namespace.clone(),
            concurrency: self.restart_concurrency.map(|n| n as usize),
            deadline: self.restart_deadline,
        };
        let target = self.kube.target();
        let runtime = match super::runtime() {
            Ok(runtime) => runtime,
            Err(e) => return failed(format!("starting the runtime: {e}")),
        };
        match runtime.block_on(preview::run(&target, &options)) {
            Ok(stdout) => Outcome {
                stdout,
                stderr: String::new(),
                code: 0,
            },
            Err(e) => failed(e.to_string()),
        }
    }
}
