//! The soak: two replicas of the webhook and of the NAD controller (each
//! replica a `webhook` and a `controller` process), with the packages'
//! rights, the webhook called by a real kube-apiserver for every pod created in the
//! soak's namespaces, at a steady rate for `SOAK_SECONDS` (75 by default;
//! `scripts/soak.sh` runs the long form) while the API server is restarted
//! twice, etcd is compacted, the leader is killed (and comes back, as its
//! Deployment would bring it), namespaces are enabled, disabled and created.
//! Afterwards: no pod of an enabled namespace was admitted without
//! `linkerd-cni`, none of another namespace with it, the NADs converge to
//! exactly the expected set, and the memory of the replica that ran
//! throughout is flat.
//!
//! One stand-in: the API server calls the webhook by URL, through a TCP
//! forwarder in this process that connects to whichever replica accepts, as
//! the webhook's Service would: there is no kube-proxy here.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::common::https::{Connection, connector, http_get};
use crate::common::kube_apiserver::{ApiServer, ControlPlane, free_port};
use crate::common::process::Guard;
use crate::common::{bin, repo_path};

#[path = "soak/forwarder.rs"]
mod forwarder;

use forwarder::Forwarder;

const MULTUS: &str = "linkerd.io/multus";
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const CONFIG_MAP: &str = include_str!("../../../shared/fixtures/linkerd-cni/version-2.19.yaml");
/// The label that puts a namespace under the soak's webhook configuration.
const SOAK_LABEL: &str = "soak.linkerd-multus.test/selected";

/// How long the soak runs: `SOAK_SECONDS`, 75 by default.
fn soak_seconds() -> u64 {
    std::env::var("SOAK_SECONDS")
        .ok()
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("SOAK_SECONDS={s}: not a number of seconds"))
        })
        .unwrap_or(75)
}

/// A replica: a `webhook` process and a `controller` process, each with its account;
/// killed when dropped.
struct Replica {
    identity: String,
    webhook: Guard,
    controller: Guard,
    addr: SocketAddr,
    ops: String,
    controller_ops: String,
    log: PathBuf,
    controller_log: PathBuf,
}

/// The kubeconfigs of the two accounts.
struct Accounts {
    webhook: PathBuf,
    controller: PathBuf,
}

