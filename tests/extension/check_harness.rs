//! An installed extension for the tests of `check`, installed the way a user
//! does: `linkerd-multus install | kubectl apply --server-side -f -` (its
//! certificates made by `install`, read back from the Secret for the webhook
//! process).
//!
//! A cluster of its own (`ControlPlane::own`: `check` reads every namespace)
//! with a second API server started with `--enable-aggregator-routing=true`,
//! which resolves a webhook's Service through its Endpoints, as there is no
//! kube-proxy here: the Service's Endpoints name a non-loopback address of
//! this machine (the API server refuses loopback ones), where the real
//! webhook process listens with the installed certificate. So the probe of
//! `check` goes API server → Service → webhook for real.
//!
//! Two stand-ins, for the controllers a lone API server lacks: the
//! Deployment's status is written through its status subresource (no
//! kube-controller-manager or kubelet runs its pods), and the Service's
//! Endpoints are written by the harness (no endpoints controller). The NADs
//! are those the NAD controller would make, built by its own code
//! (`linkerd_cni::cluster`), so that a planted defect is not mended behind
//! the test's back.

use crate::common::process::Guarded;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;

use crate::common::bin;
use crate::common::https::{Leaf, http_get};
use crate::common::kube_apiserver::{ApiServer, ControlPlane, free_port};
use crate::common::kubelet::host_ip;
use crate::common::process::Guard;

/// The extension's namespace.
pub const NS: &str = "linkerd-multus";
/// The webhook's Deployment, Service and configuration.
pub const WEBHOOK: &str = "linkerd-multus-webhook";
/// A namespace enabled for Multus, with its NAD.
pub const DEMO: &str = "demo";
const CONFIG_MAP: &str = include_str!("../../../shared/fixtures/linkerd-cni/version-2.19.yaml");

/// The installed extension and the webhook serving it.
pub struct Installed {
    /// The cluster.
    pub plane: &'static ControlPlane,
    /// The API server that reaches webhooks through Endpoints, kept running.
    _server: ApiServer,
    /// An admin kubeconfig for [`Installed::server`].
    pub kubeconfig: PathBuf,
    /// The CA certificate `install` made (PEM): the caBundle.
    pub ca_pem: String,
    /// The serving certificate `install` made.
    pub leaf: Leaf,
    /// Where the webhook listens: `IP:PORT`.
    pub ip: String,
    /// Its port.
    pub port: u16,
    webhook: Guard,
    /// In the control plane's folder: a static's, never dropped, is removed
    /// with it.
    dir: tempfile::TempDir,
}

impl Installed {
    /// Starts the webhook again, closing the connections the API server
    /// keeps open to it: the API server resolves the Service only when it
    /// dials, so a change of Endpoints reaches new connections only.
    pub fn restart_webhook(&mut self) {
        let _ = self.webhook.kill();
        self.webhook = start_webhook(
            &self.kubeconfig,
            &self.leaf,
            &self.ip,
            self.port,
            self.dir.path(),
        );
    }

