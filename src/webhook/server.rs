//! The HTTPS server the API server calls: TLS with a handshake deadline,
//! HTTP/1.1 or HTTP/2, a header and a body deadline, a body size limit, and
//! a graceful shutdown that drains the requests in flight.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::webhook::metrics::{Metrics, Refusal};
use crate::webhook::tls::Tls;

/// What answers the POSTs to the admission paths.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request body; may wait (a live read of the API server).
    fn handle(&self, body: Bytes) -> impl Future<Output = Reply> + Send;
}

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
}

impl Reply {
    /// A JSON body with status 200.
    pub fn json(body: impl Into<Bytes>) -> Self {
        Reply {
            status: StatusCode::OK,
            content_type: "application/json",
            body: body.into(),
        }
    }

    /// A plain-text body, a line ending with a newline.
    pub fn text(status: StatusCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        message.push('\n');
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: message.into(),
        }
    }
}

/// How the server treats requests and connections.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The paths answered; every other path gets 404.
    pub paths: Vec<String>,
    /// The largest body accepted; larger ones get 413.
    pub max_body_bytes: usize,
    /// Deadline for the TLS handshake, and for each request's headers.
    pub header_timeout: Duration,
    /// Deadline for each request's body once its headers are in.
    pub body_timeout: Duration,
    /// How long a shutdown waits for requests in flight.
    pub drain_timeout: Duration,
}

/// Serves HTTPS on `listener` until `shutdown` completes, then stops
/// accepting, lets the requests in flight finish (up to the drain timeout)
/// and returns.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    tls: Arc<Tls>,
    limits: Limits,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let limits = Arc::new(limits);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        tcp.set_nodelay(true).ok();
        let acceptor = TlsAcceptor::from(tls.config());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let (limits, handler, metrics) = (limits.clone(), handler.clone(), metrics.clone());
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(limits.header_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        metrics.refused(Refusal::Timeout);
                        return;
                    }
                };
            let service = service_fn(move |request| {
                let (limits, handler, metrics) = (limits.clone(), handler.clone(), metrics.clone());
                async move { Ok::<_, Infallible>(route(request, &limits, &*handler, &metrics).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        "stopped accepting; draining requests in flight"
    );
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("drained"),
        () = tokio::time::sleep(limits.drain_timeout) => {
            tracing::warn!(timeout = ?limits.drain_timeout, "drain timed out; closing the remaining connections");
        }
    }
}

async fn route<H: Handler>(
    request: Request<Incoming>,
    limits: &Limits,
    handler: &H,
    metrics: &Metrics,
) -> Response<Full<Bytes>> {
    let reply = read_and_handle(request, limits, handler, metrics).await;
    let mut response = Response::new(Full::new(reply.body));
    *response.status_mut() = reply.status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    if reply.status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
    }
    response
}

async fn read_and_handle<H: Handler>(
    request: Request<Incoming>,
    limits: &Limits,
    handler: &H,
    metrics: &Metrics,
) -> Reply {
    let path = request.uri().path();
    if !limits.paths.iter().any(|p| p == path) {
        metrics.refused(Refusal::NotFound);
        return Reply::text(
            StatusCode::NOT_FOUND,
            format!(
                "{path} is not an admission path of this webhook; it answers {}",
                limits.paths.join(" and ")
            ),
        );
    }
    if request.method() != Method::POST {
        metrics.refused(Refusal::Method);
        return Reply::text(
            StatusCode::METHOD_NOT_ALLOWED,
            "admission reviews are POSTed",
        );
    }
    let too_large = || {
        metrics.refused(Refusal::TooLarge);
        Reply::text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body is over the limit of {} bytes (--max-body-bytes)",
                limits.max_body_bytes
            ),
        )
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return too_large();
    }
    let body = Limited::new(request.into_body(), limits.max_body_bytes);
    match tokio::time::timeout(limits.body_timeout, body.collect()).await {
        Err(_) => {
            metrics.refused(Refusal::Timeout);
            Reply::text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {:?} (--body-timeout)",
                    limits.body_timeout
                ),
            )
        }
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => too_large(),
        Ok(Err(e)) => Reply::text(
            StatusCode::BAD_REQUEST,
            format!("reading the body failed: {e}"),
        ),
        Ok(Ok(collected)) => handler.handle(collected.to_bytes()).await,
    }
}
