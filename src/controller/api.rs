//! The deadline of every API call the controller makes but its watches:
//! `--api-timeout` ([`super::Options::api_timeout`]), or for a NAD write the
//! end of the leadership that allowed it, whichever comes first. Reads,
//! writes, Events and the Lease alike: a call the API server does not answer
//! fails instead of holding a reconcile, the election or a shutdown.
//!
//! Watches are long-running and bounded otherwise: the API server ends each
//! one after its `timeoutSeconds` (kube-runtime's watcher asks for 290 s), and
//! the watcher drops a stream that sent nothing for that long plus 5 s, which
//! for a watch does what a client read timeout would (the webhook's Client
//! sets none). The watcher's own lists end by the API server's
//! `--request-timeout` (60 s by default).

use std::future::Future;
use std::time::Duration;

use kube::core::Status;
use tokio::time::Instant;

/// A call that failed, or was not answered in time.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The API server refused it, or the connection failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer before the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl CallError {
    /// The API server's status, when it answered with one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            CallError::Api(kube::Error::Api(status)) => Some(status),
            _ => None,
        }
    }

    /// The HTTP code of the API server's answer, if it answered.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }
}

/// Runs `request` with a deadline `timeout` from now.
pub async fn call<T>(
    timeout: Duration,
    request: impl Future<Output = kube::Result<T>>,
) -> Result<T, CallError> {
    call_until(Instant::now() + timeout, request).await
}

/// Runs `request` until `deadline` at the latest; a request cut short is
/// dropped, its connection with it.
pub async fn call_until<T>(
    deadline: Instant,
    request: impl Future<Output = kube::Result<T>>,
) -> Result<T, CallError> {
    let started = Instant::now();
    match tokio::time::timeout_at(deadline, request).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(CallError::Timeout(
            deadline.saturating_duration_since(started),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_without_an_answer_fails_at_its_deadline() {
        let never = std::future::pending::<kube::Result<()>>();
        let started = Instant::now();
        let error = call(Duration::from_secs(10), never).await.unwrap_err();
        assert!(matches!(error, CallError::Timeout(d) if d == Duration::from_secs(10)));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(error.to_string(), "no answer within 10s");
        assert_eq!(error.code(), None);
        let answered = call(Duration::from_secs(1), async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
    }
}
