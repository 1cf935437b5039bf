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
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use common::bin;
use common::https::{Ca, Connection, Leaf, connector, http_get};
use common::kube_apiserver::{ApiServer, ControlPlane, free_port};
use serde_json::{Value, json};

const CREATE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
const DRY_RUN: &str = include_str!("../../shared/fixtures/admission/pod-create-dryrun.json");

/// A running webhook; killed when dropped.
struct Webhook {
    child: Child,
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
        let child = Command::new(bin())
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
            .stderr(Stdio::piped())
            .spawn()
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
        let (_, text) = self.ops_get("/metrics").expect("metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line_start} not in\n{text}"))
    }

    fn stop(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code(), stderr)
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

const MULTUS: &str = "linkerd.io/multus";
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

    /// Creates or updates NAD `namespace/name` with `annotations`.
    fn put_nad(&self, namespace: &str, name: &str, annotations: &[(&str, &str)]) {
        let mut yaml = format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  annotations: {}\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}}'\n",
            serde_json::to_string(
                &annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::BTreeMap<_, _>>()
            )
            .unwrap()
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

#[test]
fn captured_requests_get_the_core_patch_over_https() {
    let c = cluster();
    let ca = Ca::new("linkerd-multus test CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1", "localhost"]),
        &[],
    );
    let rt = runtime();
    rt.block_on(async {
        let tls = connector(&ca.pem, None, &[b"http/1.1"]);
        let mut conn = Connection::open(&webhook.addr, &tls).await.unwrap();
        let expected = json!([
            {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"}
        ]);
        // The same answer on the default path and the original operator's, for a dry run too.
        for (path, fixture) in [
            ("/mutate", CREATE),
            ("/annotate-multus-v1-pod", CREATE),
            ("/mutate", DRY_RUN),
        ] {
            let (status, body) = conn
                .post(path, moved(fixture, &c.demo, json!({})))
                .await
                .unwrap();
            assert_eq!(status, 200, "{path}");
            let response = response_of(&body);
            let uid = serde_json::from_str::<Value>(fixture).unwrap()["request"]["uid"].clone();
            assert_eq!(response["uid"], uid);
            assert_eq!(response["allowed"], true);
            assert_eq!(response["patchType"], "JSONPatch");
            assert_eq!(patch_of(&response), expected, "{path}");
        }
        // A namespace without the annotations: allowed, no patch.
        let (_, body) = conn
            .post("/mutate", review_in(&c.plain, json!({})))
            .await
            .unwrap();
        let response = response_of(&body);
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none(), "{response}");
        // The OpenShift UID range gives the proxy UID.
        let (_, body) = conn
            .post("/mutate", review_in(&c.openshift, json!({})))
            .await
            .unwrap();
        let patch = patch_of(&response_of(&body));
        assert!(
            patch.as_array().unwrap().contains(&json!(
                {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000682102"}
            )),
            "{patch}"
        );
        // A malformed networks annotation: allowed with a warning (the default --on-error).
        let (_, body) = conn
            .post(
                "/mutate",
                review_in(&c.demo, json!({"k8s.v1.cni.cncf.io/networks": "a,,b"})),
            )
            .await
            .unwrap();
        let response = response_of(&body);
        assert_eq!(response["allowed"], true);
        assert!(
            response["warnings"][0]
                .as_str()
                .unwrap()
                .contains("k8s.v1.cni.cncf.io/networks: item 2"),
            "{response}"
        );
        // Bodies that are not reviews, wrong paths and methods, oversized bodies.
        let (status, body) = conn.post("/mutate", Bytes::from("{}")).await.unwrap();
        assert_eq!(status, 400);
        assert!(String::from_utf8_lossy(&body).contains("not an admission.k8s.io/v1 AdmissionReview"));
        let (status, _) = conn.post("/other", Bytes::from(CREATE)).await.unwrap();
        assert_eq!(status, 404);
        // A body over the limit is refused on its declared length, before it is sent.
        let response = raw_exchange(
            &webhook.addr,
            &ca.pem,
            &format!(
                "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                7 * 1024 * 1024
            ),
        )
        .await;
        assert!(response.starts_with("HTTP/1.1 413"), "{response}");
        assert!(response.contains("--max-body-bytes"), "{response}");
    });
    // HTTP/2, as the API server negotiates it.
    rt.block_on(async {
        let tls = connector(&ca.pem, None, &[b"h2"]);
        let tcp = tokio::net::TcpStream::connect(&webhook.addr).await.unwrap();
        let stream = tls
            .connect("127.0.0.1".try_into().unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::post(format!("https://{}/mutate", webhook.addr))
            .body(http_body_util::Full::new(moved(CREATE, &c.demo, json!({}))))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
    });
    let metric = |l: &str| webhook.metric(l);
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"patched\"}"),
        5.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"unchanged\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"warned\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"invalid\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_patches_total{change=\"attached\"}"),
        5.0
    );
    assert_eq!(
        metric("linkerd_multus_http_refusals_total{reason=\"too_large\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_http_refusals_total{reason=\"not_found\"}"),
        1.0
    );
    // The test's own three and the API server's (default, kube-system, ...).
    assert!(metric("linkerd_multus_namespace_cache_namespaces") >= 7.0);
    assert_eq!(metric("linkerd_multus_namespace_cache_synced"), 1.0);
    assert_eq!(
        metric("linkerd_multus_admission_request_duration_seconds_count"),
        8.0
    );
}

