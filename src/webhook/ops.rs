//! The plain-HTTP operations port: `/healthz`, `/readyz` and `/metrics`.

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
use tokio::net::TcpListener;

use crate::webhook::cache::{NadCache, NamespaceCache};
use crate::webhook::metrics::{self, Metrics};

/// What the probes and the metrics report on.
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

impl Health {
    /// Why the webhook is not ready, if it is not: shutting down, or a cache
    /// not synced yet or whose watch has been down too long.
    pub fn not_ready(&self) -> Option<String> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Some("shutting down".into());
        }
        [&self.cache, &self.nads]
            .into_iter()
            .flatten()
            .find_map(|cache| cache.not_current(self.max_watch_outage))
    }
}

/// Serves the operations port for ever.
pub async fn serve(listener: TcpListener, health: Arc<Health>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let health = health.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let health = health.clone();
                async move { Ok::<_, Infallible>(answer(&request, &health)) }
            });
            http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(TokioIo::new(tcp), service)
                .await
                .ok();
        });
    }
}

fn answer(request: &Request<Incoming>, health: &Health) -> Response<Full<Bytes>> {
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
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            metrics::CONTENT_TYPE,
            health.metrics.encode(
                health.cache.as_ref().map(|c| c.status()),
                health.nads.as_ref().map(|c| c.status()),
            ),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "GET /healthz, /readyz or /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
