//! `linkerd-multus webhook`: the mutating admission webhook for pods created
//! outside Git. It answers with the same core as the KRM function
//! ([`crate::attach::workload`] through [`crate::admission`]); this module
//! wires the I/O around it: the HTTPS server, the namespace cache, TLS
//! reloads, probes, metrics, logs and the shutdown sequence.

pub mod metrics;
pub mod namespaces;
pub mod ops;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use bytes::Bytes;
use hyper::StatusCode;
use tokio::net::TcpListener;

use crate::admission::{self, NamespaceState, OnError, Outcome};
use crate::environment;
use crate::settings::Settings;
use metrics::Metrics;
use namespaces::NamespaceCache;
use server::{Handler, Limits, Reply};
use tls::{Tls, TlsFiles};

/// The path the original Go operator served; answered too, so existing
/// MutatingWebhookConfigurations keep working.
pub const LEGACY_PATH: &str = "/annotate-multus-v1-pod";

/// The webhook's own flags; the core settings come with them.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// HTTPS address the API server calls.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Admission path; the original operator's /annotate-multus-v1-pod is always answered too.
    #[arg(long, value_name = "PATH", default_value = "/mutate")]
    pub path: String,
    /// Serving certificate chain, PEM; reloaded when it changes on disk.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: PathBuf,
    /// The certificate's private key, PEM; reloaded when it changes on disk.
    #[arg(long, value_name = "FILE")]
    pub tls_key: PathBuf,
    /// Requires client certificates signed by these CA certificates (PEM).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// How often the TLS files are checked for changes.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub tls_reload_interval: Duration,
    /// Plain-HTTP address of /healthz, /readyz and /metrics.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9090")]
    pub ops_listen: SocketAddr,
    /// Largest request body accepted: two pods at etcd's 1.5 MiB limit, plus the review.
    #[arg(long, value_name = "BYTES", default_value_t = 6 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Deadline for a connection's TLS handshake and for each request's headers.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,
    /// Deadline for each request's body.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,
    /// What to answer for a pod the webhook cannot act on (a malformed
    /// networks annotation, a namespace cache not synced yet): allow it
    /// unchanged with a warning, or deny it saying why.
    #[arg(long, value_enum, default_value = "allow")]
    pub on_error: OnError,
    /// After SIGTERM, how long to keep serving while /readyz fails, so the
    /// pod leaves the Service's endpoints before it stops accepting.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,
    /// How long to wait for requests in flight once it stops accepting.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value = "plain")]
    pub log_format: LogFormat,
    /// Log filter: a level (info, debug) or tracing directives; RUST_LOG wins when set.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub log_level: String,
}

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Plain,
    /// One JSON object per line.
    Json,
}

/// The core settings for the webhook: `--config`, then `LINKERD_MULTUS_*`,
/// then the flags, each naming itself in errors.
pub fn settings(
    config: Option<&Path>,
    flags: &[(&'static str, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Settings> {
    let mut settings = match config {
        None => Settings::default(),
        Some(path) => {
            let node = crate::renderer::read_config(path).map_err(|e| anyhow!(e))?;
            Settings::from_function_config(Some(&node))
                .map_err(|e| anyhow!("--config {}: {e}", path.display()))?
        }
    };
    let mut values = environment::prefixed(env, environment::PREFIX);
    values.extend(environment::flags(flags));
    environment::apply(&mut settings, &values).map_err(|e| anyhow!(e))?;
    Ok(settings)
}

/// Runs the webhook until SIGTERM or SIGINT, then drains and returns.
pub fn run(args: Args, settings: Settings) -> anyhow::Result<()> {
    init_logs(&args)?;
    // kube's client and this server both use rustls; ring is the one provider built in.
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let tls = Arc::new(Tls::load(TlsFiles {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        client_ca: args.client_ca.clone(),
    })?);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve(args, settings, tls))
}

async fn serve(args: Args, settings: Settings, tls: Arc<Tls>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    let ops_listener = TcpListener::bind(args.ops_listen)
        .await
        .with_context(|| format!("--ops-listen {}", args.ops_listen))?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)")?;
    let metrics = Arc::new(Metrics::new());
    let cache = Arc::new(NamespaceCache::new(&settings.uid_range_annotation));
    tokio::spawn(cache.clone().run(kube::Api::all(client)));
    let reload_metrics = metrics.clone();
    tokio::spawn(tls.clone().watch(args.tls_reload_interval, move |ok| {
        reload_metrics.tls_reloaded(ok)
    }));
    let health = Arc::new(ops::Health {
        cache: Some(cache.clone()),
        shutting_down: false.into(),
        metrics: metrics.clone(),
    });
    tokio::spawn(ops::serve(ops_listener, health.clone()));
    tracing::info!(
        listen = %args.listen,
        ops_listen = %args.ops_listen,
        path = %args.path,
        client_auth = args.client_ca.is_some(),
        "webhook serving"
    );
    let handler = Arc::new(Admission {
        settings,
        on_error: args.on_error,
        cache,
        metrics: metrics.clone(),
    });
    let shutdown_delay = args.shutdown_delay;
    let shutdown = async move {
        let signal = termination().await;
        health.shutting_down.store(true, Ordering::Relaxed);
        tracing::info!(signal, delay = ?shutdown_delay, "shutting down: /readyz fails from now on");
        tokio::time::sleep(shutdown_delay).await;
    };
    server::serve(listener, tls, limits(&args), handler, metrics, shutdown).await;
    tracing::info!("stopped");
    Ok(())
}

