//! Benchmark of what the admission webhook adds to pod admission at a real
//! kube-apiserver.
//!
//! `cargo bench --bench admission` starts etcd and kube-apiserver with the
//! tests' harness (tests/common/kube_apiserver.rs: the binaries come from
//! `KUBEBUILDER_ASSETS`; `eval "$(scripts/kube-assets.sh)"` makes a folder of
//! them) and measures server-side dry-run pod creates in three configurations:
//!
//! - no webhook: a namespace that no MutatingWebhookConfiguration selects;
//! - the baseline: this bench re-executed as the constant-answer server of
//!   benches/webhook.rs (benches/common/baseline.rs: the webhook's own TLS,
//!   HTTP stack and limits, no parsing, no decision), copying each request's
//!   uid into its answer as the API server requires;
//! - the webhook: the release `linkerd-multus webhook`, with the admin's
//!   kubeconfig, its namespace annotated so it really patches the pod.
//!
//! Both servers are registered alike: a MutatingWebhookConfiguration with
//! `clientConfig.url` `https://127.0.0.1:PORT/mutate`, the control plane's CA
//! as `caBundle`, pods CREATE, `failurePolicy: Fail`, and a namespace
//! selector matching only its own namespace.
//!
//! The load is the pod of the captured `pod-create` review, POSTed as JSON to
//! `/api/v1/namespaces/NS/pods?dryRun=All` over TLS and HTTP/1.1 keep-alive
//! with the admin's client certificate: a closed loop on 8 connections, each
//! sending its next request when the last is answered. After a 2 s warm-up
//! of each, the configurations are measured in 5 alternating rounds (in
//! turn, forwards then backwards) of `BENCH_SECONDS` each, 5 s by default.
//! It prints the medians over the rounds of p50, p99 and throughput, the CPU
//! per request of the API server and of the webhook's process
//! (/proc/PID/stat), the ratios webhook / baseline, and the target: the
//! webhook adds no more than 5% to the baseline's p50 and p99 at the API
//! server. The API server saturates the CPUs, so on a machine shared with
//! other work the figures move by about as much as the target allows.
//!
//! Every answer is checked: 201, and the returned pod's
//! `k8s.v1.cni.cncf.io/networks` annotation holds `linkerd-cni` exactly when
//! a webhook is registered for its namespace; the webhook must have counted
//! one review for each pod created in its namespace. Any wrong answer fails
//! the run. `cargo bench --bench admission -- --quick` (or `BENCH_QUICK=1`)
//! is a smoke run of a few seconds: one short round of each, checked, never
//! judged on the target. `BENCH_WEBHOOK_ARGS="--log-level warn"` passes extra
//! flags to the webhook.

#[path = "common/baseline.rs"]
mod baseline;
mod common;
#[path = "../tests/common/https.rs"]
mod https;
#[path = "../tests/common/kube_apiserver.rs"]
mod kube_apiserver;
#[path = "common/servers.rs"]
mod servers;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;

use baseline::{BASELINE_ENV, ECHO_UID_ENV};
use common::{Tally, cpu_seconds, median};
use https::{Connection, connector};
use kube_apiserver::ControlPlane;
use servers::Server;

/// The captured review whose pod the load creates.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/fixtures/admission/pod-create.json"
);

/// What makes the webhook attach Linkerd-CNI to a namespace's pods.
const ENABLED: &[(&str, &str)] = &[
    ("linkerd.io/multus", "enabled"),
    ("linkerd.io/inject", "enabled"),
];
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const OWNED: &str = "multus.linkerd.io/owned";

/// The target: the webhook's p50 and p99 at most this much of the baseline's.
const TARGET: f64 = 1.05;

