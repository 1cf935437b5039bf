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
//! baseline and webhook / reader, and the targets: saturated throughput at
//! least 90% of the reader's (the median of the ratios of the saturation
//! rounds, each the webhook and the reader measured back to back, so that the
//! machine's drift between rounds cancels out, printed with a distribution-free
//! 95% interval of that median: what a change must beat to show), p99 under
//! 1 ms at 2,000 req/s, resident memory under 40 MiB.
//!
//! `cargo bench --bench webhook -- --quick` (or `BENCH_QUICK=1`) is a smoke
//! run of a few seconds: it fails when the webhook errors or answers wrongly,
//! never on the targets. `BENCH_WEBHOOK_ARGS="--log-level warn"` passes extra
//! flags to the webhook, `BENCH_SECONDS` sets the length of each measurement,
//! `BENCH_ONLY=saturation` skips the fixed rates,
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

#[path = "../common/baseline.rs"]
mod baseline;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "../../tests/common/https.rs"]
mod https;
mod load;
#[path = "../../tests/common/ports.rs"]
mod ports;
#[path = "../../tests/common/process.rs"]
mod process;
mod report;
mod requests;
#[path = "../common/servers.rs"]
mod servers;
mod target;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use anyhow::Result;

use baseline::{BASELINE_ENV, READER_ENV, baseline};
use fake_apiserver::FakeApiServer;
use https::{Ca, connector};
use load::{Figures, Load, Memory, Run, Shape};
use report::print_table;
use requests::{Bodies, Class, namespace_name, verify};
use servers::Server;
use target::Target;

/// The captured review the load is made of.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/fixtures/admission/pod-create.json"
);

const NAMESPACES: usize = 10_000;
/// The webhook, the baseline and the reader, in this order.
const SERVERS: usize = 3;
/// The places of the webhook, the baseline and the reader among the servers ([`Fleet::pids`]).
const WEBHOOK: usize = 0;
const BASELINE: usize = 1;
const READER: usize = 2;
/// How long before a request's time the fixed-rate clock stops sleeping and yields.
const PACER_SPIN: Duration = Duration::from_micros(80);
const PATH: &str = "/mutate";

