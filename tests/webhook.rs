//! The webhook process for real: started with certificates made here and the
//! token of a ServiceAccount with the rights its packages grant, against a real
//! kube-apiserver (tests/common/kube_apiserver.rs), driven over HTTPS with the
//! requests captured from a real kube-apiserver. Each test works in namespaces
//! of its own; the tests that stop an API server start one of their own on the
//! same etcd.

use crate::common;
/// The server under hostile load: limits, budget, eviction, dual-stack.
#[path = "webhook/limits.rs"]
mod limits;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use common::bin;
use common::https::{Ca, Connection, Leaf, connector, http_get};
use common::kube_apiserver::{ApiServer, ControlPlane, free_port};
use common::process::Guard;
use serde_json::{Value, json};

mod caches;
mod config_hash;
mod network_resources;
mod opt_ins;
mod serving;
mod skip_subnets;
mod startup;

const CREATE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
const DRY_RUN: &str = include_str!("../../shared/fixtures/admission/pod-create-dryrun.json");

/// A running webhook; killed when dropped.
struct Webhook {
    child: Guard,
    addr: String,
    ops: String,
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
}

impl Webhook {
    /// Starts the webhook with `kubeconfig` and waits until it is ready.
    fn start(kubeconfig: &Path, leaf: &Leaf, extra: &[&str]) -> Webhook {
        Self::start_with_env(kubeconfig, leaf, extra, &[])
    }

    fn start_with_env(
        kubeconfig: &Path,
        leaf: &Leaf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Webhook {
        let webhook = Self::spawn(kubeconfig, leaf, extra, env);
        webhook.wait_for("/readyz", 200);
        webhook
    }

    /// Starts the webhook without waiting for it to be ready.
    fn spawn(kubeconfig: &Path, leaf: &Leaf, extra: &[&str], env: &[(&str, &str)]) -> Webhook {
        Self::spawn_on("127.0.0.1", kubeconfig, leaf, extra, env)
    }

    /// Starts the webhook listening on `host` (both ports), reached on 127.0.0.1.
    fn spawn_on(
        host: &str,
        kubeconfig: &Path,
        leaf: &Leaf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Webhook {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = leaf.write(dir.path());
        let (port, ops_port) = (free_port(), free_port());
        let addr = format!("127.0.0.1:{port}");
        let ops = format!("127.0.0.1:{ops_port}");
        let child = Guard::spawn(
            Command::new(bin())
                .arg("webhook")
                .args(["--listen", &format!("{host}:{port}")])
                .args(["--ops-listen", &format!("{host}:{ops_port}")])
                .arg("--tls-cert")
                .arg(&cert)
                .arg("--tls-key")
                .arg(&key)
                .args([
                    "--tls-reload-interval",
                    "100ms",
                    "--shutdown-delay",
                    "300ms",
                ])
                .args(extra)
                .env("KUBECONFIG", kubeconfig)
                .envs(env.iter().copied())
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        )
        .expect("starting linkerd-multus webhook");
        Webhook {
            child,
            addr,
            ops,
            dir: dir.path().to_path_buf(),
            _dir: dir,
        }
    }

    /// GETs a path of the ops port: status and body.
    fn ops_get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.ops, path)
    }

    fn wait_for(&self, path: &str, status: u16) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((s, body)) = self.ops_get(path)
                && s == status
            {
                return body;
            }
            assert!(Instant::now() < deadline, "{path} never answered {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until metric `line_start` reads `value`; `what` names it in the failure.
    fn wait_for_metric(&self, line_start: &str, value: f64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        // The ops port may not listen yet.
        while self.ops_get("/metrics").is_none() || self.metric(line_start) != value {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn metric(&self, line_start: &str) -> f64 {
        let Some((_, text)) = self.ops_get("/metrics") else {
            // Running (R, S) but not answering, or ended (Z): what a failure needs said.
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()));
            let state = stat
                .ok()
                .and_then(|s| s.rsplit_once(") ")?.1.chars().next());
            panic!(
                "/metrics gave no answer (refused, closed, or none within 5 s); the webhook's process state: {}",
                state.map_or("gone".to_string(), String::from)
            );
        };
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line_start} not in\n{text}"))
    }

