//! `--wait`: the checks run again while one that can mend itself fails (a
//! Deployment becoming ready, cert-manager injecting the caBundle, the NAD
//! controller making a NAD, the webhook starting to answer), every
//! [`RETRY_INTERVAL`] as `linkerd check` retries, until the duration has
//! passed; the others fail at once. The last pass is the report.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::report::{Category, Check, Outcome, Report};

/// How long between two passes: `linkerd check`'s retry window.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// Whether a failure of a check may mend itself, so that it is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Something running mends it (a controller, the Deployment, cert-manager).
    Yes,
    /// Only someone acting mends it.
    No,
}

/// One pass of the checks: the report and the failures that may mend themselves.
#[derive(Debug, Default)]
pub struct Pass {
    /// What the pass found.
    pub report: Report,
    /// Whether a failed check may mend itself.
    pub retry: bool,
    /// The descriptions of the failed checks that may mend themselves.
    pub waiting_on: Vec<String>,
}

impl Pass {
    /// Adds `check` to `category` (a new one when it is not the last).
    pub fn add(&mut self, category: &str, check: Check, retry: Retry) {
        if check.result == Outcome::Error && retry == Retry::Yes {
            self.retry = true;
            self.waiting_on.push(check.description.clone());
        }
        match self.report.categories.last_mut() {
            Some(last) if last.name == category => last.checks.push(check),
            _ => self.report.categories.push(Category {
                name: category.to_string(),
                checks: vec![check],
            }),
        }
    }
}

/// Runs `pass` until no failure may mend itself or `wait` has passed, and
/// returns the last report. Before waiting on failures other than the last
/// pass's, it tells `waiting` which and how long at most (for a line on
/// stderr, as `linkerd check` shows it is waiting).
pub async fn until<F, Fut>(
    wait: Duration,
    mut pass: F,
    mut waiting: impl FnMut(&[String], Duration),
) -> Report
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Pass>,
{
    let deadline = Instant::now() + wait;
    let mut told: Vec<String> = Vec::new();
    loop {
        let done = pass().await;
        let now = Instant::now();
        if !done.retry || now >= deadline {
            return done.report;
        }
        tracing::debug!("a check that may mend itself failed; trying again");
        if done.waiting_on != told {
            waiting(&done.waiting_on, deadline - now);
            told = done.waiting_on;
        }
        tokio::time::sleep(RETRY_INTERVAL.min(deadline - now)).await;
    }
}

/// The line `check` writes on stderr when it waits: the checks, and how long at most.
pub fn waiting_line(checks: &[String], left: Duration) -> String {
    format!(
        "waiting up to {}s (--wait) for: {}",
        left.as_secs(),
        checks.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn pass(ok: bool, retry: Retry) -> Pass {
        let mut pass = Pass::default();
        pass.add("c", Check::success("a"), Retry::No);
        let check = match ok {
            true => Check::success("b"),
            false => Check::error("b", "broken", "fix it"),
        };
        pass.add("c", check, retry);
        pass
    }

    #[tokio::test(start_paused = true)]
    async fn failures_that_may_mend_are_retried_until_the_wait_passes() {
        let wait = Duration::from_secs(12);
        for (healthy_at, retry, want_passes, want_ok) in [
            (None, Retry::No, 1, false),
            (Some(2), Retry::Yes, 3, true),
            (None, Retry::Yes, 4, false),
            (Some(0), Retry::Yes, 1, true),
        ] {
            let passes = Cell::new(0);
            let started = Instant::now();
            let mut told = Vec::new();
            let report = until(
                wait,
                || {
                    let n = passes.get();
                    passes.set(n + 1);
                    let ok = healthy_at.is_some_and(|at| n >= at);
                    async move { pass(ok, retry) }
                },
                |checks, left| told.push(waiting_line(checks, left)),
            )
            .await;
            assert_eq!(passes.get(), want_passes, "{healthy_at:?} {retry:?}");
            // Told once, while the same check fails, and only when it waits.
            let want_told = match want_passes > 1 {
                true => vec!["waiting up to 12s (--wait) for: b".to_string()],
                false => vec![],
            };
            assert_eq!(told, want_told, "{healthy_at:?} {retry:?}");
            assert_eq!(report.success(), want_ok);
            assert_eq!(report.categories.len(), 1);
            assert!(started.elapsed() <= wait);
        }
    }
}
