//! The HTTPS server the API server calls: TLS with a handshake deadline,
//! HTTP/1.1 or HTTP/2, a header and a body deadline, a body size limit, and
//! a graceful shutdown that drains the requests in flight. Its memory is
//! bounded whoever calls: a connection limit that evicts unproductive
//! connections ([`crate::webhook::connections`]), idle connections closed,
//! small HTTP/2 windows and stream caps, and a budget of request-body bytes
//! held at once ([`crate::webhook::body`]).
//!
//! From SIGTERM on, every HTTP/1 answer closes its connection. The API server
//! pools its webhook connections by the Service's name, not by endpoint: it
//! keeps sending reviews over a kept-alive connection to a replica that has
//! left the endpoints, until that connection closes. Closed by the server
//! while it looks idle, it may be carrying the next review (HTTP/1 has no
//! GOAWAY), which is lost: Go retries a POST only when none of it was
//! written. Closed after an answer that says so, no review can meet it, and
//! the next one goes over a new connection to a current endpoint.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::webhook::connections::{Conn, Connections, Full, Ticket};
pub use crate::webhook::limits::{Limits, LimitsError};
use crate::webhook::metrics::{Metrics, Refusal};
pub use crate::webhook::requests::{Call, Handler, Reply};
use crate::webhook::requests::{Requests, Throttle, route};
use crate::webhook::tls::Tls;

/// HTTP/2 flow-control windows: what h2 may buffer of a stream's body, and
/// of all of a connection's, before the server reads it (the protocol's
/// default stream window; hyper's are 1 MiB each).
const STREAM_WINDOW: u32 = 64 * 1024;
const CONNECTION_WINDOW: u32 = 128 * 1024;
/// The largest HTTP/2 header list: the API server sends a few hundred bytes.
const MAX_HEADER_LIST: u32 = 8 * 1024;
/// hyper's HTTP/1 read buffer, headers included (its smallest is 8 KiB):
/// one TLS record of plaintext.
const HTTP1_BUFFER: usize = 16 * 1024;
/// How long a connection asked to close may take to say goodbye (HTTP/2's
/// GOAWAY and its PING) once no request is in flight.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What every connection's task shares.
struct Server<H> {
    tls: Arc<Tls>,
    limits: Limits,
    metrics: Arc<Metrics>,
    http: Builder<TokioExecutor>,
    connections: Arc<Connections>,
    /// What each request shares.
    requests: Requests<H>,
    /// True from SIGTERM on: HTTP/1 answers close their connections.
    draining: watch::Receiver<bool>,
}

/// Serves HTTPS on `listener` until `shutdown` completes, then stops
/// accepting, lets the requests in flight finish (up to the drain timeout)
/// and returns. Once `draining` is true (the shutdown delay has begun), each
/// HTTP/1 answer closes its connection.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    tls: Arc<Tls>,
    limits: Limits,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    draining: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Connections::new(limits.connections(), Some(metrics.clone()));
    let server = Arc::new(Server {
        tls,
        http: http_builder(&limits),
        requests: Requests::new(&limits, connections.clone(), handler, metrics.clone()),
        connections,
        limits,
        metrics,
        draining,
    });
    let refusals_warned = Throttle::default();
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
        let ticket = match server.connections.admit(peer.ip()) {
            Ok(ticket) => ticket,
            Err(full) => {
                if refusals_warned.due() {
                    refused_warning(&server.limits, full, peer);
                }
                continue;
            }
        };
        tcp.set_nodelay(true).ok();
        tokio::spawn(connection(server.clone(), tcp, peer, ticket));
    }
    drop(listener);
    tracing::info!(
        connections = server.connections.len(),
        "stopped accepting; draining requests in flight"
    );
    server.connections.shut_down();
    let drain_timeout = server.limits.drain_timeout;
    tokio::select! {
        () = server.connections.emptied() => tracing::info!("drained"),
        () = tokio::time::sleep(drain_timeout) => {
            tracing::warn!(timeout = ?drain_timeout, "drain timed out; closing the remaining connections");
        }
    }
}

/// Says why a new connection was closed at once, and what to raise.
fn refused_warning(limits: &Limits, full: Full, peer: SocketAddr) {
    match full {
        Full::PeerConnections => tracing::warn!(
            %peer,
            max_connections_per_peer = limits.max_connections_per_peer,
            "closed a new connection: every open one from its address has a request in flight (--max-connections-per-peer); raise it if the API servers reach the webhook through one address"
        ),
        _ => tracing::warn!(
            %peer,
            max_connections = limits.max_connections,
            "closed a new connection: every open one has a request in flight (--max-connections); raise --max-connections if the API servers need more"
        ),
    }
}