/// A pod the rules attach in a namespace without the NAD: denied by default,
/// naming the namespace, the NAD and the ways out; with `--missing-nad
/// attach`, attached with a warning; once the NAD exists, attached quietly.
#[test]
fn a_pod_in_a_namespace_without_the_nad_is_denied_unless_told_otherwise() {
    let c = cluster();
    let bare = c
        .plane
        .namespace("bare", &[(MULTUS, "enabled"), (INJECT, "enabled")]);
    let ca = Ca::new("CA");
    let account = c.webhook_account();
    let deny = Webhook::start(&account, &ca.leaf(&["127.0.0.1"]), &[]);
    let attach = Webhook::start(
        &account,
        &ca.leaf(&["127.0.0.1"]),
        &["--missing-nad", "attach"],
    );
    let response = post_once(&deny, &ca, review_in(&bare, json!({})));
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: namespace {bare} has no NetworkAttachmentDefinition linkerd-cni, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the webhook with --manage-nads so that it makes it"
        )
    );
    let response = post_once(&attach, &ca, review_in(&bare, json!({})));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_some(), "{response}");
    assert_eq!(
        response["warnings"],
        json!([format!(
            "linkerd-multus: namespace {bare} has no NetworkAttachmentDefinition linkerd-cni: the pod cannot start until it exists (--missing-nad attach)"
        )])
    );
    // The NAD rendered from Git and applied: both webhooks see it through their watch.
    c.put_nad(&bare, "linkerd-cni", &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    for webhook in [&deny, &attach] {
        loop {
            let response = post_once(webhook, &ca, review_in(&bare, json!({})));
            if response["allowed"] == true && response.get("warnings").is_none() {
                assert!(response.get("patch").is_some(), "{response}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the NAD never reached the cache: {response}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn core_settings_come_from_flags_and_the_environment() {
    let c = cluster();
    c.put_nad(&c.openshift, "mesh", &[]);
    let ca = Ca::new("CA");
    let webhook = Webhook::start_with_env(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--nad-name", "mesh"],
        &[("LINKERD_MULTUS_PROXY_UID_OFFSET", "5")],
    );
    runtime().block_on(async {
        let tls = connector(&ca.pem, None, &[]);
        let mut conn = Connection::open(&webhook.addr, &tls).await.unwrap();
        let (_, body) = conn
            .post("/mutate", review_in(&c.openshift, json!({})))
            .await
            .unwrap();
        let patch = patch_of(&response_of(&body));
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "mesh"},
                {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000680005"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created,proxy-uid=1000680005"}
            ])
        );
    });
}

#[test]
fn client_certificates_are_required_with_client_ca() {
    let c = cluster();
    let ca = Ca::new("serving CA");
    let clients = Ca::new("client CA");
    let strangers = Ca::new("another CA");
    let dir = tempfile::tempdir().unwrap();
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, &clients.pem).unwrap();
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--client-ca", client_ca.to_str().unwrap()],
    );
    runtime().block_on(async {
        let good = connector(&ca.pem, Some(&clients.leaf(&["apiserver"])), &[]);
        let mut conn = Connection::open(&webhook.addr, &good).await.unwrap();
        let (status, _) = conn.post("/mutate", Bytes::from(CREATE)).await.unwrap();
        assert_eq!(status, 200);
        for (name, tls) in [
            ("no client certificate", connector(&ca.pem, None, &[])),
            (
                "a certificate of another CA",
                connector(&ca.pem, Some(&strangers.leaf(&["x"])), &[]),
            ),
        ] {
            // TLS 1.3 reports a refused client certificate on the first read.
            let refused = match Connection::open(&webhook.addr, &tls).await {
                Err(_) => true,
                Ok(mut conn) => conn.post("/mutate", Bytes::from(CREATE)).await.is_err(),
            };
            assert!(refused, "{name} was let in");
        }
    });
}

