//! What the controller's tests share: a test's API server and namespaces,
//! the controller's accounts with exactly the packages' rights, and the
//! controller process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::bin;
use super::common::https::http_get;
use super::common::kube_apiserver::{ApiServer, ControlPlane, free_port};
use super::common::process::{Guard, Guarded};

pub const NAD: &str = "network-attachment-definitions.k8s.cni.cncf.io";
pub const CONFIG_MAP: &str = include_str!("../../../shared/fixtures/linkerd-cni/version-2.19.yaml");
pub const CONTROLLER_MARK: &str = "linkerd-multus-controller";
/// How long a condition the controller should reach may take at most.
pub const BOUND: Duration = Duration::from_secs(30);

/// One test's namespaces and the controller's account.
pub struct Setup {
    pub plane: &'static ControlPlane,
    pub cni: String,
    pub control_plane: String,
    pub home: String,
    pub account: String,
    pub dir: tempfile::TempDir,
    /// The packages' RBAC as this test applies it.
    rbac: String,
}

/// A test's own API server with the packages' rights for one account.
pub fn setup() -> Setup {
    setup_with(|rbac| rbac)
}

/// The same, with `edit` applied to deploy-nad-controller/rbac.yaml first.
pub fn setup_with(edit: impl Fn(String) -> String) -> Setup {
    // The controller acts on every namespace: each test has an API server of its own.
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    plane.apply(&read("deploy/namespace.yaml"));
    let cni = plane.namespace("cni", &[]);
    // The control-plane namespace is named by a flag: no NAD before it exists.
    let control_plane = plane.unique_name("linkerd");
    let home = plane.namespace("home", &[]);
    let account = plane.unique_name("controller");
    // The packages' rules, with the Roles in this test's CNI and home
    // namespaces (what kpt-set does for a user).
    let rbac = edit(read("deploy-nad-controller/rbac.yaml"))
        .replace(
            "namespace: linkerd-multus # kpt-set: ${namespace}",
            &format!("namespace: {home}"),
        )
        .replace(
            "namespace: linkerd-cni # kpt-set: ${cni-namespace}",
            &format!("namespace: {cni}"),
        );
    let setup = Setup {
        plane,
        cni,
        control_plane,
        home,
        account: account.clone(),
        dir: tempfile::tempdir().unwrap(),
        rbac,
    };
    setup.plane.apply(&setup.rbac);
    setup.grant(&account);
    setup.put_config_map(CONFIG_MAP);
    setup.account_writes_nads();
    setup
}

pub fn read(path: &str) -> String {
    std::fs::read_to_string(super::common::repo_path(path)).unwrap()
}

impl Setup {
    /// Binds `account` (a ServiceAccount in the home namespace) to the
    /// controller's roles of the packages, and to no other: the webhook's are
    /// not its. Each binding is named after the account: `<binding>-<account>`.
    pub fn grant(&self, account: &str) {
        let bindings: Vec<String> = self
            .rbac
            .split("\n---\n")
            .filter(|doc| {
                doc.contains("kind: RoleBinding") || doc.contains("kind: ClusterRoleBinding")
            })
            .map(|doc| {
                let (head, rest) = doc.split_once("metadata:\n  name: ").unwrap();
                let (name, rest) = rest.split_once('\n').unwrap();
                format!("{head}metadata:\n  name: {name}-{account}\n{rest}").replace(
                    "  name: linkerd-multus-nad-controller\n  namespace: ",
                    &format!("  name: {account}\n  namespace: "),
                )
            })
            .collect();
        self.plane.apply(&bindings.join("\n---\n"));
    }

    /// Waits until the account's first write of a NAD has been answered: a server-side dry
    /// run of a create, in the home namespace, as the account, allowed or refused. The API
    /// server holds a new account's first write of a custom resource for seconds (2.7 s
    /// here); the tests count the controller's writes, and one held past `--api-timeout` is
    /// written again.
    fn account_writes_nads(&self) {
        let nad = self.dir.path().join("probe-nad.yaml");
        std::fs::write(
            &nad,
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: probe\nspec:\n  config: '{}'\n",
        )
        .unwrap();
        // Refused or not (a test may take the right away): answered is what counts.
        self.plane
            .kubectl_command()
            .env("KUBECONFIG", self.kubeconfig())
            .args(["create", "--dry-run=server", "--request-timeout=60s"])
            .args(["-n", &self.home, "-f"])
            .arg(&nad)
            .guarded_output()
            .expect("running kubectl");
    }

