//! Benchmark of the NAD controller (`linkerd-multus controller`)
//! at scale, against a real kube-apiserver.
//!
//! `cargo bench --bench controller` starts etcd and kube-apiserver with the
//! tests' harness (tests/common/kube_apiserver.rs; `eval "$(scripts/kube-assets.sh)"`
//! makes the folder of binaries `KUBEBUILDER_ASSETS` names), creates
//! `BENCH_NAMESPACES` namespaces (10,000 by default), every other one
//! annotated `linkerd.io/multus: enabled`, and the Linkerd-CNI ConfigMap.
//! The controller talks to a second API server on the same etcd, whose audit
//! log (level Metadata, one line per request) holds its requests (those of
//! the user `admin`; the API server's own are left out).
//!
//! It measures, and prints:
//!
//! 1. start: from starting the controller until every enabled namespace has
//!    its NAD (the `linkerd_multus_nads_managed` gauge, then a list);
//! 2. a ConfigMap change: from the edit until every NAD has the new config;
//! 3. a restart with everything current: the writes it makes (target: none);
//!
//! with, for each, the NAD writes from the audit log and from the
//! controller's own counter (target: one per NAD that must change, none for
//! the rest), every request by verb and resource, and the controller's peak
//! RSS (VmHWM; targets at 10,000 namespaces: under 64 MiB, the packages'
//! limit, before any workload; under 128 MiB, the limit install and the chart
//! set with the restarts on, with 50,000 pods).
//!
//! The controller runs with its config restarts on (`--restart-stale-workloads
//! --restart-concurrency BENCH_RESTART_CONCURRENCY`, 100 by default): after the
//! start, each enabled namespace gets an opted-in Deployment, its ReplicaSet and
//! `BENCH_PODS` / 5,000 pods (50,000 in all), stamped with the current config's
//! hash (target: no patch). The ConfigMap edit makes all of them stale: the
//! benchmark plays the Deployment controller (there is no controller manager):
//! when a Deployment's generation moves past its observed one it stamps the
//! Deployment's pods with the template's hash, as their replacements would be,
//! and writes its rollout status complete. The audit log must show exactly one
//! template patch per workload, and never more rolling at once than the
//! concurrency (a patch counts as rolling until the benchmark began writing its
//! status); the restart must patch none. Every figure is checked; a miss of a
//! write target fails the run. `BENCH_QUICK=1` (or `-- --quick`) is a smoke run
//! on 200 namespaces and 1,000 pods.

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
#[path = "../tests/controller/audit.rs"]
#[allow(dead_code)]
mod requests;
// The YAML reader of kube_apiserver's server-side apply.
#[path = "../tests/common/yaml.rs"]
#[allow(dead_code)]
mod yaml;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use audit::{admin_client, audited, audited_api_server};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube_apiserver::{ApiServer, ControlPlane};
use linkerd_multus::linkerd_cni::restarts::{HASH_ANNOTATION, OPT_IN_ANNOTATION};
use linkerd_multus::linkerd_cni::rollout::config_hash;
use process::Guard;
use serde_json::json;

const CONFIG_MAP: &str = include_str!("../../shared/fixtures/linkerd-cni/version-2.19.yaml");
/// How long each phase may take before the run fails (a quick run: 60 s).
fn phase_limit() -> Duration {
    if quick() {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(600)
    }
}