#[test]
fn certificates_reload_without_dropping_connections() {
    let c = cluster();
    let first = Ca::new("first CA");
    let second = Ca::new("second CA");
    let webhook = Webhook::start(&c.webhook_account(), &first.leaf(&["127.0.0.1"]), &[]);
    runtime().block_on(async {
        let mut old = Connection::open(&webhook.addr, &connector(&first.pem, None, &[]))
            .await
            .unwrap();
        second.leaf(&["127.0.0.1"]).write(&webhook.dir);
        let deadline = Instant::now() + Duration::from_secs(10);
        let trusts_second = connector(&second.pem, None, &[]);
        loop {
            if Connection::open(&webhook.addr, &trusts_second)
                .await
                .is_ok()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new certificate was never served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The connection made before the reload still works.
        let (status, _) = old.post("/mutate", Bytes::from(CREATE)).await.unwrap();
        assert_eq!(status, 200);
        // A broken file is refused and the current certificate stays.
        std::fs::write(webhook.dir.join("tls.crt"), "not a certificate").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while webhook.metric("linkerd_multus_tls_reloads_total{result=\"error\"}") < 1.0 {
            assert!(Instant::now() < deadline, "the broken file was not noticed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            Connection::open(&webhook.addr, &trusts_second)
                .await
                .is_ok()
        );
    });
    assert_eq!(
        webhook.metric("linkerd_multus_tls_reloads_total{result=\"success\"}"),
        1.0
    );
}

#[test]
fn the_cache_follows_the_watch_resumes_it_and_lists_again_when_its_version_expires() {
    let c = cluster();
    // The webhook's own API server, on the binary's etcd, to stop and start
    // again. Without a watch cache, a resumed watch is answered from etcd's
    // history, the one place where compaction shows: a watch cache would
    // answer a restarted server's watchers from its own, younger window.
    let server = c.plane.new_api_server(&["--watch-cache=false"]);
    c.plane.start_ready(&server);
    let (_, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let webhook = Webhook::start(&kubeconfig, &ca.leaf(&["127.0.0.1"]), &[]);
    // A connection per review: the webhook closes idle ones.
    let patched = |namespace: &str| {
        post_once(&webhook, &ca, review_in(namespace, json!({})))
            .get("patch")
            .is_some()
    };
    let eventually = |what: &str, mut check: Box<dyn FnMut() -> bool + '_>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let annotate = |namespace: &str, value: &str| {
        c.plane.kubectl(&[
            "annotate",
            "namespace",
            namespace,
            "--overwrite",
            &format!("{MULTUS}={value}"),
            &format!("{INJECT}=enabled"),
        ]);
    };
    let lists = |w: &Webhook| w.metric("linkerd_multus_namespace_cache_lists_total");
    assert_eq!(lists(&webhook), 1.0);
    assert!(!patched(&c.plain));
    annotate(&c.plain, "enabled");
    eventually(
        "the annotation change to reach the cache",
        Box::new(|| patched(&c.plain)),
    );

    // The API server stops: the webhook serves from its last state, and says so.
    server.stop();
    eventually(
        "the broken watch to show in the metrics",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 0.0),
    );
    assert!(patched(&c.plain));
    assert!(patched(&c.demo));
    assert_eq!(webhook.ops_get("/readyz").unwrap().0, 200);
    std::thread::sleep(Duration::from_millis(1100));
    assert!(webhook.metric("linkerd_multus_namespace_cache_age_seconds") >= 1.0);
    // Annotated (through the other API server) while the webhook's is down.
    annotate(&c.demo, "disabled");
    c.plane.start_ready(&server);
    eventually(
        "the watch to recover",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 1.0),
    );
    eventually(
        "the change made while the API server was down to reach the cache",
        Box::new(|| !patched(&c.demo)),
    );
    assert_eq!(
        webhook.metric("linkerd_multus_namespace_cache_age_seconds"),
        0.0
    );
    assert_eq!(lists(&webhook), 1.0, "the watch resumed without a new list");

    // Down again; meanwhile etcd's history is compacted past the webhook's
    // resourceVersion: the resumed watch gets 410 Gone and the cache lists again.
    server.stop();
    eventually(
        "the broken watch to show in the metrics",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 0.0),
    );
    annotate(&c.demo, "enabled");
    c.plane.compact_etcd();
    c.plane.start_ready(&server);
    eventually(
        "a new list after the expired resourceVersion",
        Box::new(|| lists(&webhook) == 2.0),
    );
    assert!(patched(&c.demo));
    assert_eq!(webhook.metric("linkerd_multus_namespace_watch_up"), 1.0);
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, stderr) = webhook.stop();
    for want in [
        "namespace watch broken; serving from the last known namespaces",
        "namespace watch recovered",
        "namespace watch expired (410 Gone); listing again",
    ] {
        assert!(stderr.contains(want), "{want} not in {stderr}");
    }
}

