//! The webhook's Prometheus metrics, in the OpenMetrics text format.

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::admission::Outcome;
use crate::linkerd_cni::attach::Change;
use crate::webhook::cache::CacheStatus;
use crate::webhook::tally;

/// The content type of [`Metrics::encode`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabel {
    change: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabel {
    answer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// Why the server refused a request before it reached the admission code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The body is over `--max-body-bytes`.
    TooLarge,
    /// Headers or body did not arrive in time.
    Timeout,
    /// Not one of the admission paths.
    NotFound,
    /// Not a POST.
    Method,
    /// The body would go over `--max-body-bytes-in-flight`: 503, unread.
    OverBudget,
    /// A new connection at `--max-connections`, every open one with a
    /// request in flight: closed at once.
    ConnectionLimit,
    /// A new connection from a peer at `--max-connections-per-peer`, every
    /// one of its own with a request in flight: closed at once.
    PeerConnectionLimit,
    /// A request from a peer with `--max-requests-per-peer` in flight: 503, unread.
    PeerRequestLimit,
    /// A second request on a connection that has had no review answered, still
    /// waiting for the first after `--body-timeout`: 503, unread.
    Unproven,
}

impl Refusal {
    const ALL: [Refusal; 9] = [
        Refusal::TooLarge,
        Refusal::Timeout,
        Refusal::NotFound,
        Refusal::Method,
        Refusal::OverBudget,
        Refusal::ConnectionLimit,
        Refusal::PeerConnectionLimit,
        Refusal::PeerRequestLimit,
        Refusal::Unproven,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Refusal::TooLarge => "too_large",
            Refusal::Timeout => "timeout",
            Refusal::NotFound => "not_found",
            Refusal::Method => "method",
            Refusal::OverBudget => "over_budget",
            Refusal::ConnectionLimit => "connection_limit",
            Refusal::PeerConnectionLimit => "peer_connection_limit",
            Refusal::PeerRequestLimit => "peer_request_limit",
            Refusal::Unproven => "unproven_connection",
        }
    }
}

/// What a connection evicted for a new one, a request or the body budget was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Its TLS handshake, or waiting for its first byte.
    Handshake,
    /// Nothing: idle between requests, or before its first.
    Idle,
    /// Waiting for request bodies that made no progress for `--body-stall-timeout`.
    Stalled,
    /// Waiting for request bodies still arriving, on a connection that has had no
    /// review answered.
    Reading,
    /// Waiting for a cache's watch to bring the object a review names.
    Waiting,
}

impl Eviction {
    const ALL: [Eviction; 5] = [
        Eviction::Handshake,
        Eviction::Idle,
        Eviction::Stalled,
        Eviction::Reading,
        Eviction::Waiting,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Eviction::Handshake => "handshake",
            Eviction::Idle => "idle",
            Eviction::Stalled => "stalled",
            Eviction::Reading => "reading",
            Eviction::Waiting => "waiting",
        }
    }
}

/// What a live read (of an object the caches cannot vouch for) was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveObject {
    /// A namespace.
    Namespace,
    /// A NetworkAttachmentDefinition.
    Nad,
}

/// What a live read gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveResult {
    /// The object exists.
    Found,
    /// The API server says it does not.
    Absent,
    /// The read failed or timed out.
    Failed,
    /// Not started: its namespace's share or the whole budget spent.
    Refused,
    /// Not started: a read a moment ago gave the answer.
    Remembered,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LiveLabel {
    object: &'static str,
    result: &'static str,
}

const LIVE_OBJECTS: [&str; 2] = ["namespace", "nad"];
const LIVE_RESULTS: [&str; 5] = ["found", "absent", "failed", "refused", "remembered"];

const CHANGES: [&str; 6] = [
    "attached",
    "detached",
    "proxy_uid_set",
    "proxy_uid_removed",
    "proxy_uid_released",
    "network_resources",
];

