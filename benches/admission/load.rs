//! The admission benchmark's load generator: pods created through the API
//! server on keep-alive connections, each answer checked.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;

use crate::common::{Tally, cpu_seconds, median};
use crate::https::Connection;
use crate::{Config, NETWORKS, OWNED};

/// The figures of a measurement, or their medians over rounds.
#[derive(Clone, Copy)]
pub(crate) struct Figures {
    /// p50 and p99 latency, ms.
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    /// Right answers a second.
    pub(crate) rate: f64,
    /// The API server's CPU per answer, µs (NaN when its PID is unknown).
    pub(crate) api_cpu_us: f64,
    /// The webhook server's CPU per answer, µs (NaN without one).
    pub(crate) server_cpu_us: f64,
}

impl Figures {
    pub(crate) fn median(runs: &[Figures]) -> Figures {
        let med = |f: fn(&Figures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        Figures {
            p50: med(|f| f.p50),
            p99: med(|f| f.p99),
            rate: med(|f| f.rate),
            api_cpu_us: med(|f| f.api_cpu_us),
            server_cpu_us: med(|f| f.server_cpu_us),
        }
    }
}

pub(crate) struct Load<'a> {
    /// The API server's `127.0.0.1:PORT`.
    pub(crate) addr: &'a str,
    pub(crate) tls: &'a TlsConnector,
    pub(crate) pod: &'a Value,
    pub(crate) runtime: &'a tokio::runtime::Runtime,
    pub(crate) api_pid: Option<u32>,
}

/// The dry-run create of a pod in `namespace`.
pub(crate) fn create_path(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods?dryRun=All")
}

impl Load<'_> {
    /// Creates the pod in `config`'s namespace until the answer is what the
    /// configuration should give (a registration takes effect a moment after
    /// it is applied), then checks that answer in full.
    pub(crate) fn verify(&self, config: &Config, timeout: Duration) -> Result<()> {
        let path = create_path(&config.namespace);
        let body = Bytes::from(serde_json::to_vec(self.pod)?);
        let deadline = Instant::now() + timeout;
        let (status, answer) = self.runtime.block_on(async {
            let mut conn = Connection::open(self.addr, self.tls).await?;
            loop {
                let (status, answer) = conn.post(&path, body.clone()).await?;
                if check(config.attached, status, &answer).is_ok() || Instant::now() > deadline {
                    return Ok::<_, anyhow::Error>((status, answer));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })?;
        check(config.attached, status, &answer).map_err(|e| anyhow!("{e}"))?;
        let created: Value = serde_json::from_slice(&answer)?;
        let annotations = &created["metadata"]["annotations"];
        let want = if config.attached {
            (json!("linkerd-cni"), json!("network=created"))
        } else {
            (Value::Null, Value::Null)
        };
        let got = (annotations[NETWORKS].clone(), annotations[OWNED].clone());
        if got != want {
            bail!(
                "the created pod's {NETWORKS} and {OWNED} annotations are {} and {}, want {} and {}",
                got.0,
                got.1,
                want.0,
                want.1
            );
        }
        if created["metadata"]["namespace"] != json!(config.namespace) {
            bail!(
                "the pod was created in {}, want {}",
                created["metadata"]["namespace"],
                config.namespace
            );
        }
        Ok(())
    }

    /// A closed loop on `conns` connections for `duration`.
    pub(crate) fn run(
        &self,
        config: &Config,
        conns: usize,
        duration: Duration,
    ) -> Result<(Tally, Figures)> {
        let path = create_path(&config.namespace);
        let body = Bytes::from(serde_json::to_vec(self.pod)?);
        let cpu = || [self.api_pid, config.server_pid].map(|p| p.map_or(f64::NAN, cpu_seconds));
        let cpu_before = cpu();
        let (tally, elapsed) = self.runtime.block_on(async {
            let mut connections = Vec::with_capacity(conns);
            for _ in 0..conns {
                connections.push(
                    Connection::open(self.addr, self.tls)
                        .await
                        .context("connecting to the API server")?,
                );
            }
            let start = Instant::now();
            let deadline = start + duration;
            let mut tasks = Vec::with_capacity(conns);
            for mut conn in connections {
                let (path, body, addr, tls) = (
                    path.clone(),
                    body.clone(),
                    self.addr.to_string(),
                    self.tls.clone(),
                );
                let attached = config.attached;
                tasks.push(tokio::spawn(async move {
                    create_pods(&mut conn, &path, &body, &addr, &tls, attached, deadline).await
                }));
            }
            let mut tally = Tally::new();
            for task in tasks {
                tally.merge(task.await?);
            }
            Ok::<_, anyhow::Error>((tally, start.elapsed()))
        })?;
        let cpu_after = cpu();
        let per_answer =
            |i: usize| (cpu_after[i] - cpu_before[i]) * 1e6 / tally.answered.max(1) as f64;
        let figures = Figures {
            p50: tally.latency.value_at_quantile(0.5) as f64 / 1000.0,
            p99: tally.latency.value_at_quantile(0.99) as f64 / 1000.0,
            rate: tally.answered as f64 / elapsed.as_secs_f64(),
            api_cpu_us: per_answer(0),
            server_cpu_us: per_answer(1),
        };
        Ok((tally, figures))
    }
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether an answer is right: 201, and `linkerd-cni` in the returned pod's
/// networks annotation exactly when a webhook is registered (a byte search:
/// the API server writes compact JSON).
pub(crate) fn check(attached: bool, status: u16, body: &[u8]) -> Result<(), String> {
    let show = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 201 {
        return Err(format!("status {status}: {}", show()));
    }
    let key = format!("\"{NETWORKS}\":\"");
    let networks = find(body, key.as_bytes()).map(|at| {
        let value = &body[at + key.len()..];
        &value[..value.iter().position(|&b| b == b'"').unwrap_or(value.len())]
    });
    let has_cni = networks.is_some_and(|v| find(v, b"linkerd-cni").is_some());
    if has_cni != attached {
        return Err(format!(
            "{} linkerd-cni in the networks annotation: {}",
            if attached { "no" } else { "unexpected" },
            show()
        ));
    }
    Ok(())
}

/// Creates pods on `conn` until `deadline`, each answer checked: what came
/// back. A connection that fails is replaced by a fresh one.
async fn create_pods(
    conn: &mut Connection,
    path: &str,
    body: &Bytes,
    addr: &str,
    tls: &TlsConnector,
    attached: bool,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::new();
    while Instant::now() < deadline {
        let sent = Instant::now();
        match conn.post(path, body.clone()).await {
            Ok((status, answer)) => {
                let took = sent.elapsed();
                match check(attached, status, &answer) {
                    Ok(()) => {
                        tally.answered += 1;
                        tally.latency.saturating_record(took.as_micros() as u64);
                    }
                    Err(e) => {
                        tally.wrong += 1;
                        tally.first_problem.get_or_insert(e);
                    }
                }
            }
            Err(e) => {
                tally.errors += 1;
                tally
                    .first_problem
                    .get_or_insert(format!("request failed: {e}"));
                // The connection is gone: open another for the next request.
                match Connection::open(addr, tls).await {
                    Ok(fresh) => *conn = fresh,
                    Err(_) => break,
                }
            }
        }
    }
    tally
}