/// What the caches cannot vouch for is read live before a pod is decided:
/// a namespace and a NAD missing from caches whose watch is down (within
/// `--max-watch-outage`) are read and the pod attached; a namespace the API
/// server does not have, or cannot give, gets the `--on-error` answer. A
/// cache whose watch has been down longer than `--max-watch-outage` fails
/// /readyz with the reason, and its replica reads even the namespaces it holds.
#[test]
fn what_the_caches_cannot_vouch_for_is_read_live_or_answered_as_on_error_says() {
    let c = cluster();
    let server = c.plane.new_api_server(&[]);
    c.plane.start_ready(&server);
    let (account, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    // Both synced now; one tolerates an hour without its watches, one a second.
    let patient = Webhook::start(&kubeconfig, &leaf, &["--max-watch-outage", "1h"]);
    let strict = Webhook::start(&kubeconfig, &leaf, &["--max-watch-outage", "1s"]);
    let live_reads = |w: &Webhook, object: &str, result: &str| {
        w.metric(&format!(
            "linkerd_multus_live_reads_total{{object=\"{object}\",result=\"{result}\"}}"
        ))
    };
    assert_eq!(live_reads(&patient, "namespace", "found"), 0.0);

    // The account keeps `get` but loses list and watch; the API server
    // restarts, so the watches must be made again, and cannot be.
    c.grant(&account, GET_ONLY_ROLE);
    c.revoke(&account, WEBHOOK_ROLE);
    server.stop();
    c.plane.start_ready(&server);
    for w in [&patient, &strict] {
        w.wait_for_metric(
            "linkerd_multus_namespace_watch_up",
            0.0,
            "the broken watch never showed",
        );
    }
    let body = strict.wait_for("/readyz", 503);
    for want in [
        "not ready: the namespace watch has been down for ",
        "longer than --max-watch-outage 1s",
        "forbidden",
    ] {
        assert!(body.contains(want), "{want:?} not in {body}");
    }
    assert_eq!(patient.ops_get("/readyz").unwrap().0, 200);

    // A namespace and its NAD made after the watches broke: in neither cache.
    let enabled = [(MULTUS, "enabled"), (INJECT, "enabled")];
    let fresh = c.plane.namespace("fresh", &enabled);
    c.put_nad(&fresh, "linkerd-cni", &[]);
    for w in [&patient, &strict] {
        let response = post_once(w, &ca, review_in(&fresh, json!({})));
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("warnings").is_none(), "{response}");
        let patch = patch_of(&response).to_string();
        assert!(patch.contains("linkerd-cni"), "{patch}");
    }
    assert_eq!(live_reads(&patient, "namespace", "found"), 1.0);
    assert_eq!(live_reads(&patient, "nad", "found"), 1.0);
    // The strict replica's cache no longer vouches even for what it holds.
    let response = post_once(&strict, &ca, review_in(&c.demo, json!({})));
    assert!(patch_of(&response).to_string().contains("linkerd-cni"));
    assert_eq!(live_reads(&strict, "namespace", "found"), 2.0);
    assert_eq!(live_reads(&patient, "namespace", "found"), 1.0);
    post_once(&patient, &ca, review_in(&c.demo, json!({})));
    assert_eq!(
        live_reads(&patient, "namespace", "found"),
        1.0,
        "a cache within its outage answers from what it holds"
    );

    // A namespace that does not exist: the --on-error answer, never a guess.
    let ghost = c.plane.unique_name("ghost");
    let response = post_once(&patient, &ca, review_in(&ghost, json!({})));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
    let warning = response["warnings"][0].as_str().unwrap().to_string();
    assert!(
        warning.contains(&format!(
            "namespace {ghost} is in neither the webhook's cache nor the API server"
        )),
        "{warning}"
    );
    assert_eq!(live_reads(&patient, "namespace", "absent"), 1.0);

    // No rights at all: the live read fails, and the pod gets --on-error too.
    c.revoke(&account, GET_ONLY_ROLE);
    let denier = Webhook::spawn(&kubeconfig, &leaf, &["--on-error", "deny"], &[]);
    let later = c.plane.namespace("later", &enabled);
    let deadline = Instant::now() + Duration::from_secs(60);
    let response = loop {
        // The revocation reaches the API server's authorizer within moments.
        let response = post_once(&patient, &ca, review_in(&later, json!({})));
        if response["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("forbidden"))
            || Instant::now() > deadline
        {
            break response;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains(&format!(
            "namespace {later} is not in the webhook's cache, and reading it live failed"
        )) && warning.contains("forbidden"),
        "{response}"
    );
    assert!(response.get("patch").is_none(), "{response}");
    assert!(live_reads(&patient, "namespace", "failed") >= 1.0);
    // Never synced: /readyz says so, and a review that reaches it anyway is
    // denied with the reason under --on-error deny.
    let body = denier.wait_for("/readyz", 503);
    assert!(
        body.contains("the namespace cache has not synced yet"),
        "{body}"
    );
    let response = post_once(&denier, &ca, review_in(&c.demo, json!({})));
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("forbidden"),
        "{response}"
    );

    // The rights back: the watches resume and the strict replica is ready again.
    c.grant(&account, WEBHOOK_ROLE);
    strict.wait_for("/readyz", 200);
    denier.wait_for("/readyz", 200);
    assert_eq!(strict.metric("linkerd_multus_namespace_watch_up"), 1.0);
}

#[test]
fn not_ready_until_synced_and_sigterm_drains_requests_in_flight() {
    let c = cluster();
    // An API server of this test's own, not started yet.
    let server = c.plane.new_api_server(&[]);
    let (_, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = leaf.write(dir.path());
    let (port, ops_port) = (free_port(), free_port());
    let child = Command::new(bin())
        .args([
            "webhook",
            "--log-format",
            "json",
            // Each patch is logged at debug.
            "--log-level",
            "info,linkerd_multus=debug",
            "--shutdown-delay",
            "500ms",
        ])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let webhook = Webhook {
        child,
        addr: format!("127.0.0.1:{port}"),
        ops: format!("127.0.0.1:{ops_port}"),
        dir: dir.path().to_path_buf(),
        _dir: dir,
    };
    let body = webhook.wait_for("/readyz", 503);
    assert!(body.contains("not synced"), "{body}");
    assert_eq!(webhook.ops_get("/healthz").unwrap().0, 200);
    c.plane.start_ready(&server);
    webhook.wait_for("/readyz", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = rt.block_on(async {
        let tls = connector(&ca.pem, None, &[b"http/1.1"]);
        let tcp = tokio::net::TcpStream::connect(&webhook.addr).await.unwrap();
        let mut stream = tls
            .connect("127.0.0.1".try_into().unwrap(), tcp)
            .await
            .unwrap();
        // Headers and half the body, then SIGTERM, then the rest.
        let create = moved(CREATE, &c.demo, json!({}));
        let half = create.len() / 2;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let head = format!(
            "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            create.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&create[..half]).await.unwrap();
        stream.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        webhook.signal(nix::sys::signal::Signal::SIGTERM);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (status, _) = webhook.ops_get("/readyz").unwrap();
        assert_eq!(status, 503, "not ready while shutting down");
        stream.write_all(&create[half..]).await.unwrap();
        let mut text = Vec::new();
        stream.read_to_end(&mut text).await.unwrap();
        let text = String::from_utf8(text).unwrap();
        let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
        (status, text)
    });
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"));
    let (code, stderr) = webhook.stop();
    assert_eq!(code, Some(0), "{stderr}");
    // JSON logs: one object per line, the shutdown told.
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["message"].as_str()).collect();
    for want in [
        "namespace cache synced",
        "shutting down: /readyz fails from now on",
        "drained",
        "stopped",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(want)),
            "{want} not in {messages:?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "patched" && l["namespace"] == c.demo.as_str())
    );
}

#[test]
fn bad_start_up_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let missing = dir.path().join("missing.crt");
    // A good certificate and key, then `extra`.
    let with_tls = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "--tls-cert".to_string(),
            cert.display().to_string(),
            "--tls-key".to_string(),
            key.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--tls-cert".into(),
                missing.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            "missing.crt",
        ),
        (
            vec![
                "--tls-cert".into(),
                key.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            "no PEM certificate",
        ),
        (
            vec![
                "--tls-cert".into(),
                cert.display().to_string(),
                "--tls-key".into(),
                cert.display().to_string(),
            ],
            "no PEM private key",
        ),
        (with_tls(&["--proxy-uid-offset", "x"]), "--proxy-uid-offset"),
        (with_tls(&["--on-error", "maybe"]), "--on-error"),
        (
            with_tls(&["--manage-nads"]),
            "--manage-nads needs the Lease's namespace: set --lease-namespace, or POD_NAMESPACE from the downward API (metadata.namespace)",
        ),
        (
            with_tls(&[
                "--manage-nads",
                "--lease-namespace",
                "x",
                "--lease-duration",
                "2s",
            ]),
            "--lease-duration 2s: must be at least 3s",
        ),
        (
            with_tls(&["--missing-nad", "allow"]),
            "invalid value 'allow' for '--missing-nad <POLICY>'",
        ),
        (
            with_tls(&["--max-body-bytes-in-flight", "1048576"]),
            "--max-body-bytes-in-flight 1048576: a body of --max-body-bytes 6291456 could never be read (bodies over 64 KiB may take three quarters of the budget): raise it to at least 8388608, or lower --max-body-bytes",
        ),
        (
            with_tls(&["--max-connections", "0"]),
            "--max-connections 0: must be more than 0",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(bin())
            .arg("webhook")
            .args(&args)
            .env("KUBECONFIG", dir.path().join("none"))
            .env_remove("POD_NAMESPACE")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

// ------------------------------------------------------------------------------------------
// The network-resources rules (--network-resources).

const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";
const NODE_SELECTOR: &str = "k8s.v1.cni.cncf.io/nodeSelector";

/// The settings file of the network-resources rules, typed.
const NETWORK_RESOURCES: &str = "apiVersion: multus.linkerd.io/v1alpha1
kind: NetworkResources
metadata:
  name: network-resources
spec:
  downwardAPI: true
  injections:
    sriov-inject:
      annotations:
        example.com/injected: 'yes'
";

/// The cluster with resource-backed NADs in `demo`, and the Linkerd-CNI NAD.
fn cluster_with_nads() -> Cluster {
    let c = cluster();
    c.put_nad(
        &c.demo,
        "sriov-a",
        &[
            (RESOURCE_NAME, "intel.com/sriov_a"),
            (NODE_SELECTOR, "feature.node.kubernetes.io/sriov=true"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ],
    );
    c.put_nad(&c.demo, "sriov-b", &[(RESOURCE_NAME, "intel.com/sriov_b")]);
    c.put_nad(&c.demo, "linkerd-cni", &[]);
    c
}

/// The captured CREATE (or UPDATE) in `namespace`, selecting `networks`, labelled `labels`.
fn selecting(namespace: &str, operation: &str, networks: &str, labels: Value) -> Bytes {
    let review = moved(
        CREATE,
        namespace,
        json!({"k8s.v1.cni.cncf.io/networks": networks}),
    );
    let mut review: Value = serde_json::from_slice(&review).unwrap();
    review["request"]["operation"] = json!(operation);
    let metadata = &mut review["request"]["object"]["metadata"];
    for (k, v) in labels.as_object().unwrap() {
        metadata["labels"][k] = v.clone();
    }
    Bytes::from(review.to_string())
}

fn write_config(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn network_resources_patch_pods_created_and_deny_missing_nads() {
    let c = cluster_with_nads();
    let ca = Ca::new("CA");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "network-resources.yaml", NETWORK_RESOURCES);
    let webhook = Webhook::start(
        &c.account(&[WEBHOOK_ROLE, NAD_ROLE]),
        &ca.leaf(&["127.0.0.1"]),
        &["--network-resources", &config],
    );
    let rt = runtime();
    let mut conn = rt
        .block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap();
    let mut post = |body: Bytes| {
        let (status, body) = rt.block_on(conn.post("/mutate", body)).unwrap();
        assert_eq!(status, 200);
        response_of(&body)
    };
    // Two selections of sriov-a and one of sriov-b, plus the linkerd-cni the
    // Linkerd-CNI rules append (it has no resource): one patch for both rule sets.
    let response = post(selecting(
        &c.demo,
        "CREATE",
        "sriov-a, sriov-a@net2, sriov-b",
        json!({"sriov-inject": "true"}),
    ));
    assert_eq!(response["allowed"], true, "{response}");
    let record = r#"{"requests":{"intel.com/sriov_a":{"set":2},"intel.com/sriov_b":{"set":1}},"limits":{"intel.com/sriov_a":{"set":2},"intel.com/sriov_b":{"set":1}},"nodeSelector":{"feature.node.kubernetes.io/sriov":"true"},"annotations":{"example.com/injected":"yes"},"volume":true,"mounts":["c"]}"#;
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, sriov-a@net2, sriov-b, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": "/metadata/annotations/example.com~1injected", "value": "yes"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": record},
            {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"intel.com/sriov_a": "2", "intel.com/sriov_b": "1"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"intel.com/sriov_a": "2", "intel.com/sriov_b": "1"}},
            {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [
                {"name": "podnetinfo", "mountPath": "/etc/podnetinfo", "readOnly": true}
            ]},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"feature.node.kubernetes.io/sriov": "true"}},
            {"op": "add", "path": "/spec/volumes", "value": [{"name": "podnetinfo", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
            ]}}]}
        ])
    );
    // UPDATE: the Linkerd-CNI rules only; resources and node selectors of a pod are immutable.
    let response = post(selecting(
        &c.demo,
        "UPDATE",
        "sriov-a, sriov-b",
        json!({"sriov-inject": "true"}),
    ));
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, sriov-b, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"}
        ])
    );
    // Selections of NADs that do not exist: denied (the default --on-error is allow), naming
    // the pod and each missing NAD once.
    let response = post(selecting(
        &c.demo,
        "CREATE",
        &format!("sriov-a, gone, {}/gone@net2, gone", c.plain),
        json!({}),
    ));
    assert_eq!(response["allowed"], false, "{response}");
    assert!(response.get("patch").is_none());
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: pod {demo}/pod2: selects NetworkAttachmentDefinitions {demo}/gone and {}/gone, which do not exist",
            c.plain,
            demo = c.demo
        )
    );
    // NADs the watch brings later are seen.
    c.put_nad(&c.plain, "gone", &[(RESOURCE_NAME, "example.com/gone")]);
    c.put_nad(
        &c.demo,
        "gone",
        &[(NODE_SELECTOR, "feature.node.kubernetes.io/sriov=false")],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let response = loop {
        let response = post(selecting(
            &c.demo,
            "CREATE",
            &format!("sriov-a, gone, {}/gone@net2", c.plain),
            json!({}),
        ));
        if !response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("do not exist") || m.contains("does not exist"))
        {
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "the new NADs never reached the cache"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // ... and their node selectors conflict: denied too.
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: pod {demo}/pod2: spec.nodeSelector feature.node.kubernetes.io/sriov: NetworkAttachmentDefinition {demo}/sriov-a asks for \"true\" but NetworkAttachmentDefinition {demo}/gone for \"false\"",
            demo = c.demo
        )
    );
    // A networks annotation Multus would reject follows --on-error (allow, with a warning).
    let response = post(selecting(&c.demo, "CREATE", "a,,b", json!({})));
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("k8s.v1.cni.cncf.io/networks: item 2"),
        "{response}"
    );
    let metric = |l: &str| webhook.metric(l);
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"patched\"}"),
        2.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"warned\"}"),
        1.0
    );
    assert!(metric("linkerd_multus_admission_requests_total{outcome=\"denied\"}") >= 2.0);
    // The CREATE got network resources; the UPDATE did not.
    assert_eq!(
        metric("linkerd_multus_admission_patches_total{change=\"network_resources\"}"),
        1.0
    );
    // This test's five, and the other tests' NADs.
    assert!(metric("linkerd_multus_nad_cache_nads") >= 5.0);
    assert_eq!(metric("linkerd_multus_nad_cache_synced"), 1.0);
    assert_eq!(metric("linkerd_multus_nad_watch_up"), 1.0);
    assert_eq!(metric("linkerd_multus_nad_cache_age_seconds"), 0.0);
}

