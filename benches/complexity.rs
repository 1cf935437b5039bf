//! How each rule set's work grows with its input: time per review of the webhook's handler
//! and time per resource of the render, at input sizes n, 4n and 16n.
//!
//! `cargo bench --bench complexity` runs, in this process:
//!
//! * **the webhook's handler** (`webhook::handler::Admission`, as `linkerd-multus webhook`
//!   runs it), its caches fed by the stand-in API server (benches/common/fake_apiserver.rs)
//!   through kube-rs, on reviews of a pod in a namespace attached and opted in to the
//!   secondary-network rule: the Linkerd-CNI rules with skip-subnets over a pod selecting 3,
//!   12 and 48 NADs (each a whereabouts range and a route; with Linkerd-CNI's, within the
//!   selections cap), over one NAD of 8, 32 and 128
//!   routes, and over a pod selecting one NAD 1,000, 4,000 and 16,000 times (past the
//!   selections cap: refused); the network-resources rules (with the Linkerd-CNI rules, as
//!   `--network-resources` runs them) over a pod selecting 3, 12 and 48 resource-backed NADs;
//! * **the watch's store of a NAD** (`webhook::cache::Annotations::of`: its config hashed and
//!   its IPAM read with the caps) at 1,000, 4,000 and 16,000 routes (past the routes cap);
//! * **the render** (the KRM function, `commands::function::run`) of kpt-shaped ResourceLists
//!   of 1,000, 4,000 and 16,000 resources (benches/krm/generate.rs) for each rule set: the
//!   Linkerd-CNI rules with the secondary-network rule on, NetworkResources, and Validation.
//!   The validation rule set has no webhook row: the webhook does not run it.
//!
//! Each cell is the median of 5 batches, each repeating the call until 0.2 s have passed.
//! Every call's first answer is checked (the skip-subnets written, the resources set, the refusal
//! naming its cap, the render's items and results); a wrong one fails the run. It prints a
//! table of time per review (or NAD, or resource) at each size and the growth from n to 16n,
//! and judges the target: the time of one call at 16n within 20x of its time at n (linear
//! growth gives 16x; the quadratic de-duplication this replaced gave 256x).
//!
//! `BENCH_QUICK=1` (or `-- --quick`) is a smoke run of a few seconds: smaller lists and
//! annotations where the caps allow, each cell the time of its one checked call, the growth
//! printed but not judged.

#[path = "common/mod.rs"]
mod common;
#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "krm/generate.rs"]
#[allow(dead_code)]
mod generate;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use common::median;
use fake_apiserver::{FakeApiServer, NAD_CONFIG};
use generate::{Rules, resource_list};
use linkerd_multus::admission::{MissingNad, OnError};
use linkerd_multus::commands::function;
use linkerd_multus::linkerd_cni::settings::Settings;
use linkerd_multus::network_resources;
use linkerd_multus::webhook::cache::{self, Annotations, WatchCache};
use linkerd_multus::webhook::handler::Admission;
use linkerd_multus::webhook::live::LiveReader;
use linkerd_multus::webhook::metrics::Metrics;
use linkerd_multus::webhook::server::{Call, Handler};

const FIXTURE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
/// The namespace of the reviewed pods.
const NAMESPACE: &str = "app";
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const SKIP: &str = "config.linkerd.io/skip-subnets";
const OPT_IN: &str = "multus.linkerd.io/skip-secondary-subnets";
const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";
/// The cluster networks the handler's settings name.
const CLUSTER_CIDRS: [&str; 2] = ["10.128.0.0/14", "172.30.0.0/16"];
/// The target: a call at 16n takes at most this many times a call at n.
const TARGET: f64 = 20.0;

/// How long one measurement runs, and how many there are of each cell.
struct Plan {
    quick: bool,
    batch: Duration,
    batches: usize,
}

/// One line of the table.
struct Row {
    rule_set: &'static str,
    front: &'static str,
    /// What the sizes count.
    input: &'static str,
    sizes: [usize; 3],
    /// What one call is: a review, a NAD, a resource.
    per: &'static str,
    /// Seconds per call at each size.
    times: [f64; 3],
    /// Calls per measured unit: a render's time is per resource of its list.
    calls_per_unit: [f64; 3],
}

