//! What ships, run as shipped: an option set of `deploy/` (with its
//! additions) or of `linkerd multus install` installed into a fresh cluster
//! as its README says, and the webhook's Deployment (and the NAD
//! controller's, when the options have it) run from what the API server
//! stored, by the [`kubelet`](super::kubelet) (each its own args, env,
//! mounts, ServiceAccount, user, probes and grace period). [`runs_as_shipped`]
//! checks what a user gets: ready replicas, a pod admitted through the API
//! server (Service → Endpoints → replica) with linkerd-cni attached, what the
//! options add, `linkerd multus check` passing, no warning in the logs, and an
//! exit 0 on SIGTERM within the grace period with no restart before. `tests/shipped.rs`
//! runs every option set; `tests/container.rs` runs the image once.

use super as common;
use crate::common::process::Guarded;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::kube_apiserver::ControlPlane;
use common::kubelet::{Cluster, Deployment, Exit, Runtime};
use common::{bin, copy_dir, repo_path};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

pub mod install;

pub use install::{OptionSet, install};

/// The extension's namespace, as every option set installs it.
pub const NS: &str = "linkerd-multus";
/// The webhook's Deployment.
pub const WEBHOOK: &str = "linkerd-multus-webhook";
/// The NAD controller's Deployment.
pub const NAD_CONTROLLER: &str = "linkerd-multus-nad-controller";
/// The Linkerd-CNI ConfigMap the NADs are made from.
const CNI_CONFIG_MAP: &str =
    include_str!("../../../../shared/fixtures/linkerd-cni/version-2.19.yaml");
/// How long a replica may take to become ready: its first readiness probe
/// passes at most one period (5 s) after it has synced its caches.
pub const READY: Duration = Duration::from_secs(60);

/// A cluster with what Linkerd and Multus bring: the NAD CRD, the Linkerd
/// namespace and the Linkerd-CNI ConfigMap.
pub fn cluster(runtime: Runtime) -> Cluster {
    let cluster = Cluster::start(runtime);
    cluster.plane.install_nad_crd();
    cluster
        .plane
        .apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd\n");
    cluster
        .plane
        .apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    cluster.plane.apply(CNI_CONFIG_MAP);
    cluster
}

/// The NAD the function renders (and the NAD controller makes) in
/// `namespace`, from the cluster's Linkerd-CNI ConfigMap, as JSON.
pub fn linkerd_cni_nad_manifest(plane: &ControlPlane, namespace: &str) -> String {
    use linkerd_multus::linkerd_cni::cluster as rules;
    use linkerd_multus::linkerd_cni::settings::Settings;
    let path = "/api/v1/namespaces/linkerd-cni/configmaps/linkerd-cni-config";
    let map = plane
        .get_json(path)
        .unwrap_or_else(|| panic!("no ConfigMap at {path}"));
    let data = serde_json::from_value(map["data"].clone()).unwrap();
    let settings = Settings::default();
    let config = rules::config_text(Some(&data), &settings).unwrap();
    rules::controller_nad(namespace, &config, &settings).to_string()
}

/// Applies [`linkerd_cni_nad_manifest`], as a user applies what the function rendered.
pub fn linkerd_cni_nad(plane: &ControlPlane, namespace: &str) {
    plane.apply(&linkerd_cni_nad_manifest(plane, namespace));
}

/// A namespace enabled for Multus, meshed.
pub fn enabled_namespace(plane: &ControlPlane, name: &str) {
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  annotations:\n    linkerd.io/multus: enabled\n    linkerd.io/inject: enabled\n"
    ));
}

/// Creates pod `name` in `namespace` through the API server (which calls
/// the webhook for it) and returns it as stored.
pub fn create_pod(cluster: &Cluster, namespace: &str, name: &str, networks: Option<&str>) -> Pod {
    let mut annotations = json!({});
    if let Some(networks) = networks {
        annotations["k8s.v1.cni.cncf.io/networks"] = json!(networks);
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }))
    .unwrap();
    let api: Api<Pod> = Api::namespaced(cluster.client(), namespace);
    cluster
        .block(api.create(&PostParams::default(), &pod))
        .unwrap_or_else(|e| panic!("creating pod {namespace}/{name}: {e}"))
}

/// The pod's networks annotation.
pub fn networks(pod: &Pod) -> String {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("k8s.v1.cni.cncf.io/networks"))
        .cloned()
        .unwrap_or_default()
}

