//! The `linkerd-multus` command.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

/// Attaches Linkerd-CNI to workloads through Multus, at render time.
///
/// With no arguments it is a KRM function: it reads a ResourceList on stdin and
/// writes one on stdout (kpt fn render, kpt fn eval --exec, kustomize).
#[derive(Parser)]
#[command(version, about)]
struct Cli {}

fn main() -> ExitCode {
    Cli::parse();
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the ResourceList from stdin")?;
    let outcome = linkerd_multus::krm::run(&input);
    std::io::stdout()
        .lock()
        .write_all(outcome.stdout.as_bytes())
        .context("writing the ResourceList to stdout")?;
    std::io::stderr().write_all(outcome.stderr.as_bytes()).ok();
    Ok(ExitCode::from(u8::try_from(outcome.code).unwrap_or(1)))
}
