//! Can one tenant, with rights in its own namespace only, take pod admission away from the
//! cluster with what its objects ask the rules to do?
//!
//! `cargo bench --bench tenant` starts the release `linkerd-multus webhook` with its defaults
//! against the stand-in API server (benches/common/fake_apiserver.rs: 1,000 namespaces, each
//! attached and with its NAD) and the tenant's namespace, attached, holding the NAD `net`:
//! a macvlan network whose static IPAM lists 5,000 `/32` routes. For 20 s:
//!
//! * **the crafted reviews**: two at once, each of a pod opted in to the secondary-network
//!   rule (`multus.linkerd.io/skip-secondary-subnets: enabled`) that selects `net` 20,000
//!   times (an 80 KB annotation, well under Kubernetes' 256 KiB), each sent again as soon as
//!   it is answered; they come from the API server's address, as a tenant's pods do;
//! * **the tenant's edits**: `net` changed every second (another route), each a write to the
//!   webhook's NAD cache;
//! * **the API server's ordinary reviews**: on a keep-alive connection and on a fresh one each,
//!   a review every 100 ms each, answered right within 2 s of its time to count (the uid
//!   echoed, the attach patch);
//! * **the kubelet's probe**: `GET /readyz` every second, with its 1 s timeout.
//!
//! It prints, for each build, the share of ordinary reviews answered right within 2 s, with
//! their p50 and p99, how many probes `/readyz` answered, and the crafted reviews answered
//! (their p50, p99 and slowest, and whether each answer is the `--on-error` one naming the
//! cap it hit) and those still unanswered 1 s after the attack ends, with how long they
//! waited. Targets, judged in a full run of this build: at least 99 % of each client's
//! ordinary reviews within 2 s, every probe answered, and the crafted reviews answered within
//! 1 s (at the 99th percentile: thousands come back to back; none left unanswered).
//!
//! `BENCH_WEBHOOK_BIN=PATH[:PATH...]` runs the same attack against each of those builds in
//! turn, then this one, in one run (the figures before a change beside those after it; the
//! other builds are measured, not judged). `BENCH_QUICK=1` (or `-- --quick`) is a short form:
//! 3 s, 100 namespaces, a crafted pod of 2,000 selections; it fails only on a wrong answer.

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

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use base64::Engine as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

use fake_apiserver::FakeApiServer;
use https::{Ca, Connection, connector};
use servers::Server;
use stalling::{ApiServer, Timed};

const FIXTURE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
const ATTACHED: [(&str, &str); 2] = [
    ("linkerd.io/multus", "enabled"),
    ("linkerd.io/inject", "enabled"),
];
/// The tenant's namespace, and its NAD.
const TENANT: &str = "tenant";
const WIDE: &str = "net";
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const OPT_IN: &str = "multus.linkerd.io/skip-secondary-subnets";
/// The routes of the tenant's NAD.
const ROUTES: usize = 5_000;
/// The share of ordinary reviews to be answered within [`WITHIN`], %.
const TARGET_PERCENT: f64 = 99.0;
const WITHIN: Duration = Duration::from_secs(2);
/// How soon a crafted review must be answered.
const CRAFTED_WITHIN: Duration = Duration::from_secs(1);
/// How often each of the API server's clients sends an ordinary review.
const EVERY: Duration = Duration::from_millis(100);
/// The kubelet's probe: its period and timeout.
const PROBE_EVERY: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Crafted reviews in flight at once.
const CRAFTED_AT_ONCE: usize = 2;

