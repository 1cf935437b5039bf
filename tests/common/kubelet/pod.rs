//! One pod: made from a Deployment's template through the API server, its
//! volumes set up, its container started with the env and args the kubelet
//! gives it, probed, restarted when it exits or fails liveness, and ended
//! with SIGTERM, then SIGKILL after its grace period.

use crate::common::process::Guarded;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod as PodObject, Secret, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::super::kube_apiserver::free_port;
use super::super::process::Guard;
use super::Node;
use super::image::{ImageConfig, PUBLISHED_IMAGE, Runtime, program};
use super::probes::Prober;
use super::volumes::{self, Volume};

/// How a pod's container ended.
#[derive(Debug, Clone)]
pub struct Exit {
    /// The pod.
    pub pod: String,
    /// Its exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// From SIGTERM to its end.
    pub after_sigterm: Duration,
    /// Whether the grace period ran out (SIGKILL).
    pub killed: bool,
    /// The grace period.
    pub grace: Duration,
    /// The restarts it had before (container exits, liveness failures).
    pub restarts: Vec<String>,
    /// The end of its log.
    pub log_tail: String,
}

impl Exit {
    /// Exited 0 on its own within the grace period.
    pub fn is_clean(&self) -> bool {
        self.code == Some(0) && !self.killed && self.after_sigterm < self.grace
    }
}

/// A pod of the node.
pub struct Pod {
    pub name: String,
    object: PodObject,
    container: Container,
    dir: PathBuf,
    volumes: Vec<Volume>,
    /// Each `containerPort` → the port it listens on here.
    pub ports: BTreeMap<i32, u16>,
    child: Option<Guard>,
    readiness: Prober,
    liveness: Prober,
    waiting: Option<String>,
    terminating: Option<(Instant, bool)>,
    exit: Option<Exit>,
    /// Each restart, one line.
    pub restarts: Vec<String>,
    restart_at: Option<Instant>,
    synced: Instant,
    log: PathBuf,
    starts: u32,
    runtime: Runtime,
}

/// How often the volumes are read again (the kubelet: its sync period plus
/// the cache's TTL, about a minute; faster here so tests need not wait).
const VOLUME_SYNC: Duration = Duration::from_secs(1);

