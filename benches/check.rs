//! Benchmark of `linkerd multus check` at scale, against a real kube-apiserver.
//!
//! `cargo bench --bench check` starts etcd and kube-apiserver with the tests'
//! harness (tests/common/kube_apiserver.rs), creates `BENCH_NAMESPACES`
//! namespaces (10,000 by default), every other one enabled with its NAD as the
//! NAD controller makes it (`linkerd_cni::cluster`), and `BENCH_PODS` meshed
//! pods (50,000), spread evenly, each with an app container, a proxy and
//! Linkerd's network validator. `check` talks to a second API server on the
//! same etcd, whose audit log (level Metadata) holds its requests.
//!
//! It runs `check` (the extension, CNI and NAD checks: Namespaces, NADs) and
//! `check --proxy` (the pods), each timed from start to exit, and prints the
//! time (target: under 10 s each at 10,000 namespaces and 50,000 pods), every
//! request by verb and resource from the audit log (each kind listed once:
//! ceil(n / 500) pages), and the peak RSS (VmHWM, read while it runs, so a
//! lower bound). A missed target fails the run. `BENCH_QUICK=1` (or `--
//! --quick`) is a smoke run on 200 namespaces and 1,000 pods.

#[path = "common/audit.rs"]
mod audit;
#[path = "../tests/common/https.rs"]
mod https;
#[path = "../tests/common/kube_apiserver.rs"]
mod kube_apiserver;
#[path = "../tests/common/ports.rs"]
mod ports;
#[path = "../tests/common/process.rs"]
mod process;
// The tests' audit-log reader, for its `whole_lines` (common/audit.rs).
#[path = "../tests/controller/audit.rs"]
#[allow(dead_code)]
mod requests;
// The YAML reader of kube_apiserver's server-side apply.
#[path = "../tests/common/yaml.rs"]
#[allow(dead_code)]
mod yaml;

use crate::process::Guarded;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DynamicObject, PostParams};
use linkerd_multus::linkerd_cni::cluster;
use linkerd_multus::linkerd_cni::settings::Settings;
use linkerd_multus::multus::nad;
use serde_json::{Value, json};

use audit::{admin_client, audited, audited_api_server};
use kube_apiserver::ControlPlane;
use process::Guard;

const CONFIG_MAP: &str = include_str!("../../shared/fixtures/linkerd-cni/version-2.19.yaml");
/// The target of each run at full size.
const TARGET: Duration = Duration::from_secs(10);

fn quick() -> bool {
    std::env::args().any(|a| a == "--quick") || std::env::var_os("BENCH_QUICK").is_some()
}