    fn stop(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child
            .take_stderr()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code(), stderr)
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        self.child.signal(signal).unwrap();
    }
}

const MULTUS: &str = "linkerd.io/multus";
/// The config of the NADs the tests make ([`Cluster::put_nad`]).
const NAD_CONFIG: &str = r#"{"cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni"}"#;
/// Its hash ([`linkerd_multus::linkerd_cni::rollout::config_hash`]): what the
/// webhook records in `multus.linkerd.io/config-hash` on the pods it attaches.
const NAD_HASH: &str = "7c1ffac004036f75";
const INJECT: &str = "linkerd.io/inject";

/// The ClusterRole of deploy/rbac.yaml: Namespaces.
const WEBHOOK_ROLE: &str = "linkerd-multus-webhook";
/// The ClusterRole of deploy-network-resources/rbac.yaml: NADs.
const NAD_ROLE: &str = "linkerd-multus-webhook-network-resources";
/// A ClusterRole of the tests' own: Namespaces only, the least a webhook
/// with `--missing-nad ignore` and without network resources needs.
const NAMESPACES_ROLE: &str = "linkerd-multus-test-namespaces-only";

/// A ClusterRole of the tests' own: `get` of namespaces and NADs, without
/// list or watch, so a webhook's watches fail while its live reads work.
const GET_ONLY_ROLE: &str = "linkerd-multus-test-get-only";

/// One test's namespaces in the binary's API server: `demo` (attached),
/// `plain` (no annotations) and `openshift` (attached, with a UID range).
struct Cluster {
    plane: &'static ControlPlane,
    demo: String,
    plain: String,
    openshift: String,
    dir: tempfile::TempDir,
}

fn cluster() -> Cluster {
    let plane = ControlPlane::shared();
    static PACKAGES: Once = Once::new();
    PACKAGES.call_once(|| {
        // The ClusterRoles exactly as the packages ship them, and the NAD CRD.
        for file in [
            "deploy/namespace.yaml",
            "deploy/rbac.yaml",
            "deploy-network-resources/rbac.yaml",
        ] {
            plane.apply(&std::fs::read_to_string(common::repo_path(file)).unwrap());
        }
        plane.install_nad_crd();
        plane.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {NAMESPACES_ROLE}\nrules:\n- apiGroups: ['']\n  resources: [namespaces]\n  verbs: [get, list, watch]\n"
        ));
        plane.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {GET_ONLY_ROLE}\nrules:\n- apiGroups: ['']\n  resources: [namespaces]\n  verbs: [get]\n- apiGroups: [k8s.cni.cncf.io]\n  resources: [network-attachment-definitions]\n  verbs: [get]\n"
        ));
    });
    let enabled = [(MULTUS, "enabled"), (INJECT, "enabled")];
    let cluster = Cluster {
        demo: plane.namespace("demo", &enabled),
        plain: plane.namespace("plain", &[]),
        openshift: plane.namespace(
            "openshift",
            &[
                enabled[0],
                enabled[1],
                ("openshift.io/sa.scc.uid-range", "1000680000/10000"),
            ],
        ),
        plane,
        dir: tempfile::tempdir().unwrap(),
    };
    // Each has the NAD, as rendering from Git gives the namespaces whose pods it attaches.
    for namespace in [&cluster.demo, &cluster.plain, &cluster.openshift] {
        cluster.put_nad(namespace, "linkerd-cni", &[]);
    }
    cluster
}

impl Cluster {
    /// The kubeconfig of a new ServiceAccount of this test bound to the
    /// packages' ClusterRoles `roles`: the webhook's rights in a cluster.
    fn account(&self, roles: &[&str]) -> PathBuf {
        let name = self.plane.unique_name("webhook");
        for role in roles {
            self.grant(&name, role);
        }
        self.plane
            .service_account_kubeconfig(&self.plain, &name, self.dir.path())
    }

