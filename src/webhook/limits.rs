//! The limits the server keeps whoever calls: paths, body sizes and
//! deadlines, connections, HTTP/2 streams, and the budget of body bytes held
//! at once; and the check that they can work together.

use std::time::Duration;

use crate::webhook::body;

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
    /// Connections open at once; at the limit the oldest unproductive one
    /// is evicted, or the new one closed.
    pub max_connections: usize,
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
    /// Checks that the limits can serve a request of every size they accept.
    pub fn check(&self) -> Result<(), LimitsError> {
        for (flag, zero) in [
            ("--max-connections", self.max_connections == 0),
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