    /// kubectl as the admin through [`Installed::server`], which reaches the
    /// webhook (the first API server cannot: it resolves Services by their
    /// cluster IP, and no kube-proxy routes it); panics when it fails.
    pub fn kubectl_ok(&self, args: &[&str], stdin: &str) -> String {
        let mut child = Guard::spawn(
            self.plane
                .kubectl_command()
                .env("KUBECONFIG", &self.kubeconfig)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("starting kubectl");
        std::io::Write::write_all(&mut child.take_stdin().unwrap(), stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

static INSTALLED: OnceLock<Mutex<Installed>> = OnceLock::new();

/// The installed extension, for one test at a time: each test leaves it as
/// it found it. A test that failed half-way leaves it poisoned, and the next
/// carries on with it (its own failure then shows what was left). Kept to the
/// binary's end, which no drop reaches: the watchdog ends its processes and
/// removes its folder (`common::process`).
pub fn installed() -> MutexGuard<'static, Installed> {
    let lock = INSTALLED.get_or_init(|| Mutex::new(install()));
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn install() -> Installed {
    // Shared by the tests of check.rs, one at a time: kept, not stopped when
    // the first of them ends.
    let plane = ControlPlane::kept();
    let server = plane.new_api_server(&["--enable-aggregator-routing=true"]);
    plane.start_ready(&server);
    let dir = tempfile::tempdir_in(&plane.dir).unwrap();
    let kubeconfig = plane.admin_kubeconfig_for(&server, dir.path());
    plane.install_nad_crd();
    let yaml = run_install(&kubeconfig);
    plane.kubectl_ok(&["apply", "--server-side", "-f", "-"], &yaml);
    let secret = |key: &str| secret_data(plane, key);
    let leaf = Leaf {
        cert: secret("tls.crt"),
        key: secret("tls.key"),
    };
    let ca_pem = secret("ca.crt");
    deployment_ready(plane, true);
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd\n");
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    plane.apply(CONFIG_MAP);
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {DEMO}\n  annotations:\n    linkerd.io/multus: enabled\n    linkerd.io/inject: enabled\n"
    ));
    for ns in [DEMO, "linkerd"] {
        make_nad(plane, ns);
    }
    let ip = host_ip();
    let port = free_port();
    let webhook = start_webhook(&kubeconfig, &leaf, &ip, port, dir.path());
    set_endpoints(plane, Some((&ip, port)));
    Installed {
        plane,
        _server: server,
        kubeconfig,
        ca_pem,
        leaf,
        ip,
        port,
        webhook,
        dir,
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// What `linkerd-multus install` prints for the cluster of `kubeconfig`
/// (which it reads for certificates to keep: none, the first time), the
/// webhook's port admitting the API server's address alone (loopback here,
/// which the API server never lists for itself).
fn run_install(kubeconfig: &std::path::Path) -> String {
    let out = Command::new(bin())
        .arg("install")
        .arg("--api-server-cidr=127.0.0.1/32")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("LINKERD_NAMESPACE")
        .guarded_output()
        .expect("running linkerd-multus install");
    assert!(
        out.status.success(),
        "linkerd-multus install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A key of the webhook's Secret, decoded.
fn secret_data(plane: &ControlPlane, key: &str) -> String {
    let path = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
    let text = plane.kubectl(&[
        "get",
        "secret",
        &format!("{WEBHOOK}-tls"),
        "-n",
        NS,
        "-o",
        &path,
    ]);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap_or_else(|e| panic!("Secret {NS}/{WEBHOOK}-tls {key}: {e}"));
    String::from_utf8(bytes).unwrap()
}

/// Writes the serving certificate and its CA into the Secret, and the
/// caBundle: `ca_bundle` (PEM, one CA or more).
pub fn set_certificate(plane: &ControlPlane, leaf: &Leaf, ca: &str, ca_bundle: &str) {
    // Over what `install` applied (its fields are kubectl's): as an operator's renewal.
    let apply = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
    plane.kubectl_ok(&apply, &format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {WEBHOOK}-tls\n  namespace: {NS}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n  ca.crt: {}\n",
        b64(&leaf.cert),
        b64(&leaf.key),
        b64(ca)
    ),
    );
    // Every webhook of the configuration (the pods' and the Namespaces'), as certs.sh sets them.
    let patch: Vec<serde_json::Value> = (0..2)
        .map(|i| {
            json!({
                "op": "replace",
                "path": format!("/webhooks/{i}/clientConfig/caBundle"),
                "value": b64(ca_bundle),
            })
        })
        .collect();
    let patch = serde_json::Value::from(patch);
    plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        WEBHOOK,
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// The Deployment's status as its controller would write it (stand-in: no
/// kube-controller-manager runs here): every replica ready, or none.
pub fn deployment_ready(plane: &ControlPlane, ready: bool) {
    let generation = plane.kubectl(&[
        "get",
        "deployment",
        WEBHOOK,
        "-n",
        NS,
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let n = if ready { 2 } else { 0 };
    let status = json!({"status": {
        "observedGeneration": generation.trim().parse::<i64>().unwrap(),
        "replicas": 2, "updatedReplicas": 2, "readyReplicas": n, "availableReplicas": n,
    }});
    plane.kubectl(&[
        "patch",
        "deployment",
        WEBHOOK,
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// The Service's Endpoints as the endpoints controller would write them
/// (stand-in): the webhook's address, or none when its pods are not selected.
pub fn set_endpoints(plane: &ControlPlane, at: Option<(&str, u16)>) {
    let subsets = match at {
        Some((ip, port)) => {
            json!([{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port}]}])
        }
        None => json!([]),
    };
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": WEBHOOK, "namespace": NS},
        "subsets": subsets,
    });
    plane.apply(&endpoints.to_string());
}

/// The NAD the controller makes in `namespace` from the live ConfigMap.
pub fn make_nad(plane: &ControlPlane, namespace: &str) {
    let nad = crate::common::shipped::linkerd_cni_nad_manifest(plane, namespace);
    plane.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=linkerd-multus-controller",
            "-f",
            "-",
        ],
        &nad,
    );
}

fn start_webhook(
    kubeconfig: &std::path::Path,
    leaf: &Leaf,
    ip: &str,
    port: u16,
    dir: &std::path::Path,
) -> Guard {
    let (cert, key) = leaf.write(dir);
    let ops = format!("127.0.0.1:{}", free_port());
    let mut child = Guard::spawn(
        Command::new(bin())
            .arg("webhook")
            .args(["--listen", &format!("{ip}:{port}")])
            .args(["--ops-listen", &ops])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .arg("--linkerd-namespace=linkerd")
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("starting linkerd-multus webhook");
    let stderr = child.take_stderr().unwrap();
    std::thread::spawn(move || BufReader::new(stderr).lines().for_each(drop));
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_get(&ops, "/readyz").is_none_or(|(status, _)| status != 200) {
        assert!(Instant::now() < deadline, "the webhook never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}
