//! `linkerd-multus webhook`: the mutating admission webhook for pods created
//! outside Git. It answers with the same core as the KRM function
//! ([`crate::linkerd_cni::attach::workload`], and [`crate::network_resources::workload`]
//! with `--network-resources`, through [`crate::admission`]); this module
//! wires the I/O around it: the HTTPS server, the namespace and NAD caches,
//! TLS reloads, probes, metrics, logs and the shutdown sequence.

pub mod body;
pub mod cache;
pub mod connections;
pub mod entries;
pub mod eviction;
pub mod handler;
pub mod limits;
pub mod listen;
pub mod live;
pub mod metrics;
pub mod ops;
pub mod process;
mod requests;
pub mod server;
pub mod tally;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, anyhow};

use crate::admission::{MissingNad, OnError};
use crate::linkerd_cni::settings::Settings;
use crate::network_resources;
use crate::pipeline::environment;
use cache::{NadCache, NamespaceCache, WatchCache};
use handler::Admission;
use live::LiveReader;
use metrics::Metrics;
use server::Limits;
use tls::{Tls, TlsFiles};

/// The path the original Go operator served; answered too, so existing
/// MutatingWebhookConfigurations keep working.
pub const LEGACY_PATH: &str = "/annotate-multus-v1-pod";

/// The webhook's own flags; the core settings come with them.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// HTTPS address the API server calls; `[::]` takes IPv4 and IPv6 (0.0.0.0 on a kernel without IPv6).
    #[arg(long, value_name = "ADDR", default_value = "[::]:8443")]
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
    /// Plain-HTTP address of /healthz, /readyz and /metrics; `[::]` takes IPv4 and IPv6.
    #[arg(long, value_name = "ADDR", default_value = "[::]:9090")]
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
    /// How long a request's body may make no progress (not a byte arriving)
    /// before its connection may be evicted, for a new connection at a limit
    /// or for the body budget. The API server sends a review's body with its
    /// headers, so a second of silence is a stalled peer, long before
    /// --body-timeout ends the request.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub body_stall_timeout: Duration,
    /// Bytes of request bodies held at once, across all requests: a request
    /// reserves its Content-Length before its body is read, and gets 503 with
    /// Retry-After when it does not fit. Bodies over 64 KiB may use three
    /// quarters of it, so ordinary reviews still get through. 8 MiB reads one
    /// body of --max-body-bytes (6 MiB) at a time, and keeps the webhook at
    /// 10,000 namespaces under its 64 Mi memory limit under a flood of them (docs/benchmarks.md); must be at least 4/3 of --max-body-bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_body_bytes_in_flight: usize,
    /// Connections open at once. At the limit a new connection evicts one in
    /// its TLS handshake, waiting for a stalled body or idle between requests
    /// (those that have shown least of themselves first, strangers before
    /// connections that have had reviews answered), or is closed at once when
    /// every one has a request in flight. The API servers need a few (HTTP/2 carries many reviews on
    /// one); 128 idle connections, at about 22 KiB each after an HTTP/1
    /// request (5 KiB after a handshake), hold under 3 MiB (docs/benchmarks.md).
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_connections: usize,
    /// Connections open at once from one source address: one pod cannot
    /// hold them all. At the limit a new connection from that address evicts
    /// one of its own (as above), or is closed. An API server holds one or a
    /// few HTTP/2 connections; raise it when the API servers reach the
    /// webhook through one proxy address (konnectivity) with more.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_connections_per_peer: usize,
    /// Requests in flight at once from one source address, across its
    /// connections; more get 503 with Retry-After, unread. A review is
    /// answered in about a millisecond.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_requests_per_peer: usize,
    /// HTTP/2 streams in flight on one connection (SETTINGS_MAX_CONCURRENT_STREAMS):
    /// the API server's client opens another connection when a connection is
    /// at the limit, rather than queueing, and a review takes a millisecond.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_concurrent_streams: u32,
    /// How long a connection with no request in flight stays open before it
    /// is closed gracefully (HTTP/2 GOAWAY); HTTP/1 keep-alive connections
    /// close sooner, after --header-timeout without a request.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// Deadline of each call to the Kubernetes API other than a watch (which
    /// the API server ends itself every few minutes): lists, reads, writes,
    /// Events and the Lease.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub api_timeout: Duration,
    /// What to answer for a pod the webhook cannot act on (a malformed
    /// networks annotation, a namespace or NAD that neither its caches nor a
    /// live read can give, a NAD of the rules' name that runs another
    /// network): allow it unchanged with a warning, or deny it saying why.
    #[arg(long, value_enum, default_value = "allow")]
    pub on_error: OnError,
    /// How long a cache's watch may be down before the cache stops vouching
    /// for what it holds: /readyz then fails (the Service sends reviews to a
    /// current replica) and the reviews that reach it read their namespace live.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub max_watch_outage: Duration,
    /// Deadline of the live read of a namespace or NAD the caches cannot
    /// vouch for, within the API server's call of the webhook; also the most
    /// a review waits for a cache whose watch is up to bring an object it
    /// lacks (made a moment before the pod), before answering that it does
    /// not exist.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub live_read_timeout: Duration,
    /// After SIGTERM, how long to keep serving while /readyz fails, so the
    /// pod leaves the Service's endpoints before it stops accepting; each
    /// HTTP/1 answer meanwhile closes its connection, so the API server's next
    /// review goes over a new one to a current replica.
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
    /// Also runs the network-resources rules on pods CREATEd, with the
    /// settings in FILE (a NetworkResources object or a ConfigMap), after the
    /// Linkerd-CNI rules; watches NetworkAttachmentDefinitions for them.
    /// Also read from LINKERD_MULTUS_NETWORK_RESOURCES. Empty
    /// (`--network-resources=`, the packages' default): off.
    #[arg(long, value_name = "FILE", value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), PathBuf::from))]
    pub network_resources: Option<PathBuf>,
    /// What to do with a pod the rules attach in a namespace without the
    /// Linkerd-CNI NAD: deny it, attach it with a warning (where the NAD
    /// controller runs, `linkerd-multus controller`, which makes the NAD), or
    /// ignore (no check, no NAD watch).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "deny")]
    pub missing_nad: MissingNad,
}