impl Pod {
    /// Makes pod `n` of `deployment` through the API server and starts it.
    pub fn create(node: &Node, deployment: &Deployment, n: u32) -> Pod {
        let object = make_pod(node, deployment, n);
        let spec = object.spec.as_ref().expect("a pod spec");
        assert_eq!(
            spec.containers.len(),
            1,
            "the harness runs pods of one container"
        );
        assert!(
            spec.init_containers.as_ref().is_none_or(Vec::is_empty),
            "the harness runs no init containers"
        );
        let container = spec.containers[0].clone();
        let name = object.metadata.name.clone().expect("a pod name");
        let dir = node.dir.join(&name);
        std::fs::create_dir_all(&dir).expect("a pod's folder");
        volumes::open_to_all(&dir);
        let volumes = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| Volume::new(v, &dir))
            .collect();
        let ports = container
            .ports
            .iter()
            .flatten()
            .map(|p| (p.container_port, free_port()))
            .collect();
        let mut pod = Pod {
            log: dir.join("container.log"),
            name,
            readiness: Prober::readiness(&container),
            liveness: Prober::liveness(&container),
            object,
            container,
            dir,
            volumes,
            ports,
            child: None,
            waiting: Some("ContainerCreating".into()),
            terminating: None,
            exit: None,
            restarts: Vec::new(),
            restart_at: None,
            synced: Instant::now() - VOLUME_SYNC,
            starts: 0,
            runtime: node.runtime.clone(),
        };
        pod.write_status(node);
        pod
    }

    /// One step of the kubelet's loop for this pod.
    pub fn sync(&mut self, node: &Node) {
        if self.exit.is_some() {
            return;
        }
        if let Some((since, killed)) = self.terminating {
            return self.sync_termination(since, killed);
        }
        if self.synced.elapsed() >= VOLUME_SYNC {
            self.synced = Instant::now();
            if let Err(why) = self.sync_volumes(node) {
                self.waiting = Some(why);
            }
        }
        if self.child.is_none() {
            return self.try_start(node);
        }
        if let Some(status) = self.child.as_mut().unwrap().try_wait().expect("waiting") {
            self.restarted(node, format!("the container exited ({status})"));
            return;
        }
        let ip = node.host_ip.clone();
        if self
            .readiness
            .tick(&self.container, &ip, &self.ports)
            .is_some()
        {
            self.write_status(node);
        }
        if self.liveness.tick(&self.container, &ip, &self.ports) == Some(false) {
            let why = self.liveness.last_failure.clone().unwrap_or_default();
            self.stop_container(self.grace());
            self.restarted(
                node,
                format!("killed after its liveness probe failed: {why}"),
            );
        }
    }

    fn sync_volumes(&mut self, node: &Node) -> Result<(), String> {
        let object = self.object.clone();
        for volume in &mut self.volumes {
            volume
                .sync(node, &object)
                .map_err(|e| format!("volume {}: {e}", volume.name))?;
        }
        Ok(())
    }

    fn try_start(&mut self, node: &Node) {
        if self.restart_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        if !self.volumes.iter().all(Volume::is_set_up) {
            return;
        }
        self.start(node);
        self.waiting = None;
        self.write_status(node);
    }

    /// Records a restart; the container starts again after a back-off, as
    /// CrashLoopBackOff (10 s, doubling, 5 min at most).
    fn restarted(&mut self, node: &Node, why: String) {
        let tail = tail(&self.log, 5);
        self.restarts
            .push(format!("pod {}: {why}; its log ends:\n{tail}", self.name));
        self.child = None;
        let doublings = self.restarts.len().saturating_sub(1).min(5);
        let backoff = Duration::from_secs(10 << doublings).min(Duration::from_secs(300));
        self.restart_at = Some(Instant::now() + backoff);
        self.readiness = Prober::readiness(&self.container);
        self.liveness = Prober::liveness(&self.container);
        self.waiting = Some(format!("CrashLoopBackOff: {why}"));
        self.write_status(node);
    }

    /// Whether its readiness probe passes.
    pub fn is_ready(&self) -> bool {
        self.child.is_some() && self.terminating.is_none() && self.readiness.passing
    }

    /// Whether it is being ended.
    pub fn is_terminating(&self) -> bool {
        self.terminating.is_some()
    }

    /// How it ended, once it has.
    pub fn final_exit(&self) -> Option<Exit> {
        self.exit.clone()
    }

    /// Its address and the ports, for the Endpoints.
    pub fn object(&self) -> &PodObject {
        &self.object
    }

    fn grace(&self) -> Duration {
        let spec = self.object.spec.as_ref().expect("a pod spec");
        Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30) as u64)
    }

    /// Deletes the pod object (the harness's own clean-up, or a deletion).
    pub fn delete_object(&self, node: &Node) {
        let api: Api<PodObject> = Api::namespaced(node.client.clone(), self.namespace());
        let _ = node.block(api.delete(&self.name, &DeleteParams::default()));
    }

    /// Deletes the pod object and sends SIGTERM: the Endpoints drop it at
    /// the next sync.
    pub fn begin_termination(&mut self, node: &Node) {
        if self.terminating.is_some() {
            return;
        }
        self.delete_object(node);
        self.terminating = Some((Instant::now(), false));
        match &mut self.child {
            Some(_) => self.signal("TERM"),
            None => {
                self.exit = Some(self.exit_of(None, false));
            }
        }
    }

    fn sync_termination(&mut self, since: Instant, killed: bool) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Some(status) = child.try_wait().expect("waiting") {
            self.exit = Some(self.exit_of(Some(status), killed));
            self.child = None;
            return;
        }
        if !killed && since.elapsed() >= self.grace() {
            self.signal("KILL");
            self.terminating = Some((since, true));
        }
    }

    fn exit_of(&self, status: Option<std::process::ExitStatus>, killed: bool) -> Exit {
        let since = self.terminating.map_or(Instant::now(), |(s, _)| s);
        Exit {
            pod: self.name.clone(),
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            after_sigterm: since.elapsed(),
            killed,
            grace: self.grace(),
            restarts: self.restarts.clone(),
            log_tail: tail(&self.log, 20),
        }
    }

    /// Kills the container at once (the harness's own clean-up).
    pub fn kill(&mut self) {
        if self.child.is_some() {
            self.signal("KILL");
            if let Some(child) = self.child.as_mut() {
                let _ = child.wait();
            }
        }
    }

    fn stop_container(&mut self, grace: Duration) {
        self.signal("TERM");
        let deadline = Instant::now() + grace;
        while let Some(child) = self.child.as_mut() {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            if Instant::now() > deadline {
                self.signal("KILL");
                let _ = self.child.as_mut().map(Guard::wait);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&mut self, signal: &str) {
        match (&self.runtime, self.runtime_name()) {
            (Runtime::Podman { podman, .. }, Some(container)) => {
                let _ = Command::new(podman)
                    .args(["kill", "--signal", signal, &container])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .guarded_status();
            }
            _ => {
                if let Some(child) = &self.child {
                    let signal = if signal == "KILL" {
                        nix::sys::signal::Signal::SIGKILL
                    } else {
                        nix::sys::signal::Signal::SIGTERM
                    };
                    let _ = child.signal(signal);
                }
            }
        }
    }

    fn namespace(&self) -> &str {
        self.object
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    /// The podman container's name, with the podman runtime.
    fn runtime_name(&self) -> Option<String> {
        matches!(self.runtime, Runtime::Podman { .. })
            .then(|| format!("{}-{}", self.name, self.starts))
    }

    /// Its state, probes, restarts and log tail, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "pod {}: running {}, ready {}, waiting {:?}, ports {:?}\n  readiness: {:?}\n  liveness: {:?}\n  restarts: {:#?}\n  log ({}):\n{}",
            self.name,
            self.child.is_some(),
            self.readiness.passing,
            self.waiting,
            self.ports,
            self.readiness.last_failure,
            self.liveness.last_failure,
            self.restarts,
            self.log.display(),
            tail(&self.log, 15)
        )
    }

    /// Its whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The Pod the ReplicaSet controller makes from `deployment`'s template, with
/// the ServiceAccount plugin's volume, created through the API server.
fn make_pod(node: &Node, deployment: &Deployment, n: u32) -> PodObject {
    let namespace = deployment.metadata.namespace.clone().expect("a namespace");
    let name = deployment.metadata.name.clone().expect("a name");
    let generation = deployment.metadata.generation.unwrap_or(1);
    let template = deployment.spec.template.clone();
    let mut metadata = template.metadata.unwrap_or_default();
    metadata.name = Some(format!("{name}-g{generation}-{n}"));
    metadata.namespace = Some(namespace.clone());
    metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("pod-template-hash".into(), format!("g{generation}"));
    let mut spec = template.spec.expect("a pod spec in the template");
    if spec.automount_service_account_token != Some(false) {
        let volume = format!("kube-api-access-{n}");
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(volumes::service_account_volume(&volume));
        for container in &mut spec.containers {
            container.volume_mounts.get_or_insert_with(Vec::new).push(
                serde_json::from_value(json!({
                    "name": volume, "readOnly": true,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }))
                .unwrap(),
            );
        }
        volumes::publish_root_ca(node, &namespace);
    }
    let pod = PodObject {
        metadata,
        spec: Some(spec),
        status: None,
    };
    let api: Api<PodObject> = Api::namespaced(node.client.clone(), &namespace);
    node.block(api.create(&PostParams::default(), &pod))
        .unwrap_or_else(|e| panic!("creating pod {namespace}/{name}-{n}: {e}"))
}

/// The value of a downward-API field of `pod`.
pub fn field(pod: &PodObject, path: &str) -> String {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let keyed = |map: &Option<BTreeMap<String, String>>, prefix: &str| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.as_ref()?.get(key).cloned().unwrap_or_default())
    };
    if let Some(v) = keyed(&meta.labels, "metadata.labels['") {
        return v;
    }
    if let Some(v) = keyed(&meta.annotations, "metadata.annotations['") {
        return v;
    }
    match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.podIP" => {
            status.and_then(|s| s.pod_ip.clone()).unwrap_or_default()
        }
        other => panic!("a downward-API field the harness does not know: {other}"),
    }
}

