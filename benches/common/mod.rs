//! Statistics and measurements shared by the benchmarks.
#![allow(dead_code)]

use hdrhistogram::Histogram;

/// The median; NaN for no values.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if !n.is_multiple_of(2) {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A distribution-free interval of at least 95% for the median of what `xs` samples: the
/// k-th smallest and k-th largest values, k the largest rank that a Binomial(n, 1/2) count
/// falls below with probability at most 2.5% (with 15 values, the 4th and the 12th: 96.5%).
/// `None` for fewer than 6 values, too few for one.
pub fn median_interval(xs: &[f64]) -> Option<(f64, f64)> {
    let n = xs.len();
    // P(count < k), summed over the binomial's terms: C(n, i) / 2^n.
    let mut below = 0.0;
    let mut term = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut k = 0;
    for i in 0..n {
        if below + term > 0.025 {
            break;
        }
        below += term;
        k = i + 1;
        term *= (n - i) as f64 / (i + 1) as f64;
    }
    if k == 0 {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some((v[k - 1], v[n - k]))
}

/// A latency histogram in microseconds.
pub fn histogram() -> Histogram<u64> {
    // Microseconds, 1 µs to 60 s, 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// What the connections saw.
pub struct Tally {
    /// Latencies of right answers, µs.
    pub latency: Histogram<u64>,
    pub answered: u64,
    pub wrong: u64,
    pub errors: u64,
    pub first_problem: Option<String>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            latency: histogram(),
            answered: 0,
            wrong: 0,
            errors: 0,
            first_problem: None,
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.latency.add(&other.latency).expect("same bounds");
        self.answered += other.answered;
        self.wrong += other.wrong;
        self.errors += other.errors;
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
    }

    pub fn problem(&mut self, what: String) {
        self.first_problem.get_or_insert(what);
    }
}

/// CPU seconds (user + system, all threads) a process has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// A `kB` field of /proc/PID/status (`VmRSS:`, `VmHWM:`, `RssAnon:`); NaN if absent.
pub fn status_kib(pid: u32, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(f64::NAN)
}

/// Resident memory of a process, MiB: now (VmRSS) and at its peak (VmHWM).
pub fn memory_mib(pid: u32) -> (f64, f64) {
    (
        status_kib(pid, "VmRSS:") / 1024.0,
        status_kib(pid, "VmHWM:") / 1024.0,
    )
}
