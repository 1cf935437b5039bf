//! The plain-HTTP operations port: `/healthz`, `/readyz` and `/metrics`.
//! Bounded like the admission port: at most [`OPS_LIMITS`] connections (per
//! peer too, so that the kubelet's probes always get through), evicting the
//! least productive at the limit, a deadline for each request's headers, and
//! idle connections closed.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use crate::webhook::cache::{NadCache, NamespaceCache};
use crate::webhook::connections::{ConnectionLimits, Connections, Ticket};
use crate::webhook::metrics::{self, Metrics};
use crate::webhook::requests::Throttle;

/// The operations port's connections: the kubelet's probes (a connection
/// each, from the node's address) and a scraper or two. One address holds
/// at most a quarter of them.
pub const OPS_LIMITS: ConnectionLimits = ConnectionLimits {
    max: 32,
    per_peer: 8,
    requests_per_peer: 8,
    // No request to it has a body.
    stalled_after: Duration::from_secs(1),
    // A probe's connection sends its request at once; a new one may take the
    // place of one that has not.
    grace: Duration::ZERO,
};
/// Deadline for a connection's first byte and for each request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection with no request in flight stays open.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// hyper's smallest HTTP/1 read buffer: a probe's request is a few hundred bytes.
const BUFFER: usize = 8 * 1024;

/// What the operations port reports: why the process is not ready, and its metrics.
pub trait Probe: Send + Sync + 'static {
    /// Why it is not ready, if it is not.
    fn not_ready(&self) -> Option<String>;
    /// Its metrics, in the OpenMetrics text format ([`metrics::CONTENT_TYPE`]).
    fn metrics(&self) -> String;
}

/// What the webhook's probes and metrics report on.
pub struct Health {
    /// The namespace cache, when the webhook has one (the benchmark baseline has none).
    pub cache: Option<Arc<NamespaceCache>>,
    /// The NAD cache, when the webhook reads NADs.
    pub nads: Option<Arc<NadCache>>,
    /// How long a cache's watch may be down before the webhook is not ready.
    pub max_watch_outage: Duration,
    /// Set on SIGTERM: the pod leaves the Service's endpoints while it drains.
    pub shutting_down: AtomicBool,
    /// The metrics.
    pub metrics: Arc<Metrics>,
}

impl Probe for Health {
    /// Why the webhook is not ready, if it is not: shutting down, or a cache
    /// not synced yet or whose watch has been down too long.
    fn not_ready(&self) -> Option<String> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Some("shutting down".into());
        }
        [&self.cache, &self.nads]
            .into_iter()
            .flatten()
            .find_map(|cache| cache.not_current(self.max_watch_outage))
    }

    fn metrics(&self) -> String {
        self.metrics.encode(
            self.cache.as_ref().map(|c| c.status()),
            self.nads.as_ref().map(|c| c.status()),
        )
    }
}

/// Serves the operations port for ever.
pub async fn serve(listener: TcpListener, health: Arc<dyn Probe>) {
    let connections = Connections::new(OPS_LIMITS, None);
    let refusals_warned = Throttle::default();
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        match connections.admit(peer.ip()) {
            Ok(ticket) => {
                tokio::spawn(connection(tcp, ticket, health.clone()));
            }
            Err(_) if refusals_warned.due() => tracing::warn!(
                %peer,
                "closed a new connection to the operations port: it has {} connections ({} from one address) with a request in flight",
                OPS_LIMITS.max,
                OPS_LIMITS.per_peer
            ),
            Err(_) => {}
        }
    }
}

/// One connection: its first byte and each request's headers within
/// [`HEADER_TIMEOUT`], closed when evicted or idle for [`IDLE_TIMEOUT`].
async fn connection(tcp: TcpStream, ticket: Ticket, health: Arc<dyn Probe>) {
    let conn = ticket.conn().clone();
    let mut first = [0; 1];
    tokio::select! {
        // A byte there to read (readiness alone may be spurious).
        peeked = tokio::time::timeout(HEADER_TIMEOUT, tcp.peek(&mut first)) => {
            if !matches!(peeked, Ok(Ok(1))) {
                return;
            }
        }
        () = conn.signalled() => return,
    }
    conn.first_byte();
    conn.serving();
    let service = {
        let conn = conn.clone();
        service_fn(move |request| {
            let entered = conn.enter();
            let health = health.clone();
            async move {
                let response = match entered {
                    Ok(mut in_flight) => {
                        in_flight.read();
                        in_flight.answered();
                        answer(&request, &*health)
                    }
                    Err(_) => reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "text/plain",
                        "too many requests from this address\n".into(),
                    ),
                };
                Ok::<_, Infallible>(response)
            }
        })
    };
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(BUFFER)
        .serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(http);
    loop {
        let idle_for = conn.idle_for().unwrap_or_default();
        let check = tokio::time::Instant::now() + IDLE_TIMEOUT.saturating_sub(idle_for);
        tokio::select! {
            _ = http.as_mut() => return,
            () = conn.signalled() => return,
            () = tokio::time::sleep_until(check) => {
                if conn.idle_for().is_some_and(|idle| idle >= IDLE_TIMEOUT) {
                    return;
                }
            }
        }
    }
}

fn answer(request: &Request<Incoming>, health: &dyn Probe) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        (&Method::GET, "/readyz") => match health.not_ready() {
            None => (StatusCode::OK, "text/plain", "ready\n".to_string()),
            Some(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        (&Method::GET, "/metrics") => (StatusCode::OK, metrics::CONTENT_TYPE, health.metrics()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "GET /healthz, /readyz or /metrics\n".to_string(),
        ),
    };
    reply(status, content_type, body)
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