impl Pod {
    /// Writes its status as the kubelet does: phase, address, conditions and
    /// the container's state.
    fn write_status(&mut self, node: &Node) {
        let ready = self.is_ready();
        let running = self.child.is_some();
        let condition =
            |kind: &str, ok: bool| json!({"type": kind, "status": if ok {"True"} else {"False"}});
        let state = match &self.waiting {
            Some(reason) if !running => json!({"waiting": {"reason": reason}}),
            _ => json!({"running": {}}),
        };
        let status = json!({"status": {
            "phase": if running || self.starts > 0 { "Running" } else { "Pending" },
            "hostIP": node.host_ip, "podIP": node.host_ip, "podIPs": [{"ip": node.host_ip}],
            "conditions": [
                condition("PodScheduled", true), condition("Initialized", true),
                condition("ContainersReady", ready), condition("Ready", ready),
            ],
            "containerStatuses": [{
                "name": self.container.name, "ready": ready, "started": running,
                "restartCount": self.restarts.len(), "image": self.container.image,
                "imageID": "", "state": state,
            }],
        }});
        let api: Api<PodObject> = Api::namespaced(node.client.clone(), self.namespace());
        let params = PatchParams::default();
        if let Ok(pod) = node.block(api.patch_status(&self.name, &params, &Patch::Merge(status))) {
            self.object = pod;
        }
    }

