//! A kubelet for the tests: it runs the pods of a Deployment stored in a real
//! kube-apiserver the way a node would, so that what ships is tested as it
//! ships, from the manifests as the API server stored them (defaults filled).
//!
//! For each replica it plays, in order, the ReplicaSet controller (a Pod made
//! from the template, through the API server), the ServiceAccount admission
//! plugin (the `kube-api-access-*` projected volume, which this API server's
//! disabled plugin would add) and the kubelet: every volume from the API
//! server's Secrets, ConfigMaps, projected token and downward API, laid out as
//! its atomic writer lays them out (`..data` swapped on update); the
//! container's command (the image's `ENTRYPOINT`, read from the Dockerfile)
//! and args with `$(VAR)` expanded; its env with downward-API fields, Secret
//! and ConfigMap keys and the Service-link variables of the namespace's
//! Services; `runAsNonRoot` checked against the user it runs as; readiness
//! and liveness probes polled at their period, thresholds and timeouts; a
//! container that exits or fails liveness restarted (and recorded); SIGTERM,
//! then SIGKILL after `terminationGracePeriodSeconds`. It plays the endpoints
//! and EndpointSlice controllers (a pod's address is ready when its readiness
//! probe passes, and leaves as soon as it terminates) and the Deployment
//! controller (its status, and rollouts of maxSurge 1, maxUnavailable 0).
//! The API server reaches a Service through those Endpoints
//! (`--enable-aggregator-routing`, see [`Cluster`]).
//!
//! What differs from a node, each forced by running several pods on one host
//! without a container runtime for each (the [`Runtime::Process`] form; the
//! [`Runtime::Podman`] form runs the image itself and keeps every path):
//!
//! * ports: each replica listens on ports of its own, each `containerPort`
//!   mapped to a free port; `:PORT` at the end of an arg or env value is
//!   rewritten, and the Endpoints carry the mapped port;
//! * mount paths: a process sees every `mountPath` under its pod's folder; an
//!   arg or env value starting with a mount path gets that prefix;
//! * the API server: `KUBERNETES_SERVICE_HOST`/`PORT` name the API server's
//!   loopback address, not the `kubernetes` Service's cluster IP, which nothing
//!   routes here; a process (which cannot see the fixed in-cluster path of the
//!   token) gets `KUBECONFIG` naming the mounted token and CA instead;
//! * the address of every pod is this machine's own non-loopback address (the
//!   API server refuses loopback addresses in Endpoints);
//! * a process does not get a read-only root filesystem, dropped capabilities
//!   or seccomp; [`Runtime::Podman`] passes all of them to podman.

#![allow(dead_code)]

mod cert_manager;
mod controllers;
mod image;
mod pod;
mod probes;
mod volumes;

use crate::common::process::Guarded;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment as DeploymentObject;
use kube::Api;

use super::kube_apiserver::ControlPlane;

pub use cert_manager::CertManager;
pub use image::Runtime;
pub use pod::Exit;

use pod::Pod;

/// A cluster of the test's own whose API server reaches webhooks through
/// their Service's Endpoints (`--enable-aggregator-routing=true`: no
/// kube-proxy routes a cluster IP here), with a node that runs pods.
pub struct Cluster {
    /// The control plane; dropped with the cluster.
    pub plane: ControlPlane,
    node: Arc<Node>,
}

/// What the kubelet and the controllers it stands in for share.
pub(crate) struct Node {
    pub client: kube::Client,
    pub rt: tokio::runtime::Runtime,
    /// The API server as a pod reaches it: `127.0.0.1` and its port.
    pub api_host: String,
    pub api_port: u16,
    /// The API server's serving CA (PEM): `ca.crt` of the token volume.
    pub api_ca: String,
    /// The address of every pod on this node.
    pub host_ip: String,
    pub runtime: Runtime,
    /// Where pods keep their volumes and logs.
    pub dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    /// Runs `future` on the node's runtime, from any thread.
    pub fn block<F: std::future::Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }
}