fn main() -> ExitCode {
    if let Some(addr) = std::env::var_os(BASELINE_ENV) {
        return match baseline::baseline(addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("admission bench baseline: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    // Without the binaries, the harness's one line on how to get them.
    if let Err(message) = kube_apiserver::assets() {
        eprintln!("admission bench: {message}");
        return ExitCode::FAILURE;
    }
    match run(&Plan::new(quick)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("admission bench: {n} check(s) failed, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("admission bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Plan

struct Plan {
    quick: bool,
    /// Keep-alive connections of the closed loop.
    connections: usize,
    /// Length of one measurement.
    duration: Duration,
    /// Closed-loop warm-up of each configuration, not reported.
    warmup: Duration,
    /// Measurements of each configuration, alternating.
    rounds: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        let mut plan = if quick {
            Plan {
                quick,
                connections: 8,
                duration: Duration::from_millis(1500),
                warmup: Duration::from_millis(500),
                rounds: 1,
            }
        } else {
            Plan {
                quick,
                connections: 8,
                duration: Duration::from_secs(5),
                warmup: Duration::from_secs(2),
                rounds: 5,
            }
        };
        if !quick
            && let Some(secs) = std::env::var("BENCH_SECONDS")
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
        {
            plan.duration = Duration::from_secs_f64(secs);
        }
        plan
    }
}

// ---------------------------------------------------------------------------
// Driver

/// One way of creating pods: in which namespace, and what it should give.
struct Config {
    name: &'static str,
    namespace: String,
    /// Whether a webhook attaches `linkerd-cni` to the pods created there.
    attached: bool,
    /// The webhook server's process, when there is one.
    server_pid: Option<u32>,
}

fn run(plan: &Plan) -> Result<usize> {
    let started = Instant::now();
    let mut failures = 0;
    eprintln!("starting etcd and kube-apiserver ...");
    let plane = ControlPlane::shared();
    let api_addr = plane
        .url()
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("an API server URL without https://: {}", plane.url()))?
        .to_string();
    let api_pid = plane.api_server_pid();
    let dir = tempfile::Builder::new()
        .prefix("linkerd-multus-admission-bench-")
        .tempdir()?;
    let (cert, key) = plane.leaf(&["127.0.0.1"]).write(dir.path());

    let none_ns = plane.namespace("bench-no-webhook", &[]);
    let baseline_ns = plane.namespace("bench-baseline", ENABLED);
    let webhook_ns = plane.namespace("bench-webhook", ENABLED);
    // The NAD the webhook checks for before it attaches a pod, as rendering gives it.
    plane.install_nad_crd();
    plane.apply(&format!(
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {webhook_ns}\nspec:\n  config: '{{}}'\n"
    ));

    let extra: Vec<String> = std::env::var("BENCH_WEBHOOK_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // The baseline copies each request's uid: the API server checks it.
    let mut baseline =
        Server::constant(dir.path(), &cert, &key, "baseline", &[(ECHO_UID_ENV, "1")])?;
    let mut webhook = Server::webhook(dir.path(), &plane.admin_kubeconfig, &cert, &key, &extra)?;
    webhook.wait_ready(Duration::from_secs(30))?;
    plane.apply(&registration(
        "linkerd-multus-bench-baseline",
        &baseline.addr,
        &baseline_ns,
        plane.ca_pem(),
    ));
    plane.apply(&registration(
        "linkerd-multus-bench-webhook",
        &webhook.addr,
        &webhook_ns,
        plane.ca_pem(),
    ));

    let configs = [
        Config {
            name: "no webhook",
            namespace: none_ns,
            attached: false,
            server_pid: None,
        },
        Config {
            name: "baseline",
            namespace: baseline_ns,
            attached: true,
            server_pid: Some(baseline.child.id()),
        },
        Config {
            name: "webhook",
            namespace: webhook_ns,
            attached: true,
            server_pid: Some(webhook.child.id()),
        },
    ];
    let pod = fixture_pod()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let tls = connector(plane.ca_pem(), Some(&plane.admin), &[b"http/1.1"]);
    let load = Load {
        addr: &api_addr,
        tls: &tls,
        pod: &pod,
        runtime: &runtime,
        api_pid,
    };

    // Before measuring: the registrations are in force and each
    // configuration gives the pod it should.
    for config in &configs {
        if let Err(e) = load.verify(config, Duration::from_secs(30)) {
            eprintln!("  FAIL {}: {e:#}", config.name);
            failures += 1;
        }
    }
    if failures > 0 {
        eprintln!("{}", webhook.log_tail(20));
        return Ok(failures);
    }
    eprintln!(
        "checked: the webhook and the baseline attach linkerd-cni in their namespaces, nothing does in the other ({:.1} s after start)",
        started.elapsed().as_secs_f64()
    );
    let reviewed_before = webhook.admission_total()?;

    let mut sent = [0u64; 3];
    let mut measure = |duration: Duration, rounds: usize, failures: &mut usize| {
        let mut per: [Vec<Figures>; 3] = Default::default();
        for r in 0..rounds {
            // Forwards, then backwards: each is measured early and late.
            let order: Vec<usize> = if r % 2 == 0 {
                vec![0, 1, 2]
            } else {
                vec![2, 1, 0]
            };
            for i in order {
                let (tally, figures) = load.run(&configs[i], plan.connections, duration)?;
                sent[i] += tally.answered + tally.wrong + tally.errors;
                if let Some(problem) = &tally.first_problem {
                    eprintln!(
                        "  FAIL {}: {} errors, {} wrong answers of {}; first: {problem}",
                        configs[i].name,
                        tally.errors,
                        tally.wrong,
                        tally.answered + tally.wrong + tally.errors
                    );
                    *failures += 1;
                }
                per[i].push(figures);
            }
        }
        Ok::<_, anyhow::Error>(per.map(|runs| Figures::median(&runs)))
    };
    eprintln!(
        "warm-up: {:.1} s closed loop on each ...",
        plan.warmup.as_secs_f64()
    );
    measure(plan.warmup, 1, &mut failures)?;
    eprintln!(
        "measuring: {} round(s) of {:.1} s on each, alternating ...",
        plan.rounds,
        plan.duration.as_secs_f64()
    );
    let figures = measure(plan.duration, plan.rounds, &mut failures)?;

    // The API server called the webhook once for each pod created in its namespace.
    let reviewed = webhook.admission_total()? - reviewed_before;
    if reviewed != sent[2] as f64 {
        eprintln!(
            "  FAIL the webhook counted {reviewed} reviews, {} pods were created in its namespace",
            sent[2]
        );
        failures += 1;
    }
    for (server, name) in [(&mut webhook, "webhook"), (&mut baseline, "baseline")] {
        if !server.running() {
            eprintln!("  FAIL the {name} exited during the run");
            failures += 1;
        }
    }
    if failures > 0 {
        eprintln!("{}", webhook.log_tail(20));
    }

    print_table(plan, &configs, &figures);
    eprintln!(
        "admission bench: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    Ok(failures)
}

/// A MutatingWebhookConfiguration calling `addr` for pods created in
/// `namespace`, and nowhere else.
fn registration(name: &str, addr: &str, namespace: &str, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {name}
webhooks:
- name: {name}.linkerd.io
  clientConfig:
    url: https://{addr}/mutate
    caBundle: {ca}
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["pods"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {namespace}
  sideEffects: None
  admissionReviewVersions: ["v1"]
  failurePolicy: Fail
"#
    )
}

/// The pod of the captured review, without its namespace (the path names it).
fn fixture_pod() -> Result<Value> {
    let text = fs::read_to_string(FIXTURE).with_context(|| format!("reading {FIXTURE}"))?;
    let review: Value = serde_json::from_str(&text)?;
    let mut pod = review["request"]["object"].clone();
    pod["metadata"]
        .as_object_mut()
        .ok_or_else(|| anyhow!("{FIXTURE}: request.object has no metadata"))?
        .remove("namespace");
    Ok(pod)
}

// ---------------------------------------------------------------------------
// The servers

// ---------------------------------------------------------------------------
// The load generator

/// The figures of a measurement, or their medians over rounds.
#[derive(Clone, Copy)]
struct Figures {
    /// p50 and p99 latency, ms.
    p50: f64,
    p99: f64,
    /// Right answers a second.
    rate: f64,
    /// The API server's CPU per answer, µs (NaN when its PID is unknown).
    api_cpu_us: f64,
    /// The webhook server's CPU per answer, µs (NaN without one).
    server_cpu_us: f64,
}

impl Figures {
    fn median(runs: &[Figures]) -> Figures {
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

struct Load<'a> {
    /// The API server's `127.0.0.1:PORT`.
    addr: &'a str,
    tls: &'a TlsConnector,
    pod: &'a Value,
    runtime: &'a tokio::runtime::Runtime,
    api_pid: Option<u32>,
}

/// The dry-run create of a pod in `namespace`.
fn create_path(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods?dryRun=All")
}

impl Load<'_> {
    /// Creates the pod in `config`'s namespace until the answer is what the
    /// configuration should give (a registration takes effect a moment after
    /// it is applied), then checks that answer in full.
    fn verify(&self, config: &Config, timeout: Duration) -> Result<()> {
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
    fn run(&self, config: &Config, conns: usize, duration: Duration) -> Result<(Tally, Figures)> {
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
                    let mut tally = Tally::new();
                    while Instant::now() < deadline {
                        let sent = Instant::now();
                        match conn.post(&path, body.clone()).await {
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
                                match Connection::open(&addr, &tls).await {
                                    Ok(fresh) => conn = fresh,
                                    Err(_) => break,
                                }
                            }
                        }
                    }
                    tally
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether an answer is right: 201, and `linkerd-cni` in the returned pod's
/// networks annotation exactly when a webhook is registered (a byte search:
/// the API server writes compact JSON).
fn check(attached: bool, status: u16, body: &[u8]) -> Result<(), String> {
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

// ---------------------------------------------------------------------------
// Report

fn print_table(plan: &Plan, configs: &[Config; 3], figures: &[Figures; 3]) {
    let mut out = String::new();
    let api_version = kube_apiserver::assets()
        .ok()
        .and_then(|dir| {
            Command::new(dir.join("kube-apiserver"))
                .arg("--version")
                .output()
                .ok()
        })
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    writeln!(out).unwrap();
    writeln!(
        out,
        "measured: server-side dry-run pod creates (POST /api/v1/namespaces/NS/pods?dryRun=All) at a real kube-apiserver ({api_version}) with etcd,"
    )
    .unwrap();
    writeln!(
        out,
        "          the captured pod-create pod as JSON, the admin's client certificate, TLS and HTTP/1.1 keep-alive;"
    )
    .unwrap();
    writeln!(
        out,
        "          closed loop on {} connections, {} round(s) of {:.1} s per configuration, alternating; medians of the rounds;",
        plan.connections,
        plan.rounds,
        plan.duration.as_secs_f64()
    )
    .unwrap();
    writeln!(
        out,
        "          1 load generator thread on the same {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
    .unwrap();
    writeln!(
        out,
        "no webhook: namespace {} selected by no MutatingWebhookConfiguration",
        configs[0].namespace
    )
    .unwrap();
    writeln!(
        out,
        "baseline:   a constant AdmissionReview (the request's uid copied in) through webhook::server::serve, pid {}",
        configs[1].server_pid.unwrap_or(0)
    )
    .unwrap();
    writeln!(
        out,
        "webhook:    {} webhook, pid {}",
        env!("CARGO_BIN_EXE_linkerd-multus"),
        configs[2].server_pid.unwrap_or(0)
    )
    .unwrap();
    writeln!(
        out,
        "{:<24} {:>9} {:>9} {:>9} {:>16} {:>18}",
        "configuration", "p50 ms", "p99 ms", "req/s", "API CPU µs/req", "server CPU µs/req"
    )
    .unwrap();
    for (config, f) in configs.iter().zip(figures) {
        writeln!(
            out,
            "{:<24} {:>9.3} {:>9.3} {:>9.0} {:>16.0} {:>18}",
            config.name,
            f.p50,
            f.p99,
            f.rate,
            f.api_cpu_us,
            if f.server_cpu_us.is_nan() {
                "-".to_string()
            } else {
                format!("{:.0}", f.server_cpu_us)
            }
        )
        .unwrap();
    }
    let [none, base, hook] = figures;
    let ratio = |label: &str, a: &Figures, b: &Figures| {
        format!(
            "{label:<24} {:>9.3} {:>9.3} {:>9.3} {:>16.3}",
            a.p50 / b.p50,
            a.p99 / b.p99,
            a.rate / b.rate,
            a.api_cpu_us / b.api_cpu_us
        )
    };
    writeln!(out, "{}", ratio("webhook / baseline", hook, base)).unwrap();
    writeln!(out, "{}", ratio("baseline / no webhook", base, none)).unwrap();
    writeln!(out).unwrap();
    let (p50, p99) = (hook.p50 / base.p50, hook.p99 / base.p99);
    let verdict = if plan.quick {
        "not judged in a quick run"
    } else if p50 <= TARGET && p99 <= TARGET {
        "met"
    } else {
        "missed"
    };
    writeln!(
        out,
        "target: the webhook adds no more than {:.0}% to the baseline's p50 and p99 at the API server: p50 {:+.1}%, p99 {:+.1}%: {verdict}",
        (TARGET - 1.0) * 100.0,
        (p50 - 1.0) * 100.0,
        (p99 - 1.0) * 100.0
    )
    .unwrap();
    print!("{out}");
}
