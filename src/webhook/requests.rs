//! One request on the admission paths: its path and method checked, its
//! body reserved against the budget and read, and the reply of the
//! [`Handler`] (what answers a body) sent.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode, Version};

use crate::webhook::body::{self, BodyError, Budget};
use crate::webhook::connections::{Conn, Connections, Full as Refused, InFlight, Waiting};
use crate::webhook::limits::Limits;
use crate::webhook::metrics::{Metrics, Refusal};

/// What answers the POSTs to the admission paths.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request body, on `call`; may wait (for a cache's watch, or
    /// a live read of the API server).
    fn handle(&self, body: Bytes, call: &Call<'_>) -> impl Future<Output = Reply> + Send;
}

/// The request a [`Handler`] answers: what it may tell the connection.
pub struct Call<'a> {
    in_flight: Option<&'a InFlight>,
    metrics: Option<&'a Metrics>,
}

impl<'a> Call<'a> {
    /// A call on no connection (a benchmark's, a test's).
    pub const NONE: Call<'static> = Call {
        in_flight: None,
        metrics: None,
    };

    /// The handler waits for a cache's watch, not for its caller: until the
    /// guard is dropped, the request may be cut with its connection to make
    /// room ([`crate::webhook::eviction`]), and it counts in
    /// `linkerd_multus_admission_watch_waits`.
    pub fn waiting(&self) -> WatchWait<'a> {
        if let Some(metrics) = self.metrics {
            metrics.watch_waits(1);
        }
        WatchWait {
            _conn: self.in_flight.map(InFlight::waiting),
            metrics: self.metrics,
        }
    }
}

/// A review's wait for a cache's watch, from [`Call::waiting`].
pub struct WatchWait<'a> {
    _conn: Option<Waiting<'a>>,
    metrics: Option<&'a Metrics>,
}

impl Drop for WatchWait<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics {
            metrics.watch_waits(-1);
        }
    }
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
    /// Whether the answer vouches for its caller: a review of objects that
    /// exist, answered. Such a connection ranks with the API server's.
    pub vouches: bool,
}

impl Reply {
    /// A JSON body with status 200.
    pub fn json(body: impl Into<Bytes>) -> Self {
        Reply {
            status: StatusCode::OK,
            content_type: "application/json",
            body: body.into(),
            vouches: false,
        }
    }

    /// The same reply, vouching for its caller when `vouches`.
    pub fn vouching(mut self, vouches: bool) -> Self {
        self.vouches = vouches;
        self
    }

    /// A plain-text body, a line ending with a newline.
    pub fn text(status: StatusCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        message.push('\n');
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: message.into(),
            vouches: false,
        }
    }
}

/// How long a request the body budget cannot take waits for the bytes that
/// stalled connections, evicted for them, give back; and how long a request
/// over its peer's limit waits for the requests of the connection evicted
/// for it to end.
const BUDGET_WAIT: Duration = Duration::from_millis(250);

/// What every request shares: the limits, the handler, the body budget, the
/// connections (whose stalled ones give their budget back).
pub(super) struct Requests<H> {
    limits: Limits,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    budget: Arc<Budget>,
    connections: Arc<Connections>,
    over_budget_warned: Throttle,
    peer_limit_warned: Throttle,
}

impl<H> Requests<H> {
    /// The requests of a server with `limits` on `connections`, answered by `handler`.
    pub(super) fn new(
        limits: &Limits,
        connections: Arc<Connections>,
        handler: Arc<H>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Requests {
            limits: limits.clone(),
            handler,
            budget: Budget::new(limits.max_body_bytes_in_flight, metrics.clone()),
            connections,
            metrics,
            over_budget_warned: Throttle::default(),
            peer_limit_warned: Throttle::default(),
        }
    }
}