/// The server limits the flags set.
pub fn limits(args: &Args) -> Limits {
    let mut paths = vec![args.path.clone()];
    if args.path != LEGACY_PATH {
        paths.push(LEGACY_PATH.to_string());
    }
    Limits {
        paths,
        max_body_bytes: args.max_body_bytes,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        drain_timeout: args.drain_timeout,
    }
}

/// Waits for SIGTERM or SIGINT and names it.
async fn termination() -> &'static str {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

fn init_logs(args: &Args) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&directives)
                .with_context(|| format!("RUST_LOG={directives}"))?
        }
        _ => tracing_subscriber::EnvFilter::try_new(&args.log_level)
            .with_context(|| format!("--log-level {}", args.log_level))?,
    };
    // Colours only on a terminal: container logs are files.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| anyhow!("setting up the logs: {e}"))
}

/// Answers admission reviews with the core's pod rules.
struct Admission {
    settings: Settings,
    on_error: OnError,
    cache: Arc<NamespaceCache>,
    metrics: Arc<Metrics>,
}

impl Handler for Admission {
    fn handle(&self, body: Bytes) -> Reply {
        let start = Instant::now();
        let request = match admission::parse(&body) {
            Ok(request) => request,
            Err(e) => {
                self.metrics
                    .answered(Outcome::Invalid, &[], start.elapsed());
                tracing::warn!(error = %e, "refused a body that is not an AdmissionReview");
                return Reply::text(StatusCode::BAD_REQUEST, e.to_string());
            }
        };
        let cached = self.cache.get(&request.namespace);
        let namespace = match &cached {
            _ if !self.cache.synced() => NamespaceState::NotSynced,
            Some(annotations) => NamespaceState::Known(&**annotations),
            None => NamespaceState::Unknown,
        };
        let answer = admission::answer(&request, namespace, &self.settings, self.on_error);
        self.metrics
            .answered(answer.outcome, &answer.changes, start.elapsed());
        let changes = || {
            answer
                .changes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let (uid, namespace, name, operation, dry_run) = (
            request.uid.as_str(),
            request.namespace.as_str(),
            request.name.as_str(),
            request.operation.as_str(),
            request.dry_run,
        );
        match answer.outcome {
            Outcome::Patched => tracing::info!(
                uid, namespace, name, operation, dry_run, changes = %changes(),
                "patched"
            ),
            Outcome::Unchanged if answer.warnings.is_empty() => {
                tracing::debug!(uid, namespace, name, operation, dry_run, "unchanged")
            }
            Outcome::Unchanged => tracing::warn!(
                uid, namespace, name, operation, dry_run,
                warnings = %answer.warnings.join("; "),
                "unchanged, with warnings"
            ),
            Outcome::Warned | Outcome::Denied | Outcome::Invalid => tracing::warn!(
                uid, namespace, name, operation, dry_run, outcome = %answer.outcome,
                warnings = %answer.warnings.join("; "),
                "could not act on the pod"
            ),
        }
        Reply::json(answer.body)
    }
}
