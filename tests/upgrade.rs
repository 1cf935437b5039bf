//! The upgrade from an earlier release's layout, where the NAD controller and its restarts ran
//! inside the webhook's pods (`webhook --manage-nads`), with their rights bound to the
//! webhook's ServiceAccount: by `install` (its output applied server-side over that release's)
//! and by `helm upgrade` (over that release's chart), each in a cluster of its own with the
//! tests' kubelet. That release's objects are testdata/upgrade/ (scripts/upgrade-fixtures.sh
//! wrote them from commit e9e0ab5: no network, no Git history at test time).
//!
//! That release's leader is played by a webhook pod's stand-in: the controller's own election
//! and reconciles (the code those pods ran beside the server) as the webhook's account, under a
//! webhook pod's name, holding the Lease and writing NADs with the old bindings. After the
//! upgrade: the bindings name the controller's account alone, so the webhook's account may only
//! read (asked of the API server's authorizer, `kubectl auth can-i --as`); the old leader,
//! refused, stops leading while it still runs, and a ready replica of the controller's own
//! Deployment takes its Lease over; a namespace created between the upgrade and that takeover
//! gets its NAD (no write lost); no object of the old release is left that the new one does
//! not hold; and `linkerd multus check` passes.

use crate::common::process::Guarded;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::common;
use common::https::http_get;
use common::kube_apiserver::{ControlPlane, free_port};
use common::kubelet::{Cluster, Runtime};
use common::process::Guard;
use common::shipped::{
    NAD_CONTROLLER, NS, READY, WEBHOOK, check_passes, enabled_namespace, no_warnings, stops_cleanly,
};
use common::{bin, parse_yaml_stream, repo_path};

/// The old release's leader: a webhook pod's name.
const OLD_HOLDER: &str = "linkerd-multus-webhook-7c9d8b6f5-q2x7k";
const WEBHOOK_ACCOUNT: &str = "system:serviceaccount:linkerd-multus:linkerd-multus-webhook";
const CONTROLLER_ACCOUNT: &str =
    "system:serviceaccount:linkerd-multus:linkerd-multus-nad-controller";
const LEASE: &str = "linkerd-multus-nad-controller";
const NAD: &str = "network-attachment-definitions.k8s.cni.cncf.io";
/// The most any step below may take: a Lease of 15 s to expire, a retry and a reconcile.
const BOUND: Duration = Duration::from_secs(90);

/// How the upgrade is done.
#[derive(Debug, Clone, Copy)]
enum How {
    Install,
    Helm,
}

#[test]
fn install_over_the_earlier_layout_leaves_nothing_behind_and_loses_no_nad_write() {
    upgrades(How::Install);
}

#[test]
fn helm_upgrade_over_the_earlier_chart_leaves_nothing_behind_and_loses_no_nad_write() {
    upgrades(How::Helm);
}

/// The earlier release's NAD controller as its webhook pods ran it: the election and the
/// reconciles as the webhook's account, under a webhook pod's name; killed when dropped.
struct OldLeader {
    child: Guard,
    ops: String,
}

impl OldLeader {
    fn start(plane: &ControlPlane, dir: &Path) -> OldLeader {
        let kubeconfig = plane.service_account_kubeconfig(NS, "linkerd-multus-webhook", dir);
        let ops = format!("127.0.0.1:{}", free_port());
        let child = Guard::spawn(
            Command::new(bin())
                .args([
                    "controller",
                    "--restart-stale-workloads",
                    "--identity",
                    OLD_HOLDER,
                ])
                .args(["--ops-listen", &ops])
                .env("KUBECONFIG", kubeconfig)
                .env("POD_NAMESPACE", NS)
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .expect("starting the old leader's stand-in");
        OldLeader { child, ops }
    }

    /// 1 while it leads, 0 while it does not; `None` while it does not answer.
    fn leader(&self) -> Option<f64> {
        let (_, text) = http_get(&self.ops, "/metrics")?;
        text.lines().find_map(|l| {
            l.strip_prefix("linkerd_multus_nad_controller_leader ")?
                .trim()
                .parse()
                .ok()
        })
    }
}

/// Polls `check` every 200 ms until it holds; fails after [`BOUND`]. How long it took.
fn eventually(what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < BOUND, "{what}: not within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    start.elapsed()
}

/// The earlier release's `install` output, with certificates of the test's own made as
/// install makes them, applied as its README said.
fn old_install(plane: &ControlPlane) -> String {
    let text = std::fs::read_to_string(repo_path("testdata/upgrade/install.yaml")).unwrap();
    let certs = linkerd_multus::extension::install::certificates::generate(
        NS,
        time::OffsetDateTime::now_utc(),
        None,
    )
    .unwrap();
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let placeholder = "CERTIFICATES-OF-THE-TEST";
    let mut yaml = String::new();
    for line in text.split_inclusive('\n') {
        let filled = match line.trim_start().split_once(": ") {
            Some(("ca.crt", _)) | Some(("caBundle", _)) => {
                line.replace(placeholder, &b64(&certs.ca_bundle))
            }
            Some(("tls.crt", _)) => line.replace(placeholder, &b64(&certs.cert)),
            Some(("tls.key", _)) => line.replace(placeholder, &b64(&certs.key)),
            _ => line.to_string(),
        };
        yaml.push_str(&filled);
    }
    assert!(!yaml.contains(placeholder), "every certificate filled in");
    plane.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=linkerd-multus-install",
            "-f",
            "-",
        ],
        &yaml,
    );
    yaml
}