/// Whether the webhook runs its NAD cache (and its metrics): only when something reads it.
/// With `--missing-nad ignore` and no network-resources rules, it neither watches NADs nor
/// needs the RBAC to (deploy/README.md, Metrics).
pub fn watches_nads(network_resources: bool, missing_nad: MissingNad) -> bool {
    network_resources || missing_nad != MissingNad::Ignore
}

/// The API clients, one configuration: they connect when first used.
#[derive(Clone)]
pub struct Clients {
    /// Every call's but those of [`Clients::once`].
    pub client: kube::Client,
    /// The same without kube's own retries of a 429, 503 or 504 (up to 15
    /// of them, the first 5 ms later, Retry-After or not): for a call whose
    /// 429 is an answer, not a "slow down", which its caller asks again at
    /// its own pace. An eviction a PodDisruptionBudget refuses is one
    /// (client-go does not retry it: it carries no Retry-After).
    pub once: kube::Client,
}

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Plain,
    /// One JSON object per line.
    Json,
}

/// Runs the webhook until SIGTERM or SIGINT, then drains and returns; with
/// `network_resources`, the network-resources rules run on pods CREATEd.
pub fn run(
    args: Args,
    settings: Settings,
    network_resources: Option<network_resources::settings::Settings>,
) -> anyhow::Result<()> {
    init_logs(args.log_format, &args.log_level)?;
    limits(&args).check()?;
    for warning in environment::unknown_variables_here() {
        tracing::warn!("{warning}");
    }
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
        .block_on(serve(args, settings, network_resources, tls))
}