fn quick() -> bool {
    std::env::args().any(|a| a == "--quick") || std::env::var_os("BENCH_QUICK").is_some()
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

/// The controller process, killed when dropped.
struct Controller {
    child: Guard,
    ops: String,
}

impl Controller {
    fn start(kubeconfig: &Path, dir: &Path, log: &str, concurrency: usize) -> Result<Controller> {
        let ops = format!("127.0.0.1:{}", kube_apiserver::free_port());
        let child = Guard::spawn(
            Command::new(env!("CARGO_BIN_EXE_linkerd-multus"))
                .args(["controller", "--lease-namespace", "linkerd-cni"])
                .args(["--ops-listen", &ops])
                .arg("--restart-stale-workloads")
                .arg(format!("--restart-concurrency={concurrency}"))
                .args(["--log-level", "info"])
                .env("KUBECONFIG", kubeconfig)
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(log))?),
        )
        .context("starting linkerd-multus controller")?;
        Ok(Controller { child, ops })
    }

    fn metrics(&self) -> Option<String> {
        https::http_get(&self.ops, "/metrics").map(|(_, body)| body)
    }

    /// The sum of the metric lines starting with `name`.
    fn metric(&self, name: &str) -> f64 {
        self.metrics()
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    /// Peak resident memory, MiB.
    fn peak_rss_mib(&self) -> Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no VmHWM"))?;
        Ok(kib / 1024.0)
    }

    /// Waits until `check` holds, polling every 20 ms.
    fn wait(&mut self, what: &str, mut check: impl FnMut(&Controller) -> bool) -> Result<Duration> {
        let start = Instant::now();
        while !check(self) {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("the controller exited ({status}) while waiting for {what}");
            }
            if start.elapsed() > phase_limit() {
                bail!("{what}: not within {:?}", phase_limit());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(start.elapsed())
    }
}

fn nad_writes(counts: &BTreeMap<String, usize>) -> usize {
    counts
        .iter()
        .filter(|(k, _)| {
            k.ends_with(" network-attachment-definitions")
                && ["patch ", "create ", "update ", "delete "]
                    .iter()
                    .any(|v| k.starts_with(v))
        })
        .map(|(_, n)| n)
        .sum()
}

/// The controller's passes of the restarts.
const PASSES: &str = "linkerd_multus_config_restart_passes_total";

fn template_patches(counts: &BTreeMap<String, usize>) -> usize {
    [
        "patch deployments",
        "patch statefulsets",
        "patch daemonsets",
    ]
    .iter()
    .filter_map(|k| counts.get(*k))
    .sum()
}

/// The most workloads rolling at once: at each template patch, those patched so far less
/// those whose status the benchmark had begun writing complete (a lower bound of what the
/// controller counts, which sees a completion only after it is written).
fn most_rolling(patches: &[&requests::Request], completions: &[(String, Timestamp)]) -> usize {
    let mut done: Vec<Timestamp> = completions.iter().map(|(_, t)| *t).collect();
    done.sort();
    patches
        .iter()
        .enumerate()
        .map(|(i, patch)| i + 1 - done.partition_point(|t| *t < patch.received))
        .max()
        .unwrap_or(0)
}

fn show(counts: &BTreeMap<String, usize>) -> String {
    let total: usize = counts.values().sum();
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("{total} requests ({})", parts.join(", "))
}

