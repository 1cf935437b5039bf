//! Can a pod keep the API server from reaching the webhook by stalling
//! requests, or by asking about namespaces that do not exist?
//!
//! `cargo bench --bench stalled` starts the release `linkerd-multus webhook`
//! with its defaults against the stand-in API server
//! (benches/common/fake_apiserver.rs, 1,000 namespaces, each attached and
//! with its NAD) and attacks it for 25 s, once per variant, each on a webhook
//! of its own (benches/common/stalling.rs):
//!
//! * **HTTP/1.1**: 300 connections, each sending a request head announcing a
//!   1-byte body and never the body; one the server closes is opened again at
//!   once. From another pod's address (127.0.0.2), then from the API server's
//!   own (127.0.0.1: host-network pods on control-plane nodes share it);
//! * **HTTP/2**: the same 300 connections over HTTP/2, each opening as many
//!   streams as the server allows, headers without a DATA frame; from each
//!   address too;
//! * **forged reviews**: 200 keep-alive connections from 5 addresses
//!   (127.0.0.3 to 127.0.0.7), each sending AdmissionReviews for namespaces
//!   that do not exist, each again as soon as it is answered.
//!
//! Meanwhile, from the API server's address (127.0.0.1), a keep-alive
//! connection sends a review every 100 ms, and a fresh connection sends one
//! every 100 ms; each answer is checked (the uid echoed, allowed, the attach
//! patch), and a failed connection is opened again and the review sent again
//! within its time, as the API server retries. It prints, per variant and
//! client, the share of reviews answered right within 2 s of their scheduled
//! time and their p50 and p99, what the attacker's connections got, the
//! webhook's counters and its peak RSS (VmHWM). Targets (printed, judged in a
//! full run): at least 99 % of each client's reviews within 2 s, peak RSS
//! under 64 MiB.
//!
//! `BENCH_WEBHOOK_BIN=PATH[:PATH...]` runs each variant against each of those
//! builds, then this one, in one run (the figures before a change beside those
//! after it, variant by variant; the other builds are measured, not judged).
//! `BENCH_QUICK=1` (or `-- --quick`) is a short form: 4 s
//! per variant, 100 attacking connections; it fails only on a wrong answer
//! or a peak RSS over 64 MiB (the Deployment's memory limit).

#[path = "common/attack.rs"]
mod attack;
#[path = "common/baseline.rs"]
#[allow(dead_code)]
mod baseline;
mod common;
#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "../tests/common/https.rs"]
mod https;
#[path = "../tests/common/ports.rs"]
mod ports;
#[path = "../tests/common/process.rs"]
mod process;
#[path = "common/servers.rs"]
mod servers;
#[path = "common/stalling.rs"]
mod stalling;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use serde_json::Value;

use attack::Outcomes;
use fake_apiserver::FakeApiServer;
use https::{Ca, connector};
use servers::Server;
use stalling::{ApiServer, Timed};

const FIXTURE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
const ATTACHED: [(&str, &str); 2] = [
    ("linkerd.io/multus", "enabled"),
    ("linkerd.io/inject", "enabled"),
];
/// The Deployment's memory limit: over it the kernel kills the webhook.
const LIMIT_MIB: f64 = 64.0;
/// The share of reviews to be answered within [`WITHIN`], %.
const TARGET_PERCENT: f64 = 99.0;
const WITHIN: Duration = Duration::from_secs(2);
const NAMESPACES: usize = 1_000;
/// How often each of the API server's clients sends a review.
const EVERY: Duration = Duration::from_millis(100);

/// The attack's shape.
struct Plan {
    quick: bool,
    /// Connections stalling their requests.
    attackers: usize,
    /// Connections sending forged reviews, across [`FORGERS`].
    forgers: usize,
    attack: Duration,
}

/// The API server's address, where its reviews come from.
const API_SERVER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// The addresses the forged reviews come from.
const FORGERS: [IpAddr; 5] = [
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 5)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 6)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
];

#[derive(Clone, Copy)]
enum Variant {
    /// Request heads without their bodies, from this address.
    Http1(IpAddr),
    /// HTTP/2 streams without DATA, from this address.
    Http2(IpAddr),
    /// Reviews for namespaces that do not exist, from [`FORGERS`].
    Forged,
}