/// Runs `linkerd-multus check` against the cluster; panics with its output
/// unless every check passes.
pub fn check_passes(cluster: &Cluster) -> String {
    let out = Command::new(bin())
        .args(["check", "--kubeconfig"])
        .arg(&cluster.plane.admin_kubeconfig)
        .env_remove("LINKERD_NAMESPACE")
        .guarded_output()
        .expect("running linkerd-multus check");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("Status check results are √"),
        "linkerd-multus check failed ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every replica's log holds no warning or error: what a user reads first.
pub fn no_warnings(deployment: &Deployment) {
    for pod in deployment.pod_names() {
        let log = deployment.log(&pod);
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
            .collect();
        assert!(
            bad.is_empty(),
            "pod {pod} logged warnings or errors:\n{}",
            bad.join("\n")
        );
    }
}

/// Stops the Deployment; every replica exits 0 within its grace period,
/// none restarted before.
pub fn stops_cleanly(deployment: Deployment) -> Vec<Exit> {
    let restarts = deployment.restarts();
    assert!(restarts.is_empty(), "restarts:\n{}", restarts.join("\n"));
    let exits = deployment.stop();
    for exit in &exits {
        assert!(exit.is_clean(), "not a clean exit on SIGTERM: {exit:#?}");
        eprintln!(
            "pod {}: exit {:?}, {:.1} s after SIGTERM (grace {} s)",
            exit.pod,
            exit.code,
            exit.after_sigterm.as_secs_f64(),
            exit.grace.as_secs()
        );
    }
    exits
}

/// A copy of the package `name` in `dir`.
fn package(name: &str, dir: &Path) -> std::path::PathBuf {
    let to = dir.join(name);
    copy_dir(&repo_path(name), &to);
    to
}

/// Installs `options`, runs the webhook's Deployment (and the NAD
/// controller's) and checks what a user gets from them; returns the
/// replicas' exits.
pub fn runs_as_shipped(options: OptionSet, runtime: Runtime) -> Vec<Exit> {
    let cluster = cluster(runtime);
    let dir = tempfile::tempdir().unwrap();
    install(&cluster, options, dir.path());
    let deployment = cluster.run_deployment(NS, WEBHOOK);
    deployment.wait_ready(2, READY);
    let controller = options.manages_nads().then(|| {
        let controller = cluster.run_deployment(NS, NAD_CONTROLLER);
        controller.wait_ready(2, READY);
        controller
    });

    // A pod of an enabled namespace, created through the API server, which
    // reaches a replica through the Service's Endpoints.
    enabled_namespace(&cluster.plane, "app");
    for namespace in ["app", "linkerd"] {
        if options.manages_nads() {
            wait_for_nad(&cluster, namespace);
        } else {
            // Rendered from Git and applied, as the webhook alone expects.
            linkerd_cni_nad(&cluster.plane, namespace);
        }
    }
    let pod = create_pod(&cluster, "app", "first", None);
    assert!(
        networks(&pod).contains("linkerd-cni"),
        "{options:?}: the pod was admitted without linkerd-cni: {:?}\n{}",
        pod.metadata.annotations,
        deployment.describe()
    );
    if options.network_resources() {
        gives_the_device_request(&cluster);
    }
    check_passes(&cluster);
    no_warnings(&deployment);
    let mut exits = stops_cleanly(deployment);
    if let Some(controller) = controller {
        no_warnings(&controller);
        exits.extend(stops_cleanly(controller));
    }
    exits
}

/// With the NAD controller, it writes the NAD of a namespace enabled after
/// it started.
fn wait_for_nad(cluster: &Cluster, namespace: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster.plane.kubectl_input(
            &[
                "get",
                "network-attachment-definitions.k8s.cni.cncf.io",
                "linkerd-cni",
                "-n",
                namespace,
            ],
            "",
        );
        if out.status.success() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the NAD controller wrote no NAD linkerd-cni in {namespace} in 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// With `--network-resources`, a pod selecting a NAD of a device-plugin
/// resource gets that resource's request and limit.
fn gives_the_device_request(cluster: &Cluster) {
    cluster.plane.apply(
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: sriov-net\n  namespace: app\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_netdevice\nspec:\n  config: '{\"cniVersion\":\"0.3.1\",\"name\":\"sriov-net\",\"type\":\"sriov\"}'\n",
    );
    let pod = create_pod(cluster, "app", "with-device", Some("sriov-net"));
    let resources =
        serde_json::to_value(&pod.spec.as_ref().unwrap().containers[0].resources).unwrap();
    for side in ["requests", "limits"] {
        assert_eq!(
            resources[side]["intel.com/sriov_netdevice"], "1",
            "the pod did not get the device request: {resources}"
        );
    }
}