/// Every NAD's config, by namespace, listed through the admin's client.
async fn nad_configs(client: &kube::Client) -> Result<BTreeMap<String, String>> {
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
        "network-attachment-definitions",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut configs = BTreeMap::new();
    let mut params = ListParams::default().limit(1000);
    loop {
        let page = api.list(&params).await?;
        for nad in page.items {
            let ns = nad.metadata.namespace.clone().unwrap_or_default();
            let config = nad.data["spec"]["config"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            configs.insert(ns, config);
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    Ok(configs)
}

fn run() -> Result<()> {
    let quick = quick();
    let size = |var: &str, quick_size: usize, full: usize| -> Result<usize> {
        match std::env::var(var) {
            Ok(n) => n
                .parse()
                .with_context(|| format!("{var}={n}: not a number")),
            Err(_) if quick => Ok(quick_size),
            Err(_) => Ok(full),
        }
    };
    let namespaces = size("BENCH_NAMESPACES", 200, 10_000)?;
    let pods = size("BENCH_PODS", 1_000, 50_000)?;
    let concurrency = size("BENCH_RESTART_CONCURRENCY", 25, 100)?;
    let dir = tempfile::tempdir()?;
    let mut bench = Bench::start(dir.path(), namespaces, concurrency)?;
    bench.start_controller()?;
    let started = bench.controller().peak_rss_mib()?;
    let with_workloads = bench.add_workloads(pods)?;
    let restarted = bench.change_config()?;
    let second = bench.restart()?;
    let peak = restarted.max(second);
    let at_scale = namespaces >= 10_000 && pods >= 50_000;
    let missed = |over: bool| if at_scale && over { "  MISSED" } else { "" };
    println!(
        "memory: peak RSS {started:.1} MiB after the start, before any workload (target under 64 MiB, the package's limit){}; {peak:.1} MiB with the restarts (target under 128 MiB, the limit install and the chart set with them, at 10,000 namespaces and 50,000 pods){}: the first process {with_workloads:.1} MiB with the workloads, {restarted:.1} MiB after the edit and the restarts, the second {second:.1} MiB",
        missed(started >= 64.0),
        missed(peak >= 128.0),
    );
    if !bench.failures.is_empty() {
        bail!("{}", bench.failures.join("; "));
    }
    Ok(())
}

/// When the benchmark began writing each Deployment's rollout status complete, by namespace.
type Completions = Arc<Mutex<Vec<(String, Timestamp)>>>;

/// An audited API server with `namespaces` namespaces, half of them enabled,
/// and the controller under measurement.
struct Bench<'a> {
    dir: &'a Path,
    plane: &'static ControlPlane,
    /// The API server the controller talks to, which writes the audit log.
    _server: ApiServer,
    audit: std::path::PathBuf,
    /// Audit log entries already counted.
    mark: usize,
    controller_kubeconfig: std::path::PathBuf,
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    namespaces: usize,
    enabled: usize,
    controller: Option<Controller>,
    /// The controller's `--restart-concurrency`.
    concurrency: usize,
    /// The namespaces with a Deployment to restart.
    workloads: usize,
    completions: Completions,
    failures: Vec<String>,
}

impl<'a> Bench<'a> {
    /// Starts the audited API server, the ConfigMap and the namespaces.
    fn start(dir: &'a Path, namespaces: usize, concurrency: usize) -> Result<Bench<'a>> {
        let plane = ControlPlane::shared();
        plane.install_nad_crd();
        let (server, audit) = audited_api_server(plane, dir)?;
        let controller_kubeconfig = plane.admin_kubeconfig_for(&server, dir);
        plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
        plane.apply(CONFIG_MAP);

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let client = admin_client(plane, &runtime)?;
        let started = Instant::now();
        runtime.block_on(create_namespaces(&client, namespaces))?;
        let enabled = namespaces.div_ceil(2);
        println!(
            "NAD controller benchmark: {namespaces} namespaces ({enabled} enabled), created in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let (mark, _) = audited(&audit, 0)?;
        Ok(Bench {
            dir,
            plane,
            _server: server,
            audit,
            mark,
            controller_kubeconfig,
            runtime,
            client,
            namespaces,
            enabled,
            controller: None,
            concurrency,
            workloads: 0,
            completions: Completions::default(),
            failures: Vec::new(),
        })
    }

    /// The audit log's requests since the last count.
    fn audited(&mut self) -> Result<BTreeMap<String, usize>> {
        let (mark, counts) = audited(&self.audit, self.mark)?;
        self.mark = mark;
        Ok(counts)
    }

    fn controller(&mut self) -> &mut Controller {
        self.controller.as_mut().expect("the controller runs")
    }

    /// 1. Start: every enabled namespace's NAD, one write each.
    fn start_controller(&mut self) -> Result<()> {
        let enabled = self.enabled;
        let started = Instant::now();
        let controller = Controller::start(
            &self.controller_kubeconfig,
            self.dir,
            "controller.log",
            self.concurrency,
        )?;
        let controller = self.controller.insert(controller);
        controller.wait("every enabled namespace's NAD", |c| {
            c.metric("linkerd_multus_nads_managed ") as usize >= enabled
        })?;
        let took = started.elapsed();
        let configs = self.runtime.block_on(nad_configs(&self.client))?;
        if configs.len() != enabled {
            bail!("{} NADs listed, not {enabled}", configs.len());
        }
        let writes = self.controller().metric("linkerd_multus_nad_writes_total");
        let counts = self.audited()?;
        println!(
            "start:  all {enabled} NADs applied in {:.2} s; NAD writes: {} by the audit log, {writes} by the controller (target {enabled}); {}",
            took.as_secs_f64(),
            nad_writes(&counts),
            show(&counts)
        );
        if nad_writes(&counts) != enabled || writes as usize != enabled {
            self.failures.push(format!(
                "start: {} NAD writes, not {enabled}",
                nad_writes(&counts)
            ));
        }
        Ok(())
    }

    /// Each enabled namespace gets an opted-in Deployment whose pods run the current config:
    /// none is patched. The benchmark's Deployment controller starts. The peak RSS.
    fn add_workloads(&mut self, pods: usize) -> Result<f64> {
        let configs = self.runtime.block_on(nad_configs(&self.client))?;
        let hashes: BTreeMap<String, String> = configs
            .iter()
            .map(|(ns, config)| (ns.clone(), config_hash(config)))
            .collect();
        let per_workload = (pods / hashes.len().max(1)).max(1);
        self.workloads = hashes.len();
        let started = Instant::now();
        self.runtime
            .block_on(create_workloads(&self.client, &hashes, per_workload))?;
        println!(
            "workloads: {} opted-in Deployments, {} ReplicaSets and {} pods stamped with the current config, created in {:.1} s",
            self.workloads,
            self.workloads,
            self.workloads * per_workload,
            started.elapsed().as_secs_f64()
        );
        self.runtime.spawn(deployment_controller(
            self.client.clone(),
            per_workload,
            self.completions.clone(),
        ));
        let passes = self.controller().metric(PASSES);
        self.controller()
            .wait("three passes of the restarts over the new workloads", |c| {
                c.metric(PASSES) >= passes + 3.0
            })?;
        let counts = self.audited()?;
        let patches = template_patches(&counts);
        println!(
            "current: template patches {patches} by the audit log (target 0); {}",
            show(&counts)
        );
        if patches != 0 {
            self.failures
                .push(format!("current: {patches} template patches, not 0"));
        }
        self.controller().peak_rss_mib()
    }

    /// 2. A ConfigMap change reaches every NAD, one write each, and restarts every
    ///    workload, one patch each, paced. The peak RSS.
    fn change_config(&mut self) -> Result<f64> {
        let enabled = self.enabled;
        let workloads = self.workloads;
        let edited = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
        let started = Instant::now();
        let since = Timestamp::now();
        self.plane.apply(&edited);
        let updated = self.controller().wait("every NAD updated", |c| {
            c.metric("linkerd_multus_nad_reconciles_total{outcome=\"updated\"}") as usize >= enabled
        })?;
        let configs = self.runtime.block_on(nad_configs(&self.client))?;
        let stale = configs
            .values()
            .filter(|c| !c.contains("\"debug\""))
            .count();
        if stale > 0 {
            self.failures
                .push(format!("{stale} NADs without the new config"));
        }
        let completions = self.completions.clone();
        self.controller()
            .wait("every workload restarted and rolled out", |c| {
                completions.lock().unwrap().len() >= workloads
                    && c.metric("linkerd_multus_config_restarts_total") as usize >= workloads
            })?;
        let restarted = started.elapsed();
        // Let any stray write land before counting.
        std::thread::sleep(Duration::from_secs(2));
        let counts = self.audited()?;
        println!(
            "change: the ConfigMap edit reached all {enabled} NADs in {:.2} s; NAD writes: {} by the audit log (target {enabled})",
            updated.as_secs_f64(),
            nad_writes(&counts),
        );
        if nad_writes(&counts) != enabled {
            self.failures.push(format!(
                "change: {} NAD writes, not {enabled}",
                nad_writes(&counts)
            ));
        }
        let requests: Vec<requests::Request> = requests::requests(&self.audit, "admin")
            .into_iter()
            .filter(|r| r.received >= since)
            .collect();
        let patches: Vec<&requests::Request> = (requests.iter())
            .filter(|r| r.resource == "deployments" && r.verb == "patch")
            .collect();
        // When each namespace's NAD took the new config: its write's answer.
        let nad_written: BTreeMap<&str, Timestamp> = (requests.iter())
            .filter(|r| r.is_nad_write() && r.code < 300)
            .map(|r| (r.namespace.as_str(), r.done))
            .collect();
        let early = (patches.iter())
            .filter(|p| {
                nad_written
                    .get(p.namespace.as_str())
                    .is_none_or(|nad| *nad > p.received)
            })
            .count();
        let once: HashSet<&str> = patches.iter().map(|r| r.namespace.as_str()).collect();
        let in_flight = most_rolling(&patches, &self.completions.lock().unwrap());
        let concurrency = self.concurrency;
        println!(
            "restarts: {} stale workloads restarted and rolled out {:.2} s after the edit; template patches: {} by the audit log for {} workloads, {} by the controller (target {workloads}, one each), {early} before their namespace's NAD held the new config (target 0); at most {in_flight} rolling at once (--restart-concurrency {concurrency}); {}",
            workloads,
            restarted.as_secs_f64(),
            patches.len(),
            once.len(),
            self.controller()
                .metric("linkerd_multus_config_restarts_total"),
            show(&counts)
        );
        if patches.len() != workloads || once.len() != workloads {
            self.failures.push(format!(
                "restarts: {} template patches of {} workloads, not one each of {workloads}",
                patches.len(),
                once.len()
            ));
        }
        if early != 0 {
            self.failures.push(format!(
                "restarts: {early} template patches before their namespace's NAD was written"
            ));
        }
        if in_flight > concurrency {
            self.failures.push(format!(
                "restarts: {in_flight} rolling at once, over the concurrency of {concurrency}"
            ));
        }
        self.controller().peak_rss_mib()
    }

    /// 3. A restart with every NAD current writes nothing. The peak RSS.
    fn restart(&mut self) -> Result<f64> {
        let namespaces = self.namespaces;
        drop(self.controller.take());
        // The killed replica's Lease expires before the new one leads.
        let started = Instant::now();
        let controller = Controller::start(
            &self.controller_kubeconfig,
            self.dir,
            "restart.log",
            self.concurrency,
        )?;
        let controller = self.controller.insert(controller);
        controller.wait("every namespace reconciled after the restart", |c| {
            c.metric("linkerd_multus_nad_reconciles_total") as usize >= namespaces
        })?;
        let took = started.elapsed();
        controller.wait("three passes of the restarts", |c| c.metric(PASSES) >= 3.0)?;
        let counts = self.audited()?;
        let restart_writes = self.controller().metric("linkerd_multus_nad_writes_total");
        println!(
            "restart: {namespaces} namespaces reconciled in {:.2} s (the lease of the killed one expiring first); NAD writes: {} by the audit log, {restart_writes} by the controller (target 0); template patches: {} (target 0); {}",
            took.as_secs_f64(),
            nad_writes(&counts),
            template_patches(&counts),
            show(&counts)
        );
        if nad_writes(&counts) != 0 || restart_writes != 0.0 {
            self.failures.push(format!(
                "restart: {} NAD writes, not 0",
                nad_writes(&counts)
            ));
        }
        if template_patches(&counts) != 0 {
            self.failures.push(format!(
                "restart: {} template patches, not 0",
                template_patches(&counts)
            ));
        }
        self.controller().peak_rss_mib()
    }
}

/// Creates `namespaces` namespaces, 32 at a time, every other one enabled.
async fn create_namespaces(client: &kube::Client, namespaces: usize) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    all(0..namespaces, |i| {
        let api = api.clone();
        async move {
            let mut ns: Namespace = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("bench-{i}")}
            }))?;
            if i % 2 == 0 {
                ns.metadata.annotations =
                    Some([("linkerd.io/multus".to_string(), "enabled".to_string())].into());
            }
            api.create(&PostParams::default(), &ns).await?;
            anyhow::Ok(())
        }
    })
    .await
}

