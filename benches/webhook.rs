//! Load benchmark of the admission webhook against a constant-answer baseline.
//!
//! `cargo bench --bench webhook` starts a stand-in API server
//! (benches/common/fake_apiserver.rs, which says why a stand-in here)
//! holding 10,000 namespaces, the release
//! `linkerd-multus webhook` against it, and a baseline: this bench re-executed
//! as a server that answers every review with one constant AdmissionReview,
//! through the webhook's own TLS configuration, HTTP stack, limits and body
//! reading (`webhook::server::serve`), without parsing or deciding. The
//! servers stay up for the whole run and are measured in alternating rounds.
//!
//! The load is the captured `pod-create` review, rotated over the 10,000
//! namespaces, POSTed to /mutate over TLS 1.3 and HTTP/1.1 keep-alive:
//! open-loop fixed rates (latency from each request's scheduled time, so a
//! slow answer delays the ones queued behind it: no coordinated omission),
//! then a closed loop at saturation. It prints p50, p99 and p99.9, the rates,
//! the servers' CPU per request and resident memory, the ratios webhook /
//! baseline, and the targets: saturated throughput at least 80% of the
//! baseline's, p99 under 1 ms at 2,000 req/s, resident memory under 40 MiB.
//!
//! `cargo bench --bench webhook -- --quick` (or `BENCH_QUICK=1`) is a smoke
//! run of a few seconds: it fails when the webhook errors or answers wrongly,
//! never on the targets. `BENCH_WEBHOOK_ARGS="--log-level warn"` passes extra
//! flags to the webhook, `BENCH_SECONDS` sets the length of each measurement,
//! `BENCH_CLIENT_THREADS` the load generator's threads (default 1: the
//! servers keep the other CPU).
//!
//! A third server, the reader, is the baseline reading each review with the
//! webhook's own `admission::parse` before its constant answer: what reading
//! the review costs by itself, a bound on any webhook that reads its request.
//! `BENCH_BASELINE_BUSY_NS=N` makes the baseline keep the CPU busy N ns before
//! each answer, to see what a handler of that cost does to the throughput.
//!
//! Server CPU per request is the process's user + system time over the run
//! (/proc/PID/stat) divided by the answers; resident memory is VmHWM and
//! VmRSS from /proc/PID/status after the load.

#[path = "common/baseline.rs"]
mod baseline;
mod common;
#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "../tests/common/https.rs"]
mod https;
#[path = "common/servers.rs"]
mod servers;

use std::ffi::OsString;
use std::fs;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use base64::Engine;
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;

use baseline::{ATTACH_PATCH, BASELINE_ENV, READER_ENV, baseline, baseline_busy};
use common::{Tally, cpu_seconds, histogram, median};
use fake_apiserver::FakeApiServer;
use https::{Ca, Connection, connector};
use servers::Server;

/// The captured review the load is made of.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/fixtures/admission/pod-create.json"
);

const NAMESPACES: usize = 10_000;
/// The webhook, the baseline and the reader, in this order.
const SERVERS: usize = 3;
/// How long before a request's time the fixed-rate clock stops sleeping and yields.
const PACER_SPIN: Duration = Duration::from_micros(80);
const PATH: &str = "/mutate";

/// Targets.
const TARGET_THROUGHPUT: f64 = 0.80;
const TARGET_RATE: f64 = 2_000.0;
const TARGET_P99_MS: f64 = 1.0;
const TARGET_RSS_MIB: f64 = 40.0;