impl Replica {
    fn start(identity: &str, accounts: &Accounts, dir: &Path, cert: &Path, key: &Path) -> Replica {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let ops = format!("127.0.0.1:{}", free_port());
        let controller_ops = format!("127.0.0.1:{}", free_port());
        let log = dir.join(format!("{identity}.log"));
        let controller_log = dir.join(format!("{identity}-controller.log"));
        let webhook = Guard::spawn(
            Command::new(bin())
                .arg("webhook")
                .args(["--missing-nad", "attach"])
                .args(["--listen", &addr.to_string(), "--ops-listen", &ops])
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key)
                .args(["--shutdown-delay", "0s"])
                .env("KUBECONFIG", &accounts.webhook)
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        )
        .expect("starting linkerd-multus webhook");
        let controller = Guard::spawn(
            Command::new(bin())
                .arg("controller")
                .args(["--ops-listen", &controller_ops])
                .args(["--lease-duration", "3s", "--identity", identity])
                .env("KUBECONFIG", &accounts.controller)
                .env("POD_NAMESPACE", "linkerd-multus")
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&controller_log).unwrap()),
        )
        .expect("starting linkerd-multus controller");
        Replica {
            identity: identity.to_string(),
            webhook,
            controller,
            addr,
            ops,
            controller_ops,
            log,
            controller_log,
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for ops in [&self.ops, &self.controller_ops] {
            while http_get(ops, "/readyz").map(|(s, _)| s) != Some(200) {
                assert!(
                    Instant::now() < deadline,
                    "{} never became ready: {:?}\n{}",
                    self.identity,
                    http_get(ops, "/readyz"),
                    self.log_tail()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn leads(&self) -> bool {
        http_get(&self.controller_ops, "/metrics").is_some_and(|(_, text)| {
            text.lines()
                .any(|l| l == "linkerd_multus_nad_controller_leader 1")
        })
    }

    /// Resident memory of its two processes now, in KiB.
    fn rss_kib(&self) -> u64 {
        [&self.webhook, &self.controller]
            .iter()
            .map(|child| {
                let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
                    .expect("the replica runs");
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                    .expect("VmRSS in /proc/PID/status")
            })
            .sum()
    }

    fn log_tail(&self) -> String {
        [&self.log, &self.controller_log]
            .iter()
            .map(|log| {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(20)..].join("\n")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn kill(&mut self) {
        for child in [&mut self.webhook, &mut self.controller] {
            child.kill().ok();
        }
    }
}

/// What the load made: pods created (namespace, name), and the failures.
#[derive(Default)]
struct Load {
    created: Vec<(String, String)>,
    failed: BTreeMap<String, usize>,
}

/// Creates a pod every `every` in the namespaces `targets` holds, round
/// robin, through the API server at `addr`, until `stop`.
fn run_load(
    plane: &'static ControlPlane,
    addr: String,
    targets: Arc<Mutex<Vec<String>>>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Load {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tls = connector(plane.ca_pem(), Some(&plane.admin), &[b"http/1.1"]);
    let mut load = Load::default();
    let mut conn: Option<Connection> = None;
    let mut next = Instant::now();
    for i in 0usize.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += every;
        let namespace = {
            let targets = targets.lock().unwrap();
            targets[i % targets.len()].clone()
        };
        let name = format!("soak-{i}");
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "annotations": {"linkerd.io/inject": "enabled"},
            },
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        });
        let path = format!("/api/v1/namespaces/{namespace}/pods");
        let outcome = runtime.block_on(async {
            if conn.is_none() {
                conn = Connection::open(&addr, &tls).await.ok();
            }
            let Some(c) = conn.as_mut() else {
                return Err("API server unreachable".to_string());
            };
            let sent = tokio::time::timeout(
                Duration::from_secs(15),
                c.post(&path, Bytes::from(pod.to_string())),
            )
            .await;
            match sent {
                Ok(Ok((201, _))) => Ok(()),
                Ok(Ok((status, body))) => {
                    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
                    Err(format!(
                        "{status} {}",
                        body["reason"].as_str().unwrap_or_default()
                    ))
                }
                Ok(Err(_)) | Err(_) => {
                    conn = None;
                    Err("API server connection lost".to_string())
                }
            }
        });
        match outcome {
            Ok(()) => load.created.push((namespace, name)),
            Err(why) => *load.failed.entry(why).or_default() += 1,
        }
    }
    load
}

/// The soak's namespaces: enabled ones that stay enabled, plain ones that
/// stay plain, and those switched during the soak, with their last state.
struct Namespaces {
    enabled: Vec<String>,
    plain: Vec<String>,
    switched: BTreeMap<String, bool>,
}

impl Namespaces {
    fn all(&self) -> BTreeSet<String> {
        self.enabled
            .iter()
            .chain(&self.plain)
            .chain(self.switched.keys())
            .cloned()
            .collect()
    }

    fn expected_nads(&self) -> BTreeSet<String> {
        let switched = self.switched.iter().filter(|(_, on)| **on);
        self.enabled
            .iter()
            .chain(switched.map(|(ns, _)| ns))
            .cloned()
            .collect()
    }
}

fn namespace(plane: &ControlPlane, prefix: &str, enabled: bool) -> String {
    let name = plane.unique_name(prefix);
    let annotation = if enabled {
        format!("  annotations:\n    {MULTUS}: enabled\n")
    } else {
        String::new()
    };
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    {SOAK_LABEL}: \"true\"\n{annotation}"
    ));
    name
}

fn switch(plane: &ControlPlane, namespace: &str, on: bool) {
    let value = if on { "enabled" } else { "disabled" };
    plane.kubectl(&[
        "annotate",
        "namespace",
        namespace,
        "--overwrite",
        &format!("{MULTUS}={value}"),
    ]);
}

/// Namespaces holding the controller's NAD `linkerd-cni`, among `of`.
fn with_nad(plane: &ControlPlane, of: &BTreeSet<String>) -> BTreeSet<String> {
    let out = plane.kubectl(&[
        "get",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "-A",
        "--field-selector",
        "metadata.name=linkerd-cni",
        "-o",
        "json",
    ]);
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["metadata"]["labels"]["app.kubernetes.io/created-by"] == "linkerd-multus-controller"
        })
        .filter_map(|n| n["metadata"]["namespace"].as_str())
        .filter(|ns| of.contains(*ns))
        .map(str::to_string)
        .collect()
}

/// Whether each pod of the soak carries `linkerd-cni`, by namespace and name.
fn attached_pods(plane: &ControlPlane) -> BTreeMap<(String, String), bool> {
    let out = plane.kubectl(&["get", "pods", "-A", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let meta = &p["metadata"];
            let networks = meta["annotations"][NETWORKS].as_str().unwrap_or_default();
            (
                (
                    meta["namespace"].as_str().unwrap().to_string(),
                    meta["name"].as_str().unwrap().to_string(),
                ),
                networks.split(',').any(|n| n.trim() == "linkerd-cni"),
            )
        })
        .collect()
}

fn restart(plane: &ControlPlane, server: &ApiServer, down: Duration) {
    server.stop();
    std::thread::sleep(down);
    plane.start_ready(server);
}