    /// A kubeconfig of the test's account on the first API server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.plane
            .service_account_kubeconfig(&self.home, &self.account, self.dir.path())
    }

    /// A kubeconfig of `account` on `server`.
    pub fn kubeconfig_on(&self, server: &ApiServer, account: &str) -> PathBuf {
        let dir = self.dir.path().join(format!("api-{}", server.port()));
        std::fs::create_dir_all(&dir).unwrap();
        self.plane
            .service_account_kubeconfig_for(server, &self.home, account, &dir)
    }

    /// A kubeconfig of the test's account through `address` (a proxy in
    /// front of the first API server).
    pub fn kubeconfig_through(&self, address: &str) -> PathBuf {
        let direct = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let path = self.dir.path().join("proxied.kubeconfig");
        std::fs::write(
            &path,
            direct.replace(self.plane.url(), &format!("https://{address}")),
        )
        .unwrap();
        path
    }

    /// Another API server on the test's etcd, started, whose audit log (one
    /// JSON line per request) is [`Audited::log`].
    pub fn audited_server(&self) -> Audited {
        let dir = self
            .dir
            .path()
            .join(format!("audit-{}", self.plane.unique_name("server")));
        std::fs::create_dir_all(&dir).unwrap();
        let policy = dir.join("policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).unwrap();
        let log = dir.join("audit.log");
        let server = self.plane.new_api_server(&[
            &format!("--audit-policy-file={}", policy.display()),
            &format!("--audit-log-path={}", log.display()),
            "--audit-log-mode=blocking",
        ]);
        self.plane.start_ready(&server);
        Audited { server, log }
    }

    pub fn put_config_map(&self, yaml: &str) {
        let yaml = yaml.replace(
            "namespace: linkerd-cni",
            &format!("namespace: {}", self.cni),
        );
        assert!(yaml.contains(&self.cni), "the fixture names its namespace");
        self.plane.apply(&yaml);
    }

    /// The NAD `linkerd-cni` of `namespace`, if any.
    /// Read from the API server directly, managed fields and all (polls call it often).
    pub fn nad(&self, namespace: &str) -> Option<Value> {
        self.plane.get_json(&format!(
            "/apis/k8s.cni.cncf.io/v1/namespaces/{namespace}/network-attachment-definitions/linkerd-cni"
        ))
    }

    /// A field of the controllers' Lease (`spec.holderIdentity`: `["spec",
    /// "holderIdentity"]`), read from the API server directly; empty when absent.
    pub fn lease(&self, field: &[&str]) -> String {
        let lease = self.plane.get_json(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/linkerd-multus-nad-controller",
            self.home
        ));
        let value = field
            .iter()
            .fold(lease.as_ref(), |value, key| value.and_then(|v| v.get(key)));
        value
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    pub fn version(&self, namespace: &str) -> Option<String> {
        self.nad(namespace).map(|n| {
            n["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string()
        })
    }

    pub fn put_nad(&self, namespace: &str, managed_by: Option<&str>) {
        let labels = managed_by
            .map(|m| format!("  labels:\n    app.kubernetes.io/managed-by: {m}\n"))
            .unwrap_or_default();
        self.plane.apply(&format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {namespace}\n{labels}spec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\"}}'\n"
        ));
    }

    /// `kubectl annotate namespace NAMESPACE --overwrite linkerd.io/multus=VALUE`, made from
    /// this process.
    pub fn annotate(&self, namespace: &str, value: &str) {
        self.plane
            .annotate_namespace(namespace, "linkerd.io/multus", value);
    }

    /// The `spec.config` the KRM function renders from the same ConfigMap:
    /// the controller must build exactly this.
    pub fn rendered_config(&self, config_map: &str) -> String {
        let nad = rendered_nad("demo", config_map);
        nad.str_at(&["spec", "config"]).unwrap().to_string()
    }

    /// The Events in `namespace` about the object named `name` (events.k8s.io/v1), read
    /// from the API server directly (polls call it often).
    pub fn events_about(&self, namespace: &str, name: &str) -> Vec<Value> {
        let list = self.plane.get_ok(&format!(
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events?fieldSelector=regarding.name%3D{name}"
        ));
        list["items"].as_array().unwrap().clone()
    }

    /// Reasons of the Events on Namespace `namespace`.
    pub fn event_reasons(&self, namespace: &str) -> Vec<String> {
        self.events_about("default", namespace)
            .iter()
            .filter(|e| e["regarding"]["kind"] == "Namespace")
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// Metadata of every request, the stages with no more to say left out.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n";

/// An API server with an audit log.
pub struct Audited {
    pub server: ApiServer,
    pub log: PathBuf,
}

/// A running `linkerd-multus controller`; killed when dropped.
pub struct Controller {
    pub child: Guard,
    pub ops: String,
    log: PathBuf,
}

impl Controller {
    /// Starts one with a Lease of 3 s.
    pub fn start(s: &Setup, identity: &str, kubeconfig: &Path) -> Controller {
        Controller::start_with(s, identity, kubeconfig, "3s")
    }

    /// Starts one for a test that asserts no Warning Event and is not about leadership: with
    /// a Lease of 30 s, not 3 s, whose term bounds every call to about 2 s, so that an answer
    /// slowed by a loaded machine is waited for rather than cut (a `NADFailed` Warning,
    /// rightly, for a call the term's end cut).
    pub fn start_quiet(s: &Setup) -> Controller {
        Controller::start_with(s, "only", &s.kubeconfig(), "30s")
    }

    /// Starts one with a Lease of `lease` (`--lease-duration`); its log is
    /// [`Controller::log`].
    pub fn start_with(s: &Setup, identity: &str, kubeconfig: &Path, lease: &str) -> Controller {
        Controller::start_args(s, identity, kubeconfig, lease, &[])
    }

    /// Starts one that reads and writes through the delaying proxy at `proxy`, which holds
    /// the cluster's answers back up to 5 s: a Lease of 45 s (renewed within 30 s) and 30 s
    /// a call, for a call on a new connection waits for two late answers (the TLS
    /// handshake's, then its own), and a renewal for two calls.
    pub fn start_behind(s: &Setup, proxy: &str) -> Controller {
        let kubeconfig = s.kubeconfig_through(proxy);
        Controller::start_args(s, "only", &kubeconfig, "45s", &["--api-timeout=30s"])
    }

    /// Starts one with a Lease of `lease` and the flags `extra`.
    pub fn start_args(
        s: &Setup,
        identity: &str,
        kubeconfig: &Path,
        lease: &str,
        extra: &[&str],
    ) -> Controller {
        let ops = format!("127.0.0.1:{}", free_port());
        let log = s.dir.path().join(format!("{identity}.log"));
        let child = Guard::spawn(
            Command::new(bin())
                .arg("controller")
                .args(["--ops-listen", &ops])
                .args(["--cni-namespace", &s.cni])
                .args(["--linkerd-namespace", &s.control_plane])
                .args(["--lease-duration", lease, "--identity", identity])
                .args(extra)
                .env("KUBECONFIG", kubeconfig)
                .env("POD_NAMESPACE", &s.home)
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        )
        .expect("starting linkerd-multus controller");
        Controller { child, ops, log }
    }

    /// A metric's value; `None` while the ops port does not answer.
    pub fn metric(&self, line_start: &str) -> Option<f64> {
        let (_, text) = http_get(&self.ops, "/metrics")?;
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
    }

    /// Whether it leads (1) or not (0).
    pub fn leader(&self) -> Option<f64> {
        self.metric("linkerd_multus_nad_controller_leader ")
    }

    /// The NAD writes it sent.
    pub fn writes(&self) -> f64 {
        self.metric("linkerd_multus_nad_writes_total ")
            .unwrap_or_default()
    }

    /// The end of its log, for a failure's message.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn kill(&mut self) {
        self.child.kill().ok();
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn terminate(&mut self) {
        self.child
            .signal(nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

/// A test's own API server, an enabled namespace (`prefix-N`) and one
/// controller ([`Controller::start_quiet`]), once it has made the namespace's NAD.
pub fn with_one_nad(prefix: &str) -> (Setup, String, Controller) {
    let s = setup();
    let namespace = s
        .plane
        .namespace(prefix, &[("linkerd.io/multus", "enabled")]);
    let controller = Controller::start_quiet(&s);
    eventually("the controller's NAD", BOUND, || {
        s.nad(&namespace)
            .is_some_and(|n| labelled_by_controller(&n))
    });
    (s, namespace, controller)
}

/// Polls `check` every 100 ms until it holds; fails after `within`.
pub fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// `Command` with bytes on stdin, returning stdout (the command must succeed).
pub trait StdinBytes {
    fn stdin_bytes(&mut self, input: &[u8]) -> String;
}

impl StdinBytes for Command {
    fn stdin_bytes(&mut self, input: &[u8]) -> String {
        use std::io::Write;
        let mut child = Guard::spawn(
            self.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap();
        child.take_stdin().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

pub fn labelled_by_controller(nad: &Value) -> bool {
    nad["metadata"]["labels"]["app.kubernetes.io/created-by"] == CONTROLLER_MARK
        && nad["metadata"]["labels"]
            .get("app.kubernetes.io/managed-by")
            .is_none()
}

/// The NAD `linkerd-multus render` gives namespace `namespace` (enabled) from
/// `config_map`: what a GitOps user commits and syncs.
pub fn rendered_nad(namespace: &str, config_map: &str) -> super::common::Yaml {
    let input = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n  annotations:\n    linkerd.io/multus: enabled\n---\n{config_map}"
    );
    let out = Command::new(bin())
        .args(["render", "-"])
        .stdin_bytes(input.as_bytes());
    let docs = super::common::parse_yaml_stream(&out).unwrap();
    docs.into_iter()
        .find(|d| d.str_at(&["kind"]) == Some("NetworkAttachmentDefinition"))
        .expect("render generates the NAD")
}