impl Cluster {
    /// Starts a cluster of its own and a node with `runtime`.
    pub fn start(runtime: Runtime) -> Cluster {
        let plane = ControlPlane::start_own(&["--enable-aggregator-routing=true"])
            .unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the kubelet");
        let client = rt.block_on(admin_client(&plane.admin_kubeconfig));
        let dir = tempfile::Builder::new()
            .prefix("kubelet-")
            .tempdir()
            .expect("a folder for the kubelet");
        volumes::open_to_all(dir.path());
        let url = plane.url().trim_start_matches("https://").to_string();
        let (api_host, api_port) = url.rsplit_once(':').expect("HOST:PORT");
        let node = Node {
            client,
            rt,
            api_host: api_host.to_string(),
            api_port: api_port.parse().expect("the API server's port"),
            api_ca: plane.ca_pem().to_string(),
            host_ip: host_ip(),
            runtime,
            dir: dir.path().to_path_buf(),
            _dir: dir,
        };
        Cluster {
            plane,
            node: Arc::new(node),
        }
    }

    /// The admin's client.
    pub fn client(&self) -> kube::Client {
        self.node.client.clone()
    }

    /// Runs `future` on the cluster's runtime.
    pub fn block<F: std::future::Future>(&self, future: F) -> F::Output {
        self.node.block(future)
    }

    /// Starts the replicas of Deployment `namespace/name` as stored now.
    pub fn run_deployment(&self, namespace: &str, name: &str) -> Deployment {
        let api: Api<DeploymentObject> = Api::namespaced(self.client(), namespace);
        let object = self
            .block(api.get(name))
            .unwrap_or_else(|e| panic!("reading Deployment {namespace}/{name}: {e}"));
        let deployment = Deployment {
            node: self.node.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            object: Arc::new(Mutex::new(object)),
            pods: Arc::new(Mutex::new(Pods::default())),
            stop: Arc::new(AtomicBool::new(false)),
            sync: None,
            next: Arc::new(Mutex::new(0)),
        };
        deployment.start_sync()
    }
}

/// A client of the admin's kubeconfig.
async fn admin_client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("the admin kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the admin's client configuration");
    kube::Client::try_from(config).expect("the admin's client")
}

/// A non-loopback IPv4 address of this machine: the pods' address. The API
/// server refuses loopback ones in Endpoints; traffic to it stays on this
/// machine.
pub fn host_ip() -> String {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .guarded_output()
        .expect("hostname -I");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .expect("a non-loopback IPv4 address for the pods (hostname -I lists none)")
        .to_string()
}

/// The pods of one Deployment, kept in sync by a thread of their own.
pub struct Deployment {
    node: Arc<Node>,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    object: Arc<Mutex<DeploymentObject>>,
    pods: Arc<Mutex<Pods>>,
    stop: Arc<AtomicBool>,
    sync: Option<std::thread::JoinHandle<()>>,
    next: Arc<Mutex<u32>>,
}

/// The pods of a Deployment: those the node runs, and how the others ended.
#[derive(Default)]
struct Pods {
    live: Vec<Pod>,
    ended: Vec<Exit>,
}

/// How often the sync loop looks at its pods: probes, exits, volumes.
const TICK: Duration = Duration::from_millis(100);

impl Deployment {
    fn start_sync(mut self) -> Deployment {
        let replicas = self.object.lock().unwrap().spec.replicas.unwrap_or(1);
        for _ in 0..replicas {
            self.add_pod();
        }
        let (node, pods, stop, object) = (
            self.node.clone(),
            self.pods.clone(),
            self.stop.clone(),
            self.object.clone(),
        );
        self.sync = Some(std::thread::spawn(move || {
            let mut last = None;
            while !stop.load(Ordering::Relaxed) {
                {
                    let mut pods = pods.lock().unwrap();
                    let Pods { live, ended } = &mut *pods;
                    for pod in live.iter_mut() {
                        pod.sync(&node);
                    }
                    live.retain(|pod| match pod.final_exit() {
                        Some(exit) => {
                            ended.push(exit);
                            false
                        }
                        None => true,
                    });
                    let state = controllers::State::of(live);
                    if last.as_ref() != Some(&state) {
                        controllers::write(&node, &object.lock().unwrap(), live);
                        last = Some(state);
                    }
                }
                std::thread::sleep(TICK);
            }
        }));
        self
    }

    /// Makes one more pod from the template (as the ReplicaSet controller)
    /// and starts it (as the kubelet).
    fn add_pod(&self) {
        let n = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        let object = self.object.lock().unwrap().clone();
        let pod = Pod::create(&self.node, &object, n);
        self.pods.lock().unwrap().live.push(pod);
    }

    /// Waits until `count` pods are ready and their Endpoints written;
    /// panics with each pod's state and log tail after `timeout`.
    pub fn wait_ready(&self, count: usize, timeout: Duration) {
        if let Err(why) = self.ready_within(count, timeout) {
            panic!("{why}");
        }
    }