/// Targets: the saturated throughput as a share of the reader's (a server that
/// only parses the review), the p99 at a fixed rate, the resident memory.
const TARGET_THROUGHPUT: f64 = 0.90;
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
    /// Measurements of each server per fixed rate, alternating.
    rounds: usize,
    /// Measurements of each server at saturation, alternating: more and shorter, as the
    /// target is judged on each round's ratio (the machine's speed drifts between rounds).
    saturation_rounds: usize,
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
        if std::env::var("BENCH_ONLY").is_ok_and(|only| only == "saturation") {
            plan.rates.clear();
        }
        plan
    }

    /// The length of one saturation round: the fixed rates' time per server, in more rounds.
    fn saturation_round(&self) -> Duration {
        self.duration
            .mul_f64(self.rounds as f64 / self.saturation_rounds as f64)
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
                saturation_rounds: 1,
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
                saturation_rounds: 15,
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
    let mut fleet = Fleet::start(dir.path())?;
    let cached = fleet
        .webhook
        .metric("linkerd_multus_namespace_cache_namespaces")?;
    let mut failures = 0;
    if cached != NAMESPACES as f64 {
        eprintln!("  FAIL the webhook's cache holds {cached} namespaces, want {NAMESPACES}");
        failures += 1;
    }
    eprintln!(
        "webhook ready with {cached} namespaces cached, {:.1} s after start",
        started.elapsed().as_secs_f64()
    );

    let bodies = Arc::new(Bodies::new(&fleet.classes)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.client_threads)
        .enable_all()
        .build()?;
    let tls = connector(&fleet.ca.pem, None, &[b"http/1.1"]);
    let targets = fleet.targets();

    // Each answers right before anything is measured.
    failures += runtime.block_on(verify(&targets, &tls, &bodies, &fleet.classes))?;
    if failures > 0 {
        eprintln!("{}", fleet.webhook.log_tail(20));
        return Ok(failures);
    }
    let sent_before = fleet.webhook.admission_total()?;
    let mut bench = Bench {
        plan,
        targets: &targets,
        load: Load {
            tls: &tls,
            bodies: &bodies,
            next: Arc::new(AtomicUsize::new(0)),
            runtime: &runtime,
        },
        sent: [0; SERVERS],
        failures: 0,
        paired: Vec::new(),
    };
    let rows = bench.every_load()?;
    let paired = std::mem::take(&mut bench.paired);
    failures += bench.failures;
    failures += fleet.check_counts(sent_before, bench.sent[0])?;
    let handler = fleet
        .webhook
        .metric("linkerd_multus_admission_request_duration_seconds_sum")?
        / fleet
            .webhook
            .metric("linkerd_multus_admission_request_duration_seconds_count")?;
    let memory = fleet.pids().map(Memory::of);
    failures += fleet.check_running();
    if failures > 0 {
        eprintln!("{}", fleet.webhook.log_tail(20));
    }

    print_table(
        plan,
        &rows,
        &paired,
        &memory,
        handler,
        &bodies,
        fleet.pids(),
    );
    eprintln!(
        "webhook bench: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    drop(runtime);
    drop(fleet);
    Ok(failures)
}

/// The fake API server and the three servers under load.
struct Fleet {
    webhook: Server,
    baseline: Server,
    reader: Server,
    /// Dropped after the servers, which watch it.
    _api: FakeApiServer,
    ca: Ca,
    classes: Vec<Class>,
}

impl Fleet {
    /// Starts the API server with [`NAMESPACES`] namespaces and their NADs,
    /// then the servers, and waits for the webhook to be ready.
    fn start(dir: &Path) -> Result<Fleet> {
        let api = FakeApiServer::start();
        let classes: Vec<Class> = (0..NAMESPACES).map(Class::of).collect();
        for (i, class) in classes.iter().enumerate() {
            api.put(&namespace_name(i), class.annotations());
            // The NAD the webhook checks for before it attaches a pod, as rendering gives it.
            api.put_nad(&namespace_name(i), "linkerd-cni", &[]);
        }
        let ca = Ca::new("linkerd-multus bench CA");
        let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir);
        let kubeconfig = api.kubeconfig(dir);
        let extra: Vec<String> = std::env::var("BENCH_WEBHOOK_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let mut webhook = Server::webhook(dir, &kubeconfig, &cert, &key, &extra)?;
        let baseline = Server::constant(dir, &cert, &key, "baseline", &[])?;
        let reader = Server::constant(dir, &cert, &key, "reader", &[(READER_ENV, "1")])?;
        webhook.wait_ready(Duration::from_secs(30))?;
        Ok(Fleet {
            webhook,
            baseline,
            reader,
            _api: api,
            ca,
            classes,
        })
    }

    fn pids(&self) -> [u32; SERVERS] {
        [&self.webhook, &self.baseline, &self.reader].map(|s| s.child.id())
    }

    fn targets(&self) -> [Target; SERVERS] {
        let target = |name, server: &Server, check_patch| Target {
            name,
            addr: server.addr.clone(),
            pid: server.child.id(),
            check_patch,
        };
        [
            target("webhook", &self.webhook, true),
            target("baseline", &self.baseline, false),
            target("reader", &self.reader, false),
        ]
    }

    /// Failures: every request reached the admission code and was read as a
    /// review (`sent` since the count was `before`), and none was invalid,
    /// warned of or denied.
    fn check_counts(&self, before: f64, sent: u64) -> Result<usize> {
        let mut failures = 0;
        let answered = self.webhook.admission_total()? - before;
        if answered != sent as f64 {
            eprintln!(
                "  FAIL the webhook counted {answered} reviews, the load generator sent {sent}"
            );
            failures += 1;
        }
        for outcome in ["invalid", "warned", "denied"] {
            let n = self.webhook.metric(&format!(
                "linkerd_multus_admission_requests_total{{outcome=\"{outcome}\"}}"
            ))?;
            if n != 0.0 {
                eprintln!("  FAIL the webhook counted {n} {outcome} reviews");
                failures += 1;
            }
        }
        Ok(failures)
    }

    /// Failures: a server exited during the run.
    fn check_running(&mut self) -> usize {
        let mut failures = 0;
        for (server, name) in [
            (&mut self.webhook, "webhook"),
            (&mut self.baseline, "baseline"),
            (&mut self.reader, "reader"),
        ] {
            if !server.running() {
                eprintln!("  FAIL the {name} exited during the run");
                failures += 1;
            }
        }
        failures
    }
}

/// The measurements of one run: each load on each server, in rounds.
struct Bench<'a> {
    plan: &'a Plan,
    targets: &'a [Target; SERVERS],
    load: Load<'a>,
    /// Requests sent to each server.
    sent: [u64; SERVERS],
    failures: usize,
    /// At saturation, each round's webhook / reader throughput: the two measured back to
    /// back, so a drift of the machine's speed between rounds cancels out.
    paired: Vec<f64>,
}