/// A reply, and how to send it.
struct Answer {
    reply: Reply,
    /// `Retry-After`, in seconds.
    retry_after: Option<u32>,
    /// HTTP/1: close the connection after the reply (the body was not read).
    close: bool,
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Answer {
        Answer {
            reply,
            retry_after: None,
            close: false,
        }
    }
}

/// Answers `request`, entered on `conn` as hyper took it (`in_flight`).
pub(super) async fn route<H: Handler>(
    request: Request<Incoming>,
    mut in_flight: Result<InFlight, Refused>,
    conn: &Arc<Conn>,
    server: &Requests<H>,
) -> Response<Full<Bytes>> {
    // An unproven connection's next request waits for the one in flight.
    if matches!(in_flight, Err(Refused::Unproven)) {
        in_flight = conn.enter_in_turn(server.limits.body_timeout).await;
    }
    // Over its peer's requests: room is made among the peer's connections
    // whose requests all wait, once.
    if matches!(in_flight, Err(Refused::PeerRequests))
        && server.connections.room_for_request(conn, BUDGET_WAIT).await
    {
        in_flight = conn.enter();
    }
    let answer = match in_flight {
        Ok(mut in_flight) => read_and_handle(request, &mut in_flight, server).await,
        Err(Refused::PeerRequests) => peer_limit(server, request.version() < Version::HTTP_2),
        Err(Refused::Unproven) => {
            server.metrics.refused(Refusal::Unproven);
            Answer {
                reply: Reply::text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "this connection's first request is still unanswered: until a review is answered on it, a connection carries one request at a time; retry shortly",
                ),
                retry_after: Some(1),
                close: request.version() < Version::HTTP_2,
            }
        }
        // Evicted as the request arrived: the connection is being dropped,
        // and this request unanswered with it, so that the client sends it
        // again on another, as if the eviction had come a moment sooner (the
        // API server retries a reset call, not a 503). The 503 is for a
        // connection that lingers.
        Err(_) => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Reply::text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the connection is closing; retry on another",
            )
            .into()
        }
    };
    let Answer {
        reply,
        retry_after,
        close,
    } = answer;
    let mut response = Response::new(Full::new(reply.body));
    *response.status_mut() = reply.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    if reply.status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(ALLOW, HeaderValue::from_static("POST"));
    }
    if let Some(seconds) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    if close {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads the body and answers it; a request answered without its body read
/// ends at once, its reading with it (when the `InFlight` is dropped).
async fn read_and_handle<H: Handler>(
    request: Request<Incoming>,
    in_flight: &mut InFlight,
    server: &Requests<H>,
) -> Answer {
    let limits = &server.limits;
    let metrics = &server.metrics;
    let path = request.uri().path();
    if !limits.paths.iter().any(|p| p == path) {
        metrics.refused(Refusal::NotFound);
        return Reply::text(
            StatusCode::NOT_FOUND,
            format!(
                "{path} is not an admission path of this webhook; it answers {}",
                limits.paths.join(" and ")
            ),
        )
        .into();
    }
    if request.method() != Method::POST {
        metrics.refused(Refusal::Method);
        return Reply::text(
            StatusCode::METHOD_NOT_ALLOWED,
            "admission reviews are POSTed",
        )
        .into();
    }
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let declared = match declared.map(usize::try_from) {
        Some(Ok(n)) if n <= limits.max_body_bytes => Some(n),
        Some(_) => return too_large(server).into(),
        None => None,
    };
    // Only the body is kept: the headers go before it is read.
    let http1 = request.version() < Version::HTTP_2;
    let body = request.into_body();
    let Some(mut reservation) = reserve(server, declared.unwrap_or(0)).await else {
        return over_budget(server, declared, http1);
    };
    let read = body::read(
        body,
        declared,
        limits.max_body_bytes,
        &mut reservation,
        || in_flight.progressed(),
    );
    match tokio::time::timeout(limits.body_timeout, read).await {
        Err(_) => {
            metrics.refused(Refusal::Timeout);
            Reply::text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {:?} (--body-timeout)",
                    limits.body_timeout
                ),
            )
            .into()
        }
        Ok(Err(BodyError::TooLarge)) => too_large(server).into(),
        Ok(Err(BodyError::OverBudget)) => over_budget(server, None, http1),
        Ok(Err(BodyError::Overlong)) => Reply::text(
            StatusCode::BAD_REQUEST,
            "the body is longer than its Content-Length",
        )
        .into(),
        Ok(Err(BodyError::Read(e))) => Reply::text(
            StatusCode::BAD_REQUEST,
            format!("reading the body failed: {e}"),
        )
        .into(),
        Ok(Err(BodyError::Memory(e))) => {
            tracing::error!(error = %e, "no memory mapping for a request body");
            Reply::text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no memory for the body: {e}"),
            )
            .into()
        }
        // The body's bytes stay reserved until the reply is made.
        Ok(Ok(bytes)) => {
            in_flight.read();
            let call = Call {
                in_flight: Some(&*in_flight),
                metrics: Some(metrics.as_ref()),
            };
            let reply = server.handler.handle(bytes, &call).await;
            if reply.status == StatusCode::OK && reply.vouches {
                in_flight.answered();
            }
            reply.into()
        }
    }
}