    /// Starts the container with the env, args and mounts the kubelet gives it.
    fn start(&mut self, node: &Node) {
        self.starts += 1;
        let image = ImageConfig::of_dockerfile();
        let env = self.environment(node, &image);
        let argv = self.argv(&image, &env);
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the container's log");
        let mut command = match &node.runtime {
            Runtime::Process => self.process(node, &image, &argv, env),
            Runtime::Podman { podman, image: tag } => self.podman(podman, tag, &image, &argv, env),
        };
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log);
        let child = Guard::spawn(&mut command)
            .unwrap_or_else(|e| panic!("starting the container of pod {}: {e}", self.name));
        self.child = Some(child);
        self.readiness = Prober::readiness(&self.container);
        self.liveness = Prober::liveness(&self.container);
    }

    /// The user the container runs as: the pod's or container's runAsUser,
    /// else the image's USER; refused when runAsNonRoot says it may not be 0.
    fn user(&self, image: &ImageConfig) -> (u32, u32) {
        let pod = self
            .object
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref());
        let container = self.container.security_context.as_ref();
        let uid = container
            .and_then(|c| c.run_as_user)
            .or_else(|| pod.and_then(|p| p.run_as_user))
            .map_or(image.user.0, |u| u as u32);
        let gid = container
            .and_then(|c| c.run_as_group)
            .or_else(|| pod.and_then(|p| p.run_as_group))
            .map_or(image.user.1, |g| g as u32);
        let non_root = container
            .and_then(|c| c.run_as_non_root)
            .or_else(|| pod.and_then(|p| p.run_as_non_root))
            .unwrap_or(false);
        assert!(
            !(non_root && uid == 0),
            "pod {}: container has runAsNonRoot and image will run as root",
            self.name
        );
        (uid, gid)
    }
}