fn main() -> ExitCode {
    if let Some(addr) = std::env::var_os(BASELINE_ENV) {
        return match baseline(addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("webhook bench baseline: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    match run(&Plan::new(quick)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("webhook bench: {n} check(s) failed, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("webhook bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Plan

struct Plan {
    quick: bool,
    /// Fixed rates, req/s.
    rates: Vec<f64>,
    /// Connections at fixed rates.
    rate_connections: usize,
    /// Connections of the closed loop.
    saturation_connections: usize,
    /// Length of one measurement.
    duration: Duration,
    /// Closed-loop warm-up of each server.
    warmup: Duration,
    /// Measurements of each server per load, alternating.
    rounds: usize,
    /// Threads of the load generator's runtime.
    client_threads: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        let client_threads = std::env::var("BENCH_CLIENT_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let mut plan = Plan::defaults(quick, client_threads);
        if let Some(secs) = std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
        {
            plan.duration = Duration::from_secs_f64(secs);
        }
        plan
    }

    fn defaults(quick: bool, client_threads: usize) -> Plan {
        if quick {
            Plan {
                quick,
                rates: vec![TARGET_RATE],
                rate_connections: 8,
                saturation_connections: 16,
                duration: Duration::from_secs(1),
                warmup: Duration::from_millis(500),
                rounds: 1,
                client_threads,
            }
        } else {
            Plan {
                quick,
                rates: vec![500.0, 1_000.0, TARGET_RATE],
                rate_connections: 8,
                saturation_connections: 32,
                duration: Duration::from_secs(8),
                warmup: Duration::from_secs(3),
                rounds: 3,
                client_threads,
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Driver

fn run(plan: &Plan) -> Result<usize> {
    let started = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("linkerd-multus-webhook-bench-")
        .tempdir()?;
    let mut failures = 0;

    let api = FakeApiServer::start();
    let classes: Vec<Class> = (0..NAMESPACES).map(Class::of).collect();
    for (i, class) in classes.iter().enumerate() {
        api.put(&namespace_name(i), class.annotations());
        // The NAD the webhook checks for before it attaches a pod, as rendering gives it.
        api.put_nad(&namespace_name(i), "linkerd-cni", &[]);
    }
    let ca = Ca::new("linkerd-multus bench CA");
    let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir.path());
    let kubeconfig = api.kubeconfig(dir.path());

    let extra: Vec<String> = std::env::var("BENCH_WEBHOOK_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut webhook = Server::webhook(dir.path(), &kubeconfig, &cert, &key, &extra)?;
    let mut baseline = Server::constant(dir.path(), &cert, &key, "baseline", &[])?;
    let mut reader = Server::constant(dir.path(), &cert, &key, "reader", &[(READER_ENV, "1")])?;
    webhook.wait_ready(Duration::from_secs(30))?;
    let cached = webhook.metric("linkerd_multus_namespace_cache_namespaces")?;
    if cached != NAMESPACES as f64 {
        eprintln!("  FAIL the webhook's cache holds {cached} namespaces, want {NAMESPACES}");
        failures += 1;
    }
    eprintln!(
        "webhook ready with {cached} namespaces cached, {:.1} s after start",
        started.elapsed().as_secs_f64()
    );

    let bodies = Arc::new(Bodies::new(&classes)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.client_threads)
        .enable_all()
        .build()?;
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    let targets = [
        Target {
            name: "webhook",
            addr: webhook.addr.clone(),
            pid: webhook.child.id(),
            check_patch: true,
        },
        Target {
            name: "baseline",
            addr: baseline.addr.clone(),
            pid: baseline.child.id(),
            check_patch: false,
        },
        Target {
            name: "reader",
            addr: reader.addr.clone(),
            pid: reader.child.id(),
            check_patch: false,
        },
    ];

    // Each answers right before anything is measured.
    failures += runtime.block_on(verify(&targets, &tls, &bodies, &classes))?;
    if failures > 0 {
        eprintln!("{}", webhook.log_tail(20));
        return Ok(failures);
    }
    let sent_before = webhook.admission_total()?;

    let load = Load {
        tls: &tls,
        bodies: &bodies,
        next: Arc::new(AtomicUsize::new(0)),
        runtime: &runtime,
    };
    let mut sent = [0u64; SERVERS];
    let mut measure =
        |shape: Shape, secs: Duration, failures: &mut usize| -> Result<[Figures; SERVERS]> {
            let mut per: [Vec<Run>; SERVERS] = Default::default();
            let rounds = if matches!(shape, Shape::Warmup(_)) {
                1
            } else {
                plan.rounds
            };
            for r in 0..rounds {
                // Forwards, then backwards: each server is measured early and late.
                let order: Vec<usize> = if r % 2 == 0 {
                    (0..SERVERS).collect()
                } else {
                    (0..SERVERS).rev().collect()
                };
                for i in order {
                    let result = load.run(&targets[i], shape, secs)?;
                    sent[i] += result.tally.answered + result.tally.wrong;
                    if let Some(problem) = &result.tally.first_problem {
                        eprintln!(
                            "  FAIL {} under {}: {} errors, {} wrong answers; first: {problem}",
                            targets[i].name,
                            shape.label(),
                            result.tally.errors,
                            result.tally.wrong
                        );
                        *failures += 1;
                    }
                    per[i].push(result);
                }
            }
            Ok(per.map(|runs| Figures::median(&runs)))
        };

    eprintln!(
        "warm-up: {:.1} s closed loop on each ...",
        plan.warmup.as_secs_f64()
    );
    measure(
        Shape::Warmup(plan.saturation_connections),
        plan.warmup,
        &mut failures,
    )?;
    let mut rows = Vec::new();
    for &rate in &plan.rates {
        eprintln!(
            "{rate} req/s on {} connections, {} x {:.0} s each ...",
            plan.rate_connections,
            plan.rounds,
            plan.duration.as_secs_f64()
        );
        let shape = Shape::Rate(rate, plan.rate_connections);
        rows.push((shape, measure(shape, plan.duration, &mut failures)?));
    }
    eprintln!(
        "saturation on {} connections, {} x {:.0} s each ...",
        plan.saturation_connections,
        plan.rounds,
        plan.duration.as_secs_f64()
    );
    let shape = Shape::Closed(plan.saturation_connections);
    rows.push((shape, measure(shape, plan.duration, &mut failures)?));

    // Every request reached the admission code and was read as a review.
    let answered = webhook.admission_total()? - sent_before;
    if answered != sent[0] as f64 {
        eprintln!(
            "  FAIL the webhook counted {answered} reviews, the load generator sent {}",
            sent[0]
        );
        failures += 1;
    }
    for outcome in ["invalid", "warned", "denied"] {
        let n = webhook.metric(&format!(
            "linkerd_multus_admission_requests_total{{outcome=\"{outcome}\"}}"
        ))?;
        if n != 0.0 {
            eprintln!("  FAIL the webhook counted {n} {outcome} reviews");
            failures += 1;
        }
    }
    let handler = webhook.metric("linkerd_multus_admission_request_duration_seconds_sum")?
        / webhook.metric("linkerd_multus_admission_request_duration_seconds_count")?;
    let memory = [&webhook, &baseline, &reader].map(|s| Memory::of(s.child.id()));
    for (server, name) in [
        (&mut webhook, "webhook"),
        (&mut baseline, "baseline"),
        (&mut reader, "reader"),
    ] {
        if !server.running() {
            eprintln!("  FAIL the {name} exited during the run");
            failures += 1;
        }
    }
    if failures > 0 {
        eprintln!("{}", webhook.log_tail(20));
    }

    print_table(
        plan,
        &rows,
        &memory,
        handler,
        &bodies,
        [webhook.child.id(), baseline.child.id(), reader.child.id()],
    );
    eprintln!(
        "webhook bench: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    drop(runtime);
    drop((webhook, baseline, reader));
    drop(api);
    Ok(failures)
}

// ---------------------------------------------------------------------------
// Namespaces and requests

/// What a namespace is annotated with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// `linkerd.io/multus` and `linkerd.io/inject` enabled.
    Enabled,
    /// Enabled, with OpenShift's UID range: the patch sets the proxy UID too.
    EnabledUidRange,
    /// Only OpenShift's UID range: no patch.
    UidRange,
    /// Nothing: no patch.
    Plain,
}

const UID_RANGE: (&str, &str) = ("openshift.io/sa.scc.uid-range", "1000680000/10000");

impl Class {
    /// A third enabled (half of those with a UID range), a fifth of the rest
    /// with only a UID range, the others plain.
    fn of(i: usize) -> Class {
        match (i % 3, i % 6, i % 5) {
            (_, 0, _) => Class::EnabledUidRange,
            (0, _, _) => Class::Enabled,
            (_, _, 0) => Class::UidRange,
            _ => Class::Plain,
        }
    }

    fn annotations(self) -> &'static [(&'static str, &'static str)] {
        const ON: (&str, &str) = ("linkerd.io/multus", "enabled");
        const INJECT: (&str, &str) = ("linkerd.io/inject", "enabled");
        match self {
            Class::Enabled => &[ON, INJECT],
            Class::EnabledUidRange => &[ON, INJECT, UID_RANGE],
            Class::UidRange => &[UID_RANGE],
            Class::Plain => &[],
        }
    }

    fn patched(self) -> bool {
        matches!(self, Class::Enabled | Class::EnabledUidRange)
    }
}

fn namespace_name(i: usize) -> String {
    format!("team-{i:05}")
}

/// The captured review once per namespace, serialized before measuring.
struct Bodies {
    bodies: Vec<Bytes>,
    patched: Vec<bool>,
    bytes: usize,
}

impl Bodies {
    fn new(classes: &[Class]) -> Result<Bodies> {
        let text = fs::read_to_string(FIXTURE).with_context(|| format!("reading {FIXTURE}"))?;
        let mut review: Value = serde_json::from_str(&text)?;
        let mut bodies = Vec::with_capacity(classes.len());
        for i in 0..classes.len() {
            let namespace = namespace_name(i);
            review["request"]["uid"] = json!(uid(i));
            review["request"]["namespace"] = json!(namespace);
            review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
            bodies.push(Bytes::from(serde_json::to_vec(&review)?));
        }
        let bytes = bodies.iter().map(Bytes::len).sum::<usize>() / bodies.len();
        Ok(Bodies {
            bodies,
            patched: classes.iter().map(|c| c.patched()).collect(),
            bytes,
        })
    }
}

fn uid(i: usize) -> String {
    format!("{i:08x}-b1df-410b-9f67-c7462560ec49")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether an answer is right for request `i`: 200, allowed, and (for the
/// webhook) a patch exactly when the namespace is enabled.
fn judge(
    target: &Target,
    bodies: &Bodies,
    i: usize,
    status: u16,
    body: &[u8],
) -> Result<(), String> {
    let show = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 200 {
        return Err(format!("status {status}: {}", show()));
    }
    if !contains(body, br#""allowed":true"#) {
        return Err(format!("not allowed: {}", show()));
    }
    if target.check_patch && contains(body, br#""patch":"#) != bodies.patched[i] {
        return Err(format!(
            "{} a patch for {}: {}",
            if bodies.patched[i] {
                "no"
            } else {
                "unexpected"
            },
            namespace_name(i % NAMESPACES),
            show()
        ));
    }
    Ok(())
}

/// Before measuring: the webhook patches exactly the enabled namespaces
/// (with the proxy UID under a UID range) and echoes the uid; the baseline
/// and the reader answer 200.
async fn verify(
    targets: &[Target; SERVERS],
    tls: &TlsConnector,
    bodies: &Bodies,
    classes: &[Class],
) -> Result<usize> {
    let mut failures = 0;
    let mut conn = Connection::open(&targets[0].addr, tls).await?;
    let mut fail = |what: String| {
        eprintln!("  FAIL webhook: {what}");
        failures += 1;
    };
    for class in [
        Class::Enabled,
        Class::EnabledUidRange,
        Class::UidRange,
        Class::Plain,
    ] {
        let i = classes
            .iter()
            .position(|&c| c == class)
            .expect("each class");
        let (status, body) = conn.post(PATH, bodies.bodies[i].clone()).await?;
        if let Err(e) = judge(&targets[0], bodies, i, status, &body) {
            fail(format!("{class:?} namespace: {e}"));
            continue;
        }
        let review: Value = serde_json::from_slice(&body)?;
        let response = &review["response"];
        if response["uid"] != json!(uid(i)) {
            fail(format!("uid {} echoed as {}", uid(i), response["uid"]));
        }
        let patch: Value = match response["patch"].as_str() {
            None => Value::Null,
            Some(text) => serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .context("the patch is not base64")?,
            )?,
        };
        let want = match class {
            Class::Enabled => serde_json::from_str(ATTACH_PATCH)?,
            // 1000680000 + 2102, and the ownership record says so.
            Class::EnabledUidRange => json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
                {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000682102"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created,proxy-uid=1000682102"},
            ]),
            Class::UidRange | Class::Plain => Value::Null,
        };
        let sorted = |v: &Value| {
            let mut ops: Vec<String> = v
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            ops.sort();
            ops
        };
        if sorted(&patch) != sorted(&want) {
            fail(format!("{class:?} namespace: patch {patch}, want {want}"));
        }
    }
    for target in &targets[1..] {
        let mut conn = Connection::open(&target.addr, tls).await?;
        let (status, body) = conn.post(PATH, bodies.bodies[0].clone()).await?;
        if let Err(e) = judge(target, bodies, 0, status, &body) {
            eprintln!("  FAIL {}: {e}", target.name);
            failures += 1;
        }
    }
    if failures == 0 {
        eprintln!(
            "checked: the webhook patches exactly the enabled namespaces; the baseline and the reader answer"
        );
    }
    Ok(failures)
}

// ---------------------------------------------------------------------------
// The servers

/// Resident memory of a process, from /proc/PID/status.
#[derive(Clone, Copy)]
struct Memory {
    /// Peak resident set, MiB.
    hwm: f64,
    /// Resident set now, MiB.
    rss: f64,
}

impl Memory {
    fn of(pid: u32) -> Memory {
        let (rss, hwm) = common::memory_mib(pid);
        Memory { hwm, rss }
    }
}

// ---------------------------------------------------------------------------
// The load generator

#[derive(Clone)]
struct Target {
    name: &'static str,
    addr: String,
    pid: u32,
    /// Whether answers are checked for a patch exactly on enabled namespaces.
    check_patch: bool,
}

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Closed loop on this many connections, not reported.
    Warmup(usize),
    /// Open loop: this many requests a second, spread over this many connections.
    Rate(f64, usize),
    /// Closed loop on this many connections.
    Closed(usize),
}

impl Shape {
    fn label(self) -> String {
        match self {
            Shape::Warmup(c) => format!("warm-up, {c} conns"),
            Shape::Rate(r, c) => format!("{r:.0} req/s, {c} conns"),
            Shape::Closed(c) => format!("saturation, {c} conns"),
        }
    }
}

/// One measurement of one server.
struct Run {
    tally: Tally,
    figures: Figures,
}

/// The figures of a measurement, or their medians over rounds.
#[derive(Clone, Copy)]
struct Figures {
    /// p50, p99 and p99.9 latency, ms.
    latency: [f64; 3],
    /// Right answers a second.
    rate: f64,
    /// Server CPU per answer, µs.
    cpu_us: f64,
    /// The load generator's CPU per answer, µs.
    client_cpu_us: f64,
    /// How late the fixed-rate clock released requests, p99, µs.
    pacer_p99_us: f64,
}

const QUANTILES: [f64; 3] = [0.5, 0.99, 0.999];

impl Figures {
    fn median(runs: &[Run]) -> Figures {
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

struct Load<'a> {
    tls: &'a TlsConnector,
    bodies: &'a Arc<Bodies>,
    /// The next request body, shared by all runs so every namespace is hit.
    next: Arc<AtomicUsize>,
    runtime: &'a tokio::runtime::Runtime,
}

impl Load<'_> {
    fn run(&self, target: &Target, shape: Shape, duration: Duration) -> Result<Run> {
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

    async fn connect(&self, target: &Target, n: usize) -> Result<Vec<Connection>> {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(
                Connection::open(&target.addr, self.tls)
                    .await
                    .with_context(|| format!("connecting to the {}", target.name))?,
            );
        }
        Ok(conns)
    }

    /// `rate` requests a second for `duration`, request k released at
    /// start + k / rate on connection k mod conns by a clock thread; latency
    /// runs from the scheduled time, so queueing behind a slow answer counts.
    async fn open_loop(
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
    async fn closed_loop(
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
async fn exchange(
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

// ---------------------------------------------------------------------------
// Report

fn print_table(
    plan: &Plan,
    rows: &[(Shape, [Figures; SERVERS])],
    memory: &[Memory; SERVERS],
    handler_s: f64,
    bodies: &Bodies,
    pids: [u32; SERVERS],
) {
    println!();
    println!(
        "webhook:  {} webhook (pid {}), {NAMESPACES} namespaces cached",
        env!("CARGO_BIN_EXE_linkerd-multus"),
        pids[0]
    );
    let busy = baseline_busy();
    println!(
        "baseline: a constant AdmissionReview through webhook::server::serve: same TLS, HTTP, limits, runtime{} (pid {})",
        if busy.is_zero() {
            String::new()
        } else {
            format!(
                "; busy {} ns before each answer (BENCH_BASELINE_BUSY_NS)",
                busy.as_nanos()
            )
        },
        pids[1]
    );
    println!(
        "reader:   the baseline reading each review first, with the webhook's admission::parse (pid {})",
        pids[2]
    );
    println!(
        "load:     POST {PATH}, the captured pod-create review ({} bytes) rotated over the namespaces,",
        bodies.bytes
    );
    println!(
        "          TLS 1.3, HTTP/1.1 keep-alive, {} load generator thread(s) on the same {} CPUs",
        plan.client_threads,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<22} {:<16} {:>9} {:>9} {:>6} {:>9} {:>6}",
        "load", "figure", "webhook", "baseline", "x", "reader", "xr"
    );
    let line = |load: &str, figure: &str, [w, b, r]: [f64; SERVERS], decimals: usize| {
        println!(
            "{load:<22} {figure:<16} {w:>9.decimals$} {b:>9.decimals$} {:>6.2} {r:>9.decimals$} {:>6.2}",
            w / b,
            w / r
        );
    };
    for (shape, f) in rows {
        let of = |figure: fn(&Figures) -> f64| f.each_ref().map(figure);
        line(&shape.label(), "p50 ms", of(|f| f.latency[0]), 3);
        line("", "p99 ms", of(|f| f.latency[1]), 3);
        line("", "p99.9 ms", of(|f| f.latency[2]), 3);
        line("", "req/s", of(|f| f.rate), 0);
        line("", "server CPU µs/req", of(|f| f.cpu_us), 1);
        line("", "load CPU µs/req", of(|f| f.client_cpu_us), 1);
    }
    line("after the load", "VmHWM MiB", memory.map(|m| m.hwm), 1);
    line("", "VmRSS MiB", memory.map(|m| m.rss), 1);
    let late = rows
        .iter()
        .filter(|(s, _)| matches!(s, Shape::Rate(..)))
        .flat_map(|(_, r)| r.iter().map(|f| f.pacer_p99_us))
        .fold(0.0, f64::max);
    println!(
        "(medians of {} round(s) of {:.0} s, the three servers alternating; x = webhook / baseline, xr = webhook / reader;",
        plan.rounds,
        plan.duration.as_secs_f64()
    );
    println!(
        " fixed rates: latency from each request's scheduled time, the clock {late:.0} µs late at p99;"
    );
    println!(
        " CPU: user + system time per answer; webhook handler (parse, decide, answer) {:.1} µs a review)",
        handler_s * 1e6
    );

    println!();
    let judged = |met: bool| match (plan.quick, met) {
        (true, _) => "not judged in a quick run",
        (false, true) => "met",
        (false, false) => "NOT met",
    };
    if let Some((_, [w, b, r])) = rows.iter().find(|(s, _)| matches!(s, Shape::Closed(_))) {
        let share = w.rate / b.rate;
        println!(
            "target: saturated throughput >= {:.0}% of the baseline's: {:.0}% ({:.0} / {:.0} req/s): {}",
            TARGET_THROUGHPUT * 100.0,
            share * 100.0,
            w.rate,
            b.rate,
            judged(share >= TARGET_THROUGHPUT)
        );
        // Not a target: what reading the review costs by itself on this machine.
        println!(
            "reading alone: the reader at {:.0}% of the baseline's saturated throughput ({:.0} req/s), the webhook at {:.0}% of the reader's",
            r.rate / b.rate * 100.0,
            r.rate,
            w.rate / r.rate * 100.0
        );
    }
    match rows
        .iter()
        .find(|(s, _)| matches!(s, Shape::Rate(r, _) if *r == TARGET_RATE))
    {
        Some((_, [w, b, _])) => println!(
            "target: p99 < {TARGET_P99_MS} ms at {TARGET_RATE:.0} req/s: {:.3} ms (baseline {:.3} ms): {}",
            w.latency[1],
            b.latency[1],
            judged(w.latency[1] < TARGET_P99_MS)
        ),
        None => println!("target: p99 at {TARGET_RATE:.0} req/s: not measured"),
    }
    let w = &memory[0];
    println!(
        "target: resident memory < {TARGET_RSS_MIB} MiB: peak {:.1} MiB, {:.1} MiB after the load: {}",
        w.hwm,
        w.rss,
        judged(w.hwm < TARGET_RSS_MIB)
    );
}