/// Creates in each namespace of `hashes` Deployment `app` (opted in to restarts, its pod
/// template stamped with the namespace's hash, its rollout complete), ReplicaSet `app-1` and
/// `pods` pods of it stamped with the same hash; 32 namespaces at a time.
async fn create_workloads(
    client: &kube::Client,
    hashes: &BTreeMap<String, String>,
    pods: usize,
) -> Result<()> {
    let params = PostParams::default();
    all(hashes, |(ns, hash)| {
            let params = &params;
            async move {
                let template = json!({
                    "metadata": {"labels": {"app": "app"},
                                 "annotations": {OPT_IN_ANNOTATION: "enabled", HASH_ANNOTATION: hash}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                });
                let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
                let deployment = deployments
                    .create(
                        params,
                        &serde_json::from_value(json!({
                            "metadata": {"name": "app", "labels": {"bench": "restarts"}},
                            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "app"}},
                                     "template": template}
                        }))?,
                    )
                    .await?;
                write_complete(&deployments, "app", 1, pods).await?;
                let owner = |kind: &str, name: &str, uid: &Option<String>| {
                    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                            "uid": uid, "controller": true}])
                };
                let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
                let rs = replica_sets
                    .create(
                        params,
                        &serde_json::from_value(json!({
                            "metadata": {"name": "app-1",
                                         "ownerReferences": owner("Deployment", "app", &deployment.metadata.uid)},
                            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "app"}},
                                     "template": template}
                        }))?,
                    )
                    .await?;
                let api: Api<Pod> = Api::namespaced(client.clone(), ns);
                for i in 0..pods {
                    let pod = json!({
                        "metadata": {"name": format!("app-1-{i}"), "labels": {"app": "app"},
                                     "annotations": {HASH_ANNOTATION: hash},
                                     "ownerReferences": owner("ReplicaSet", "app-1", &rs.metadata.uid)},
                        "spec": template["spec"]
                    });
                    api.create(params, &serde_json::from_value(pod)?).await?;
                }
                anyhow::Ok(())
            }
        })
    .await
}