async fn serve(
    args: Args,
    settings: Settings,
    network_resources: Option<network_resources::settings::Settings>,
    tls: Arc<Tls>,
) -> anyhow::Result<()> {
    let missing_nad = args.missing_nad;
    if missing_nad == MissingNad::Ignore && settings.skip_secondary_subnets {
        anyhow::bail!(
            "--skip-secondary-subnets=enabled reads the IPAM of the NADs pods select, but --missing-nad ignore reads no NAD: run with --missing-nad attach or deny, or leave skipSecondarySubnets disabled"
        );
    }
    let (listener, listen) = listen::bind_as(args.listen, "--listen")?;
    let (ops_listener, ops_listen) = listen::bind_as(args.ops_listen, "--ops-listen")?;
    let client = api_client(api_config(args.api_timeout).await?)?;
    let watch_nads = watches_nads(network_resources.is_some(), missing_nad);
    let metrics = Arc::new(match watch_nads {
        true => Metrics::with_nad_cache(),
        false => Metrics::new(),
    });
    // True from SIGTERM on: the server then closes each HTTP/1 connection
    // after its answer.
    let (stop, draining) = tokio::sync::watch::channel(false);
    let caches = start_caches(
        &args,
        &client,
        &settings,
        network_resources.as_ref(),
        watch_nads,
        &metrics,
    );
    metrics.certificate_expiry(tls.not_after());
    let (reload_metrics, reloaded) = (metrics.clone(), tls.clone());
    tokio::spawn(tls.clone().watch(args.tls_reload_interval, move |ok| {
        reload_metrics.tls_reloaded(ok);
        reload_metrics.certificate_expiry(reloaded.not_after());
    }));
    let health = Arc::new(ops::Health {
        cache: Some(caches.namespaces.clone()),
        nads: caches.nads.clone(),
        max_watch_outage: args.max_watch_outage,
        shutting_down: false.into(),
        metrics: metrics.clone(),
    });
    tokio::spawn(ops::serve(ops_listener, health.clone()));
    tracing::info!(
        %listen,
        %ops_listen,
        path = %args.path,
        client_auth = args.client_ca.is_some(),
        network_resources = network_resources.is_some(),
        missing_nad = ?missing_nad,
        "webhook serving"
    );
    let handler = Arc::new(Admission {
        settings,
        network_resources,
        nads: caches.nads,
        missing_nad,
        on_error: args.on_error,
        cache: caches.namespaces,
        live: caches.live,
        max_watch_outage: args.max_watch_outage,
        watch_lag: args.live_read_timeout,
        metrics: metrics.clone(),
    });
    let shutdown = shutdown(stop, health, args.shutdown_delay);
    server::serve(
        listener,
        tls,
        limits(&args),
        handler,
        metrics,
        draining,
        shutdown,
    )
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// The webhook's caches, their watches started, and the live reader of what
/// they cannot vouch for.
struct Caches {
    /// The namespace cache.
    namespaces: Arc<NamespaceCache>,
    /// The NAD cache, when something reads NADs.
    nads: Option<Arc<NadCache>>,
    /// The live reader.
    live: LiveReader,
}

/// Starts the namespace cache's watch, and the NAD cache's with `watch_nads`;
/// the NAD cache keeps the annotations the network-resources rules read.
fn start_caches(
    args: &Args,
    client: &kube::Client,
    settings: &Settings,
    network_resources: Option<&network_resources::settings::Settings>,
    watch_nads: bool,
    metrics: &Arc<Metrics>,
) -> Caches {
    let cache = Arc::new(
        WatchCache::namespaces(&settings.uid_range_annotation).with_api_timeout(args.api_timeout),
    );
    tokio::spawn(cache::run_namespaces(cache.clone(), client.clone()));
    let nad_keys = WatchCache::nads(
        network_resources
            .map(|s| s.resource_name_keys.as_slice())
            .unwrap_or_default(),
    )
    .with_api_timeout(args.api_timeout);
    let live = LiveReader::new(
        client.clone(),
        args.live_read_timeout,
        cache.keys(),
        nad_keys.keys(),
        metrics.clone(),
    );
    let nads = watch_nads.then(|| {
        let nads = Arc::new(nad_keys);
        tokio::spawn(cache::run_nads(nads.clone(), client.clone()));
        nads
    });
    Caches {
        namespaces: cache,
        nads,
        live,
    }
}

/// Waits for SIGTERM or SIGINT, then fails /readyz, has each HTTP/1 answer
/// close its connection (`stop` turned true tells the server), and keeps
/// serving for `delay`, for the pod to leave the Service's endpoints and the
/// API server its connections to the pod.
async fn shutdown(
    stop: tokio::sync::watch::Sender<bool>,
    health: Arc<ops::Health>,
    delay: Duration,
) {
    let signal = termination().await;
    stop.send_replace(true);
    health.shutting_down.store(true, Ordering::Relaxed);
    tracing::info!(signal, delay = ?delay, "shutting down: /readyz fails from now on");
    tokio::time::sleep(delay).await;
}

/// Silence the client tolerates on any response: a watch asks the API server
/// to end it after 290 s (and the API server's watch cache sends a bookmark
/// every minute meanwhile), so only a dead connection stays silent longer.
const API_READ_TIMEOUT: Duration = Duration::from_secs(295);

const API_CONTEXT: &str =
    "connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)";

/// The Kubernetes client's configuration: in-cluster service account, or
/// KUBECONFIG. No call can hang: connecting is bounded by `api_timeout`,
/// every read by `API_READ_TIMEOUT` from the request (lists made inside
/// kube-runtime's watchers included), and the calls made here have their
/// own deadlines.
pub async fn api_config(api_timeout: Duration) -> anyhow::Result<kube::Config> {
    let mut config = kube::Config::infer().await.context(API_CONTEXT)?;
    config.connect_timeout = Some(api_timeout);
    config.read_timeout = Some(API_READ_TIMEOUT);
    config.reset_reader_on_write = true;
    Ok(config)
}

/// The Kubernetes client of `config`.
pub fn api_client(config: kube::Config) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(config).context(API_CONTEXT)
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
        body_stall_timeout: args.body_stall_timeout,
        drain_timeout: args.drain_timeout,
        max_connections: args.max_connections,
        max_connections_per_peer: args.max_connections_per_peer,
        max_requests_per_peer: args.max_requests_per_peer,
        max_streams: args.max_concurrent_streams,
        idle_timeout: args.idle_timeout,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
    }
}

/// Waits for SIGTERM or SIGINT and names it.
pub async fn termination() -> &'static str {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

/// Logs to stderr in `format`, filtered by `level` (`--log-level`) unless
/// RUST_LOG is set.
pub fn init_logs(format: LogFormat, level: &str) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&directives)
                .with_context(|| format!("RUST_LOG={directives}"))?
        }
        _ => tracing_subscriber::EnvFilter::try_new(level)
            .with_context(|| format!("--log-level {level}"))?,
    };
    // Colours only on a terminal: container logs are files.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| anyhow!("setting up the logs: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nad_cache_runs_unless_nothing_reads_it() {
        for (network_resources, missing_nad, want) in [
            (false, MissingNad::Deny, true),
            (false, MissingNad::Attach, true),
            (false, MissingNad::Ignore, false),
            (true, MissingNad::Ignore, true),
        ] {
            assert_eq!(
                watches_nads(network_resources, missing_nad),
                want,
                "{network_resources} {missing_nad:?}"
            );
        }
    }
}
