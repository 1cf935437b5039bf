//! The webhook benchmark's load generator: closed and open loops over TLS
//! connections, each answer judged, and the figures of a measurement.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use tokio_rustls::TlsConnector;

use crate::common::{self, Tally, cpu_seconds, histogram, median};
use crate::https::Connection;
use crate::requests::{Bodies, judge};
use crate::target::Target;
use crate::{PACER_SPIN, PATH};

/// Resident memory of a process, from /proc/PID/status.
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    /// Peak resident set, MiB.
    pub(crate) hwm: f64,
    /// Resident set now, MiB.
    pub(crate) rss: f64,
}

impl Memory {
    pub(crate) fn of(pid: u32) -> Memory {
        let (rss, hwm) = common::memory_mib(pid);
        Memory { hwm, rss }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    /// Closed loop on this many connections, not reported.
    Warmup(usize),
    /// Open loop: this many requests a second, spread over this many connections.
    Rate(f64, usize),
    /// Closed loop on this many connections.
    Closed(usize),
}

impl Shape {
    pub(crate) fn label(self) -> String {
        match self {
            Shape::Warmup(c) => format!("warm-up, {c} conns"),
            Shape::Rate(r, c) => format!("{r:.0} req/s, {c} conns"),
            Shape::Closed(c) => format!("saturation, {c} conns"),
        }
    }
}

/// One measurement of one server.
pub(crate) struct Run {
    pub(crate) tally: Tally,
    pub(crate) figures: Figures,
}

/// The figures of a measurement, or their medians over rounds.
#[derive(Clone, Copy)]
pub(crate) struct Figures {
    /// p50, p99 and p99.9 latency, ms.
    pub(crate) latency: [f64; 3],
    /// Right answers a second.
    pub(crate) rate: f64,
    /// Server CPU per answer, µs.
    pub(crate) cpu_us: f64,
    /// The load generator's CPU per answer, µs.
    pub(crate) client_cpu_us: f64,
    /// How late the fixed-rate clock released requests, p99, µs.
    pub(crate) pacer_p99_us: f64,
}

pub(crate) const QUANTILES: [f64; 3] = [0.5, 0.99, 0.999];

impl Figures {
    pub(crate) fn median(runs: &[Run]) -> Figures {
        let med = |f: &dyn Fn(&Figures) -> f64| {
            median(&runs.iter().map(|r| f(&r.figures)).collect::<Vec<_>>())
        };
        Figures {
            latency: [0, 1, 2].map(|q| med(&|f| f.latency[q])),
            rate: med(&|f| f.rate),
            cpu_us: med(&|f| f.cpu_us),
            client_cpu_us: med(&|f| f.client_cpu_us),
            pacer_p99_us: med(&|f| f.pacer_p99_us),
        }
    }
}

pub(crate) struct Load<'a> {
    pub(crate) tls: &'a TlsConnector,
    pub(crate) bodies: &'a Arc<Bodies>,
    /// The next request body, shared by all runs so every namespace is hit.
    pub(crate) next: Arc<AtomicUsize>,
    pub(crate) runtime: &'a tokio::runtime::Runtime,
}