/// This release's `install`, reading the cluster, applied the same way.
fn new_install(plane: &ControlPlane) -> String {
    let out = Command::new(bin())
        .args(["install", "--manage-nads", "--restart-stale-workloads"])
        .arg("--kubeconfig")
        .arg(&plane.admin_kubeconfig)
        .env_remove("LINKERD_NAMESPACE")
        .guarded_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "install: {stderr}");
    assert!(
        stderr.contains("kept the webhook's certificates"),
        "the earlier install's certificates are kept: {stderr}"
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    plane.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=linkerd-multus-install",
            "-f",
            "-",
        ],
        &yaml,
    );
    yaml
}

/// `helm install` or `upgrade` of `chart` with the NAD controller and its restarts; the
/// release's manifest.
fn helm(plane: &ControlPlane, command: &str, chart: &str) -> String {
    let values = r#"{"manageNADs": true, "restartStaleWorkloads": true}"#;
    let mut args = vec![
        command,
        chart,
        "--release",
        "linkerd-multus",
        "--namespace",
        NS,
        "--values",
        values,
    ];
    if command == "install" {
        args.push("--create-namespace");
    }
    let out = common::helm::helm(&args, Some(&plane.admin_kubeconfig));
    assert!(
        out.status.success(),
        "helm {command} {chart}: {}",
        common::output_text(&out)
    );
    let release: Value = serde_json::from_slice(&out.stdout).unwrap();
    release["manifest"].as_str().unwrap().to_string()
}

/// `kind/namespace/name` of each object of `yaml`.
fn ids(yaml: &str) -> std::collections::BTreeSet<String> {
    parse_yaml_stream(yaml)
        .unwrap()
        .iter()
        .map(|o| {
            let text = |path: &[&str]| o.str_at(path).unwrap_or_default().to_string();
            format!(
                "{}/{}/{}",
                text(&["kind"]),
                text(&["metadata", "namespace"]),
                text(&["metadata", "name"])
            )
        })
        .collect()
}

/// What the authorizer answers `account` for `verb resource` in `namespace` (`RESOURCE/NAME`
/// names an object; `pods/eviction` is the subresource).
fn can(plane: &ControlPlane, account: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let as_account = format!("--as={account}");
    let mut args = vec![
        "auth",
        "can-i",
        verb,
        resource,
        "-n",
        namespace,
        &as_account,
    ];
    if resource == "pods/eviction" {
        args[3] = "pods";
        args.push("--subresource=eviction");
    }
    let out = plane.kubectl_input(&args, "");
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// What the restarts and the NAD controller do, each a verb, a resource and a namespace.
const WRITES: [(&str, &str, &str); 5] = [
    ("create", NAD, "app"),
    ("patch", "deployments.apps", "app"),
    ("patch", "daemonsets.apps", "kube-system"),
    ("create", "pods/eviction", "app"),
    (
        "update",
        "leases.coordination.k8s.io/linkerd-multus-nad-controller",
        NS,
    ),
];

/// The bindings of the cluster that name `account`: `kind/namespace/name`.
fn bindings_of(plane: &ControlPlane, account: &str) -> Vec<String> {
    let (namespace, name) = account
        .strip_prefix("system:serviceaccount:")
        .and_then(|a| a.split_once(':'))
        .unwrap();
    let mut out = Vec::new();
    for kind in ["clusterrolebindings", "rolebindings"] {
        let list: Value =
            serde_json::from_str(&plane.kubectl(&["get", kind, "-A", "-o", "json"])).unwrap();
        for binding in list["items"].as_array().unwrap() {
            let names_it = binding["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["name"] == name
                        && s["namespace"] == namespace
                })
            });
            if names_it {
                let meta = &binding["metadata"];
                out.push(format!(
                    "{}/{}/{} -> {}",
                    binding["kind"].as_str().unwrap(),
                    meta["namespace"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap(),
                    binding["roleRef"]["name"].as_str().unwrap()
                ));
            }
        }
    }
    out.sort();
    out
}

/// The Lease's holder, its acquire time and its transitions.
fn lease(plane: &ControlPlane) -> (String, String, i64) {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}");
    let lease = plane
        .get_json(&path)
        .unwrap_or_else(|| panic!("no Lease at {path}"));
    let spec = &lease["spec"];
    (
        spec["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        spec["acquireTime"].as_str().unwrap_or_default().to_string(),
        spec["leaseTransitions"].as_i64().unwrap_or_default(),
    )
}