#[test]
fn with_missing_nad_ignore_and_no_network_resources_there_is_no_nad_watch_and_no_spec_change() {
    let c = cluster_with_nads();
    let ca = Ca::new("CA");
    // Namespaces only: the NADs cannot be listed, and the webhook must not need them.
    let webhook = Webhook::start(
        &c.account(&[NAMESPACES_ROLE]),
        &ca.leaf(&["127.0.0.1"]),
        &["--missing-nad", "ignore"],
    );
    let response = post_once(
        &webhook,
        &ca,
        selecting(&c.demo, "CREATE", "sriov-a, gone", json!({})),
    );
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, gone, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"}
        ])
    );
    let (_, metrics) = webhook.ops_get("/metrics").unwrap();
    assert!(!metrics.contains("linkerd_multus_nad_"), "{metrics}");
}

#[test]
fn not_ready_until_the_nad_cache_has_synced() {
    let c = cluster_with_nads();
    // An API server of this test's own, to take down at the end.
    let server = c.plane.new_api_server(&[]);
    c.plane.start_ready(&server);
    // The account has the Namespace rights but not yet the NAD rights: the NAD
    // list is refused (403), as in a cluster where the webhook's ClusterRole
    // is still an older one, without NADs.
    let (account, kubeconfig) = c.account_on(&server, NAMESPACES_ROLE);
    let ca = Ca::new("CA");
    let dir = tempfile::tempdir().unwrap();
    // The ConfigMap form, named by the environment variable.
    let config = write_config(
        dir.path(),
        "config-map.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: network-resources}\ndata:\n  resourceNameKeys: '[k8s.v1.cni.cncf.io/resourceName]'\n",
    );
    let webhook = Webhook::spawn(
        &kubeconfig,
        &ca.leaf(&["127.0.0.1"]),
        &[],
        &[("LINKERD_MULTUS_NETWORK_RESOURCES", &config)],
    );
    // The namespace cache syncs; only the NADs hold readiness back.
    webhook.wait_for_metric(
        "linkerd_multus_namespace_cache_synced",
        1.0,
        "the namespace cache never synced",
    );
    let (status, body) = webhook.ops_get("/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the NAD cache has not synced yet"), "{body}");
    assert!(!body.contains("namespace"), "{body}");
    assert_eq!(webhook.metric("linkerd_multus_nad_cache_synced"), 0.0);
    // The NAD rights granted: the retried list succeeds.
    c.grant(&account, NAD_ROLE);
    webhook.wait_for("/readyz", 200);
    assert!(webhook.metric("linkerd_multus_nad_cache_nads") >= 3.0);
    let patch = patch_of(&post_once(
        &webhook,
        &ca,
        selecting(&c.demo, "CREATE", "sriov-b", json!({})),
    ));
    assert!(
        patch.as_array().unwrap().contains(&json!(
            {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"intel.com/sriov_b": "1"}}
        )),
        "{patch}"
    );
    // The API server going away: still serving from the last known NADs, and said so.
    server.stop();
    webhook.wait_for_metric(
        "linkerd_multus_nad_watch_up",
        0.0,
        "the broken NAD watch never showed",
    );
    assert_eq!(webhook.ops_get("/readyz").unwrap().0, 200);
    assert!(
        post_once(
            &webhook,
            &ca,
            selecting(&c.demo, "CREATE", "sriov-b", json!({}))
        )
        .get("patch")
        .is_some()
    );
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, stderr) = webhook.stop();
    assert!(stderr.contains("NAD cache synced"), "{stderr}");
    assert!(
        stderr.contains("NAD watch broken; serving from the last known NADs"),
        "{stderr}"
    );
}

