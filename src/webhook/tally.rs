//! The counters and the histogram that every review writes, kept per thread and summed when
//! scraped. prometheus_client's `Counter` is one atomic and its `Histogram` one mutex, shared
//! by every thread: two cores answering reviews would pass their cache lines back and forth
//! on every review, about 0.15 µs each time on a 2-core VM (docs/benchmarks.md). Here each
//! thread writes its own shard, on cache lines of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Shards of each metric: more than the threads answering reviews (the runtime's workers);
/// threads past it share a shard, which costs only speed.
const SHARDS: usize = 8;

/// This thread's shard: given in turn as threads first write.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// The sum of the shards.
fn total<'a>(values: impl Iterator<Item = &'a AtomicU64>) -> u64 {
    values.fold(0, |sum, v| sum.wrapping_add(v.load(Ordering::Relaxed)))
}

/// A counter kept per thread: a Prometheus counter.
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<[CachePadded<AtomicU64>; SHARDS]>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0[shard()].fetch_add(1, Ordering::Relaxed);
    }

    /// The count, over every thread.
    pub fn get(&self) -> u64 {
        total(self.0.iter().map(|shard| &**shard))
    }
}

impl TypedMetric for Counter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Counter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// One thread's observations of a [`Histogram`] with `N` bounds.
#[derive(Debug)]
struct Observed<const N: usize> {
    /// Observations at or under each bound and over the one before, then over the last.
    buckets: [AtomicU64; N],
    over: AtomicU64,
    /// The sum of the observations, in nanoseconds.
    nanos: AtomicU64,
}

/// A histogram of durations kept per thread: a Prometheus histogram in seconds, whose count
/// is the sum of its buckets (so `_count` always equals the `+Inf` bucket).
#[derive(Debug, Clone)]
pub struct Histogram<const N: usize> {
    /// The buckets' upper bounds, in seconds, ascending.
    bounds: [f64; N],
    shards: Arc<[CachePadded<Observed<N>>]>,
}

impl<const N: usize> Histogram<N> {
    /// A histogram with these upper bounds (seconds, ascending) and `+Inf`.
    pub fn new(bounds: [f64; N]) -> Self {
        let shards = (0..SHARDS)
            .map(|_| {
                CachePadded::new(Observed {
                    buckets: std::array::from_fn(|_| AtomicU64::new(0)),
                    over: AtomicU64::new(0),
                    nanos: AtomicU64::new(0),
                })
            })
            .collect();
        Histogram { bounds, shards }
    }

    /// Records one duration.
    pub fn observe(&self, took: Duration) {
        let observed = &self.shards[shard()];
        let seconds = took.as_secs_f64();
        let bucket = match self.bounds.iter().position(|bound| seconds <= *bound) {
            Some(i) => &observed.buckets[i],
            None => &observed.over,
        };
        bucket.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        observed.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The count of each bucket (not cumulative), `+Inf` last, and the sum in seconds.
    fn snapshot(&self) -> (Vec<(f64, u64)>, f64) {
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .enumerate()
            .map(|(i, bound)| (*bound, total(self.shards.iter().map(|s| &s.buckets[i]))))
            .collect();
        buckets.push((f64::INFINITY, total(self.shards.iter().map(|s| &s.over))));
        let nanos = total(self.shards.iter().map(|s| &s.nanos));
        (buckets, Duration::from_nanos(nanos).as_secs_f64())
    }
}

impl<const N: usize> TypedMetric for Histogram<N> {
    const TYPE: MetricType = MetricType::Histogram;
}

impl<const N: usize> EncodeMetric for Histogram<N> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (buckets, sum) = self.snapshot();
        let count = buckets.iter().fold(0, |sum, (_, n)| sum + n);
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    /// What threads add is summed, whichever shards they write.
    #[test]
    fn a_counter_sums_what_every_thread_added() {
        let counter = Counter::default();
        std::thread::scope(|scope| {
            for _ in 0..(SHARDS + 3) {
                scope.spawn(|| (0..1000).for_each(|_| counter.inc()));
            }
        });
        assert_eq!(counter.get(), 1000 * (SHARDS as u64 + 3));
    }

    /// The exposition is prometheus_client's own for the same observations: one on a bound
    /// counts in its bucket, one past the last in `+Inf`. The durations are whole nanoseconds
    /// and sums of powers of two, so both sums are exact.
    #[test]
    fn the_histogram_reads_as_prometheus_clients_histogram() {
        let bounds = [0.001, 0.0078125, 0.1];
        let took = [0.001953125, 0.00390625, 0.0078125, 0.25, 0.5, 2.0, 0.0];
        let ours = Histogram::new(bounds);
        let theirs = prometheus_client::metrics::histogram::Histogram::new(bounds);
        std::thread::scope(|scope| {
            for t in took {
                let ours = &ours;
                scope.spawn(move || ours.observe(Duration::from_secs_f64(t)));
                theirs.observe(t);
            }
        });
        let (mut a, mut b) = (Registry::default(), Registry::default());
        a.register("took", "help", ours);
        b.register("took", "help", theirs);
        assert_eq!(text(&a), text(&b));
    }

    /// A counter reads as prometheus_client's counter, in a family too.
    #[test]
    fn a_counter_reads_as_prometheus_clients_counter() {
        use prometheus_client::metrics::family::Family;
        let ours = Family::<Vec<(String, String)>, Counter>::default();
        let theirs =
            Family::<Vec<(String, String)>, prometheus_client::metrics::counter::Counter>::default(
            );
        for (label, times) in [("a", 3), ("b", 1)] {
            let labels = vec![("outcome".to_string(), label.to_string())];
            for _ in 0..times {
                ours.get_or_create(&labels).inc();
                theirs.get_or_create(&labels).inc();
            }
        }
        let (mut a, mut b) = (Registry::default(), Registry::default());
        a.register("requests", "help", ours);
        b.register("requests", "help", theirs);
        // A family's label sets come in the order of its hash map.
        let lines = |r: &Registry| {
            let mut lines: Vec<String> = text(r).lines().map(str::to_string).collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&a), lines(&b));
    }
}