#[test]
fn soak_admissions_and_nads_hold_through_restarts_compaction_and_a_leader_killed() {
    let seconds = soak_seconds();
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    // The API server everything talks to, restarted during the soak.
    let server = plane.new_api_server(&[]);
    plane.start_ready(&server);
    apply_the_packages(plane);
    let dir = tempfile::tempdir().unwrap();
    let account = |name: &str| {
        plane.service_account_kubeconfig_for(&server, "linkerd-multus", name, dir.path())
    };
    let accounts = Accounts {
        webhook: account("linkerd-multus-webhook"),
        controller: account("linkerd-multus-nad-controller"),
    };
    let (cert, key) = plane.leaf(&["127.0.0.1"]).write(dir.path());
    let mut namespaces = Namespaces {
        enabled: (0..4).map(|_| namespace(plane, "on", true)).collect(),
        plain: (0..2).map(|_| namespace(plane, "off", false)).collect(),
        switched: (0..2)
            .map(|i| (namespace(plane, "switched", i == 0), i == 0))
            .collect(),
    };
    let mut replicas = [
        Replica::start("replica-a", &accounts, dir.path(), &cert, &key),
        Replica::start("replica-b", &accounts, dir.path(), &cert, &key),
    ];
    replicas.iter().for_each(Replica::wait_ready);
    let forwarder = Forwarder::start(replicas.iter().map(|r| r.addr).collect());
    register_the_webhook(plane, &forwarder);

    let targets = Arc::new(Mutex::new(Vec::from_iter(namespaces.all())));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (targets, stop) = (targets.clone(), stop.clone());
        let addr = format!("127.0.0.1:{}", server.port());
        std::thread::spawn(move || run_load(plane, addr, targets, Duration::from_millis(200), stop))
    };

    let start_replica =
        |identity: &str| Replica::start(identity, &accounts, dir.path(), &cert, &key);
    let fleet = Fleet {
        replicas: &mut replicas,
        forwarder: &forwarder,
        start: &start_replica,
    };
    let (steady, rss_first, events) =
        inject_faults(plane, &server, fleet, &mut namespaces, &targets, seconds);
    stop.store(true, Ordering::Relaxed);
    let load = load.join().unwrap();
    let rss_last = replicas[steady].rss_kib();

    let converged = nads_converge(plane, &namespaces, &replicas);

    let checked = pods_attached_as_their_namespace_says(plane, &namespaces, &load);
    let sent = load.created.len() + load.failed.values().sum::<usize>();
    eprintln!(
        "soak of {seconds}s: {} pods created of {sent} sent, {checked} checked; failures {:?}; NADs converged {:.1}s after the load; replica {} RSS {} KiB at +{:.0}s, {} KiB at the end; {events:?}",
        load.created.len(),
        load.failed,
        converged.elapsed().as_secs_f64(),
        replicas[steady].identity,
        rss_first,
        seconds as f64 * 0.15,
        rss_last,
    );
    assert!(
        load.created.len() * 2 >= sent,
        "fewer than half the pods were created: {:?}",
        load.failed
    );
    // Flat: no more than 16 MiB over what it held at the start of the faults
    // (the long form, scripts/soak.sh, reports the figures).
    assert!(
        rss_last <= rss_first + 16 * 1024,
        "the replica's memory grew from {rss_first} KiB to {rss_last} KiB"
    );
}

/// The replicas, the forwarder in front of them, and how a replica is started again.
struct Fleet<'a> {
    replicas: &'a mut [Replica; 2],
    forwarder: &'a Forwarder,
    start: &'a dyn Fn(&str) -> Replica,
}

