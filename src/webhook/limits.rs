//! The limits the server keeps whoever calls: paths, body sizes and
//! deadlines, connections (per peer too), HTTP/2 streams, and the budget of body bytes held
//! at once; and the check that they can work together.

use std::time::Duration;

use crate::webhook::body;
use crate::webhook::connections::ConnectionLimits;

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
    /// How long a request's body may make no progress before its
    /// connection may be evicted for a new one or for the body budget.
    pub body_stall_timeout: Duration,
    /// How long a shutdown waits for requests in flight.
    pub drain_timeout: Duration,
    /// Connections open at once; at the limit the most unproductive one
    /// is evicted, or the new one closed.
    pub max_connections: usize,
    /// Connections open at once from one source address; at the limit the
    /// most unproductive of its own is evicted, or the new one closed.
    pub max_connections_per_peer: usize,
    /// Requests in flight at once from one source address; more get 503.
    pub max_requests_per_peer: usize,
    /// HTTP/2 streams in flight on one connection.
    pub max_streams: u32,
    /// How long a connection with no request in flight stays open.
    pub idle_timeout: Duration,
    /// Bytes of request bodies held at once across all requests.
    pub max_body_bytes_in_flight: usize,
}

/// Limits that cannot work together.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// The budget cannot take a body of the largest size.
    #[error(
        "--max-body-bytes-in-flight {budget}: a body of --max-body-bytes {max} could never be read (bodies over 64 KiB may take three quarters of the budget): raise it to at least {need}, or lower --max-body-bytes"
    )]
    BudgetBelowLargestBody {
        budget: usize,
        max: usize,
        need: usize,
    },
    /// A limit of zero.
    #[error("{flag} 0: must be more than 0")]
    Zero { flag: &'static str },
}

impl Limits {
    /// The connection limits of the admission port.
    pub fn connections(&self) -> ConnectionLimits {
        ConnectionLimits {
            max: self.max_connections,
            per_peer: self.max_connections_per_peer,
            requests_per_peer: self.max_requests_per_peer,
            stalled_after: self.body_stall_timeout,
            grace: crate::webhook::eviction::GRACE,
        }
    }

    /// Checks that the limits can serve a request of every size they accept.
    pub fn check(&self) -> Result<(), LimitsError> {
        for (flag, zero) in [
            ("--max-connections", self.max_connections == 0),
            (
                "--max-connections-per-peer",
                self.max_connections_per_peer == 0,
            ),
            ("--max-requests-per-peer", self.max_requests_per_peer == 0),
            ("--body-stall-timeout", self.body_stall_timeout.is_zero()),
            ("--max-concurrent-streams", self.max_streams == 0),
            ("--idle-timeout", self.idle_timeout.is_zero()),
        ] {
            if zero {
                return Err(LimitsError::Zero { flag });
            }
        }
        if !body::fits(self.max_body_bytes_in_flight, self.max_body_bytes) {
            return Err(LimitsError::BudgetBelowLargestBody {
                budget: self.max_body_bytes_in_flight,
                max: self.max_body_bytes,
                need: body::least_budget_for(self.max_body_bytes),
            });
        }
        Ok(())
    }
}