/// The attack's shape.
struct Plan {
    quick: bool,
    attack: Duration,
    namespaces: usize,
    selections: usize,
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let plan = if quick {
        Plan {
            quick,
            attack: Duration::from_secs(3),
            namespaces: 100,
            selections: 2_000,
        }
    } else {
        Plan {
            quick,
            attack: Duration::from_secs(20),
            namespaces: 1_000,
            selections: 20_000,
        }
    };
    match run(&plan) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("tenant bench: {n} check(s) failed, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("tenant bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(plan: &Plan) -> Result<usize> {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_linkerd-multus"));
    let others: Vec<PathBuf> = std::env::var_os("BENCH_WEBHOOK_BIN")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let api = FakeApiServer::start();
    for i in 0..plan.namespaces {
        api.put(&namespace(i), &ATTACHED);
        api.put_nad(&namespace(i), "linkerd-cni", &[]);
    }
    api.put(TENANT, &ATTACHED);
    api.put_nad(TENANT, "linkerd-cni", &[]);
    api.put_nad_config(TENANT, WIDE, &[], &wide(0));
    println!(
        "the tenant: a NAD of {ROUTES} /32 routes; {CRAFTED_AT_ONCE} reviews at once of a pod selecting it {} times ({} KB of annotation), each sent again when answered; the NAD edited every second",
        plan.selections,
        crafted_networks(plan.selections).len() / 1000
    );
    println!(
        "meanwhile, {:.0} s: an ordinary review every {} ms on a keep-alive connection and on a fresh one, from the API server's address; GET /readyz every {} s (timeout {} s)",
        plan.attack.as_secs_f64(),
        EVERY.as_millis(),
        PROBE_EVERY.as_secs(),
        PROBE_TIMEOUT.as_secs()
    );
    let mut failures = 0;
    for bin in &others {
        failures += attack_once(plan, bin, &api, false)?;
    }
    failures += attack_once(plan, &this, &api, true)?;
    Ok(failures)
}

fn namespace(i: usize) -> String {
    format!("team-{i:05}")
}

/// The tenant's NAD config: a static address and [`ROUTES`] `/32` routes, the last
/// differing with `edit`.
fn wide(edit: usize) -> String {
    let routes: Vec<Value> = (0..ROUTES)
        .map(|i| {
            let i = if i + 1 == ROUTES { i + edit } else { i };
            json!({"dst": format!("192.168.{}.{}/32", i / 256 % 256, i % 256)})
        })
        .collect();
    json!({
        "cniVersion": "0.3.1",
        "type": "macvlan",
        "master": "eth1",
        "ipam": {
            "type": "static",
            "addresses": [{"address": "10.200.0.5/24"}],
            "routes": routes,
        }
    })
    .to_string()
}

fn crafted_networks(selections: usize) -> String {
    vec![WIDE; selections].join(",")
}

/// The captured review in `namespace` with `uid`, its pod's annotations `annotations`.
fn review(fixture: &Value, namespace: &str, uid: &str, annotations: &[(&str, &str)]) -> Bytes {
    let mut review = fixture.clone();
    review["request"]["uid"] = json!(uid);
    review["request"]["namespace"] = json!(namespace);
    let metadata = &mut review["request"]["object"]["metadata"];
    metadata["namespace"] = json!(namespace);
    for (key, value) in annotations {
        metadata["annotations"][*key] = json!(value);
    }
    Bytes::from(review.to_string())
}

/// What the crafted reviews got.
struct Crafted {
    /// Answer latencies, µs.
    latency: Histogram<u64>,
    /// Answered with the `--on-error` answer naming a cap or the budget.
    refused: u64,
    /// Answered otherwise: how, the first time.
    other: u64,
    first_other: Option<String>,
    /// Still unanswered at the end, and for how long.
    unanswered: Vec<Duration>,
}

impl Crafted {
    fn answered(&self) -> u64 {
        self.latency.len()
    }
}

/// One build under the attack.
fn attack_once(plan: &Plan, bin: &Path, api: &FakeApiServer, judged: bool) -> Result<usize> {
    let dir = tempfile::tempdir()?;
    let ca = Ca::new("tenant bench CA");
    let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir.path());
    let kubeconfig = api.kubeconfig(dir.path());
    let mut server = Server::webhook_binary(bin, dir.path(), &kubeconfig, &cert, &key, &[])?;
    server.wait_ready(Duration::from_secs(60))?;
    let fixture: Value = serde_json::from_str(FIXTURE)?;
    let reviews = (0..plan.namespaces)
        .map(|i| {
            let uid = format!("{i:08x}-5a11-410b-9f67-c7462560ec49");
            (review(&fixture, &namespace(i), &uid, &[]), uid)
        })
        .collect();
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    let api_server = ApiServer {
        addr: server.addr.clone(),
        tls: tls.clone(),
        reviews: Arc::new(reviews),
        patch: Arc::new(serde_json::from_str(baseline::ATTACH_PATCH)?),
        within: WITHIN,
    };
    let crafted = review(
        &fixture,
        TENANT,
        "c0ffee00-5a11-410b-9f67-c7462560ec49",
        &[
            (NETWORKS, &crafted_networks(plan.selections)),
            (OPT_IN, "enabled"),
        ],
    );
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
    let ops = server.ops.clone().expect("the webhook's ops port");
    let (keep_alive, fresh, probes, crafted, edits) = runtime.block_on(async {
        let until = Instant::now() + plan.attack;
        let attackers: Vec<_> = (0..CRAFTED_AT_ONCE)
            .map(|_| {
                tokio::spawn(send_crafted(
                    server.addr.clone(),
                    tls.clone(),
                    crafted.clone(),
                    until,
                ))
            })
            .collect();
        // The crafted reviews take hold before the others start.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (keep_alive, fresh, probes, edits) = tokio::join!(
            api_server.keep_alive(EVERY, until),
            api_server.fresh(EVERY, until),
            probe(&ops, until),
            edit(api, until),
        );
        let mut all = Crafted {
            latency: common::histogram(),
            refused: 0,
            other: 0,
            first_other: None,
            unanswered: Vec::new(),
        };
        for attacker in attackers {
            let one = attacker.await.expect("a crafted review's task");
            all.latency.add(&one.latency).expect("same bounds");
            all.refused += one.refused;
            all.other += one.other;
            all.first_other = all.first_other.take().or(one.first_other);
            all.unanswered.extend(one.unanswered);
        }
        (keep_alive, fresh, probes, all, edits)
    });
    println!("\n{}:", bin.display());
    for (client, timed) in [
        ("ordinary reviews, keep-alive connection", &keep_alive),
        ("ordinary reviews, fresh connections", &fresh),
    ] {
        print_timed(client, timed);
    }
    println!(
        "  /readyz: {} of {} probes answered 200 within {} s",
        probes.0,
        probes.1,
        PROBE_TIMEOUT.as_secs()
    );
    print_crafted(&crafted);
    println!("  the tenant's NAD edits: {edits}");
    // Judged at the 99th percentile: the crafted reviews come back to back, thousands of them,
    // and the slowest is printed beside it.
    let crafted_in_time = crafted.unanswered.is_empty()
        && crafted.answered() > 0
        && crafted.latency.value_at_quantile(0.99) <= CRAFTED_WITHIN.as_micros() as u64;
    let met = |ok: bool| match (plan.quick || !judged, ok) {
        (true, true) => "met (not judged)",
        (true, false) => "not met (not judged)",
        (false, true) => "met",
        (false, false) => "NOT met",
    };
    println!(
        "  targets: {TARGET_PERCENT:.0} % within {} s: keep-alive {}, fresh {}; /readyz answering: {}; crafted reviews answered within {} s (p99, none left unanswered): {}",
        WITHIN.as_secs(),
        met(keep_alive.percent() >= TARGET_PERCENT),
        met(fresh.percent() >= TARGET_PERCENT),
        met(probes.0 == probes.1),
        CRAFTED_WITHIN.as_secs(),
        met(crafted_in_time),
    );
    let mut failures = 0;
    let mut fail = |what: String| {
        eprintln!("  FAIL {what}");
        failures += 1;
    };
    if !server.running() {
        fail(format!(
            "the webhook exited during the attack\n{}",
            server.log_tail(20)
        ));
    }
    if keep_alive.wrong + fresh.wrong > 0 {
        fail("ordinary reviews answered wrong".into());
    }
    if judged && crafted.other > 0 {
        fail(format!(
            "crafted reviews answered without naming a cap: {:?}",
            crafted.first_other
        ));
    }
    if judged && !plan.quick {
        let ok = keep_alive.percent() >= TARGET_PERCENT
            && fresh.percent() >= TARGET_PERCENT
            && probes.0 == probes.1
            && crafted_in_time;
        if !ok {
            fail("a target is not met".into());
        }
    }
    Ok(failures)
}

