//! Benchmark of the NAD controller (`linkerd-multus webhook --manage-nads`)
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
//! RSS (VmHWM; target: under 64 MiB at 10,000 namespaces). Every figure is
//! checked; a miss of a write target fails the run. `BENCH_QUICK=1` (or
//! `-- --quick`) is a smoke run on 200 namespaces.

#[path = "common/audit.rs"]
mod audit;
#[path = "../tests/common/https.rs"]
mod https;
#[path = "../tests/common/kube_apiserver.rs"]
mod kube_apiserver;
#[path = "../tests/common/ports.rs"]
mod ports;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use audit::{admin_client, audited, audited_api_server};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube_apiserver::{ApiServer, ControlPlane};

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
    child: Child,
    ops: String,
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

impl Controller {
    fn start(kubeconfig: &Path, dir: &Path, log: &str) -> Result<Controller> {
        let ca = https::Ca::new("bench CA");
        let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir);
        let ops = format!("127.0.0.1:{}", kube_apiserver::free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_linkerd-multus"))
            .args([
                "webhook",
                "--manage-nads",
                "--lease-namespace",
                "linkerd-cni",
            ])
            .args([
                "--listen",
                &format!("127.0.0.1:{}", kube_apiserver::free_port()),
            ])
            .args(["--ops-listen", &ops])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(["--log-level", "info", "--shutdown-delay", "0s"])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(log))?)
            .spawn()
            .context("starting linkerd-multus webhook --manage-nads")?;
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
    let quick =
        std::env::args().any(|a| a == "--quick") || std::env::var_os("BENCH_QUICK").is_some();
    let namespaces: usize = match std::env::var("BENCH_NAMESPACES") {
        Ok(n) => n.parse().context("BENCH_NAMESPACES")?,
        Err(_) if quick => 200,
        Err(_) => 10_000,
    };
    let dir = tempfile::tempdir()?;
    let mut bench = Bench::start(dir.path(), namespaces)?;
    bench.start_controller()?;
    let peak = bench.change_config()?;
    let peak = peak.max(bench.restart()?);
    println!(
        "memory: peak RSS {peak:.1} MiB (target under 64 MiB at 10,000 namespaces){}",
        if namespaces >= 10_000 && peak >= 64.0 {
            "  MISSED"
        } else {
            ""
        }
    );
    if !bench.failures.is_empty() {
        bail!("{}", bench.failures.join("; "));
    }
    Ok(())
}

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
    failures: Vec<String>,
}

impl<'a> Bench<'a> {
    /// Starts the audited API server, the ConfigMap and the namespaces.
    fn start(dir: &'a Path, namespaces: usize) -> Result<Bench<'a>> {
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
        let controller =
            Controller::start(&self.controller_kubeconfig, self.dir, "controller.log")?;
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

    /// 2. A ConfigMap change reaches every NAD, one write each. The peak RSS.
    fn change_config(&mut self) -> Result<f64> {
        let enabled = self.enabled;
        let edited = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
        let started = Instant::now();
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
        // Let any stray write land before counting.
        std::thread::sleep(Duration::from_secs(2));
        let counts = self.audited()?;
        println!(
            "change: the ConfigMap edit reached all {enabled} NADs in {:.2} s (from the edit: {:.2} s); NAD writes: {} by the audit log (target {enabled}); {}",
            updated.as_secs_f64(),
            started.elapsed().as_secs_f64() - 2.0,
            nad_writes(&counts),
            show(&counts)
        );
        if nad_writes(&counts) != enabled {
            self.failures.push(format!(
                "change: {} NAD writes, not {enabled}",
                nad_writes(&counts)
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
        let controller = Controller::start(&self.controller_kubeconfig, self.dir, "restart.log")?;
        let controller = self.controller.insert(controller);
        controller.wait("every namespace reconciled after the restart", |c| {
            c.metric("linkerd_multus_nad_reconciles_total") as usize >= namespaces
        })?;
        let took = started.elapsed();
        std::thread::sleep(Duration::from_secs(2));
        let counts = self.audited()?;
        let restart_writes = self.controller().metric("linkerd_multus_nad_writes_total");
        println!(
            "restart: {namespaces} namespaces reconciled in {:.2} s (the lease of the killed one expiring first); NAD writes: {} by the audit log, {restart_writes} by the controller (target 0); {}",
            took.as_secs_f64(),
            nad_writes(&counts),
            show(&counts)
        );
        if nad_writes(&counts) != 0 || restart_writes != 0.0 {
            self.failures.push(format!(
                "restart: {} NAD writes, not 0",
                nad_writes(&counts)
            ));
        }
        self.controller().peak_rss_mib()
    }
}

/// Creates `namespaces` namespaces, 32 at a time, every other one enabled.
async fn create_namespaces(client: &kube::Client, namespaces: usize) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    futures_util::stream::iter(0..namespaces)
        .map(|i| {
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
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}