/// `$(NAME)` replaced by `env`'s value where defined, `$$` by `$`, as the
/// kubelet expands command, args and env values.
pub fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(close) = after.strip_prefix('(').and_then(|a| a.find(')')) {
            let name = &after[1..1 + close];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, value)) => out.push_str(value),
                None => out.push_str(&rest[at..at + close + 3]),
            }
            rest = &after[close + 2..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

impl Pod {
    /// The env the kubelet gives the container, in its order: the Service
    /// links, then the container's `envFrom` and `env`.
    fn environment(&self, node: &Node, image: &ImageConfig) -> Vec<(String, String)> {
        let namespace = self.namespace().to_string();
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), image.path.clone()),
            ("HOSTNAME".into(), self.name.clone()),
        ];
        env.extend(service_links(
            "KUBERNETES",
            &node.api_host,
            &[(None, node.api_port, "TCP")],
        ));
        let links = self
            .object
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links);
        if links != Some(false) {
            let api: Api<Service> = Api::namespaced(node.client.clone(), &namespace);
            let services = node
                .block(api.list(&ListParams::default()))
                .expect("listing the namespace's Services");
            for service in services {
                env.extend(links_of(&service));
            }
        }
        for from in self.container.env_from.iter().flatten() {
            let prefix = from.prefix.clone().unwrap_or_default();
            let data = if let Some(map) = &from.config_map_ref {
                config_map_strings(node, &namespace, &map.name, map.optional)
            } else if let Some(secret) = &from.secret_ref {
                secret_strings(node, &namespace, &secret.name, secret.optional)
            } else {
                BTreeMap::new()
            };
            env.extend(data.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)));
        }
        for var in self.container.env.iter().flatten() {
            let value = match &var.value_from {
                None => expand(var.value.as_deref().unwrap_or_default(), &env),
                Some(from) => self.value_from(node, from),
            };
            env.push((var.name.clone(), value));
        }
        env
    }

    fn value_from(&self, node: &Node, from: &k8s_openapi::api::core::v1::EnvVarSource) -> String {
        let namespace = self.namespace().to_string();
        if let Some(field_ref) = &from.field_ref {
            return field(&self.object, &field_ref.field_path);
        }
        if let Some(key) = &from.config_map_key_ref {
            let data = config_map_strings(node, &namespace, &key.name, key.optional);
            return data.get(&key.key).cloned().unwrap_or_default();
        }
        if let Some(key) = &from.secret_key_ref {
            let data = secret_strings(node, &namespace, &key.name, key.optional);
            return data.get(&key.key).cloned().unwrap_or_default();
        }
        panic!(
            "pod {}: an env source the harness does not know: {from:?}",
            self.name
        )
    }

    /// The command line: `command` (else the image's ENTRYPOINT) and `args`,
    /// expanded.
    fn argv(&self, image: &ImageConfig, env: &[(String, String)]) -> Vec<String> {
        let command = match &self.container.command {
            Some(command) if !command.is_empty() => command.clone(),
            _ => image.entrypoint.clone(),
        };
        command
            .iter()
            .chain(self.container.args.iter().flatten())
            .map(|a| expand(a, env))
            .collect()
    }

    /// `text` with each `:PORT` at its end mapped to this pod's port.
    fn map_port(&self, text: &str) -> String {
        for (from, to) in &self.ports {
            if let Some(head) = text.strip_suffix(&format!(":{from}")) {
                return format!("{head}:{to}");
            }
        }
        text.to_string()
    }

    /// Where the process sees `mountPath`: under the pod's folder.
    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// `text` with a mount path at its start (or after `--flag=`) moved
    /// under [`Pod::root`].
    fn map_mount(&self, text: &str) -> String {
        let (flag, value) = match text.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => (format!("{flag}="), value),
            _ => (String::new(), text),
        };
        for mount in self.container.volume_mounts.iter().flatten() {
            if value.starts_with(&mount.mount_path) {
                return format!("{flag}{}{value}", self.root().display());
            }
        }
        text.to_string()
    }

    /// The container as a process of the test build.
    fn process(
        &self,
        node: &Node,
        image: &ImageConfig,
        argv: &[String],
        env: Vec<(String, String)>,
    ) -> Command {
        let root = self.root();
        for mount in self.container.volume_mounts.iter().flatten() {
            assert!(mount.sub_path.is_none(), "the harness mounts no subPath");
            let volume = self
                .volumes
                .iter()
                .find(|v| v.name == mount.name)
                .unwrap_or_else(|| panic!("pod {}: no volume {} to mount", self.name, mount.name));
            let at = root.join(mount.mount_path.trim_start_matches('/'));
            std::fs::create_dir_all(at.parent().unwrap()).expect("a mount's folder");
            let _ = std::fs::remove_file(&at);
            std::os::unix::fs::symlink(&volume.dir, &at).expect("a mount");
        }
        open_tree(&root);
        let mut command = Command::new(program(&argv[0], image));
        command.args(argv[1..].iter().map(|a| self.map_port(&self.map_mount(a))));
        command.env_clear();
        for (key, value) in env {
            command.env(key, self.map_port(&self.map_mount(&value)));
        }
        let token = root.join("var/run/secrets/kubernetes.io/serviceaccount");
        if token.exists() {
            let kubeconfig = self.dir.join("kubeconfig");
            let server = format!("https://{}:{}", node.api_host, node.api_port);
            std::fs::write(&kubeconfig, in_cluster_kubeconfig(&server, &token)).unwrap();
            command.env("KUBECONFIG", kubeconfig);
        }
        let (uid, gid) = self.user(image);
        command.uid(uid).gid(gid).current_dir(&root);
        command
    }

    /// The container as podman runs the image: the pod's user, mounts at
    /// their paths, read-only root, capabilities dropped, the host network.
    fn podman(
        &self,
        podman: &std::path::Path,
        tag: &str,
        image: &ImageConfig,
        argv: &[String],
        env: Vec<(String, String)>,
    ) -> Command {
        assert_eq!(
            self.container.image.as_deref(),
            Some(PUBLISHED_IMAGE),
            "pod {}: the harness runs the project's image only",
            self.name
        );
        let (uid, gid) = self.user(image);
        let mut command = Command::new(podman);
        command.args([
            "run",
            "--rm",
            "--network",
            "host",
            "--pull",
            "never",
            "--name",
        ]);
        command.arg(self.runtime_name().unwrap());
        command.arg(format!("--user={uid}:{gid}"));
        let security = self.container.security_context.clone().unwrap_or_default();
        if security.read_only_root_filesystem == Some(true) {
            command.arg("--read-only");
        }
        if security.allow_privilege_escalation == Some(false) {
            command.arg("--security-opt=no-new-privileges");
        }
        for drop in security
            .capabilities
            .and_then(|c| c.drop)
            .into_iter()
            .flatten()
        {
            command.arg(format!("--cap-drop={drop}"));
        }
        for mount in self.container.volume_mounts.iter().flatten() {
            let volume = self.volumes.iter().find(|v| v.name == mount.name).unwrap();
            let mode = if mount.read_only == Some(true) {
                "ro"
            } else {
                "rw"
            };
            command.arg(format!(
                "--volume={}:{}:{mode}",
                volume.dir.display(),
                mount.mount_path
            ));
        }
        for (key, value) in env {
            command.arg(format!("--env={key}={}", self.map_port(&value)));
        }
        command.arg(format!(
            "--entrypoint={}",
            serde_json::to_string(&argv[..1]).unwrap()
        ));
        command.arg(tag);
        command.args(argv[1..].iter().map(|a| self.map_port(a)));
        command
    }
}