fn http_builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    // An idle keep-alive connection waits for its next request's headers
    // under header_read_timeout too, so it closes within --header-timeout.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(HTTP1_BUFFER)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .adaptive_window(false)
        .max_header_list_size(MAX_HEADER_LIST)
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// One connection, from its first byte: the spawned task stays small while
/// it waits (no TLS state before a byte arrives), the rest is boxed.
async fn connection<H: Handler>(
    server: Arc<Server<H>>,
    tcp: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
) {
    let deadline = tokio::time::Instant::now() + server.limits.header_timeout;
    let mut first = [0; 1];
    tokio::select! {
        // A byte there to read: readiness alone may be reported before one is.
        peeked = tokio::time::timeout_at(deadline, tcp.peek(&mut first)) => match peeked {
            Ok(Ok(1)) => {}
            Ok(Ok(_)) => return,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "connection failed before its handshake");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "no TLS handshake within --header-timeout");
                server.metrics.refused(Refusal::Timeout);
                return;
            }
        },
        // Evicted, or shutting down: nothing to finish.
        () = ticket.conn().signalled() => return,
    }
    ticket.conn().first_byte();
    Box::pin(handshake_and_serve(server, tcp, peer, ticket, deadline)).await;
}

async fn handshake_and_serve<H: Handler>(
    server: Arc<Server<H>>,
    tcp: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    deadline: tokio::time::Instant,
) {
    let conn = ticket.conn().clone();
    let Some(stream) = handshake(&server, tcp, peer, &conn, deadline).await else {
        return;
    };
    conn.serving();
    let service = {
        let (server, conn) = (server.clone(), conn.clone());
        service_fn(move |request: Request<_>| {
            // Entered here, as hyper takes the request: the connection is
            // busy from now, before the request's task first runs.
            let in_flight = conn.enter();
            let server = server.clone();
            let conn = conn.clone();
            async move {
                let version = request.version();
                let response = route(request, in_flight, &conn, &server.requests).await;
                Ok::<_, Infallible>(close_when_draining(response, version, &server.draining))
            }
        })
    };
    let http = server.http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(http);
    let idle_timeout = server.limits.idle_timeout;
    loop {
        let idle_for = conn.idle_for().unwrap_or_default();
        let check = tokio::time::Instant::now() + idle_timeout.saturating_sub(idle_for);
        tokio::select! {
            ended = http.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = conn.signalled() => {
                if conn.evicted() {
                    // Idle: a GOAWAY if it fits at once, then gone.
                    http.as_mut().graceful_shutdown();
                    http.as_mut().now_or_never();
                    return;
                }
                if conn.closing() {
                    break;
                }
            }
            () = tokio::time::sleep_until(check) => {
                if conn.idle_for().is_some_and(|idle| idle >= idle_timeout) {
                    tracing::debug!(%peer, "closing a connection idle for --idle-timeout");
                    server.metrics.idle_closed();
                    break;
                }
            }
        }
    }
    // Gracefully: HTTP/2 sends GOAWAY, the requests in flight finish; a
    // peer that does not say goodbye is dropped once none is in flight.
    http.as_mut().graceful_shutdown();
    loop {
        tokio::select! {
            _ = http.as_mut() => return,
            () = conn.signalled() => if conn.evicted() { return },
            () = tokio::time::sleep(CLOSE_GRACE) => if conn.idle_for().is_some() { return },
        }
    }
}