#[test]
fn network_resources_settings_errors_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let nr = write_config(dir.path(), "nr.yaml", NETWORK_RESOURCES);
    let lm = write_config(
        dir.path(),
        "lm.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec: {}\n",
    );
    let bad = write_config(
        dir.path(),
        "bad.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nspec:\n  honorResources: perhaps\n",
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    type Env<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Vec<&str>, Env, String)> = vec![
        (
            vec!["--config", &nr],
            vec![],
            format!(
                "--config {nr}: is a NetworkResources: the webhook takes it as --network-resources {nr}"
            ),
        ),
        (
            vec!["--network-resources", &lm],
            vec![],
            format!("--network-resources {lm}: is a LinkerdMultus: give it as --config"),
        ),
        (
            vec!["--network-resources", &bad],
            vec![],
            format!("--network-resources {bad}: setting honorResources: must be true or false"),
        ),
        (
            vec![],
            vec![("LINKERD_MULTUS_NETWORK_RESOURCES", missing.as_str())],
            format!("environment variable LINKERD_MULTUS_NETWORK_RESOURCES {missing}"),
        ),
    ];
    for (args, env, want) in cases {
        let out = Command::new(bin())
            .arg("webhook")
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(&args)
            .envs(env.iter().copied())
            .env("KUBECONFIG", dir.path().join("none"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
    }
}

/// `webhook --help` lists the webhook's own flags, the settings that decide a
/// pod and those of the NAD config (its controller's), not those only
/// rendering uses (workload kinds,
/// namespaces of files, config rollouts).
#[test]
fn help_lists_only_the_flags_the_webhook_uses() {
    let out = Command::new(bin())
        .args(["webhook", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        flags,
        [
            "listen",
            "path",
            "tls-cert",
            "tls-key",
            "client-ca",
            "tls-reload-interval",
            "ops-listen",
            "max-body-bytes",
            "header-timeout",
            "body-timeout",
            "max-body-bytes-in-flight",
            "max-connections",
            "max-concurrent-streams",
            "idle-timeout",
            "api-timeout",
            "on-error",
            "max-watch-outage",
            "live-read-timeout",
            "shutdown-delay",
            "drain-timeout",
            "log-format",
            "log-level",
            "network-resources",
            "missing-nad",
            "manage-nads",
            "lease-name",
            "lease-namespace",
            "lease-duration",
            "identity",
            "config",
            "linkerd-namespace",
            "nad-name",
            "uid-range-annotation",
            "proxy-uid-offset",
            "cni-namespace",
            "cni-kubeconfig",
            "cni-version",
        ]
    );
    // A render-only flag is refused, not silently ignored.
    let out = Command::new(bin())
        .args(["webhook", "--config-rollout", "all"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("error: unexpected argument '--config-rollout' found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A misspelt variable is logged at start-up, before anything else can fail.
#[test]
fn a_misspelt_variable_is_logged_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let out = Command::new(bin())
        .args([
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--ops-listen",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env_clear()
        .env("LINKERD_MULTUS_NETWORK_RESOURCE", "nr.yaml")
        .env("KUBECONFIG", dir.path().join("none"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No API server here: it stops after the warning.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let warning = stderr.lines().next().unwrap_or_default();
    assert!(
        warning.contains(" WARN ")
            && warning.ends_with(
                "environment variable LINKERD_MULTUS_NETWORK_RESOURCE is not one linkerd-multus reads; did you mean LINKERD_MULTUS_NETWORK_RESOURCES?"
            ),
        "{stderr}"
    );
}
