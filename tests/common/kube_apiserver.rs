//! A real kube-apiserver and etcd for the tests, started the way envtest starts
//! them: the binaries come from the folder named by `KUBEBUILDER_ASSETS`
//! (`kube-apiserver`, `etcd`, `kubectl`), so anyone with their own assets
//! (`setup-envtest use 1.32 -p path`) runs the same tests.
//!
//! [`ControlPlane::shared`] starts one etcd and one API server per test binary,
//! on free loopback ports, in a temporary folder, with certificates made here.
//! Each test works in namespaces of its own ([`ControlPlane::namespace`]): a
//! lone API server has no namespace controller, so a deleted namespace never
//! goes away. Each process is a [`Guard`]'s, and the folder is left to the
//! binary's watchdog, so that a control plane kept to the end (a static's) is
//! stopped and removed when the test binary ends, however it ends. A start-up
//! failure fails the test with the tail of the log of the process that failed.
#![allow(dead_code)]

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};

use super::https::{Ca, Leaf};
pub use super::ports::free_port;
use super::process::{Entry, Guard, leave_to_watchdog};

#[path = "kube_apiserver/api_server.rs"]
mod api_server;
#[path = "kube_apiserver/apply.rs"]
mod apply;

use api_server::{etcd_post, log_file, wait_for_etcd};

/// The environment variable naming the folder of the binaries.
pub const ASSETS: &str = "KUBEBUILDER_ASSETS";

/// What to do when the assets are missing, in one line.
pub const HOW_TO_GET_ASSETS: &str = "set KUBEBUILDER_ASSETS to a folder holding kube-apiserver, etcd and kubectl: `eval \"$(scripts/kube-assets.sh)\"` makes one from ../shared/kube and Debian's etcd-server (or use `setup-envtest use 1.32 -p path`)";

/// How long the API server may take to answer /readyz.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// An etcd and the API servers in front of it.
pub struct ControlPlane {
    /// The temporary folder holding certificates, data and logs.
    pub dir: PathBuf,
    assets: PathBuf,
    etcd_url: String,
    ca: Ca,
    service_account_key: KeyPair,
    /// The first API server: what [`ControlPlane::kubectl`] talks to.
    api: ApiServer,
    /// The admin's kubeconfig (a client certificate in `system:masters`).
    pub admin_kubeconfig: PathBuf,
    /// The admin's client certificate, for clients of the tests' own.
    pub admin: Leaf,
    names: AtomicUsize,
    /// What the first API server serves, for [`ControlPlane::apply`].
    discovery: apply::Discovery,
    etcd: Mutex<Option<Guard>>,
    /// The folder left to the watchdog, until [`ControlPlane::stop`].
    watched: Mutex<Option<Entry>>,
    _dir: tempfile::TempDir,
}