/// A kubeconfig for a process: the in-cluster configuration it would read
/// from the fixed paths, which it cannot see (see the module's differences).
fn in_cluster_kubeconfig(server: &str, token: &std::path::Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n    server: {server}\n    certificate-authority: {0}/ca.crt\ncontexts:\n- name: in-cluster\n  context:\n    cluster: in-cluster\n    user: in-cluster\ncurrent-context: in-cluster\nusers:\n- name: in-cluster\n  user:\n    tokenFile: {0}/token\n",
        token.display()
    )
}

/// Every folder under `root` searchable by the container's user.
fn open_tree(root: &std::path::Path) {
    volumes::open_to_all(root);
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            open_tree(&entry.path());
        }
    }
}

/// The variables of a Service the kubelet gives every container of its
/// namespace (`{NAME}_SERVICE_HOST`, ... and Docker's links).
fn service_links(
    name: &str,
    ip: &str,
    ports: &[(Option<String>, u16, &str)],
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let Some((_, first, protocol)) = ports.first() else {
        return env;
    };
    env.push((format!("{name}_SERVICE_HOST"), ip.to_string()));
    env.push((format!("{name}_SERVICE_PORT"), first.to_string()));
    for (port_name, port, _) in ports {
        if let Some(port_name) = port_name {
            let port_name = port_name.to_uppercase().replace('-', "_");
            env.push((format!("{name}_SERVICE_PORT_{port_name}"), port.to_string()));
        }
    }
    let lower = protocol.to_lowercase();
    env.push((format!("{name}_PORT"), format!("{lower}://{ip}:{first}")));
    for (_, port, protocol) in ports {
        let prefix = format!("{name}_PORT_{port}_{}", protocol.to_uppercase());
        let lower = protocol.to_lowercase();
        env.push((prefix.clone(), format!("{lower}://{ip}:{port}")));
        env.push((format!("{prefix}_PROTO"), lower));
        env.push((format!("{prefix}_PORT"), port.to_string()));
        env.push((format!("{prefix}_ADDR"), ip.to_string()));
    }
    env
}