/// Reserves `bytes` of the body budget; when it cannot take them, evicts
/// the connections whose bodies have stalled and waits a moment for what
/// they held.
async fn reserve<H>(server: &Requests<H>, bytes: usize) -> Option<body::Reservation> {
    if let Some(reservation) = server.budget.reserve(bytes) {
        return Some(reservation);
    }
    if server.connections.evict_stalled() == 0 {
        return None;
    }
    let deadline = tokio::time::Instant::now() + BUDGET_WAIT;
    server.budget.reserve_by(bytes, deadline).await
}

/// 503 at once, the body unread, for a peer with as many requests in flight
/// as it may have; on HTTP/1 the connection closes after it.
fn peer_limit<H>(server: &Requests<H>, http1: bool) -> Answer {
    server.metrics.refused(Refusal::PeerRequestLimit);
    let limit = server.limits.max_requests_per_peer;
    if server.peer_limit_warned.due() {
        tracing::warn!(
            limit,
            "refused requests from a peer with --max-requests-per-peer in flight (503, Retry-After); raise it if the API servers reach the webhook through one address"
        );
    }
    Answer {
        reply: Reply::text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this address has {limit} requests in flight (--max-requests-per-peer): retry shortly"
            ),
        ),
        retry_after: Some(1),
        close: http1,
    }
}

fn too_large<H>(server: &Requests<H>) -> Reply {
    server.metrics.refused(Refusal::TooLarge);
    Reply::text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the body is over the limit of {} bytes (--max-body-bytes)",
            server.limits.max_body_bytes
        ),
    )
}

/// 503 at once, the body unread; on HTTP/1 the connection closes after it,
/// so the rest of the body is not drained.
fn over_budget<H>(server: &Requests<H>, declared: Option<usize>, http1: bool) -> Answer {
    server.metrics.refused(Refusal::OverBudget);
    let limit = server.limits.max_body_bytes_in_flight;
    let held = server.budget.held();
    if server.over_budget_warned.due() {
        tracing::warn!(
            held,
            limit,
            declared,
            "refused request bodies over --max-body-bytes-in-flight (503, Retry-After); raise it if the API servers send that much at once"
        );
    }
    Answer {
        reply: Reply::text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "request bodies of {held} bytes are being read, against a limit of {limit} (--max-body-bytes-in-flight): retry shortly"
            ),
        ),
        retry_after: Some(1),
        close: http1,
    }
}

/// At most one warning per this long about refusals under load.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Says yes at most once per [`WARN_EVERY`]: one log line for a flood.
#[derive(Default)]
pub(super) struct Throttle(Mutex<Option<Instant>>);

impl Throttle {
    /// Whether to warn now.
    pub(super) fn due(&self) -> bool {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }
}