/// Crafted reviews, one after another on keep-alive connections, until `until`; the one in
/// flight then is counted unanswered if it is not answered within [`CRAFTED_WITHIN`] more.
async fn send_crafted(addr: String, tls: TlsConnector, body: Bytes, until: Instant) -> Crafted {
    let mut out = Crafted {
        latency: common::histogram(),
        refused: 0,
        other: 0,
        first_other: None,
        unanswered: Vec::new(),
    };
    // The review in flight when the attack ends has a second more to be answered.
    let deadline = tokio::time::Instant::from(until + CRAFTED_WITHIN);
    let mut conn: Option<Connection> = None;
    while Instant::now() < until {
        let sent = Instant::now();
        if conn.is_none() {
            match tokio::time::timeout_at(deadline, Connection::open(&addr, &tls)).await {
                Ok(Ok(open)) => conn = Some(open),
                Ok(Err(_)) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Err(_) => break,
            }
        }
        let open = conn.as_mut().expect("opened above");
        match tokio::time::timeout_at(deadline, open.post("/mutate", body.clone())).await {
            Ok(Ok((status, answer))) => {
                out.latency
                    .saturating_record(sent.elapsed().as_micros() as u64);
                match judge_crafted(status, &answer) {
                    Ok(()) => out.refused += 1,
                    Err(e) => {
                        out.other += 1;
                        out.first_other.get_or_insert(e);
                    }
                }
            }
            Ok(Err(_)) => conn = None,
            Err(_) => {
                out.unanswered.push(sent.elapsed());
                break;
            }
        }
    }
    out
}

