//! The webhook in a cluster, through a real kube-apiserver
//! (tests/common/kube_apiserver.rs): `scripts/e2e-webhook.sh` as users run it,
//! the webhook running with exactly the rights its packages grant, its
//! configuration with no replica to answer, and the soak (cluster/soak.rs).

use crate::common;
use crate::common::process::Guarded;
#[path = "cluster/soak.rs"]
mod soak;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::https::{Connection, connector, http_get};
use common::kube_apiserver::{ControlPlane, free_port};
use common::ports::free_port_pair;
use common::process::Guard;
use common::{bin, repo_path};

/// Runs scripts/e2e-webhook.sh against the binary's API server with `extra`
/// flags; returns its output after checking that it passed. Its webhook is
/// in its group: killed with it, should the script leave it.
fn e2e(plane: &ControlPlane, extra: &[&str]) -> String {
    // With --manage-nads the script runs the NAD controller on the port after `ops`: that
    // port is the test's too, or another test's process may take it first.
    let port = free_port();
    let (ops, _controller_ops) = free_port_pair();
    let out = Guard::output(
        Command::new("bash")
            .arg(repo_path("scripts/e2e-webhook.sh"))
            .args(["--url", &format!("https://127.0.0.1:{port}/mutate")])
            .arg("--kubeconfig")
            .arg(&plane.admin_kubeconfig)
            .args(["--binary", bin()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops}")])
            .args(extra)
            .env("PATH", path_with_kubectl(plane)),
    )
    .expect("running scripts/e2e-webhook.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "scripts/e2e-webhook.sh failed:\n{text}"
    );
    assert!(!text.contains("FAIL"), "{text}");
    text
}

/// PATH with the assets' kubectl first, so the script runs the kubectl of the
/// API server's assets.
fn path_with_kubectl(plane: &ControlPlane) -> String {
    format!(
        "{}:{}",
        plane.kubectl_path().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn e2e_script_passes_the_operators_scenarios() {
    let text = e2e(ControlPlane::shared(), &[]);
    assert!(text.contains("16 passed, 0 failed"), "{text}");
}

#[test]
fn e2e_script_passes_the_network_resources_scenarios() {
    ControlPlane::shared().install_nad_crd();
    let text = e2e(ControlPlane::shared(), &["--network-resources"]);
    for scenario in [
        "PASS  network resources: requests, limits and node selector from the selected NADs",
        "PASS  network resources: a pod selecting a missing NAD is denied",
    ] {
        assert!(text.contains(scenario), "{scenario} not in\n{text}");
    }
    assert!(text.contains("18 passed, 0 failed"), "{text}");
}

/// The Go operator's two halves: the webhook attaches pods in new enabled
/// namespaces and its NAD controller gives those namespaces the NAD.
#[test]
fn e2e_script_passes_with_the_nad_controller() {
    // The controller acts on every namespace: an API server of its own, away
    // from the other scenarios' namespaces.
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    let text = e2e(plane, &["--manage-nads"]);
    for scenario in [
        "PASS  enabled namespace: pod attached",
        "PASS  NAD controller: every namespace that needs it has linkerd-cni",
        "PASS  NAD controller: no NAD where none is needed",
    ] {
        assert!(text.contains(scenario), "{scenario} not in\n{text}");
    }
    assert!(text.contains("18 passed, 0 failed"), "{text}");
}

/// The rules `kubectl auth can-i --list` shows for a kubeconfig in `namespace`,
/// one line each, whitespace folded.
fn rules(plane: &ControlPlane, kubeconfig: &Path, namespace: &str) -> BTreeSet<String> {
    let out = Command::new(plane.kubectl_path())
        .env("KUBECONFIG", kubeconfig)
        .args(["auth", "can-i", "--list", "-n", namespace, "--no-headers"])
        .guarded_output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl auth can-i --list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// What a package grants `account` beyond what every authenticated user has
/// (the rights of `nobody`, an account no binding names), as `kubectl auth
/// can-i --list` shows them.
fn granted(
    plane: &ControlPlane,
    account: &Path,
    nobody: &Path,
    namespace: &str,
) -> BTreeSet<String> {
    let everyone = rules(plane, nobody, namespace);
    rules(plane, account, namespace)
        .difference(&everyone)
        .cloned()
        .collect()
}

/// A webhook process, killed when dropped.
struct Webhook {
    _child: Guard,
    ops: String,
    addr: String,
    plane: &'static ControlPlane,
}

impl Webhook {
    /// Whether it answers the captured review with a patch, over HTTPS.
    fn patches(&self) -> bool {
        let review = include_str!("../../shared/fixtures/admission/pod-create.json");
        let plane = self.plane;
        let (status, body) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let tls = connector(plane.ca_pem(), None, &[]);
                let mut conn = Connection::open(&self.addr, &tls).await.unwrap();
                conn.post("/mutate", bytes::Bytes::from(review)).await
            })
            .unwrap();
        assert_eq!(status, 200);
        let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
        review["response"]["patch"].is_string()
    }
}

/// A process of `linkerd-multus` with its ops port alone (the NAD controller), killed when
/// dropped.
struct Process {
    _child: Guard,
    ops: String,
}

impl Process {
    /// Starts `args` with `kubeconfig` and `env`; returns it once /readyz answers 200.
    fn start(kubeconfig: &Path, args: &[&str], env: &[(&str, &str)]) -> Process {
        let ops = format!("127.0.0.1:{}", free_port());
        let child = Guard::spawn(
            Command::new(bin())
                .args(args)
                .args(["--ops-listen", &ops])
                .env("KUBECONFIG", kubeconfig)
                .envs(env.iter().copied())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .unwrap();
        let process = Process { _child: child, ops };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(&process.ops, "/readyz").map(|(s, _)| s) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "{args:?} never became ready: {:?}",
                http_get(&process.ops, "/readyz")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        process
    }
}

/// Starts the webhook with `kubeconfig`; returns it once /readyz answers 200.
fn start_webhook(
    plane: &'static ControlPlane,
    kubeconfig: &Path,
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Webhook {
    let (cert, key) = plane.leaf(&["127.0.0.1"]).write(dir);
    let ops = format!("127.0.0.1:{}", free_port());
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Guard::spawn(
        Command::new(bin())
            .arg("webhook")
            .args(["--listen", &addr])
            .args(["--ops-listen", &ops])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_get(&ops, "/readyz").map(|(s, _)| s) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the webhook never became ready: {:?}",
            http_get(&ops, "/readyz")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Webhook {
        _child: child,
        ops,
        addr,
        plane,
    }
}

#[test]
fn the_webhook_runs_with_exactly_the_rights_of_its_packages() {
    // With deploy-nad-controller/ it acts on every namespace: an API server of its own.
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    let dir = tempfile::tempdir().unwrap();
    let read = |file: &str| std::fs::read_to_string(repo_path(file)).unwrap();
    // deploy/ alone: the ServiceAccount, ClusterRole and binding as shipped.
    plane.apply(&read("deploy/namespace.yaml"));
    plane.apply(&read("deploy/rbac.yaml"));
    let account =
        plane.service_account_kubeconfig("linkerd-multus", "linkerd-multus-webhook", dir.path());
    let nobody_namespace = plane.namespace("nobody", &[]);
    let nobody = plane.service_account_kubeconfig(&nobody_namespace, "nobody", dir.path());
    let namespaces = "namespaces [] [] [get list watch]".to_string();
    let nads = "network-attachment-definitions.k8s.cni.cncf.io [] [] [get list watch]".to_string();
    let read_only = BTreeSet::from([namespaces.clone(), nads.clone()]);
    for namespace in ["linkerd-multus", "default"] {
        assert_eq!(
            granted(plane, &account, &nobody, namespace),
            read_only,
            "in namespace {namespace}"
        );
    }
    // The captured review is in namespace demo, which attaches its pods and
    // has the NAD, as rendered from Git.
    plane.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n  annotations:\n    linkerd.io/multus: enabled\n    linkerd.io/inject: enabled\n---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: demo\n  labels:\n    app.kubernetes.io/managed-by: linkerd-multus\nspec:\n  config: '{}'\n",
    );
    let webhook = start_webhook(plane, &account, dir.path(), &[], &[]);
    let metrics = http_get(&webhook.ops, "/metrics").unwrap().1;
    for synced in [
        "linkerd_multus_namespace_cache_synced 1",
        "linkerd_multus_nad_cache_synced 1",
    ] {
        assert!(metrics.contains(synced), "{metrics}");
    }
    assert!(webhook.patches());
    drop(webhook);

    // With deploy-network-resources/: nothing more (the NADs are read already).
    plane.apply(&read("deploy-network-resources/rbac.yaml"));
    let config = dir.path().join("network-resources.yaml");
    std::fs::write(
        &config,
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nspec: {}\n",
    )
    .unwrap();
    let webhook = start_webhook(
        plane,
        &account,
        dir.path(),
        &["--network-resources", config.to_str().unwrap()],
        &[],
    );
    assert!(webhook.patches());
    assert_eq!(granted(plane, &account, &nobody, "default"), read_only);
    drop(webhook);

    with_the_nad_controller_package(plane, &account, &nobody, dir.path(), &namespaces);
}

/// With deploy-nad-controller/ added: the webhook's account still only reads; the controller's
/// own account has the rights of its package (and of deploy-restarts/ added), and the
/// controller makes a NAD with them.
fn with_the_nad_controller_package(
    plane: &'static ControlPlane,
    webhook: &Path,
    nobody: &Path,
    dir: &Path,
    namespaces: &str,
) {
    let read = |file: &str| std::fs::read_to_string(repo_path(file)).unwrap();
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    plane.apply(include_str!(
        "../../shared/fixtures/linkerd-cni/version-2.19.yaml"
    ));
    plane.apply(&read("deploy-nad-controller/rbac.yaml"));
    let account =
        plane.service_account_kubeconfig("linkerd-multus", "linkerd-multus-nad-controller", dir);
    let read_only = BTreeSet::from([
        namespaces.to_string(),
        "network-attachment-definitions.k8s.cni.cncf.io [] [] [get list watch]".to_string(),
    ]);
    let mut want = nad_controller_rights(namespaces);
    granted_eventually(plane, &account, nobody, &want);
    for namespace in want.keys() {
        assert_eq!(
            granted(plane, webhook, nobody, namespace),
            read_only,
            "the webhook's account in {namespace}"
        );
    }
    let controller = Process::start(
        &account,
        &["controller"],
        &[
            ("POD_NAMESPACE", "linkerd-multus"),
            ("POD_NAME", "controller-0"),
        ],
    );
    plane.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant\n  annotations:\n    linkerd.io/multus: enabled\n",
    );
    the_controller_makes_the_nad(plane, &controller);

    // With deploy-restarts/: pods, ReplicaSets and workloads read, workloads patched, pods
    // evicted, Events written, by the controller's account alone.
    plane.apply(&read("deploy-restarts/rbac.yaml"));
    let restarts = [
        "pods [] [] [get list watch]",
        "pods/eviction [] [] [create]",
        "replicasets.apps [] [] [get list watch]",
        "deployments.apps [] [] [get list watch patch]",
        "statefulsets.apps [] [] [get list watch patch]",
        "daemonsets.apps [] [] [get list watch patch]",
        "events.events.k8s.io [] [] [create patch]",
    ];
    for rights in want.values_mut() {
        rights.extend(restarts.map(String::from));
    }
    granted_eventually(plane, &account, nobody, &want);
    for namespace in want.keys() {
        assert_eq!(
            granted(plane, webhook, nobody, namespace),
            read_only,
            "the webhook's account in {namespace}"
        );
    }
}

/// Waits until `account` holds exactly `want` in each namespace: RBAC reaches the
/// authorizer through its own watch.
fn granted_eventually(
    plane: &ControlPlane,
    account: &Path,
    nobody: &Path,
    want: &BTreeMap<&'static str, BTreeSet<String>>,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for (namespace, want) in want {
        while granted(plane, account, nobody, namespace) != *want {
            assert!(
                Instant::now() < deadline,
                "in namespace {namespace}: {:?}, not {want:?}",
                granted(plane, account, nobody, namespace)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// What deploy-nad-controller/ grants the controller's account, by namespace: Namespaces
/// read and NADs written cluster-wide, Events only in the two namespaces it writes them to
/// (`default` for Namespaces', the CNI namespace for the ConfigMap's), the one ConfigMap in
/// the CNI namespace, the Lease in the extension's.
fn nad_controller_rights(namespaces: &str) -> BTreeMap<&'static str, BTreeSet<String>> {
    let write_nads =
        "network-attachment-definitions.k8s.cni.cncf.io [] [] [create patch delete get list watch]";
    let events = "events.events.k8s.io [] [] [create patch]";
    let cluster_wide = BTreeSet::from([namespaces.to_string(), write_nads.to_string()]);
    let mut want = BTreeMap::from([
        ("default", cluster_wide.clone()),
        ("linkerd-cni", cluster_wide.clone()),
        ("linkerd-multus", cluster_wide),
    ]);
    want.get_mut("default").unwrap().insert(events.to_string());
    let cni = want.get_mut("linkerd-cni").unwrap();
    cni.insert(events.to_string());
    cni.insert("configmaps [] [linkerd-cni-config] [get list watch]".to_string());
    let lease = want.get_mut("linkerd-multus").unwrap();
    lease.insert("leases.coordination.k8s.io [] [] [create]".to_string());
    lease.insert(
        "leases.coordination.k8s.io [] [linkerd-multus-nad-controller] [get update]".to_string(),
    );
    want
}

/// The controller, leader, makes the NAD of a new namespace without an error.
fn the_controller_makes_the_nad(plane: &ControlPlane, controller: &Process) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let made = || {
        plane
            .kubectl_input(
                &[
                    "get",
                    "network-attachment-definitions.k8s.cni.cncf.io",
                    "linkerd-cni",
                    "-n",
                    "tenant",
                ],
                "",
            )
            .status
            .success()
    };
    while !made() {
        assert!(
            Instant::now() < deadline,
            "the controller made no NAD with the packages' rights: {}",
            http_get(&controller.ops, "/metrics").unwrap().1
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let metrics = http_get(&controller.ops, "/metrics").unwrap().1;
    for want in [
        "linkerd_multus_nad_controller_leader 1",
        "linkerd_multus_cni_config_map_valid 1",
        "linkerd_multus_nad_reconciles_total{outcome=\"error\"} 0",
    ] {
        assert!(metrics.contains(want), "{want} not in {metrics}");
    }
}

/// The webhook's configuration as deploy/ ships it, with no replica to answer
/// (scaled to zero: nothing serves its Service). An ordinary pod in a selected
/// namespace is refused (`failurePolicy: Fail`); a pod on the host's network
/// is still created, a pod's labels still change, and a pod's finalizer is
/// still removed so its deletion completes: none of them waits on the webhook.
#[test]
fn with_the_webhook_down_only_pod_creations_it_must_see_are_refused() {
    // It registers a webhook for every namespace: an API server of its own.
    let plane = ControlPlane::own();
    let namespace = plane.namespace("apps", &[]);
    let pod = |name: &str, extra_spec: &str, extra_meta: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n{extra_meta}spec:\n{extra_spec}  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n"
        )
    };
    // Made before the webhook is registered, holding its deletion back.
    plane.apply(&pod("held", "", "  finalizers:\n  - example.com/hold\n"));
    apply_the_webhook_package(plane);
    let kubectl = |args: &[&str], input: &str| {
        let out = plane.kubectl_input(args, input);
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (created, text) = kubectl(&["create", "-f", "-"], &pod("ordinary", "", ""));
    assert!(!created, "an ordinary pod was created without the webhook");
    assert!(
        text.contains("failed calling webhook \"attach.multus.linkerd.io\""),
        "{text}"
    );
    let (created, text) = kubectl(
        &["create", "-f", "-"],
        &pod("node-agent", "  hostNetwork: true\n", ""),
    );
    assert!(created, "a host-network pod waits on the webhook: {text}");
    let (updated, text) = kubectl(&["label", "pod", "held", "-n", &namespace, "tier=web"], "");
    assert!(updated, "a label change waits on the webhook: {text}");
    let (deleted, text) = kubectl(
        &["delete", "pod", "held", "-n", &namespace, "--wait=false"],
        "",
    );
    assert!(deleted, "{text}");
    let (_, held) = kubectl(
        &[
            "get",
            "pod",
            "held",
            "-n",
            &namespace,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
        "",
    );
    assert!(!held.trim().is_empty(), "the finalizer holds the deletion");
    let (patched, text) = kubectl(
        &[
            "patch",
            "pod",
            "held",
            "-n",
            &namespace,
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
        ],
        "",
    );
    assert!(patched, "removing a finalizer waits on the webhook: {text}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while kubectl(&["get", "pod", "held", "-n", &namespace], "").0 {
        assert!(Instant::now() < deadline, "the pod was never deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Applies deploy/ to `plane`, the Namespace first.
fn apply_the_webhook_package(plane: &ControlPlane) {
    // deploy/ as shipped, but for cert-manager's objects (no CRDs here):
    // applied server-side, so the API server validates each object, the
    // configuration's CEL conditions included.
    let mut files: Vec<_> = std::fs::read_dir(repo_path("deploy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort_by_key(|p| !p.ends_with("namespace.yaml"));
    for file in &files {
        plane.apply(&std::fs::read_to_string(file).unwrap());
    }
}