/// `response`, made to close its HTTP/1 connection once `draining` is true:
/// hyper closes it after writing an answer that says `Connection: close`, and
/// the client, told so, sends nothing more on it.
fn close_when_draining<B>(
    mut response: Response<B>,
    version: Version,
    draining: &watch::Receiver<bool>,
) -> Response<B> {
    if version < Version::HTTP_2 && *draining.borrow() {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The TLS handshake, by `deadline`; `None` when it fails, times out, or
/// the connection is evicted meanwhile.
async fn handshake<H>(
    server: &Server<H>,
    tcp: TcpStream,
    peer: SocketAddr,
    conn: &Conn,
    deadline: tokio::time::Instant,
) -> Option<TlsStream<TcpStream>> {
    let acceptor = TlsAcceptor::from(server.tls.config());
    tokio::select! {
        accepted = tokio::time::timeout_at(deadline, acceptor.accept(tcp)) => match accepted {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                server.metrics.refused(Refusal::Timeout);
                None
            }
        },
        () = conn.signalled() => None,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::webhook::tls::TlsFiles;

    struct Nothing;

    impl Handler for Nothing {
        async fn handle(&self, _: Bytes, _: &Call<'_>) -> Reply {
            Reply::json("{}")
        }
    }

    fn server(dir: &std::path::Path) -> Arc<Server<Nothing>> {
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, signing_key.serialize_pem()).unwrap();
        let tls = Tls::load(TlsFiles {
            cert: cert_file,
            key: key_file,
            client_ca: None,
        })
        .unwrap();
        let limits = Limits {
            paths: vec!["/mutate".into()],
            max_body_bytes: 1024,
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(5),
            body_stall_timeout: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(5),
            max_connections: 4,
            max_connections_per_peer: 4,
            max_requests_per_peer: 16,
            max_streams: 4,
            idle_timeout: Duration::from_secs(5),
            max_body_bytes_in_flight: 4096,
        };
        let metrics = Arc::new(Metrics::new());
        let connections = Connections::new(limits.connections(), Some(metrics.clone()));
        Arc::new(Server {
            tls: Arc::new(tls),
            http: http_builder(&limits),
            requests: Requests::new(
                &limits,
                connections.clone(),
                Arc::new(Nothing),
                metrics.clone(),
            ),
            connections,
            limits,
            metrics,
            draining: watch::channel(false).1,
        })
    }

    #[test]
    fn from_sigterm_on_http1_answers_close_their_connections() {
        // (version, draining, whether the answer says Connection: close);
        // HTTP/2 forbids the header: GOAWAY ends its connections.
        let cases = [
            (Version::HTTP_10, false, false),
            (Version::HTTP_11, false, false),
            (Version::HTTP_2, false, false),
            (Version::HTTP_10, true, true),
            (Version::HTTP_11, true, true),
            (Version::HTTP_2, true, false),
        ];
        for (version, draining, closes) in cases {
            let (_tx, rx) = watch::channel(draining);
            let response = close_when_draining(Response::new(()), version, &rx);
            let header = response.headers().get(CONNECTION);
            assert_eq!(
                header.is_some_and(|v| v == "close"),
                closes,
                "{version:?}, draining {draining}: {header:?}"
            );
        }
    }

    #[test]
    fn limits_that_cannot_work_together_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let limits = server(dir.path()).limits.clone();
        let with = |change: fn(&mut Limits)| {
            let mut limits = limits.clone();
            change(&mut limits);
            limits.check().map_err(|e| e.to_string())
        };
        assert_eq!(with(|_| {}), Ok(()));
        // A small body may take the whole budget, a large one three quarters.
        assert_eq!(with(|l| l.max_body_bytes = 4096), Ok(()));
        assert_eq!(
            with(|l| {
                l.max_body_bytes_in_flight = 1 << 20;
                l.max_body_bytes = 800_000;
            }),
            Err("--max-body-bytes-in-flight 1048576: a body of --max-body-bytes 800000 could never be read (bodies over 64 KiB may take three quarters of the budget): raise it to at least 1066668, or lower --max-body-bytes".into())
        );
        assert_eq!(
            with(|l| l.max_connections = 0),
            Err("--max-connections 0: must be more than 0".into())
        );
        assert_eq!(
            with(|l| l.idle_timeout = Duration::ZERO),
            Err("--idle-timeout 0: must be more than 0".into())
        );
    }

    /// The spawned task of a connection that has not sent a byte holds no
    /// TLS or HTTP state: what follows its first byte is boxed. Before it
    /// was, the task was the size of that boxed part from the accept on.
    #[tokio::test]
    async fn a_connection_waiting_for_its_first_byte_is_a_small_task() {
        let dir = tempfile::tempdir().unwrap();
        let server = server(dir.path());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _clients = [
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        let (first, peer) = listener.accept().await.unwrap();
        let (second, _) = listener.accept().await.unwrap();
        let deadline = tokio::time::Instant::now();
        let waiting = connection(
            server.clone(),
            first,
            peer,
            server.connections.admit(peer.ip()).ok().unwrap(),
        );
        let boxed = handshake_and_serve(
            server.clone(),
            second,
            peer,
            server.connections.admit(peer.ip()).ok().unwrap(),
            deadline,
        );
        let (waiting, boxed) = (
            std::mem::size_of_val(&waiting),
            std::mem::size_of_val(&boxed),
        );
        eprintln!(
            "a connection's task: {waiting} bytes until its first byte, then {boxed} bytes boxed"
        );
        assert!(waiting <= 1024, "{waiting} bytes");
        assert!(waiting * 2 < boxed, "{waiting} bytes, {boxed} boxed");
    }
}