impl Load<'_> {
    pub(crate) fn run(&self, target: &Target, shape: Shape, duration: Duration) -> Result<Run> {
        let cpu_before = [cpu_seconds(target.pid), cpu_seconds(std::process::id())];
        let (tally, elapsed, pacer) = self.runtime.block_on(async {
            match shape {
                Shape::Rate(rate, conns) => self.open_loop(target, rate, conns, duration).await,
                Shape::Warmup(conns) | Shape::Closed(conns) => {
                    self.closed_loop(target, conns, duration).await
                }
            }
        })?;
        let cpu = cpu_seconds(target.pid) - cpu_before[0];
        let client_cpu = cpu_seconds(std::process::id()) - cpu_before[1];
        let figures = Figures {
            latency: QUANTILES.map(|q| tally.latency.value_at_quantile(q) as f64 / 1000.0),
            rate: tally.answered as f64 / elapsed.as_secs_f64(),
            cpu_us: cpu * 1e6 / tally.answered.max(1) as f64,
            client_cpu_us: client_cpu * 1e6 / tally.answered.max(1) as f64,
            pacer_p99_us: pacer.map_or(0.0, |h| h.value_at_quantile(0.99) as f64),
        };
        Ok(Run { tally, figures })
    }

    /// `n` connections to `target`. A connection refused is opened again for up to 2 s, as
    /// the API server retries a reset call: the server may not yet have let go of the
    /// previous load's connections, and a new one past `--max-connections-per-peer` (which
    /// the saturating load's 32 reach) is refused until they are gone.
    pub(crate) async fn connect(&self, target: &Target, n: usize) -> Result<Vec<Connection>> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut conns = Vec::with_capacity(n);
        while conns.len() < n {
            match Connection::open(&target.addr, self.tls).await {
                Ok(conn) => conns.push(conn),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("connecting to the {}", target.name));
                }
            }
        }
        Ok(conns)
    }

    /// `rate` requests a second for `duration`, request k released at
    /// start + k / rate on connection k mod conns by a clock thread; latency
    /// runs from the scheduled time, so queueing behind a slow answer counts.
    pub(crate) async fn open_loop(
        &self,
        target: &Target,
        rate: f64,
        conns: usize,
        duration: Duration,
    ) -> Result<(Tally, Duration, Option<Histogram<u64>>)> {
        let connections = self.connect(target, conns).await?;
        let mut queues = Vec::with_capacity(conns);
        let mut tasks = Vec::with_capacity(conns);
        for mut conn in connections {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, usize)>();
            queues.push(tx);
            let (bodies, tls, check) = (self.bodies.clone(), self.tls.clone(), target.clone());
            tasks.push(tokio::spawn(async move {
                let mut tally = Tally::new();
                while let Some((scheduled, i)) = rx.recv().await {
                    exchange(&mut conn, &check, &bodies, i, scheduled, &mut tally, &tls).await;
                }
                tally
            }));
        }
        let start = Instant::now() + Duration::from_millis(10);
        let total = (rate * duration.as_secs_f64()).round() as u64;
        let (next, len) = (self.next.clone(), self.bodies.bodies.len());
        let pacer = tokio::task::spawn_blocking(move || {
            // The default timer slack of 50 µs (plus a VM's wake-up delay)
            // would release most requests ~100 µs late: sleep with 1 ns of
            // slack to shortly before each time, then yield until it.
            nix::sys::prctl::set_timerslack(1).ok();
            let mut late = histogram();
            for k in 0..total {
                let at = start + Duration::from_secs_f64(k as f64 / rate);
                let now = Instant::now();
                if at > now + PACER_SPIN {
                    std::thread::sleep(at - now - PACER_SPIN);
                }
                while Instant::now() < at {
                    std::thread::yield_now();
                }
                late.saturating_record(
                    Instant::now().saturating_duration_since(at).as_micros() as u64
                );
                let i = next.fetch_add(1, Ordering::Relaxed) % len;
                queues[k as usize % queues.len()].send((at, i)).ok();
            }
            late
        })
        .await?;
        let mut tally = Tally::new();
        for task in tasks {
            tally.merge(task.await?);
        }
        Ok((tally, start.elapsed(), Some(pacer)))
    }

    /// Each connection sends its next request as soon as the last is answered.
    pub(crate) async fn closed_loop(
        &self,
        target: &Target,
        conns: usize,
        duration: Duration,
    ) -> Result<(Tally, Duration, Option<Histogram<u64>>)> {
        let connections = self.connect(target, conns).await?;
        let start = Instant::now();
        let deadline = start + duration;
        let mut tasks = Vec::with_capacity(conns);
        for mut conn in connections {
            let (bodies, tls, next) = (self.bodies.clone(), self.tls.clone(), self.next.clone());
            let check = target.clone();
            tasks.push(tokio::spawn(async move {
                let mut tally = Tally::new();
                loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed) % bodies.bodies.len();
                    exchange(&mut conn, &check, &bodies, i, now, &mut tally, &tls).await;
                }
                tally
            }));
        }
        let mut tally = Tally::new();
        for task in tasks {
            tally.merge(task.await?);
        }
        Ok((tally, start.elapsed(), None))
    }
}

/// Sends request `i`, checks the answer and records its latency from `since`.
pub(crate) async fn exchange(
    conn: &mut Connection,
    target: &Target,
    bodies: &Bodies,
    i: usize,
    since: Instant,
    tally: &mut Tally,
    tls: &TlsConnector,
) {
    match conn.post(PATH, bodies.bodies[i].clone()).await {
        Ok((status, body)) => {
            let took = since.elapsed();
            match judge(target, bodies, i, status, &body) {
                Ok(()) => {
                    tally.answered += 1;
                    tally.latency.saturating_record(took.as_micros() as u64);
                }
                Err(e) => {
                    tally.wrong += 1;
                    tally.problem(e);
                }
            }
        }
        Err(e) => {
            tally.errors += 1;
            tally.problem(format!("request failed: {e}"));
            // The connection is gone: open another for the next request.
            if let Ok(fresh) = Connection::open(&target.addr, tls).await {
                *conn = fresh;
            }
        }
    }
}