/// The Service-link variables of `service`, when it has a cluster IP.
fn links_of(service: &Service) -> Vec<(String, String)> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let Some(ip) = spec
        .cluster_ip
        .as_deref()
        .filter(|ip| !ip.is_empty() && *ip != "None")
    else {
        return Vec::new();
    };
    let name = service.metadata.name.clone().unwrap_or_default();
    let name = name.to_uppercase().replace('-', "_");
    let ports: Vec<(Option<String>, u16, &str)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone(),
                p.port as u16,
                p.protocol.as_deref().unwrap_or("TCP"),
            )
        })
        .collect();
    service_links(&name, ip, &ports)
}

fn config_map_strings(
    node: &Node,
    namespace: &str,
    name: &str,
    optional: Option<bool>,
) -> BTreeMap<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(node.client.clone(), namespace);
    match node.block(api.get_opt(name)).expect("reading a ConfigMap") {
        Some(map) => map.data.unwrap_or_default(),
        None if optional == Some(true) => BTreeMap::new(),
        None => panic!("ConfigMap {namespace}/{name} is missing: the kubelet would not start it"),
    }
}

fn secret_strings(
    node: &Node,
    namespace: &str,
    name: &str,
    optional: Option<bool>,
) -> BTreeMap<String, String> {
    let api: Api<Secret> = Api::namespaced(node.client.clone(), namespace);
    match node.block(api.get_opt(name)).expect("reading a Secret") {
        Some(secret) => secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect(),
        None if optional == Some(true) => BTreeMap::new(),
        None => panic!("Secret {namespace}/{name} is missing: the kubelet would not start it"),
    }
}