/// The position of `network_resources` in [`CHANGES`]: a pod whose patch holds
/// network-resources changes, counted once.
const NETWORK_RESOURCES: usize = 5;

/// The position of a change's label in [`CHANGES`].
fn change_index(change: &Change) -> usize {
    match change {
        Change::Attached => 0,
        Change::Detached => 1,
        Change::ProxyUidSet(_) => 2,
        Change::ProxyUidRemoved => 3,
        Change::ProxyUidReleased => 4,
    }
}

/// Registers a family of counters and makes the counter of each label set,
/// in order: each is exported from the start, with no lookup per event.
fn counters<L, C>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    labels: impl IntoIterator<Item = L>,
) -> Vec<C>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
    C: Clone + Default + EncodeMetric + TypedMetric + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, C>::default();
    let counters = labels
        .into_iter()
        .map(|label| family.get_or_create(&label).clone())
        .collect();
    registry.register(name, help, family);
    counters
}

/// The bounds of the reviews' duration histogram, in seconds: from 50 µs, as a review takes
/// tens of microseconds.
const DURATION_BOUNDS: [f64; 11] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0,
];

/// Every metric of the webhook.
pub struct Metrics {
    registry: Registry,
    // One counter per label value, made up front: no lookup per request. What every review
    // writes is kept per thread (tally).
    requests: Vec<tally::Counter>,
    /// The `--on-error` answers: allow, deny.
    on_error: [Counter; 2],
    duration: tally::Histogram<{ DURATION_BOUNDS.len() }>,
    patches: Vec<tally::Counter>,
    refusals: Vec<Counter>,
    http: HttpGauges,
    tls_reloads: [Counter; 2],
    certificate_expiry: Gauge,
    /// By [`LiveObject`], then [`LiveResult`].
    live_reads: [[Counter; 5]; 2],
    namespaces: CacheGauges,
    nads: Option<CacheGauges>,
}

/// The connections and request bodies of the admission port.
struct HttpGauges {
    connections: Gauge,
    evictions: Vec<Counter>,
    idle_closes: Counter,
    body_bytes: Gauge,
    watch_waits: Gauge,
}

impl HttpGauges {
    fn register(registry: &mut Registry) -> Self {
        let connections = Gauge::default();
        registry.register(
            "linkerd_multus_http_connections",
            "Open connections of the admission port: in their TLS handshake, idle or serving",
            connections.clone(),
        );
        let family = Family::<StateLabel, Counter>::default();
        let evictions = Eviction::ALL
            .iter()
            .map(|e| {
                family
                    .get_or_create(&StateLabel { state: e.as_str() })
                    .clone()
            })
            .collect();
        registry.register(
            "linkerd_multus_http_evictions",
            "Connections closed to make room for a new one at --max-connections or --max-connections-per-peer, for a request at --max-requests-per-peer, or for the body budget, by what they were doing",
            family,
        );
        let idle_closes = Counter::default();
        registry.register(
            "linkerd_multus_http_idle_closes",
            "Connections closed after --idle-timeout without a request in flight",
            idle_closes.clone(),
        );
        let body_bytes = Gauge::default();
        registry.register(
            "linkerd_multus_http_body_bytes_in_flight",
            "Bytes of request bodies held now, against --max-body-bytes-in-flight",
            body_bytes.clone(),
        );
        let watch_waits = Gauge::default();
        registry.register(
            "linkerd_multus_admission_watch_waits",
            "Reviews waiting now for a cache's watch to bring the namespace or NADs they name (each at most --live-read-timeout), holding no connection's place",
            watch_waits.clone(),
        );
        HttpGauges {
            connections,
            evictions,
            idle_closes,
            body_bytes,
            watch_waits,
        }
    }
}

/// The gauges of one watch-fed cache.
struct CacheGauges {
    entries: Gauge,
    synced: Gauge,
    watch_up: Gauge,
    age: Gauge<f64, std::sync::atomic::AtomicU64>,
    lists: Counter,
}