impl Bench<'_> {
    /// The warm-up, each fixed rate and the saturation: the figures of each.
    fn every_load(&mut self) -> Result<Vec<(Shape, [Figures; SERVERS])>> {
        let plan = self.plan;
        eprintln!(
            "warm-up: {:.1} s closed loop on each ...",
            plan.warmup.as_secs_f64()
        );
        self.measure(Shape::Warmup(plan.saturation_connections), plan.warmup)?;
        let mut rows = Vec::new();
        for &rate in &plan.rates {
            eprintln!(
                "{rate} req/s on {} connections, {} x {:.0} s each ...",
                plan.rate_connections,
                plan.rounds,
                plan.duration.as_secs_f64()
            );
            let shape = Shape::Rate(rate, plan.rate_connections);
            rows.push((shape, self.measure(shape, plan.duration)?));
        }
        let secs = plan.saturation_round();
        eprintln!(
            "saturation on {} connections, {} x {:.1} s each ...",
            plan.saturation_connections,
            plan.saturation_rounds,
            secs.as_secs_f64()
        );
        let shape = Shape::Closed(plan.saturation_connections);
        rows.push((shape, self.measure(shape, secs)?));
        Ok(rows)
    }

    /// One load on each server, in rounds, forwards then backwards so each
    /// server is measured early and late, the webhook and the reader back to back
    /// (the baseline first or last): the medians.
    fn measure(&mut self, shape: Shape, secs: Duration) -> Result<[Figures; SERVERS]> {
        let mut per: [Vec<Run>; SERVERS] = Default::default();
        let rounds = match shape {
            Shape::Warmup(_) => 1,
            Shape::Rate(..) => self.plan.rounds,
            Shape::Closed(_) => self.plan.saturation_rounds,
        };
        for r in 0..rounds {
            let order = if r % 2 == 0 {
                [WEBHOOK, READER, BASELINE]
            } else {
                [BASELINE, READER, WEBHOOK]
            };
            for i in order {
                let result = self.load.run(&self.targets[i], shape, secs)?;
                self.sent[i] += result.tally.answered + result.tally.wrong;
                if let Some(problem) = &result.tally.first_problem {
                    eprintln!(
                        "  FAIL {} under {}: {} errors, {} wrong answers; first: {problem}",
                        self.targets[i].name,
                        shape.label(),
                        result.tally.errors,
                        result.tally.wrong
                    );
                    self.failures += 1;
                }
                per[i].push(result);
            }
            if matches!(shape, Shape::Closed(_)) {
                let rate = |i: usize| per[i].last().map_or(0.0, |r| r.figures.rate);
                self.paired.push(rate(WEBHOOK) / rate(READER));
            }
        }
        Ok(per.map(|runs| Figures::median(&runs)))
    }
}