/// One kube-apiserver process, which a test may stop and start again on the
/// same port (and so the same URL).
pub struct ApiServer {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    port: u16,
    args: Vec<String>,
    binary: PathBuf,
    log: PathBuf,
    child: Mutex<Option<Guard>>,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The assets folder, or the one-line message saying how to get one.
pub fn assets() -> Result<PathBuf, String> {
    let dir = std::env::var_os(ASSETS)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| format!("{ASSETS} is not set: {HOW_TO_GET_ASSETS}"))?;
    let dir = PathBuf::from(dir);
    for binary in ["kube-apiserver", "etcd", "kubectl"] {
        let path = dir.join(binary);
        if !path.is_file() {
            return Err(format!(
                "{ASSETS}={} has no {binary}: {HOW_TO_GET_ASSETS}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn pem_base64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A kubeconfig for `server`, trusting `ca`, authenticating with `user` (the
/// YAML of the user entry).
fn kubeconfig(server: &str, ca: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\nusers:\n- name: test\n  user:\n{user}",
        pem_base64(ca)
    )
}

impl ControlPlane {
    /// The control plane of this test binary, started on first use. Panics
    /// with a one-line message when `KUBEBUILDER_ASSETS` is missing, and with
    /// the log's tail when a process fails to start.
    pub fn shared() -> &'static ControlPlane {
        match SHARED.get_or_init(|| Self::start_own(&[])) {
            Ok(plane) => plane,
            Err(message) => panic!("{message}"),
        }
    }

    /// A control plane of the calling test's own, started anew: for a subject
    /// that acts on every namespace (the NAD controller), which would meet the
    /// other tests' namespaces in the shared one. Stopped, and its folder
    /// removed, when the test ends (libtest runs each test on a thread of its
    /// own): an idle API server still takes CPU from the tests that follow.
    #[allow(dead_code)] // Not every test binary uses it.
    pub fn own() -> &'static ControlPlane {
        let plane = Self::kept();
        OWN.with(|own| own.0.borrow_mut().push(plane));
        plane
    }

    /// A control plane started anew and kept until the binary exits: for a
    /// fixture several tests share, one at a time.
    #[allow(dead_code)] // Not every test binary uses it.
    pub fn kept() -> &'static ControlPlane {
        match Self::start_own(&[]) {
            Ok(plane) => Box::leak(Box::new(plane)),
            Err(message) => panic!("{message}"),
        }
    }

    /// Stops the API server and etcd and removes the folder: what dropping
    /// does, for a plane [`ControlPlane::own`] leaked to give out `'static`.
    fn stop(&self) {
        self.api.stop();
        drop(self.etcd.lock().unwrap_or_else(|p| p.into_inner()).take());
        let _ = std::fs::remove_dir_all(&self.dir);
        drop(
            self.watched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }

    /// A control plane of the caller's own, its API server started with
    /// `extra` flags; stopped, and its folder removed, when dropped.
    pub fn start_own(extra: &[&str]) -> Result<ControlPlane, String> {
        let assets = assets()?;
        // In TMPDIR when it is set (scripts/test.sh sets one of its run's), else on tmpfs
        // where there is one: etcd's fsyncs cost nothing there.
        let shm = Path::new("/dev/shm");
        let mut builder = tempfile::Builder::new();
        builder.prefix("kube-apiserver-");
        let dir = if std::env::var_os("TMPDIR").is_none() && shm.is_dir() {
            builder.tempdir_in(shm)
        } else {
            builder.tempdir()
        }
        .map_err(|e| format!("making a temporary folder: {e}"))?;
        let path = dir.path().to_path_buf();
        let watched = leave_to_watchdog(&path);

        // etcd on two free ports, its data in the temporary folder.
        let (client, peer) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let etcd_log = path.join("etcd.log");
        let etcd = Guard::spawn(
            Command::new(assets.join("etcd"))
                .arg("--data-dir")
                .arg(path.join("etcd"))
                .args(["--listen-client-urls", &etcd_url])
                .args(["--advertise-client-urls", &etcd_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("default={peer_url}")])
                .args(["--name", "default"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file(&etcd_log)?),
        )
        .map_err(|e| format!("starting {}: {e}", assets.join("etcd").display()))?;
        wait_for_etcd(&etcd_url, &etcd_log)?;

        // Certificates: a CA, the serving certificate, an admin client
        // certificate in system:masters, and a key for service-account tokens.
        let ca = Ca::new("linkerd-multus test CA");
        let serving = ca.leaf(&["127.0.0.1", "localhost"]);
        serving.write(&path);
        std::fs::write(path.join("ca.crt"), &ca.pem).map_err(|e| e.to_string())?;
        let service_account_key = KeyPair::generate().map_err(|e| e.to_string())?;
        std::fs::write(path.join("sa.key"), service_account_key.serialize_pem())
            .map_err(|e| e.to_string())?;
        std::fs::write(path.join("sa.pub"), service_account_key.public_key_pem())
            .map_err(|e| e.to_string())?;
        let admin = client_certificate(&ca, "admin", &["system:masters"]);
        let api = ApiServer::new(&assets, &path, &etcd_url, extra);
        let admin_kubeconfig = path.join("admin.kubeconfig");
        std::fs::write(
            &admin_kubeconfig,
            kubeconfig(&api.url, &ca.pem, &user_entry(&admin)),
        )
        .map_err(|e| e.to_string())?;
        let plane = ControlPlane {
            dir: path,
            assets,
            etcd_url,
            ca,
            service_account_key,
            api,
            admin_kubeconfig,
            admin,
            names: AtomicUsize::new(0),
            discovery: apply::Discovery::default(),
            etcd: Mutex::new(Some(etcd)),
            watched: Mutex::new(Some(watched)),
            _dir: dir,
        };
        plane.api.start_and_wait(&plane.ca.pem, &plane.admin)?;
        Ok(plane)
    }

    /// The first API server's URL.
    pub fn url(&self) -> &str {
        &self.api.url
    }

    /// The first API server's process ID.
    pub fn api_server_pid(&self) -> Option<u32> {
        self.api.pid()
    }

    /// The CA of the API server's serving certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca.pem
    }

    /// A leaf certificate signed by the control plane's CA (for webhooks the
    /// API server calls: it is also the `caBundle` to register).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.ca.leaf(names)
    }

    /// The `kubectl` of the assets.
    pub fn kubectl_path(&self) -> PathBuf {
        self.assets.join("kubectl")
    }

    /// A `kubectl` command with the admin's kubeconfig.
    pub fn kubectl_command(&self) -> Command {
        let mut command = Command::new(self.kubectl_path());
        command
            .env("KUBECONFIG", &self.admin_kubeconfig)
            .env_remove("KUBECTL_EXTERNAL_DIFF");
        command
    }

    /// Runs kubectl as the admin with `stdin` as input.
    pub fn kubectl_input(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Guard::spawn(
            self.kubectl_command()
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("starting kubectl");
        child
            .take_stdin()
            .unwrap()
            .write_all(stdin.as_bytes())
            .expect("writing to kubectl");
        child.wait_with_output().expect("waiting for kubectl")
    }

    /// Runs kubectl as the admin; panics with its stderr when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_ok(args, "")
    }

    /// Runs kubectl as the admin with `stdin`; panics with its stderr when it fails.
    pub fn kubectl_ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_input(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("kubectl prints UTF-8")
    }

    /// GETs `path` (`/api/v1/...`) from the first API server as the admin, over HTTPS from
    /// this process: what the tests' polls read many times a second, which a `kubectl get`
    /// each would pay for with a process and a tenth of a second of CPU. The status and the
    /// body; `None` when the server cannot be reached (stopped) or does not answer in 30 s.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        https_get(
            &self.api.url,
            &self.ca.pem,
            &self.admin,
            path,
            Duration::from_secs(30),
        )
    }

    /// The object (or list) at `path` as JSON, when the API server answers 200; `None` for
    /// any other answer or none, as a failed `kubectl get` reads.
    pub fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        match self.get(path)? {
            (200, body) => Some(serde_json::from_str(&body).expect("the API server's JSON")),
            _ => None,
        }
    }

    /// The object (or list) at `path` as JSON; panics, with the answer, unless it is 200.
    pub fn get_ok(&self, path: &str) -> serde_json::Value {
        match self.get(path) {
            Some((200, body)) => serde_json::from_str(&body).expect("the API server's JSON"),
            other => panic!("GET {path}: {other:?}"),
        }
    }

    /// `kubectl apply --server-side --field-manager=tests -f -` of `yaml` as the admin, made
    /// from this process ([`ControlPlane::apply_as`]); panics with what failed.
    pub fn apply(&self, yaml: &str) -> String {
        self.apply_as("tests", yaml)
            .unwrap_or_else(|e| panic!("server-side apply as the admin: {e}"))
    }

    /// A name no other test of this binary uses: `prefix-N`.
    pub fn unique_name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.names.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates a namespace of its own for a test, with `annotations`, and
    /// returns its name.
    pub fn namespace(&self, prefix: &str, annotations: &[(&str, &str)]) -> String {
        let name = self.unique_name(prefix);
        let mut yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
        if !annotations.is_empty() {
            yaml.push_str("  annotations:\n");
            for (k, v) in annotations {
                writeln!(yaml, "    {k}: {}", serde_json::to_string(v).unwrap()).unwrap();
            }
        }
        self.apply(&yaml);
        name
    }

    /// Installs the NetworkAttachmentDefinition CRD (testdata/crds) and waits
    /// until it is served.
    pub fn install_nad_crd(&self) {
        let crd = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/crds/network-attachment-definitions.yaml"),
        )
        .expect("testdata/crds/network-attachment-definitions.yaml");
        self.apply(&crd);
        self.wait_established("network-attachment-definitions.k8s.cni.cncf.io");
    }

    /// Creates ServiceAccount `namespace/name` when missing, and writes a
    /// kubeconfig into `dir` that authenticates as it with a token from the
    /// TokenRequest API ([`ControlPlane::create_token`]). Its rights are whatever RBAC
    /// grants the account: nothing until a binding says otherwise.
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str, dir: &Path) -> PathBuf {
        self.service_account_kubeconfig_for(&self.api, namespace, name, dir)
    }

    /// The same as [`ControlPlane::service_account_kubeconfig`], for `server`.
    pub fn service_account_kubeconfig_for(
        &self,
        server: &ApiServer,
        namespace: &str,
        name: &str,
        dir: &Path,
    ) -> PathBuf {
        self.apply(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        ));
        let token = self.create_token(namespace, name, 2 * 3600);
        let path = dir.join(format!("{namespace}-{name}.kubeconfig"));
        std::fs::write(
            &path,
            kubeconfig(
                &server.url,
                &self.ca.pem,
                &format!("    token: {}\n", token.trim()),
            ),
        )
        .expect("writing a kubeconfig");
        path
    }

    /// An admin kubeconfig for `server`, written into `dir`.
    pub fn admin_kubeconfig_for(&self, server: &ApiServer, dir: &Path) -> PathBuf {
        let admin = std::fs::read_to_string(&self.admin_kubeconfig).expect("admin kubeconfig");
        let path = dir.join("admin.kubeconfig");
        std::fs::write(&path, admin.replace(&self.api.url, &server.url))
            .expect("writing a kubeconfig");
        path
    }

    /// A new API server on the same etcd, with `extra` flags, not started yet:
    /// a test may start it, stop it and start it again on the same port
    /// without disturbing the other tests.
    pub fn new_api_server(&self, extra: &[&str]) -> ApiServer {
        ApiServer::new(&self.assets, &self.dir, &self.etcd_url, extra)
    }

    /// Starts `server` (again) and waits until it is ready.
    pub fn start_ready(&self, server: &ApiServer) {
        server
            .start_and_wait(&self.ca.pem, &self.admin)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Compacts etcd's history up to its current revision: watches that resume
    /// from an older resourceVersion get `410 Gone`. Returns the revision.
    pub fn compact_etcd(&self) -> u64 {
        let range = etcd_post(&self.etcd_url, "/v3/kv/range", r#"{"key":"AA=="}"#);
        let range: serde_json::Value = serde_json::from_str(&range).expect("etcd's answer");
        let revision: u64 = range["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no revision in {range}"));
        etcd_post(
            &self.etcd_url,
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        );
        revision
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The control planes the test running on this thread started with
/// [`ControlPlane::own`], stopped when the thread ends.
struct OwnPlanes(RefCell<Vec<&'static ControlPlane>>);

impl Drop for OwnPlanes {
    fn drop(&mut self) {
        for plane in self.0.take() {
            plane.stop();
        }
    }
}

thread_local! {
    static OWN: OwnPlanes = const { OwnPlanes(RefCell::new(Vec::new())) };
}

/// GETs `path` from the API server at `url` (`https://127.0.0.1:PORT`) as `client`, trusting
/// `ca`, over HTTPS from this process: the status and the body; `None` when it cannot be
/// reached or does not answer `within`.
fn https_get(
    url: &str,
    ca: &str,
    client: &Leaf,
    path: &str,
    within: Duration,
) -> Option<(u16, String)> {
    let connector = super::https::connector(ca, Some(client), &[b"http/1.1"]);
    let addr = url.trim_start_matches("https://");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(async {
        let get = async {
            let mut connection = super::https::Connection::open(addr, &connector)
                .await
                .ok()?;
            connection.get(path).await.ok()
        };
        let (status, body) = tokio::time::timeout(within, get).await.ok()??;
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    })
}

/// A kubeconfig user entry authenticating with `leaf`.
fn user_entry(leaf: &Leaf) -> String {
    format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        pem_base64(&leaf.cert),
        pem_base64(&leaf.key)
    )
}

/// A client certificate for `name` in `groups`.
fn client_certificate(ca: &Ca, name: &str, groups: &[&str]) -> Leaf {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("certificate params");
    params.distinguished_name.push(DnType::CommonName, name);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    ca.sign(params)
}