impl CacheGauges {
    /// Registers `linkerd_multus_<what>_cache_<plural>`, `…_cache_synced`,
    /// `linkerd_multus_<what>_watch_up`, `…_cache_age_seconds` and
    /// `…_cache_lists_total`.
    fn register(registry: &mut Registry, what: &str, plural: &str) -> Self {
        let entries = Gauge::default();
        registry.register(
            format!("linkerd_multus_{what}_cache_{plural}"),
            format!("{} in the {what} cache", capitalized(plural)),
            entries.clone(),
        );
        let synced = Gauge::default();
        registry.register(
            format!("linkerd_multus_{what}_cache_synced"),
            format!("1 once the {what} cache has listed every {what}"),
            synced.clone(),
        );
        let watch_up = Gauge::default();
        registry.register(
            format!("linkerd_multus_{what}_watch_up"),
            format!(
                "1 while the {what} watch runs; 0 while it is broken and the cache serves its last state"
            ),
            watch_up.clone(),
        );
        let age = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            format!("linkerd_multus_{what}_cache_age_seconds"),
            format!(
                "Seconds since the {what} cache was last known to be current: 0 while the watch is up"
            ),
            age.clone(),
        );
        let lists = Counter::default();
        registry.register(
            format!("linkerd_multus_{what}_cache_lists"),
            format!(
                "Full lists of every {what}: one at the start, one each time the watch's resourceVersion expired"
            ),
            lists.clone(),
        );
        CacheGauges {
            entries,
            synced,
            watch_up,
            age,
            lists,
        }
    }

    fn set(&self, status: CacheStatus) {
        self.entries
            .set(i64::try_from(status.entries).unwrap_or(i64::MAX));
        self.synced.set(i64::from(status.synced));
        self.watch_up.set(i64::from(status.watch_up));
        self.age.set(status.age_seconds);
        self.lists
            .inc_by(status.lists.saturating_sub(self.lists.get()));
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric, with every label value at zero.
    pub fn new() -> Self {
        Self::build(false)
    }

    /// [`Metrics::new`] and the gauges of the NAD cache (the missing-NAD
    /// check and the network-resources rules read it).
    pub fn with_nad_cache() -> Self {
        Self::build(true)
    }

    /// The registry, for a task beside the server (the NAD controller) to
    /// register its own metrics in.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    fn build(nad_cache: bool) -> Self {
        let mut registry = Registry::default();
        let requests = counters(
            &mut registry,
            "linkerd_multus_admission_requests",
            "Admission reviews answered, by outcome",
            Outcome::ALL.iter().map(|o| OutcomeLabel {
                outcome: o.as_str(),
            }),
        );
        let family = Family::<AnswerLabel, Counter>::default();
        let on_error =
            ["allow", "deny"].map(|answer| family.get_or_create(&AnswerLabel { answer }).clone());
        registry.register(
            "linkerd_multus_admission_on_error",
            "Reviews answered with --on-error (allow: admitted without the webhook's changes; deny: refused), the webhook unable to act on the pod (its caches and live reads could not vouch for the namespace or NADs, or the rules could not apply), by answer",
            family,
        );
        let duration = tally::Histogram::new(DURATION_BOUNDS);
        registry.register(
            "linkerd_multus_admission_request_duration_seconds",
            "Time from the end of the request body to the response, in seconds",
            duration.clone(),
        );
        let patches = counters(
            &mut registry,
            "linkerd_multus_admission_patches",
            "Changes made by the patches returned, by change (dry runs included)",
            CHANGES.iter().map(|&change| ChangeLabel { change }),
        );
        let refusals = counters(
            &mut registry,
            "linkerd_multus_http_refusals",
            "HTTP requests refused before admission, by reason",
            Refusal::ALL
                .iter()
                .map(|r| ReasonLabel { reason: r.as_str() }),
        );
        let http = HttpGauges::register(&mut registry);
        let family = Family::<ResultLabel, Counter>::default();
        let tls_reloads = ["success", "error"]
            .map(|result| family.get_or_create(&ResultLabel { result }).clone());
        registry.register(
            "linkerd_multus_tls_reloads",
            "Reloads of the TLS files after they changed on disk, by result",
            family,
        );
        let certificate_expiry = Gauge::default();
        registry.register(
            "linkerd_multus_tls_certificate_expiry_timestamp_seconds",
            "When the serving certificate in use expires (its notAfter), in seconds since the Unix epoch",
            certificate_expiry.clone(),
        );
        let family = Family::<LiveLabel, Counter>::default();
        let live_reads = LIVE_OBJECTS.map(|object| {
            LIVE_RESULTS.map(|result| family.get_or_create(&LiveLabel { object, result }).clone())
        });
        registry.register(
            "linkerd_multus_live_reads",
            "Reads from the API server of a namespace or NAD the caches could not vouch for, by object and result",
            family,
        );
        let namespaces = CacheGauges::register(&mut registry, "namespace", "namespaces");
        let nads = nad_cache.then(|| CacheGauges::register(&mut registry, "nad", "nads"));
        Metrics {
            registry,
            requests,
            on_error,
            duration,
            patches,
            refusals,
            http,
            tls_reloads,
            certificate_expiry,
            live_reads,
            namespaces,
            nads,
        }
    }

    /// Counts a live read.
    pub fn live_read(&self, object: LiveObject, result: LiveResult) {
        self.live_reads[object as usize][result as usize].inc();
    }

    /// Counts an answered review and its changes.
    pub fn answered(
        &self,
        outcome: Outcome,
        changes: &[Change],
        network_resources: bool,
        took: Duration,
    ) {
        self.requests[outcome as usize].inc();
        self.duration.observe(took);
        for change in changes {
            self.patches[change_index(change)].inc();
        }
        if network_resources {
            self.patches[NETWORK_RESOURCES].inc();
        }
    }

    /// Counts an `--on-error` answer: `denied` when it refused the pod.
    pub fn on_error(&self, denied: bool) {
        self.on_error[usize::from(denied)].inc();
    }

    /// Shows when the serving certificate in use expires (seconds since the epoch).
    pub fn certificate_expiry(&self, not_after: Option<i64>) {
        self.certificate_expiry.set(not_after.unwrap_or_default());
    }

    /// Counts a request refused before admission.
    pub fn refused(&self, refusal: Refusal) {
        self.refusals[refusal as usize].inc();
    }

    /// Shows how many connections are open.
    pub fn connections(&self, open: usize) {
        self.http
            .connections
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// Counts a connection evicted for a new one, a request or the body budget.
    pub fn evicted(&self, eviction: Eviction) {
        self.http.evictions[eviction as usize].inc();
    }

    /// Counts a connection closed after `--idle-timeout`.
    pub fn idle_closed(&self) {
        self.http.idle_closes.inc();
    }

    /// Adds `delta` to the reviews waiting for a cache's watch.
    pub fn watch_waits(&self, delta: i64) {
        self.http.watch_waits.inc_by(delta);
    }

    /// Adds `delta` to the body bytes held.
    pub fn body_bytes(&self, delta: i64) {
        self.http.body_bytes.inc_by(delta);
    }

    /// Counts a TLS reload.
    pub fn tls_reloaded(&self, ok: bool) {
        self.tls_reloads[usize::from(!ok)].inc();
    }

    /// The metrics in the OpenMetrics text format, with the caches' state now.
    pub fn encode(&self, namespaces: Option<CacheStatus>, nads: Option<CacheStatus>) -> String {
        if let Some(status) = namespaces {
            self.namespaces.set(status);
        }
        if let (Some(gauges), Some(status)) = (&self.nads, nads) {
            gauges.set(status);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