/// The controller's NAD of `namespace`, as JSON, if any.
fn nad(plane: &ControlPlane, namespace: &str) -> Option<Value> {
    let out = plane.kubectl_input(
        &["get", NAD, "linkerd-cni", "-n", namespace, "-o", "json"],
        "",
    );
    out.status
        .success()
        .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
        .filter(|n| {
            // The earlier release's mark, or the one the new controller relabels it with.
            let labels = &n["metadata"]["labels"];
            labels["app.kubernetes.io/managed-by"] == "linkerd-multus-controller"
                || labels["app.kubernetes.io/created-by"] == "linkerd-multus-controller"
        })
}

fn upgrades(how: How) {
    let cluster: Cluster = common::shipped::cluster(Runtime::Process);
    let plane = &cluster.plane;
    let dir = tempfile::tempdir().unwrap();
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n");

    // The earlier layout at work: its leader writes NADs with the webhook's account.
    let old_objects = match how {
        How::Install => old_install(plane),
        How::Helm => helm(plane, "install", "testdata/upgrade/chart"),
    };
    assert!(
        old_objects.contains("- --manage-nads=true"),
        "the earlier layout"
    );
    let mut old = OldLeader::start(plane, dir.path());
    enabled_namespace(plane, "before");
    eventually("the old leader's NAD", || nad(plane, "before").is_some());
    assert_eq!(lease(plane).0, OLD_HOLDER);
    let (_, _, transitions) = lease(plane);
    for (verb, resource, namespace) in WRITES {
        assert!(
            can(plane, WEBHOOK_ACCOUNT, verb, resource, namespace),
            "before: the webhook's account may {verb} {resource} in {namespace}"
        );
    }

    // The upgrade.
    let new_objects = match how {
        How::Install => new_install(plane),
        How::Helm => helm(plane, "upgrade", common::helm::CHART),
    };
    let upgraded = Instant::now();
    let left: Vec<String> = ids(&old_objects)
        .difference(&ids(&new_objects))
        .cloned()
        .collect();
    assert!(
        left.is_empty(),
        "objects of the earlier release left: {left:?}"
    );
    // A namespace enabled before any replica of the new controller runs.
    enabled_namespace(plane, "during");

    // The webhook's account only reads now, at once; the controller's does what it did.
    let revoked = eventually("the webhook's account refused every write", || {
        WRITES
            .iter()
            .all(|(verb, resource, ns)| !can(plane, WEBHOOK_ACCOUNT, verb, resource, ns))
    });
    for (verb, resource, namespace) in WRITES {
        assert!(
            can(plane, CONTROLLER_ACCOUNT, verb, resource, namespace),
            "after: the controller's account may {verb} {resource} in {namespace}"
        );
    }
    for (verb, resource) in [("list", "namespaces"), ("watch", NAD)] {
        assert!(
            can(plane, WEBHOOK_ACCOUNT, verb, resource, "app"),
            "{verb} {resource}"
        );
    }
    assert_eq!(
        bindings_of(plane, WEBHOOK_ACCOUNT),
        ["ClusterRoleBinding//linkerd-multus-webhook -> linkerd-multus-webhook"],
        "the earlier bindings no longer name the webhook's account"
    );
    // Refused, the old leader stops leading while it still runs.
    let stopped = eventually("the old leader stops leading", || old.leader() == Some(0.0));

    // The new layout: the controller's own Deployment takes the Lease over.
    let controller = cluster.run_deployment(NS, NAD_CONTROLLER);
    controller.wait_ready(2, READY);
    let took = eventually("a controller replica holds the Lease", || {
        controller.pod_names().contains(&lease(plane).0)
    });
    let (holder, acquired, now_transitions) = lease(plane);
    assert_eq!(now_transitions, transitions + 1, "taken over, once");
    let written = eventually("the NAD of the namespace enabled meanwhile", || {
        nad(plane, "during").is_some()
    });
    let after_the_apply = upgraded.elapsed();
    let created = nad(plane, "during").unwrap()["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let (created, acquired): (Timestamp, Timestamp) =
        (created.parse().unwrap(), acquired.parse().unwrap());
    assert!(
        created.as_second() >= acquired.as_second(),
        "written by the new leader ({created}), which took the Lease at {acquired}"
    );
    // The old webhook pod goes, as the rollout ends it: SIGTERM, its Lease gone already.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = old.child.wait().unwrap();
    assert!(status.success(), "the old leader's exit: {status}");
    assert_eq!(
        lease(plane).0,
        holder,
        "its exit released nothing of the new holder's"
    );

    let webhook = cluster.run_deployment(NS, WEBHOOK);
    webhook.wait_ready(2, READY);
    check_passes(&cluster);
    eprintln!(
        "upgrade by {how:?}: the webhook's account refused every write {:.1} s after the apply; the old leader ({OLD_HOLDER}) stopped leading {:.1} s after; {holder} took its Lease {:.1} s after the new controller started; the NAD of the namespace enabled meanwhile written {:.1} s after that ({:.1} s after the apply)",
        revoked.as_secs_f64(),
        stopped.as_secs_f64(),
        took.as_secs_f64(),
        written.as_secs_f64(),
        after_the_apply.as_secs_f64(),
    );
    no_warnings(&controller);
    stops_cleanly(webhook);
    stops_cleanly(controller);
}