fn size(var: &str, quick: usize, full: usize) -> Result<usize> {
    match std::env::var(var) {
        Ok(n) => n.parse().with_context(|| var.to_string()),
        Err(_) if self::quick() => Ok(quick),
        Err(_) => Ok(full),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let namespaces = size("BENCH_NAMESPACES", 200, 10_000)?;
    let pods = size("BENCH_PODS", 1_000, 50_000)?;
    let dir = tempfile::tempdir()?;
    let plane = ControlPlane::shared();
    plane.install_nad_crd();
    let (server, audit) = audited_api_server(plane, dir.path())?;
    let kubeconfig = plane.admin_kubeconfig_for(&server, dir.path());
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    plane.apply(CONFIG_MAP);
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd\n");

    let listed = populated(plane, namespaces, pods)?;
    let mut failures = Vec::new();
    let mut mark = audited(&audit, 0)?.0;
    for (args, kinds) in [
        (&["--wait=0s"][..], [listed[0], listed[1]]),
        (&["--wait=0s", "--proxy"], [listed[0], listed[2]]),
    ] {
        let (elapsed, peak, code) = run_check(&kubeconfig, args)?;
        let (mut next, counts) = audited(&audit, mark)?;
        // The reader of the same kinds, in the same pages: kubectl.
        let kinds_read = kinds.map(|(resource, _)| resource).join(",");
        let read = kubectl_reads(plane, &kubeconfig, &kinds_read)?;
        next = audited(&audit, next)?.0;
        mark = next;
        let lists = |resource: &str| {
            counts
                .get(&format!("list {resource}"))
                .copied()
                .unwrap_or(0)
        };
        let mut line = format!(
            "check {}: {:.2} s (exit {code}), peak RSS at least {peak:.1} MiB; {}; `kubectl get {kinds_read} -A -o json` {:.2} s, check {:.2}x that",
            args.join(" "),
            elapsed.as_secs_f64(),
            show(&counts),
            read.as_secs_f64(),
            elapsed.as_secs_f64() / read.as_secs_f64()
        );
        for (resource, objects) in kinds {
            let pages = objects.div_ceil(500);
            if lists(resource) != pages {
                failures.push(format!(
                    "{args:?}: {} list pages of {resource}, not {pages}",
                    lists(resource)
                ));
            }
        }
        if namespaces >= 10_000 && pods >= 50_000 && elapsed >= TARGET {
            line.push_str("  MISSED");
            failures.push(format!("{args:?} took {elapsed:?}, target {TARGET:?}"));
        }
        println!("{line}");
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// Fills the cluster with `namespaces` (half enabled, with their NAD) and
/// `pods` meshed pods; the number of each kind `check` lists.
fn populated(
    plane: &ControlPlane,
    namespaces: usize,
    pods: usize,
) -> Result<[(&'static str, usize); 3]> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = admin_client(plane, &runtime)?;
    let started = Instant::now();
    runtime.block_on(populate(&client, namespaces, pods))?;
    println!(
        "check benchmark: {namespaces} namespaces ({} enabled, with their NAD), {pods} meshed pods, created in {:.1} s",
        namespaces.div_ceil(2),
        started.elapsed().as_secs_f64()
    );
    let listed = runtime.block_on(async {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let pods: Api<Pod> = Api::all(client.clone());
        let nads: Api<DynamicObject> = Api::all_with(client.clone(), &nad::api_resource());
        let lp = kube::api::ListParams::default();
        anyhow::Ok([
            (
                "namespaces",
                namespaces.list_metadata(&lp).await?.items.len(),
            ),
            (
                "network-attachment-definitions",
                nads.list_metadata(&lp).await?.items.len(),
            ),
            ("pods", pods.list_metadata(&lp).await?.items.len()),
        ])
    })?;
    Ok(listed)
}

/// How long `kubectl get KINDS -A -o json` takes (in pages of 500, its
/// default), its output thrown away: what reading the same objects costs.
fn kubectl_reads(plane: &ControlPlane, kubeconfig: &Path, kinds: &str) -> Result<Duration> {
    let started = Instant::now();
    let status = Command::new(plane.kubectl_path())
        .env("KUBECONFIG", kubeconfig)
        .args(["get", kinds, "-A", "-o", "json"])
        .stdout(Stdio::null())
        .guarded_status()
        .context("running kubectl")?;
    if !status.success() {
        bail!("kubectl get {kinds}: {status}");
    }
    Ok(started.elapsed())
}

/// Runs `check` with `args`: its time, its peak RSS as last read (MiB) and its exit code.
fn run_check(kubeconfig: &Path, args: &[&str]) -> Result<(Duration, f64, i32)> {
    let started = Instant::now();
    let mut child = Guard::spawn(
        Command::new(env!("CARGO_BIN_EXE_linkerd-multus"))
            .arg("check")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .context("starting linkerd-multus check")?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0f64;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let kib = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0.0);
        peak_kib = peak_kib.max(kib);
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok((
        started.elapsed(),
        peak_kib / 1024.0,
        status.code().unwrap_or(-1),
    ))
}

/// The namespaces (every other one enabled, with its NAD) and the meshed pods.
async fn populate(client: &kube::Client, namespaces: usize, pods: usize) -> Result<()> {
    let data: BTreeMap<String, String> = {
        let cm: Value = serde_json::from_str(&linkerd_multus_yaml_to_json(CONFIG_MAP)?)?;
        serde_json::from_value(cm["data"].clone())?
    };
    let settings = Settings::default();
    let config = cluster::config_text(Some(&data), &settings)?;
    let spaces: Api<Namespace> = Api::all(client.clone());
    let params = PostParams::default();
    let namespace = |i: usize| format!("bench-{i}");
    all(0..namespaces, |i| {
        let (spaces, params, config) = (&spaces, &params, &config);
        async move {
            let mut ns = json!({"metadata": {"name": namespace(i)}});
            if i.is_multiple_of(2) {
                ns["metadata"]["annotations"] =
                    json!({"linkerd.io/multus": "enabled", "linkerd.io/inject": "enabled"});
            }
            spaces.create(params, &serde_json::from_value(ns)?).await?;
            if i.is_multiple_of(2) {
                let nad = cluster::controller_nad(&namespace(i), config, &Settings::default());
                let nad: DynamicObject = serde_json::from_value(nad)?;
                let resource = nad::api_resource();
                let nads: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &namespace(i), &resource);
                nads.create(params, &nad).await?;
            }
            anyhow::Ok(())
        }
    })
    .await?;
    all(0..pods, |i| {
        let (client, params) = (client.clone(), &params);
        async move {
            let ns = namespace(i % namespaces);
            let api: Api<Pod> = Api::namespaced(client, &ns);
            api.create(params, &meshed_pod(i, (i % namespaces).is_multiple_of(2)))
                .await?;
            anyhow::Ok(())
        }
    })
    .await
}

/// Runs `make` over `items`, 32 at a time.
async fn all<I, F, Fut>(items: I, make: F) -> Result<()>
where
    I: Iterator<Item = usize>,
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    futures_util::stream::iter(items)
        .map(make)
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// A pod as Linkerd's injector leaves it: an app, the proxy, the validator,
/// with the annotations of an injected pod (and linkerd-cni when attached).
fn meshed_pod(i: usize, attached: bool) -> Pod {
    let mut annotations = json!({
        "linkerd.io/inject": "enabled",
        "linkerd.io/created-by": "linkerd/proxy-injector stable-2.19.0",
        "linkerd.io/proxy-version": "stable-2.19.0",
        "linkerd.io/trust-root-sha256": "a".repeat(64),
        "viz.linkerd.io/tap-enabled": "true",
    });
    if attached {
        annotations["k8s.v1.cni.cncf.io/networks"] = json!("linkerd-cni");
    }
    let env: Vec<Value> = (0..12)
        .map(|n| json!({"name": format!("LINKERD2_PROXY_SETTING_{n}"), "value": "x".repeat(40)}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("app-{i}"), "labels": {"app": "bench", "linkerd.io/workload-ns": "bench"},
                     "annotations": annotations},
        "spec": {
            "initContainers": [{"name": "linkerd-network-validator", "image": "cr.l5d.io/linkerd/proxy:stable-2.19.0"}],
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 8080}]},
                {"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:stable-2.19.0", "env": env,
                 "securityContext": {"runAsUser": 2102}}
            ]
        }
    }))
    .expect("a Pod")
}

/// The fixture ConfigMap, YAML, as JSON (through the crate's own reader).
fn linkerd_multus_yaml_to_json(yaml: &str) -> Result<String> {
    let node = linkerd_multus::yaml::parse_document(yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(node.to_json().to_string())
}

fn show(counts: &BTreeMap<String, usize>) -> String {
    let total: usize = counts.values().sum();
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("{total} requests ({})", parts.join(", "))
}