/// The faults, at fixed fractions of the soak; namespaces change between. The replica that
/// runs throughout, its RSS at the first fault, and what was done.
fn inject_faults(
    plane: &ControlPlane,
    server: &ApiServer,
    fleet: Fleet<'_>,
    namespaces: &mut Namespaces,
    targets: &Mutex<Vec<String>>,
    seconds: u64,
) -> (usize, u64, Vec<String>) {
    let Fleet {
        replicas,
        forwarder,
        start: start_replica,
    } = fleet;
    let start = Instant::now();
    let at = |fraction: f64| start + Duration::from_secs_f64(seconds as f64 * fraction);
    let wait_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
    let mut events = Vec::new();
    let mut note = |what: String| {
        eprintln!("soak +{:.0}s: {what}", start.elapsed().as_secs_f64());
        events.push(what);
    };
    wait_until(at(0.15));
    // The replica that runs throughout is the one that does not lead now.
    let leader = replicas
        .iter()
        .position(Replica::leads)
        .expect("a leader before the faults");
    let steady = 1 - leader;
    let rss_first = replicas[steady].rss_kib();
    restart(plane, server, Duration::from_secs(2));
    note("API server restarted".into());
    let fresh = namespace(plane, "fresh", true);
    targets.lock().unwrap().push(fresh.clone());
    namespaces.enabled.push(fresh);
    wait_until(at(0.3));
    plane.compact_etcd();
    note("etcd compacted".into());
    // One switched off (its NAD removed), one on (its NAD made).
    let (first_switched, second_switched) = {
        let mut keys = namespaces.switched.keys().cloned();
        (keys.next().unwrap(), keys.next().unwrap())
    };
    switch(plane, &first_switched, false);
    namespaces.switched.insert(first_switched.clone(), false);
    wait_until(at(0.4));
    let leader = replicas
        .iter()
        .position(Replica::leads)
        .expect("a leader before the kill");
    replicas[leader].kill();
    note(format!("leader {} killed", replicas[leader].identity));
    switch(plane, &second_switched, true);
    namespaces.switched.insert(second_switched, true);
    wait_until(at(0.5));
    let identity = replicas[leader].identity.clone();
    replicas[leader] = start_replica(&identity);
    forwarder.set_backends(replicas.iter().map(|r| r.addr).collect());
    note(format!("{identity} started again"));
    wait_until(at(0.65));
    restart(plane, server, Duration::from_secs(2));
    note("API server restarted again".into());
    let fresh = namespace(plane, "fresh", true);
    targets.lock().unwrap().push(fresh.clone());
    namespaces.enabled.push(fresh);
    wait_until(at(1.0));
    (steady, rss_first, events)
}

/// The CNI namespace, the webhook's and NAD controller's packages, and Linkerd-CNI's ConfigMap.
fn apply_the_packages(plane: &ControlPlane) {
    let read = |file: &str| std::fs::read_to_string(repo_path(file)).unwrap();
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    for file in [
        "deploy/namespace.yaml",
        "deploy/rbac.yaml",
        "deploy-nad-controller/rbac.yaml",
    ] {
        plane.apply(&read(file));
    }
    plane.apply(CONFIG_MAP);
}

/// A webhook configuration sending the soak's namespaces' pod creations to `forwarder`.
fn register_the_webhook(plane: &ControlPlane, forwarder: &Forwarder) {
    plane.apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: soak\nwebhooks:\n- name: attach.multus.linkerd.io\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n  timeoutSeconds: 5\n  clientConfig:\n    url: https://{}/mutate\n    caBundle: {}\n  rules:\n  - operations: [CREATE]\n    apiGroups: ['']\n    apiVersions: [v1]\n    resources: [pods]\n  namespaceSelector:\n    matchLabels:\n      {SOAK_LABEL}: \"true\"\n",
        forwarder.addr,
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            plane.ca_pem()
        )
    ));
}

/// The NADs converge to exactly the expected set; when the wait started.
fn nads_converge(plane: &ControlPlane, namespaces: &Namespaces, replicas: &[Replica]) -> Instant {
    // The NADs converge to exactly the expected set.
    let all = namespaces.all();
    let want = namespaces.expected_nads();
    let converged = Instant::now();
    loop {
        let have = with_nad(plane, &all);
        if have == want {
            break;
        }
        assert!(
            converged.elapsed() < Duration::from_secs(60),
            "the NADs never converged: {have:?}, not {want:?}\nreplica logs:\n{}\n{}",
            replicas[0].log_tail(),
            replicas[1].log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    converged
}

/// Every pod created in a namespace that stayed enabled carries linkerd-cni; none in a
/// namespace that stayed plain does. How many were checked.
fn pods_attached_as_their_namespace_says(
    plane: &ControlPlane,
    namespaces: &Namespaces,
    load: &Load,
) -> usize {
    // Every pod created in a namespace that stayed enabled carries
    // linkerd-cni; none in a namespace that stayed plain does.
    let pods = attached_pods(plane);
    let stable_on: BTreeSet<&String> = namespaces.enabled.iter().collect();
    let stable_off: BTreeSet<&String> = namespaces.plain.iter().collect();
    let mut checked = 0;
    for (namespace, name) in &load.created {
        let attached = pods
            .get(&(namespace.clone(), name.clone()))
            .unwrap_or_else(|| panic!("pod {namespace}/{name} was created but is not listed"));
        if stable_on.contains(namespace) {
            assert!(
                attached,
                "pod {namespace}/{name} admitted without linkerd-cni"
            );
            checked += 1;
        } else if stable_off.contains(namespace) {
            assert!(
                !attached,
                "pod {namespace}/{name} attached in a plain namespace"
            );
            checked += 1;
        }
    }
    checked
}
