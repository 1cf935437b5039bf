//! The servers a benchmark measures: `linkerd-multus webhook` and the bench
//! binary re-executed as a constant-answer server (benches/common/baseline.rs),
//! each killed when dropped.
#![allow(dead_code)]

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::baseline::BASELINE_ENV;
use super::https;
use super::process::Guard;

/// A server process.
pub struct Server {
    pub child: Guard,
    /// `127.0.0.1:PORT` of the admission endpoint.
    pub addr: String,
    /// The webhook's ops port (metrics, readiness); none for the baseline.
    pub ops: Option<String>,
    log: PathBuf,
}

fn free_addr() -> Result<String> {
    Ok(format!("127.0.0.1:{}", super::ports::free_port()))
}

impl Server {
    /// `linkerd-multus webhook`, reading the cluster with `kubeconfig`.
    pub fn webhook(
        dir: &Path,
        kubeconfig: &Path,
        cert: &Path,
        key: &Path,
        extra: &[String],
    ) -> Result<Server> {
        let bin = Path::new(env!("CARGO_BIN_EXE_linkerd-multus"));
        Self::webhook_binary(bin, dir, kubeconfig, cert, key, extra)
    }

    /// [`Server::webhook`] with the binary `bin` (another build, to compare).
    pub fn webhook_binary(
        bin: &Path,
        dir: &Path,
        kubeconfig: &Path,
        cert: &Path,
        key: &Path,
        extra: &[String],
    ) -> Result<Server> {
        let (addr, ops) = (free_addr()?, free_addr()?);
        let log = dir.join("webhook.log");
        let child = Guard::spawn(
            Command::new(bin)
                .arg("webhook")
                .args(["--listen", &addr, "--ops-listen", &ops])
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key)
                .args(extra)
                .env("KUBECONFIG", kubeconfig)
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(fs::File::create(&log)?),
        )
        .with_context(|| format!("starting {} webhook", bin.display()))?;
        Ok(Server {
            child,
            addr,
            ops: Some(ops),
            log,
        })
    }

    /// This bench re-executed as the constant-answer server `name`, with the
    /// variant's environment `env`; returns once it listens.
    pub fn constant(
        dir: &Path,
        cert: &Path,
        key: &Path,
        name: &str,
        env: &[(&str, &str)],
    ) -> Result<Server> {
        let addr = free_addr()?;
        let log = dir.join(format!("{name}.log"));
        let mut child = Guard::spawn(
            Command::new(std::env::current_exe()?)
                .envs(env.iter().copied())
                .env(BASELINE_ENV, &addr)
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(fs::File::create(&log)?),
        )
        .with_context(|| format!("starting the {name} server"))?;
        let mut ready = [0u8; 6];
        let read = child.take_stdout().expect("piped").read_exact(&mut ready);
        let server = Server {
            child,
            addr,
            ops: None,
            log,
        };
        if read.is_err() || &ready != b"ready\n" {
            bail!("the {name} server did not start: {}", server.log_tail(10));
        }
        Ok(server)
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `lines` of its log, without terminal colours.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<String> = text.lines().map(without_colours).collect();
        format!(
            "last lines of {}:\n{}",
            self.log.display(),
            all[all.len().saturating_sub(lines)..].join("\n")
        )
    }

    /// GETs a path of the ops port: status and body.
    pub fn ops_get(&self, path: &str) -> Option<(u16, String)> {
        https::http_get(self.ops.as_ref()?, path)
    }

    /// Waits until the webhook's /readyz answers 200.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.ops_get("/readyz").is_some_and(|(s, _)| s == 200) {
                return Ok(());
            }
            if !self.running() {
                bail!("the webhook exited\n{}", self.log_tail(20));
            }
            if Instant::now() > deadline {
                bail!(
                    "the webhook did not become ready within {timeout:?}\n{}",
                    self.log_tail(20)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The value of the first metric line starting with `name` and a space.
    pub fn metric(&self, name: &str) -> Result<f64> {
        self.metrics()?
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .ok_or_else(|| anyhow!("{name} not in /metrics"))
    }

    /// The reviews the webhook has answered, whatever their outcome.
    pub fn admission_total(&self) -> Result<f64> {
        Ok(self
            .metrics()?
            .lines()
            .filter(|l| l.starts_with("linkerd_multus_admission_requests_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum())
    }

    fn metrics(&self) -> Result<String> {
        Ok(self
            .ops_get("/metrics")
            .ok_or_else(|| anyhow!("GET /metrics of the webhook failed"))?
            .1)
    }
}

/// A log line without its terminal colour codes (`ESC [ ... m`).
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('\x1b') {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        rest = rest.find('m').map_or("", |end| &rest[end + 1..]);
    }
    out.push_str(rest);
    out
}