    /// Removes the binding of ServiceAccount `account` to ClusterRole `role`.
    fn revoke(&self, account: &str, role: &str) {
        self.plane
            .kubectl(&["delete", "clusterrolebinding", &format!("{account}-{role}")]);
    }

    /// Binds ServiceAccount `account` of this test to ClusterRole `role`.
    fn grant(&self, account: &str, role: &str) {
        self.plane.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {account}-{role}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\nsubjects:\n- kind: ServiceAccount\n  name: {account}\n  namespace: {}\n",
            self.plain
        ));
    }

    /// A new ServiceAccount of this test with the rights of deploy/rbac.yaml, and its
    /// kubeconfig for `server`.
    fn account_on(&self, server: &ApiServer, role: &str) -> (String, PathBuf) {
        let account = self.plane.unique_name("webhook");
        self.grant(&account, role);
        let kubeconfig = self.plane.service_account_kubeconfig_for(
            server,
            &self.plain,
            &account,
            self.dir.path(),
        );
        (account, kubeconfig)
    }

    /// The webhook's account with the rights of deploy/rbac.yaml.
    fn webhook_account(&self) -> PathBuf {
        self.account(&[WEBHOOK_ROLE])
    }

    /// Creates or updates NAD `namespace/name` with `annotations` and [`NAD_CONFIG`].
    fn put_nad(&self, namespace: &str, name: &str, annotations: &[(&str, &str)]) {
        self.put_nad_config(namespace, name, annotations, NAD_CONFIG);
    }

    /// Creates or updates NAD `namespace/name` with `annotations` and `config`.
    fn put_nad_config(
        &self,
        namespace: &str,
        name: &str,
        annotations: &[(&str, &str)],
        config: &str,
    ) {
        let mut yaml = format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  annotations: {}\nspec:\n  config: {}\n",
            serde_json::to_string(
                &annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::BTreeMap<_, _>>()
            )
            .unwrap(),
            serde_json::to_string(config).unwrap()
        );
        if annotations.is_empty() {
            yaml = yaml.replace("  annotations: {}\n", "");
        }
        self.plane.apply(&yaml);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Posts one review to /mutate on a new connection that trusts `ca`, and
/// returns the AdmissionReview's response.
fn post_once(webhook: &Webhook, ca: &Ca, review: Bytes) -> Value {
    let (_, body) = runtime()
        .block_on(async {
            let mut conn = Connection::open(&webhook.addr, &connector(&ca.pem, None, &[]))
                .await
                .unwrap();
            conn.post("/mutate", review).await
        })
        .unwrap();
    response_of(&body)
}

fn response_of(body: &[u8]) -> Value {
    let review: Value = serde_json::from_slice(body).expect("a JSON review");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

fn patch_of(response: &Value) -> Value {
    let text = response["patch"].as_str().expect("a patch");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap(),
    )
    .unwrap()
}

/// The captured review with the pod moved to `namespace`.
fn review_in(namespace: &str, pod_annotations: Value) -> Bytes {
    moved(CREATE, namespace, pod_annotations)
}

/// The captured review `fixture` with the pod moved to `namespace` and given
/// `pod_annotations`.
fn moved(fixture: &str, namespace: &str, pod_annotations: Value) -> Bytes {
    let mut review: Value = serde_json::from_str(fixture).unwrap();
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    let annotations = &mut review["request"]["object"]["metadata"]["annotations"];
    for (k, v) in pod_annotations.as_object().unwrap() {
        annotations[k] = v.clone();
    }
    Bytes::from(review.to_string())
}

/// Writes `text` over TLS and reads until the server closes or 2 s pass.
async fn raw_exchange(addr: &str, ca: &str, text: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut stream = connector(ca, None, &[b"http/1.1"])
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}