impl Row {
    /// The time of one call at 16n over its time at n.
    fn growth(&self) -> f64 {
        (self.times[2] * self.calls_per_unit[2]) / (self.times[0] * self.calls_per_unit[0])
    }
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let plan = if quick {
        Plan {
            quick,
            batch: Duration::from_millis(20),
            batches: 1,
        }
    } else {
        Plan {
            quick,
            batch: Duration::from_millis(200),
            batches: 5,
        }
    };
    match run(&plan) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("complexity bench: the growth of {n} row(s) is past the target, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("complexity bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(plan: &Plan) -> Result<usize> {
    let started = Instant::now();
    let mut rows = handler_rows(plan)?;
    rows.push(store_row(plan)?);
    rows.extend(render_rows(plan)?);
    print_table(&rows);
    let past: Vec<&Row> = rows.iter().filter(|r| r.growth() > TARGET).collect();
    let verdict = match (plan.quick, past.is_empty()) {
        (true, _) => "not judged in a quick run".to_string(),
        (false, true) => "met by every row".to_string(),
        (false, false) => format!("NOT met by {} row(s)", past.len()),
    };
    println!("target: a call at 16n within {TARGET:.0}x of a call at n: {verdict}");
    eprintln!(
        "complexity bench: {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
    Ok(if plan.quick { 0 } else { past.len() })
}

/// Seconds per call of `call`, whose first answer `check` judges: in a quick run the time of
/// that call, else the median over the plan's batches, each repeating it until the batch's
/// time has passed.
fn checked<T>(
    plan: &Plan,
    mut call: impl FnMut() -> T,
    check: impl FnOnce(T) -> Result<()>,
) -> Result<f64> {
    let start = Instant::now();
    let first = call();
    let once = start.elapsed().as_secs_f64();
    check(first)?;
    if plan.quick {
        return Ok(once);
    }
    let mut per = Vec::new();
    for _ in 0..plan.batches {
        let start = Instant::now();
        let mut calls = 0u64;
        while calls == 0 || start.elapsed() < plan.batch {
            std::hint::black_box(call());
            calls += 1;
        }
        per.push(start.elapsed().as_secs_f64() / calls as f64);
    }
    Ok(median(&per))
}

// ---------------------------------------------------------------------------
// The webhook's handler

/// A whereabouts NAD config with `range` and a route to each of `routes`.
fn whereabouts(range: &str, routes: &[String]) -> String {
    let routes: Vec<Value> = routes.iter().map(|r| json!({"dst": r})).collect();
    json!({
        "cniVersion": "0.3.1",
        "type": "macvlan",
        "master": "eth1",
        "ipam": {"type": "whereabouts", "range": range, "routes": routes}
    })
    .to_string()
}

/// `n` distinct IPv4 /24 networks in 172.16.0.0/12, from `first` on.
fn networks(first: usize, n: usize) -> Vec<String> {
    (first..first + n)
        .map(|i| format!("172.{}.{}.0/24", 16 + i / 256 % 16, i % 256))
        .collect()
}

/// The captured review, of a pod in [`NAMESPACE`] with `annotations` added, as a body.
fn review(annotations: &[(&str, String)]) -> Bytes {
    let mut review: Value = serde_json::from_str(FIXTURE).expect("the fixture is JSON");
    review["request"]["namespace"] = json!(NAMESPACE);
    let metadata = &mut review["request"]["object"]["metadata"];
    metadata["namespace"] = json!(NAMESPACE);
    for (key, value) in annotations {
        metadata["annotations"][*key] = json!(value);
    }
    Bytes::from(review.to_string())
}

/// What an answer must show.
enum Expect {
    /// Patched, skip-subnets holding this many entries.
    Skips(usize),
    /// Patched, with resources set on the first container.
    Resources,
    /// Admitted unchanged, the warning naming this.
    Refused(&'static str),
}

/// Whether the handler's answer `body` shows `expect`.
fn check(body: &[u8], expect: &Expect) -> Result<()> {
    let review: Value = serde_json::from_slice(body)?;
    let response = &review["response"];
    let show = || String::from_utf8_lossy(&body[..body.len().min(400)]).into_owned();
    if response["allowed"] != true {
        bail!("not allowed: {}", show());
    }
    let patch: Value = match response["patch"].as_str() {
        Some(patch) => {
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch)?)?
        }
        None => Value::Null,
    };
    let ops = patch.as_array().cloned().unwrap_or_default();
    let op_at = |path: &str| ops.iter().find(|op| op["path"] == path).cloned();
    match expect {
        Expect::Skips(n) => {
            let path = format!("/metadata/annotations/{}", SKIP.replace('/', "~1"));
            let value = op_at(&path).ok_or_else(|| anyhow!("no {SKIP} in {}", show()))?;
            let got = value["value"]
                .as_str()
                .unwrap_or_default()
                .split(',')
                .count();
            if got != *n {
                bail!("{SKIP} holds {got} subnets, not {n}");
            }
        }
        Expect::Resources => {
            if !ops.iter().any(|op| {
                op["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/spec/containers/0/resources"))
            }) {
                bail!("no resources set: {}", show());
            }
        }
        Expect::Refused(cap) => {
            let warning = response["warnings"][0].as_str().unwrap_or_default();
            if !patch.is_null() || !warning.contains(cap) {
                bail!("not refused naming {cap:?}: {}", show());
            }
        }
    }
    Ok(())
}

/// The stand-in API server with the NADs every handler row reads, and the handlers.
struct Handlers {
    _api: FakeApiServer,
    runtime: tokio::runtime::Runtime,
    /// The Linkerd-CNI rules alone, and with the network-resources rules.
    linkerd: Arc<Admission>,
    network_resources: Arc<Admission>,
}

impl Handlers {
    fn start() -> Result<Handlers> {
        let api = FakeApiServer::start();
        api.put(
            NAMESPACE,
            &[
                ("linkerd.io/multus", "enabled"),
                ("linkerd.io/inject", "enabled"),
                (OPT_IN, "enabled"),
            ],
        );
        api.put_nad(NAMESPACE, "linkerd-cni", &[]);
        for (i, range) in networks(0, 64).iter().enumerate() {
            let route = networks(1000 + i, 1);
            api.put_nad_config(
                NAMESPACE,
                &format!("net{i}"),
                &[],
                &whereabouts(range, &route),
            );
            let resource = format!("example.com/dev{}", i % 4);
            api.put_nad_config(
                NAMESPACE,
                &format!("res{i}"),
                &[(RESOURCE_NAME, resource.as_str())],
                NAD_CONFIG,
            );
        }
        for routes in [8, 32, 128] {
            let config = whereabouts("192.168.0.0/24", &networks(2000, routes));
            api.put_nad_config(NAMESPACE, &format!("routes{routes}"), &[], &config);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let url = api.url.clone();
        let (linkerd, network_resources) = runtime.block_on(async move {
            let config = kube::Config::new(url.parse()?);
            let client = kube::Client::try_from(config)?;
            let nr = network_resources::settings::Settings::default();
            let linkerd = admission(&client, None).await?;
            let network_resources = admission(&client, Some(nr)).await?;
            anyhow::Ok((linkerd, network_resources))
        })?;
        Ok(Handlers {
            _api: api,
            runtime,
            linkerd,
            network_resources,
        })
    }

    /// Seconds per review of `body` by `handler`, checked first.
    fn time(
        &self,
        plan: &Plan,
        handler: &Arc<Admission>,
        body: &Bytes,
        expect: &Expect,
    ) -> Result<f64> {
        checked(
            plan,
            || {
                self.runtime
                    .block_on(handler.handle(body.clone(), &Call::NONE))
            },
            |reply| check(&reply.body, expect),
        )
    }
}

/// A handler as `linkerd-multus webhook --cluster-cidrs ...` makes it (with the
/// network-resources rules when given), its caches synced from `client`.
async fn admission(
    client: &kube::Client,
    network_resources: Option<network_resources::settings::Settings>,
) -> Result<Arc<Admission>> {
    let settings = Settings {
        cluster_cidrs: CLUSTER_CIDRS
            .iter()
            .map(|c| c.parse())
            .collect::<Result<_, _>>()?,
        ..Settings::default()
    };
    let metrics = Arc::new(Metrics::with_nad_cache());
    let namespaces = Arc::new(WatchCache::namespaces(&settings.uid_range_annotation));
    let keys = network_resources
        .as_ref()
        .map(|s| s.resource_name_keys.clone())
        .unwrap_or_default();
    let nads = Arc::new(WatchCache::nads(&keys));
    let live = LiveReader::new(
        client.clone(),
        Duration::from_secs(1),
        namespaces.keys(),
        nads.keys(),
        metrics.clone(),
    );
    tokio::spawn(cache::run_namespaces(namespaces.clone(), client.clone()));
    tokio::spawn(cache::run_nads(nads.clone(), client.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(namespaces.synced() && nads.synced()) {
        if Instant::now() > deadline {
            bail!("the caches did not sync from the stand-in API server in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(Arc::new(Admission {
        settings,
        network_resources,
        nads: Some(nads),
        missing_nad: MissingNad::Deny,
        on_error: OnError::Allow,
        cache: namespaces,
        live,
        max_watch_outage: Duration::from_secs(60),
        watch_lag: Duration::from_secs(1),
        metrics,
    }))
}

fn handler_rows(plan: &Plan) -> Result<Vec<Row>> {
    let handlers = Handlers::start()?;
    let select =
        |names: &mut dyn Iterator<Item = String>| -> String { names.collect::<Vec<_>>().join(",") };
    let opted = |networks: String| review(&[(NETWORKS, networks), (OPT_IN, "enabled".into())]);
    let mut rows = Vec::new();

    let sizes = [3, 12, 48];
    let mut times = [0.0; 3];
    for (i, &n) in sizes.iter().enumerate() {
        let body = opted(select(&mut (0..n).map(|k| format!("net{k}"))));
        times[i] = handlers.time(plan, &handlers.linkerd, &body, &Expect::Skips(2 * n))?;
    }
    rows.push(Row {
        rule_set: "Linkerd-CNI + skip-subnets",
        front: "webhook",
        input: "NADs selected",
        sizes,
        per: "review",
        times,
        calls_per_unit: [1.0; 3],
    });

    let sizes = [8, 32, 128];
    for (i, &n) in sizes.iter().enumerate() {
        let body = opted(format!("routes{n}"));
        times[i] = handlers.time(plan, &handlers.linkerd, &body, &Expect::Skips(n + 1))?;
    }
    rows.push(Row {
        rule_set: "Linkerd-CNI + skip-subnets",
        front: "webhook",
        input: "routes of its NAD",
        sizes,
        per: "review",
        times,
        calls_per_unit: [1.0; 3],
    });

    let sizes = if plan.quick {
        [250, 1_000, 4_000]
    } else {
        [1_000, 4_000, 16_000]
    };
    for (i, &n) in sizes.iter().enumerate() {
        let body = opted(vec!["net0"; n].join(","));
        let expect = Expect::Refused("the selections cap");
        times[i] = handlers.time(plan, &handlers.linkerd, &body, &expect)?;
    }
    rows.push(Row {
        rule_set: "Linkerd-CNI + skip-subnets",
        front: "webhook",
        input: "selections (past the cap)",
        sizes,
        per: "review",
        times,
        calls_per_unit: [1.0; 3],
    });

    let sizes = [3, 12, 48];
    for (i, &n) in sizes.iter().enumerate() {
        let body = review(&[(NETWORKS, select(&mut (0..n).map(|k| format!("res{k}"))))]);
        times[i] = handlers.time(plan, &handlers.network_resources, &body, &Expect::Resources)?;
    }
    rows.push(Row {
        rule_set: "network-resources",
        front: "webhook",
        input: "NADs selected",
        sizes,
        per: "review",
        times,
        calls_per_unit: [1.0; 3],
    });
    Ok(rows)
}

/// The watch's store of a NAD: its config hashed and its IPAM read, refused past the routes
/// cap after counting them.
fn store_row(plan: &Plan) -> Result<Row> {
    let sizes = if plan.quick {
        [250, 1_000, 4_000]
    } else {
        [1_000, 4_000, 16_000]
    };
    let mut times = [0.0; 3];
    let keys = cache::keys(&[RESOURCE_NAME.to_string()]);
    for (i, &n) in sizes.iter().enumerate() {
        let config = whereabouts("192.168.0.0/24", &networks(0, n));
        let meta = kube::core::ObjectMeta {
            name: Some("big".into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        };
        times[i] = checked(
            plan,
            || Annotations::of(&meta, &keys, Some(&config)),
            |stored| {
                let refused = stored
                    .ipam()
                    .and_then(|ipam| ipam.as_ref().err())
                    .is_some_and(|e| e.to_string().contains("the routes cap"));
                match refused {
                    true => Ok(()),
                    false => Err(anyhow!(
                        "a NAD of {n} routes is not refused naming the routes cap: {:?}",
                        stored.ipam()
                    )),
                }
            },
        )?;
    }
    Ok(Row {
        rule_set: "Linkerd-CNI + skip-subnets",
        front: "NAD store",
        input: "routes (past the cap)",
        sizes,
        per: "NAD",
        times,
        calls_per_unit: [1.0; 3],
    })
}

// ---------------------------------------------------------------------------
// The render

/// The ResourceList of a rule set's render, of a given size.
type ListOf<'a> = Box<dyn Fn(usize) -> String + 'a>;

fn render_rows(plan: &Plan) -> Result<Vec<Row>> {
    let sizes = if plan.quick {
        [30, 120, 480]
    } else {
        [1_000, 4_000, 16_000]
    };
    let exec = Path::new("/usr/local/bin/linkerd-multus");
    let validation = |list: String| {
        let at = list.find("functionConfig:").expect("a functionConfig");
        format!(
            "{}functionConfig:\n  apiVersion: multus.linkerd.io/v1alpha1\n  kind: Validation\n  metadata:\n    name: validation\n  spec:\n    namespaceIsolation: true\n",
            &list[..at]
        )
    };
    let cases: [(&str, ListOf<'_>, &str); 3] = [
        (
            "Linkerd-CNI + skip-subnets",
            Box::new(|n| resource_list(n, exec, Rules::SkipSubnets)),
            "multus.linkerd.io/skip-subnets:",
        ),
        (
            "network-resources",
            Box::new(|n| resource_list(n, exec, Rules::NetworkResources)),
            "multus.linkerd.io/network-resources:",
        ),
        (
            "validation",
            Box::new(|n| validation(resource_list(n, exec, Rules::SkipSubnets))),
            "kind: ResourceList",
        ),
    ];
    let mut rows = Vec::new();
    for (rule_set, input, mark) in cases {
        let mut times = [0.0; 3];
        for (i, &n) in sizes.iter().enumerate() {
            let list = input(n);
            let judge = |outcome: function::Outcome| {
                if outcome.code != 0 || !outcome.stdout.contains(mark) {
                    bail!(
                        "the render of {rule_set} at {n} resources: exit {}, {mark:?} in its output: {}; {}",
                        outcome.code,
                        outcome.stdout.contains(mark),
                        outcome.stderr.lines().next().unwrap_or_default()
                    );
                }
                Ok(())
            };
            times[i] = checked(plan, || function::run(&list), judge)? / n as f64;
        }
        rows.push(Row {
            rule_set,
            front: "render",
            input: "resources",
            sizes,
            per: "resource",
            times,
            calls_per_unit: sizes.map(|n| n as f64),
        });
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------
// The table

fn print_table(rows: &[Row]) {
    let show = |s: f64| {
        if s >= 1e-3 {
            format!("{:.2} ms", s * 1e3)
        } else {
            format!("{:.1} µs", s * 1e6)
        }
    };
    println!(
        "\n| rule set | front | input | n / 4n / 16n | time per call at n | at 4n | at 16n | one call at 16n / at n |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} / {} / {} | {} per {} | {} | {} | {:.1}x |",
            row.rule_set,
            row.front,
            row.input,
            row.sizes[0],
            row.sizes[1],
            row.sizes[2],
            show(row.times[0]),
            row.per,
            show(row.times[1]),
            show(row.times[2]),
            row.growth(),
        );
    }
    println!("| validation | webhook | | | (the webhook does not run it) | | | |\n");
}
