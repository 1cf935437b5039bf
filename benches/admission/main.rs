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
//!   benches/webhook/ (benches/common/baseline.rs: the webhook's own TLS,
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

#[path = "../common/baseline.rs"]
mod baseline;
#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/common/https.rs"]
mod https;
#[path = "../../tests/common/kube_apiserver.rs"]
mod kube_apiserver;
mod load;
#[path = "../../tests/common/ports.rs"]
mod ports;
#[path = "../../tests/common/process.rs"]
mod process;
mod report;
#[path = "../common/servers.rs"]
mod servers;
// The YAML reader of kube_apiserver's server-side apply.
#[path = "../../tests/common/yaml.rs"]
#[allow(dead_code)]
mod yaml;

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use base64::Engine;
use serde_json::Value;

use baseline::{BASELINE_ENV, ECHO_UID_ENV};
use https::connector;
use kube_apiserver::ControlPlane;
use load::{Figures, Load};
use report::print_table;
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
    eprintln!("starting etcd and kube-apiserver ...");
    let plane = ControlPlane::shared();
    let api_addr = plane
        .url()
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("an API server URL without https://: {}", plane.url()))?
        .to_string();
    let dir = tempfile::Builder::new()
        .prefix("linkerd-multus-admission-bench-")
        .tempdir()?;
    let mut servers = Servers::start(plane, dir.path())?;
    let configs = servers.configs();
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
        api_pid: plane.api_server_pid(),
    };

    // Before measuring: the registrations are in force and each
    // configuration gives the pod it should.
    let mut failures = 0;
    for config in &configs {
        if let Err(e) = load.verify(config, Duration::from_secs(30)) {
            eprintln!("  FAIL {}: {e:#}", config.name);
            failures += 1;
        }
    }
    if failures > 0 {
        eprintln!("{}", servers.webhook.log_tail(20));
        return Ok(failures);
    }
    eprintln!(
        "checked: the webhook and the baseline attach linkerd-cni in their namespaces, nothing does in the other ({:.1} s after start)",
        started.elapsed().as_secs_f64()
    );
    let reviewed_before = servers.webhook.admission_total()?;
    let mut bench = Bench {
        load: &load,
        configs: &configs,
        connections: plan.connections,
        sent: [0; 3],
        failures: 0,
    };
    eprintln!(
        "warm-up: {:.1} s closed loop on each ...",
        plan.warmup.as_secs_f64()
    );
    bench.measure(plan.warmup, 1)?;
    eprintln!(
        "measuring: {} round(s) of {:.1} s on each, alternating ...",
        plan.rounds,
        plan.duration.as_secs_f64()
    );
    let figures = bench.measure(plan.duration, plan.rounds)?;
    failures += bench.failures;
    failures += servers.check(reviewed_before, bench.sent[2])?;
    if failures > 0 {
        eprintln!("{}", servers.webhook.log_tail(20));
    }

    print_table(plan, &configs, &figures);
    eprintln!(
        "admission bench: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    Ok(failures)
}

/// The webhook and the baseline, each registered for pods created in a
/// namespace of its own, and a namespace no webhook is called for.
struct Servers {
    baseline: Server,
    webhook: Server,
    /// No webhook's, the baseline's and the webhook's.
    namespaces: [String; 3],
}

impl Servers {
    /// Makes the namespaces (and the NAD the webhook checks for), starts
    /// both servers and registers them.
    fn start(plane: &ControlPlane, dir: &Path) -> Result<Servers> {
        let (cert, key) = plane.leaf(&["127.0.0.1"]).write(dir);
        let none_ns = plane.namespace("bench-no-webhook", &[]);
        let baseline_ns = plane.namespace("bench-baseline", ENABLED);
        let webhook_ns = plane.namespace("bench-webhook", ENABLED);
        // The NAD the webhook checks for before it attaches a pod, as rendering gives it.
        plane.install_nad_crd();
        plane.apply(&format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {webhook_ns}\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\"}}'\n"
        ));
        let extra: Vec<String> = std::env::var("BENCH_WEBHOOK_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        // The baseline copies each request's uid: the API server checks it.
        let baseline = Server::constant(dir, &cert, &key, "baseline", &[(ECHO_UID_ENV, "1")])?;
        let mut webhook = Server::webhook(dir, &plane.admin_kubeconfig, &cert, &key, &extra)?;
        webhook.wait_ready(Duration::from_secs(30))?;
        for (name, server, namespace) in [
            ("linkerd-multus-bench-baseline", &baseline, &baseline_ns),
            ("linkerd-multus-bench-webhook", &webhook, &webhook_ns),
        ] {
            plane.apply(&registration(name, &server.addr, namespace, plane.ca_pem()));
        }
        Ok(Servers {
            baseline,
            webhook,
            namespaces: [none_ns, baseline_ns, webhook_ns],
        })
    }

    /// The three ways of creating pods.
    fn configs(&self) -> [Config; 3] {
        let [none, baseline, webhook] = self.namespaces.clone();
        [
            Config {
                name: "no webhook",
                namespace: none,
                attached: false,
                server_pid: None,
            },
            Config {
                name: "baseline",
                namespace: baseline,
                attached: true,
                server_pid: Some(self.baseline.child.id()),
            },
            Config {
                name: "webhook",
                namespace: webhook,
                attached: true,
                server_pid: Some(self.webhook.child.id()),
            },
        ]
    }

    /// Failures: the API server did not call the webhook once for each pod
    /// created in its namespace (`created` since the count was `before`), or
    /// a server exited.
    fn check(&mut self, before: f64, created: u64) -> Result<usize> {
        let mut failures = 0;
        let reviewed = self.webhook.admission_total()? - before;
        if reviewed != created as f64 {
            eprintln!(
                "  FAIL the webhook counted {reviewed} reviews, {created} pods were created in its namespace"
            );
            failures += 1;
        }
        for (server, name) in [
            (&mut self.webhook, "webhook"),
            (&mut self.baseline, "baseline"),
        ] {
            if !server.running() {
                eprintln!("  FAIL the {name} exited during the run");
                failures += 1;
            }
        }
        Ok(failures)
    }
}

/// The measurements: each configuration in rounds.
struct Bench<'a> {
    load: &'a Load<'a>,
    configs: &'a [Config; 3],
    connections: usize,
    /// Pods created in each configuration.
    sent: [u64; 3],
    failures: usize,
}

impl Bench<'_> {
    /// Each configuration `rounds` times, forwards then backwards so each is
    /// measured early and late: the medians.
    fn measure(&mut self, duration: Duration, rounds: usize) -> Result<[Figures; 3]> {
        let mut per: [Vec<Figures>; 3] = Default::default();
        for r in 0..rounds {
            let order: Vec<usize> = if r % 2 == 0 {
                vec![0, 1, 2]
            } else {
                vec![2, 1, 0]
            };
            for i in order {
                let config = &self.configs[i];
                let (tally, figures) = self.load.run(config, self.connections, duration)?;
                let total = tally.answered + tally.wrong + tally.errors;
                self.sent[i] += total;
                if let Some(problem) = &tally.first_problem {
                    eprintln!(
                        "  FAIL {}: {} errors, {} wrong answers of {total}; first: {problem}",
                        config.name, tally.errors, tally.wrong
                    );
                    self.failures += 1;
                }
                per[i].push(figures);
            }
        }
        Ok(per.map(|runs| Figures::median(&runs)))
    }
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
