//! How long a namespace whose reconcile failed waits before it is tried again:
//! exponentially longer with each failure in a row, with jitter, up to a cap;
//! a success forgets its failures.
//!
//! The n-th failure in a row waits a random time between half and all of
//! `min(1 s × 2^(n−1), 5 min)`:
//!
//! | failure | waits |
//! |---|---|
//! | 1 | 0.5–1 s |
//! | 2 | 1–2 s |
//! | 3 | 2–4 s |
//! | 4 | 4–8 s |
//! | 5 | 8–16 s |
//! | 6 | 16–32 s |
//! | 7 | 32–64 s |
//! | 8 | 64–128 s |
//! | 9 | 128–256 s |
//! | 10 and on | 150–300 s |
//!
//! So a namespace that keeps failing is tried at most 9 times in its first 3
//! minutes (the shortest waits add up to 127.5 s after the first try, the
//! next to 255.5 s), then at most once every 150 s: at 10,000 namespaces and
//! a persistent 403, about 45 NAD writes a second at the cap (and no more
//! Event writes), where a fixed 10 s retry sent 1,000 of each. The jitter
//! spreads namespaces that failed together.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The full wait after the first failure.
pub const BASE: Duration = Duration::from_secs(1);
/// The longest full wait.
pub const CAP: Duration = Duration::from_secs(300);

/// The wait after the `failures`-th failure in a row (from 1), with
/// `fraction` in [0, 1) choosing where in its jitter range it falls.
pub fn delay(failures: u32, fraction: f64) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    let full = BASE.saturating_mul(1 << doublings).min(CAP);
    full.mul_f64(0.5 + 0.5 * fraction.clamp(0.0, 1.0))
}

/// A pseudo-random number in [0, 1), for jitter: the standard library's
/// randomly keyed hasher over a counter, so no random-number crate is needed.
pub fn random_fraction() -> f64 {
    static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let bits = KEYS
        .get_or_init(std::hash::RandomState::new)
        .hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// The failures in a row of each namespace that failed last.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Counts a failure of `key`; the wait before its next try.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().expect("backoff lock");
        let count = failures.entry(key.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        delay(*count, random_fraction())
    }

    /// Forgets the failures of `key`: its next failure waits the least again.
    pub fn succeeded(&self, key: &str) {
        let mut failures = self.failures.lock().expect("backoff lock");
        failures.remove(key);
    }

    /// Keeps only the keys `keep` accepts (namespaces that still exist).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut failures = self.failures.lock().expect("backoff lock");
        failures.retain(|key, _| keep(key));
    }

    /// How many keys have failures.
    pub fn len(&self) -> usize {
        self.failures.lock().expect("backoff lock").len()
    }

    /// Whether no key has failures.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule() {
        let s = Duration::from_secs_f64;
        for (failures, shortest, longest) in [
            (0, s(0.5), s(1.0)),
            (1, s(0.5), s(1.0)),
            (2, s(1.0), s(2.0)),
            (3, s(2.0), s(4.0)),
            (7, s(32.0), s(64.0)),
            (9, s(128.0), s(256.0)),
            (10, s(150.0), s(300.0)),
            (40, s(150.0), s(300.0)),
            (u32::MAX, s(150.0), s(300.0)),
        ] {
            assert_eq!(delay(failures, 0.0), shortest, "failure {failures}");
            assert_eq!(delay(failures, 1.0), longest, "failure {failures}");
            let middle = delay(failures, 0.5);
            assert!(shortest < middle && middle < longest, "failure {failures}");
        }
    }

    #[test]
    fn the_documented_bound_over_three_minutes() {
        // The shortest waits, added up: the tries a namespace gets in 180 s.
        let mut at = Duration::ZERO;
        let mut tries = 1;
        while at + delay(tries, 0.0) <= Duration::from_secs(180) {
            at += delay(tries, 0.0);
            tries += 1;
        }
        assert_eq!((tries, at), (9, Duration::from_secs_f64(127.5)));
    }

    #[test]
    fn failures_count_per_key_until_a_success() {
        let backoff = Backoff::default();
        for want in [1.0, 2.0, 4.0] {
            let wait = backoff.failed("a");
            assert!(
                wait <= Duration::from_secs_f64(want)
                    && wait >= Duration::from_secs_f64(want / 2.0)
            );
        }
        assert!(backoff.failed("b") <= Duration::from_secs(1));
        backoff.succeeded("a");
        assert!(backoff.failed("a") <= Duration::from_secs(1));
        backoff.retain(|key| key == "b");
        assert_eq!(backoff.len(), 1);
    }

    #[test]
    fn random_fractions_are_in_range_and_vary() {
        let fractions: Vec<f64> = (0..1000).map(|_| random_fraction()).collect();
        assert!(fractions.iter().all(|f| (0.0..1.0).contains(f)));
        let low = fractions.iter().filter(|f| **f < 0.5).count();
        assert!((350..650).contains(&low), "{low} of 1000 below one half");
    }
}