/// Writes Deployment `name`'s rollout of `generation` complete with `replicas` replicas.
async fn write_complete(
    api: &Api<Deployment>,
    name: &str,
    generation: i64,
    replicas: usize,
) -> Result<()> {
    let status = json!({"status": {
        "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Plays the Deployment controller for the benchmark's Deployments (there is no controller
/// manager): when one's generation moves past the observed one, its `pods` pods are stamped
/// with its template's hash (as their replacements would be) and its rollout written complete,
/// when that write began recorded in `completions`.
async fn deployment_controller(client: kube::Client, pods: usize, completions: Completions) {
    let api: Api<Deployment> = Api::all(client.clone());
    let seen = Mutex::new(HashSet::new());
    let config = watcher::Config::default().labels("bench=restarts");
    watcher(api, config)
        .default_backoff()
        .applied_objects()
        .for_each_concurrent(64, |deployment| {
            let (client, completions, seen) = (client.clone(), completions.clone(), &seen);
            async move {
                let Ok(deployment) = deployment else {
                    return;
                };
                let generation = deployment.metadata.generation.unwrap_or_default();
                let observed = deployment
                    .status
                    .as_ref()
                    .and_then(|s| s.observed_generation)
                    .unwrap_or_default();
                let ns = deployment.metadata.namespace.clone().unwrap_or_default();
                if generation < 2
                    || observed >= generation
                    || !seen.lock().unwrap().insert((ns.clone(), generation))
                {
                    return;
                }
                if let Err(e) =
                    roll(&client, &deployment, &ns, pods, generation, &completions).await
                {
                    eprintln!("rolling Deployment {ns}/app out: {e:#}");
                }
            }
        })
        .await;
}

async fn roll(
    client: &kube::Client,
    deployment: &Deployment,
    ns: &str,
    pods: usize,
    generation: i64,
    completions: &Completions,
) -> Result<()> {
    let hash = (deployment.spec.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref()?.get(HASH_ANNOTATION))
        .context("no hash in the template")?;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let stamp = json!({"metadata": {"annotations": {HASH_ANNOTATION: hash}}});
    for i in 0..pods {
        api.patch(
            &format!("app-1-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&stamp),
        )
        .await?;
    }
    let began = Timestamp::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    write_complete(&deployments, "app", generation, pods).await?;
    completions.lock().unwrap().push((ns.to_string(), began));
    Ok(())
}

/// Runs `make` over `items`, 32 at a time, until one fails.
async fn all<I, F, Fut>(items: I, make: F) -> Result<()>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
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
