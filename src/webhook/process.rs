//! A process that runs one task with the operations port alone: no admission
//! port, no TLS. It is how `linkerd-multus controller` runs the NAD
//! controller, apart from the webhook: the same logs, API clients, probes,
//! metrics and signals as the webhook's, and nothing else listening.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::pipeline::environment;
use crate::webhook::ops::{self, Probe};
use crate::webhook::{Clients, LogFormat, api_client, api_config, init_logs, listen, termination};

/// What the process needs of its command line.
#[derive(Debug, Clone)]
pub struct ProcessArgs {
    /// Where `/healthz`, `/readyz` and `/metrics` are served (`--ops-listen`).
    pub ops_listen: SocketAddr,
    /// The deadline of each call to the API other than a watch (`--api-timeout`).
    pub api_timeout: Duration,
    /// The log format (`--log-format`).
    pub log_format: LogFormat,
    /// The log filter (`--log-level`).
    pub log_level: String,
}

/// Why the task is not ready, if it is not: what `/readyz` answers.
pub type Readiness = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// A task, started with the API clients, the registry to register its
/// metrics in, and a flag that turns true on SIGTERM or SIGINT: the future
/// to run until it returns (it must return soon after the flag turns), and
/// its readiness.
pub type Task = Box<
    dyn FnOnce(Clients, &mut Registry, watch::Receiver<bool>) -> (BoxFuture<'static, ()>, Readiness)
        + Send,
>;

/// Runs `task` with the operations port until SIGTERM or SIGINT, then waits
/// for the task to return.
pub fn run(args: ProcessArgs, task: Task) -> anyhow::Result<()> {
    init_logs(args.log_format, &args.log_level)?;
    for warning in environment::unknown_variables_here() {
        tracing::warn!("{warning}");
    }
    // kube's client uses rustls; ring is the one provider built in.
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve(args, task))
}

/// The probes and metrics of a task.
struct TaskHealth {
    registry: Registry,
    readiness: Readiness,
    shutting_down: AtomicBool,
}

impl Probe for TaskHealth {
    fn not_ready(&self) -> Option<String> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Some("shutting down".into());
        }
        (self.readiness)()
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

async fn serve(args: ProcessArgs, task: Task) -> anyhow::Result<()> {
    let (ops_listener, ops_listen) = listen::bind_as(args.ops_listen, "--ops-listen")?;
    let config = api_config(args.api_timeout).await?;
    let mut once = config.clone();
    once.default_retry = false;
    let clients = Clients {
        client: api_client(config)?,
        once: api_client(once)?,
    };
    let mut registry = Registry::default();
    let (stop, stopped) = watch::channel(false);
    let (future, readiness) = task(clients, &mut registry, stopped);
    let health = Arc::new(TaskHealth {
        registry,
        readiness,
        shutting_down: false.into(),
    });
    tokio::spawn(ops::serve(ops_listener, health.clone()));
    tracing::info!(%ops_listen, "serving the operations port only");
    let mut running = tokio::spawn(future);
    tokio::select! {
        signal = termination() => {
            tracing::info!(signal, "shutting down");
            health.shutting_down.store(true, Ordering::Relaxed);
            stop.send_replace(true);
            running.await.context("the task")?;
        }
        ended = &mut running => {
            ended.context("the task")?;
            anyhow::bail!("the task stopped on its own");
        }
    }
    tracing::info!("stopped");
    Ok(())
}