    /// Waits until `count` pods are ready and their Endpoints written; an
    /// `Err` with each pod's state and log tail when `timeout` passes first,
    /// or as soon as a container has restarted.
    pub fn ready_within(&self, count: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let (ready, restarted) = {
                let pods = self.pods.lock().unwrap();
                let ready = pods.live.iter().filter(|p| p.is_ready()).count();
                (ready, pods.live.iter().any(|p| !p.restarts.is_empty()))
            };
            if ready >= count && self.endpoints_ready() >= count {
                return Ok(());
            }
            if restarted || Instant::now() > deadline {
                return Err(format!(
                    "Deployment {}/{}: {ready} of {count} pods ready after {:?}{}\n{}",
                    self.namespace,
                    self.name,
                    timeout.saturating_sub(deadline.saturating_duration_since(Instant::now())),
                    if restarted {
                        ", a container restarted"
                    } else {
                        ""
                    },
                    self.describe()
                ));
            }
            std::thread::sleep(TICK);
        }
    }

    /// Ready addresses in the Endpoints of the Services that select these pods.
    fn endpoints_ready(&self) -> usize {
        let pods = self.pods.lock().unwrap();
        controllers::ready_in_endpoints(&self.node, &self.namespace, &pods.live)
    }

    /// Each pod's state, restarts, probe failures and last log lines.
    pub fn describe(&self) -> String {
        self.pods
            .lock()
            .unwrap()
            .live
            .iter()
            .map(Pod::describe)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The names of the running pods.
    pub fn pod_names(&self) -> Vec<String> {
        let pods = self.pods.lock().unwrap();
        pods.live.iter().map(|p| p.name.clone()).collect()
    }

    /// The log of pod `name` (stdout and stderr).
    pub fn log(&self, name: &str) -> String {
        let pods = self.pods.lock().unwrap();
        pods.live
            .iter()
            .find(|p| p.name == name)
            .map(Pod::log)
            .unwrap_or_default()
    }

    /// What went wrong that a user would see as restarts: every container
    /// exit and liveness failure so far, one line each.
    pub fn restarts(&self) -> Vec<String> {
        let pods = self.pods.lock().unwrap();
        pods.live
            .iter()
            .flat_map(|p| p.restarts.clone())
            .chain(pods.ended.iter().flat_map(|e| e.restarts.clone()))
            .collect()
    }

    /// A rolling restart as the Deployment controller does it with maxSurge
    /// 1 and maxUnavailable 0: for each old pod, a new one first, ready and
    /// in the Endpoints, then the old one terminated. Returns the old pods'
    /// exits.
    pub fn rolling_restart(&self, timeout: Duration) -> Vec<Exit> {
        let old = self.pod_names();
        let mut exits = Vec::new();
        for name in old {
            let want = self.pods.lock().unwrap().live.len() + 1;
            self.add_pod();
            self.wait_ready(want, timeout);
            exits.push(self.terminate(&name));
        }
        exits
    }

    /// Deletes pod `name` as a user or controller would: it leaves the
    /// Endpoints at once, gets SIGTERM, and SIGKILL after its grace period.
    /// Returns how it ended.
    pub fn terminate(&self, name: &str) -> Exit {
        if let Some(pod) = self
            .pods
            .lock()
            .unwrap()
            .live
            .iter_mut()
            .find(|p| p.name == name)
        {
            pod.begin_termination(&self.node);
        }
        loop {
            let pods = self.pods.lock().unwrap();
            if let Some(exit) = pods.ended.iter().find(|e| e.pod == name) {
                return exit.clone();
            }
            assert!(
                pods.live.iter().any(|p| p.name == name),
                "no pod {name} in Deployment {}/{}",
                self.namespace,
                self.name
            );
            drop(pods);
            std::thread::sleep(TICK);
        }
    }

    /// Terminates every pod at once (the Deployment deleted, or scaled to
    /// zero) and returns their exits.
    pub fn stop(mut self) -> Vec<Exit> {
        let names = self.pod_names();
        for pod in self.pods.lock().unwrap().live.iter_mut() {
            pod.begin_termination(&self.node);
        }
        let exits = names.iter().map(|name| self.terminate(name)).collect();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sync) = self.sync.take() {
            sync.join().expect("the kubelet's sync thread");
        }
        exits
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sync) = self.sync.take() {
            let _ = sync.join();
        }
        let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
        for pod in pods.live.iter_mut() {
            pod.kill();
            pod.delete_object(&self.node);
        }
    }
}
