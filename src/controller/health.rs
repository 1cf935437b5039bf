//! The controller's readiness: a replica is ready while it reaches its Lease,
//! as leader or candidate. One that has not reached it within the Lease's
//! duration could neither write nor take over, and says why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// When the election last reached the Lease, and its last failure since.
#[derive(Debug, Clone, Default)]
pub struct Contact(Arc<Mutex<Seen>>);

#[derive(Debug, Default)]
struct Seen {
    at: Option<Instant>,
    error: Option<String>,
}

impl Contact {
    /// A try read or wrote the Lease at `at`.
    pub fn reached(&self, at: Instant) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.at = Some(at);
        seen.error = None;
    }

    /// A try failed with `error`.
    pub fn failed(&self, error: &str) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.error = Some(error.to_string());
    }

    /// Why the replica is not ready at `now`: it has not reached `lease` (its
    /// `namespace/name`) within `within`, and the last failure.
    pub fn not_ready(&self, lease: &str, within: Duration, now: Instant) -> Option<String> {
        let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let since = match seen.at {
            Some(at) if now.saturating_duration_since(at) <= within => return None,
            Some(at) => format!(
                "has not reached Lease {lease} for {} s",
                now.saturating_duration_since(at).as_secs()
            ),
            None => format!("has not reached Lease {lease} yet"),
        };
        Some(match &seen.error {
            Some(error) => format!("{since}: {error}"),
            None => since,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_while_the_lease_is_reached() {
        let start = Instant::now();
        let within = Duration::from_secs(15);
        let s = Duration::from_secs;
        for (reached, error, now, want) in [
            (None, None, s(0), Some("has not reached Lease ns/l yet")),
            (
                None,
                Some("403"),
                s(1),
                Some("has not reached Lease ns/l yet: 403"),
            ),
            (Some(s(0)), None, s(15), None),
            (Some(s(0)), Some("timed out"), s(10), None),
            (
                Some(s(0)),
                Some("timed out"),
                s(16),
                Some("has not reached Lease ns/l for 16 s: timed out"),
            ),
        ] {
            let contact = Contact::default();
            if let Some(at) = reached {
                contact.reached(start + at);
            }
            if let Some(error) = error {
                contact.failed(error);
            }
            assert_eq!(
                contact.not_ready("ns/l", within, start + now).as_deref(),
                want,
                "{reached:?} {error:?} {now:?}"
            );
        }
    }
}