impl Variant {
    const ALL: [Variant; 5] = [
        Variant::Http1(attack::ATTACKER),
        Variant::Http2(attack::ATTACKER),
        Variant::Http1(API_SERVER),
        Variant::Http2(API_SERVER),
        Variant::Forged,
    ];

    fn name(self) -> String {
        let from = |source: IpAddr| match source == API_SERVER {
            true => format!("from the API server's address ({source})"),
            false => format!("from another pod ({source})"),
        };
        match self {
            Variant::Http1(source) => format!("HTTP/1.1: request heads, no body, {}", from(source)),
            Variant::Http2(source) => format!("HTTP/2: streams opened, no DATA, {}", from(source)),
            Variant::Forged => format!(
                "forged reviews for namespaces that do not exist, from {} addresses ({} to {})",
                FORGERS.len(),
                FORGERS[0],
                FORGERS[FORGERS.len() - 1]
            ),
        }
    }
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let plan = if quick {
        Plan {
            quick,
            attackers: 100,
            forgers: 100,
            attack: Duration::from_secs(4),
        }
    } else {
        Plan {
            quick,
            attackers: 300,
            forgers: 200,
            attack: Duration::from_secs(25),
        }
    };
    match run(&plan) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("stalled bench: {n} check(s) failed, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("stalled bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(plan: &Plan) -> Result<usize> {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_linkerd-multus"));
    let others: Vec<PathBuf> = std::env::var_os("BENCH_WEBHOOK_BIN")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    println!(
        "attack: {:.0} s per variant, {} stalling connections or {} forging ones, reopened at once; a review every {} ms on a keep-alive connection and on a fresh one from {API_SERVER}",
        plan.attack.as_secs_f64(),
        plan.attackers,
        plan.forgers,
        EVERY.as_millis()
    );
    let api = FakeApiServer::start();
    for i in 0..NAMESPACES {
        api.put(&namespace(i), &ATTACHED);
        api.put_nad(&namespace(i), "linkerd-cni", &[]);
    }
    let mut failures = 0;
    for variant in Variant::ALL {
        for bin in &others {
            attack_once(plan, bin, &api, variant, false)?;
        }
        failures += attack_once(plan, &this, &api, variant, true)?;
    }
    Ok(failures)
}

fn namespace(i: usize) -> String {
    format!("team-{i:05}")
}

/// One variant against a webhook of its own, of the build `bin`; only a `judged` build's
/// problems count as failures.
fn attack_once(
    plan: &Plan,
    bin: &Path,
    api: &FakeApiServer,
    variant: Variant,
    judged: bool,
) -> Result<usize> {
    let dir = tempfile::tempdir()?;
    let ca = Ca::new("stalled bench CA");
    let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir.path());
    let kubeconfig = api.kubeconfig(dir.path());
    let mut server = Server::webhook_binary(bin, dir.path(), &kubeconfig, &cert, &key, &[])?;
    server.wait_ready(Duration::from_secs(60))?;
    let fixture: Value = serde_json::from_str(FIXTURE)?;
    let reviews = (0..NAMESPACES)
        .map(|i| {
            let uid = format!("{i:08x}-5a11-410b-9f67-c7462560ec49");
            (attack::review(&fixture, &namespace(i), &uid, None), uid)
        })
        .collect();
    let api_server = ApiServer {
        addr: server.addr.clone(),
        tls: connector(&ca.pem, None, &[b"http/1.1"]),
        reviews: Arc::new(reviews),
        patch: Arc::new(serde_json::from_str(baseline::ATTACH_PATCH)?),
        within: WITHIN,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let warm =
        runtime.block_on(api_server.keep_alive(EVERY, Instant::now() + Duration::from_millis(500)));
    if warm.in_time != warm.sent {
        bail!(
            "the webhook does not answer right before the attack: {:?}\n{}",
            warm.first_problem,
            server.log_tail(20)
        );
    }
    let attacker_tls = match variant {
        Variant::Http2(_) => connector(&ca.pem, None, &[b"h2"]),
        _ => connector(&ca.pem, None, &[b"http/1.1"]),
    };
    let forged: Arc<Vec<Bytes>> = Arc::new(
        (0..NAMESPACES)
            .map(|i| {
                let uid = format!("{i:08x}-f0a6-410b-9f67-c7462560ec49");
                attack::review(&fixture, &format!("made-up-{i:05}"), &uid, None)
            })
            .collect(),
    );
    let outcomes = Arc::new(Outcomes::default());
    let (keep_alive, fresh) = runtime.block_on(async {
        let until = Instant::now() + plan.attack;
        let count = match variant {
            Variant::Forged => plan.forgers,
            _ => plan.attackers,
        };
        let attackers: Vec<_> = (0..count)
            .map(|i| {
                let (addr, tls, out) =
                    (server.addr.clone(), attacker_tls.clone(), outcomes.clone());
                match variant {
                    Variant::Http1(source) => {
                        tokio::spawn(stalling::stalled_http1(source, addr, tls, until, out))
                    }
                    Variant::Http2(source) => {
                        tokio::spawn(stalling::stalled_http2(source, addr, tls, until, out))
                    }
                    Variant::Forged => tokio::spawn(stalling::forged(
                        FORGERS[i % FORGERS.len()],
                        addr,
                        tls,
                        forged.clone(),
                        until,
                        out,
                    )),
                }
            })
            .collect();
        // The attack takes hold before the API server's reviews start.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reviews = tokio::join!(
            api_server.keep_alive(EVERY, until),
            api_server.fresh(EVERY, until)
        );
        for attacker in attackers {
            attacker.abort();
        }
        reviews
    });
    let hwm = common::memory_mib(server.child.id()).1;
    println!("\n{} ({}):", variant.name(), bin.display());
    for (client, timed) in [
        ("keep-alive connection", &keep_alive),
        ("fresh connections", &fresh),
    ] {
        print_timed(client, timed);
    }
    println!("  the attacker's connections: {}", outcomes.show());
    println!("  the webhook's counters: {}", counters(&server));
    println!("  peak RSS (VmHWM): {hwm:.1} MiB");
    let met = |ok: bool| match (plan.quick || !judged, ok) {
        (true, _) => "not judged (a quick run, or another build)",
        (false, true) => "met",
        (false, false) => "NOT met",
    };
    println!(
        "  target: {TARGET_PERCENT:.0} % within {} s: keep-alive {}, fresh {}; peak RSS < {LIMIT_MIB:.0} MiB: {}",
        WITHIN.as_secs(),
        met(keep_alive.percent() >= TARGET_PERCENT),
        met(fresh.percent() >= TARGET_PERCENT),
        met(hwm < LIMIT_MIB),
    );
    let mut failures = 0;
    let mut fail = |what: String| {
        if judged {
            eprintln!("  FAIL {what}");
            failures += 1;
        } else {
            println!("  (another build, not judged) {what}");
        }
    };
    if !server.running() {
        fail(format!(
            "the webhook exited during the attack\n{}",
            server.log_tail(20)
        ));
    }
    if keep_alive.wrong + fresh.wrong > 0 {
        fail("reviews answered wrong".into());
    }
    if hwm > LIMIT_MIB {
        fail(format!(
            "peak RSS {hwm:.1} MiB is over the {LIMIT_MIB:.0} MiB limit"
        ));
    }
    Ok(failures)
}

fn print_timed(client: &str, timed: &Timed) {
    let ms = |q: f64| timed.latency.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "  {client}: {} of {} answered right within {} s ({:.1} %), p50 {:.1} ms, p99 {:.1} ms; {} wrong{}",
        timed.in_time,
        timed.sent,
        WITHIN.as_secs(),
        timed.percent(),
        ms(0.5),
        ms(0.99),
        timed.wrong,
        timed
            .first_problem
            .as_ref()
            .map_or(String::new(), |p| format!(" (first problem: {p})"))
    );
}

/// The webhook's evictions and refusals.
fn counters(server: &Server) -> String {
    let Some((_, text)) = server.ops_get("/metrics") else {
        return "no /metrics".into();
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            [
                "linkerd_multus_http_evictions_total{",
                "linkerd_multus_http_refusals_total{",
            ]
            .iter()
            .any(|w| l.starts_with(w))
                && !l.ends_with(" 0")
        })
        .map(|l| l.trim_start_matches("linkerd_multus_http_"))
        .collect();
    if lines.is_empty() {
        "none".into()
    } else {
        lines.join(", ")
    }
}