/// Whether a crafted review got the `--on-error` answer (allowed unchanged) naming a cap or
/// the work budget.
fn judge_crafted(status: u16, body: &[u8]) -> Result<(), String> {
    let show = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 200 {
        return Err(format!("status {status}: {}", show()));
    }
    let review: Value = serde_json::from_slice(body).map_err(|e| format!("{e}: {}", show()))?;
    let response = &review["response"];
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    let named = warning.contains(" cap)") || warning.contains("(the work budget)");
    if response["allowed"] != true || !response["patch"].is_null() || !named {
        let patch = response["patch"]
            .as_str()
            .and_then(|p| base64::engine::general_purpose::STANDARD.decode(p).ok())
            .map(|p| {
                String::from_utf8_lossy(&p)
                    .chars()
                    .take(200)
                    .collect::<String>()
            });
        return Err(format!("{warning:?}, patch {patch:?}"));
    }
    Ok(())
}

/// `GET /readyz` on `ops` every [`PROBE_EVERY`] until `until`, each with [`PROBE_TIMEOUT`]:
/// (answered 200 in time, probes).
async fn probe(ops: &str, until: Instant) -> (u64, u64) {
    let mut ticks = tokio::time::interval(PROBE_EVERY);
    let (mut ok, mut sent) = (0, 0);
    while Instant::now() < until {
        ticks.tick().await;
        sent += 1;
        if tokio::time::timeout(PROBE_TIMEOUT, readyz(ops))
            .await
            .is_ok_and(|status| status == Some(200))
        {
            ok += 1;
        }
    }
    (ok, sent)
}

/// The status of one `GET /readyz`.
async fn readyz(ops: &str) -> Option<u16> {
    let mut tcp = tokio::net::TcpStream::connect(ops).await.ok()?;
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut text = Vec::new();
    tcp.read_to_end(&mut text).await.ok()?;
    String::from_utf8_lossy(&text)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// The tenant edits its NAD every second until `until`: how many edits.
async fn edit(api: &FakeApiServer, until: Instant) -> usize {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    let mut edits = 0;
    while Instant::now() < until {
        ticks.tick().await;
        edits += 1;
        api.put_nad_config(TENANT, WIDE, &[], &wide(edits));
    }
    edits
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

fn print_crafted(crafted: &Crafted) {
    let ms = |us: u64| us as f64 / 1000.0;
    let answered = if crafted.answered() == 0 {
        "none answered".to_string()
    } else {
        format!(
            "{} answered, p50 {:.1} ms, p99 {:.1} ms, slowest {:.1} ms; {} with the --on-error answer naming a cap or the budget, {} otherwise{}",
            crafted.answered(),
            ms(crafted.latency.value_at_quantile(0.5)),
            ms(crafted.latency.value_at_quantile(0.99)),
            ms(crafted.latency.max()),
            crafted.refused,
            crafted.other,
            crafted
                .first_other
                .as_ref()
                .map_or(String::new(), |o| format!(" (first: {o})"))
        )
    };
    let unanswered = match crafted.unanswered.iter().max() {
        None => "none unanswered".to_string(),
        Some(longest) => format!(
            "{} unanswered at the end, the longest after {:.1} s",
            crafted.unanswered.len(),
            longest.as_secs_f64()
        ),
    };
    println!("  crafted reviews: {answered}; {unanswered}");
}
