//! Why `check` fails, said so that a user knows what to do.
//!
//! The webhook's Deployment not ready: each reason its objects give, read from them
//! as they are in the API server. A lone kube-apiserver has no controllers and no
//! kubelet, so nothing ever acts on a Deployment here: that is the first case, as
//! it is. For the others the test writes, through the status subresource, what the
//! Deployment and ReplicaSet controllers, the scheduler and the kubelet would have
//! written (a ReplicaSet of the Deployment's template, owned by it, with its
//! condition; its pods with their containers' states; their Warning Events), and
//! the refusal of a pod is the API server's own answer.
//!
//! An error of the API server is printed as its message, once, with its reason and code.

use crate::common::process::Guarded;
use serde_json::{Value, json};

use super::check::{check, failures, read_json};
use super::check_harness::{self, Installed, NS, WEBHOOK, installed};
use crate::common::kube_apiserver::ControlPlane;

/// The check of the Deployment.
const DESCRIPTION: &str = "linkerd-multus-webhook Deployment is ready";
/// The `pod-template-hash` of the ReplicaSet the tests write, as its controller names one.
const HASH: &str = "5d8f7c9b6";
/// The label of the Events the tests write, to remove them.
const TEST_LABEL: &str = "test.linkerd-multus.io/check-why";

/// The Deployment's check, as `check --wait=0s` prints it, the only one failing:
/// its error's lines and its hint, the same in the table.
fn deployment_check(installed: &Installed) -> (Vec<String>, String) {
    let (code, failing, table) = failures(installed, &["--wait=0s"]);
    assert_eq!((code, failing.len()), (1, 1), "{table}");
    let one = &failing[0];
    assert_eq!(
        (one.description.as_str(), one.result.as_str()),
        (DESCRIPTION, "error"),
        "{table}"
    );
    let mut block = format!("× {DESCRIPTION}\n");
    for line in one.error.lines() {
        block.push_str(&format!("    {line}\n"));
    }
    block.push_str(&format!("    hint: {}\n", one.hint));
    assert!(table.contains(&block), "{table}");
    (
        one.error.lines().map(String::from).collect(),
        one.hint.clone(),
    )
}

fn get(plane: &ControlPlane, kind: &str, name: &str) -> Value {
    let text = plane.kubectl(&["get", kind, name, "-n", NS, "-o", "json"]);
    serde_json::from_str(&text).unwrap()
}

/// Writes `status` as the object's whole status, through its status subresource.
fn write_status(plane: &ControlPlane, kind: &str, name: &str, status: Value) {
    let patch = json!([{"op": "add", "path": "/status", "value": status}]);
    plane.kubectl(&[
        "patch",
        kind,
        name,
        "-n",
        NS,
        "--subresource=status",
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// What the tests wrote removed, the Deployment ready again (check_harness's stand-in).
fn reset(plane: &ControlPlane) {
    plane.kubectl(&[
        "delete",
        "replicasets,pods",
        "-n",
        NS,
        "-l",
        "pod-template-hash",
        "--grace-period=0",
        "--force",
        "--ignore-not-found",
    ]);
    plane.kubectl(&[
        "delete",
        "events,resourcequotas",
        "-n",
        NS,
        "-l",
        TEST_LABEL,
        "--ignore-not-found",
    ]);
    check_harness::deployment_ready(plane, true);
}

/// The Deployment's generation.
fn generation(plane: &ControlPlane) -> i64 {
    get(plane, "deployment", WEBHOOK)["metadata"]["generation"]
        .as_i64()
        .unwrap()
}

/// The Deployment's status as its controller writes it once it has made its
/// ReplicaSet: `updated` pods made, none ready, and `conditions`.
fn deployment_status(plane: &ControlPlane, updated: i64, conditions: Value) {
    let status = json!({
        "observedGeneration": generation(plane),
        "replicas": updated, "updatedReplicas": updated, "readyReplicas": 0,
        "unavailableReplicas": 2,
        "conditions": conditions,
    });
    write_status(plane, "deployment", WEBHOOK, status);
}

fn not_available() -> Value {
    json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
        "message": "Deployment does not have minimum availability."})
}

/// The ReplicaSet the Deployment controller makes for the current template:
/// owned by the Deployment, the template's labels and its selector with
/// `pod-template-hash`; its status `status`. Returns its name.
fn replica_set(plane: &ControlPlane, status: Value) -> String {
    let deployment = get(plane, "deployment", WEBHOOK);
    let name = format!("{WEBHOOK}-{HASH}");
    let mut template = deployment["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!(HASH);
    let mut selector = deployment["spec"]["selector"].clone();
    selector["matchLabels"]["pod-template-hash"] = json!(HASH);
    let replica_set = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": name, "namespace": NS,
            "labels": template["metadata"]["labels"],
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": WEBHOOK,
                "uid": deployment["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"replicas": deployment["spec"]["replicas"], "selector": selector, "template": template},
    });
    plane.kubectl_ok(&["create", "-f", "-"], &replica_set.to_string());
    write_status(plane, "replicaset", &name, status);
    name
}

/// A pod of the ReplicaSet, as it makes one from its template; its status `status`.
/// Returns its name and its UID.
fn pod(plane: &ControlPlane, replica_set: &str, suffix: &str, status: Value) -> (String, String) {
    let owner = get(plane, "replicaset", replica_set);
    let template = &owner["spec"]["template"];
    let name = format!("{replica_set}-{suffix}");
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NS,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
                "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": template["spec"],
    });
    let created: Value = serde_json::from_str(
        &plane.kubectl_ok(&["create", "-o", "json", "-f", "-"], &pod.to_string()),
    )
    .unwrap();
    write_status(plane, "pod", &name, status);
    (
        name,
        created["metadata"]["uid"].as_str().unwrap().to_string(),
    )
}

/// A pod's status, scheduled, its container `webhook` in `state`.
fn container_status(image: &str, ready: bool, restarts: i64, state: Value, last: Value) -> Value {
    json!({
        "phase": if ready { "Running" } else { "Pending" },
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": if ready { "True" } else { "False" }},
        ],
        "containerStatuses": [{"name": "webhook", "image": image, "imageID": "", "ready": false,
            "restartCount": restarts, "state": state, "lastState": last}],
    })
}

/// The image of the Deployment's webhook container.
fn image(plane: &ControlPlane) -> String {
    get(plane, "deployment", WEBHOOK)["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A Warning Event of the pod `name` (`uid`), as the kubelet reports one, seen
/// last at `last`.
fn warning_event(
    plane: &ControlPlane,
    (name, uid): (&str, &str),
    reason: &str,
    message: &str,
    last: &str,
) {
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{}", reason.to_lowercase()), "namespace": NS,
            "labels": {TEST_LABEL: "event"}},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": NS, "uid": uid,
            "fieldPath": "spec.containers{webhook}"},
        "reason": reason, "message": message, "type": "Warning", "count": 12,
        "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": last,
        "source": {"component": "kubelet", "host": "node-a"},
    });
    plane.kubectl_ok(&["create", "-f", "-"], &event.to_string());
}

/// Installed here, nothing acts on the Deployment: it is never rolled out, and
/// after `kubectl rollout restart` its change is not either.
#[test]
fn a_deployment_no_controller_acted_on_is_named_so() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    // As install leaves it where no controller runs: no status at all.
    write_status(plane, "deployment", WEBHOOK, json!({}));
    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: its latest change is not rolled out yet"),
            "no controller has acted on it: it has no status and no ReplicaSet".into(),
        ]
    );
    let controller_hint = "check that kube-controller-manager runs and reaches the API server (kubeadm: kubectl -n kube-system get pods -l component=kube-controller-manager)";
    assert_eq!(hint, controller_hint);

    // Rolled out once (the stand-in), then restarted by the user.
    check_harness::deployment_ready(plane, true);
    let before = generation(plane);
    plane.kubectl(&["rollout", "restart", "deployment", WEBHOOK, "-n", NS]);
    assert_eq!(generation(plane), before + 1);
    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: its latest change is not rolled out yet"),
            format!(
                "no controller has acted on its latest change: its status is of generation {before}, not {}, and no ReplicaSet has its pod template",
                before + 1
            ),
        ]
    );
    assert_eq!(hint, controller_hint);
    reset(plane);
}

/// The ReplicaSet's pods refused: here by a ResourceQuota, the refusal the API
/// server's own (as an SCC's or Pod Security's would be), in the condition the
/// ReplicaSet controller writes.
#[test]
fn a_replica_set_whose_pods_are_refused_names_what_refuses_them() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    let quota = json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "no-pods", "namespace": NS, "labels": {TEST_LABEL: "quota"}},
        "spec": {"hard": {"pods": "0"}},
    });
    plane.apply(&quota.to_string());
    // What the quota controller would write: the quota admission checks against it.
    write_status(
        plane,
        "resourcequota",
        "no-pods",
        json!({"hard": {"pods": "0"}, "used": {"pods": "0"}}),
    );
    let name = replica_set(plane, json!({"observedGeneration": 1, "replicas": 0}));
    // The pod the ReplicaSet controller creates, and the API server's answer.
    let rs = get(plane, "replicaset", &name);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{name}-"), "namespace": NS,
            "labels": rs["spec"]["template"]["metadata"]["labels"]},
        "spec": rs["spec"]["template"]["spec"],
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let refusal = loop {
        let out = plane.kubectl_input(&["create", "--dry-run=server", "-f", "-"], &pod.to_string());
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // kubectl's words around the API server's message left out.
        if let Some(message) = stderr.strip_prefix("Error from server (Forbidden): ") {
            break message
                .trim_start_matches("error when creating \"STDIN\": ")
                .to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the quota never refused the pod: {stderr}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        refusal.starts_with(&format!("pods \"{name}-"))
            && refusal.contains("is forbidden: exceeded quota: no-pods"),
        "{refusal}"
    );
    let failure = |message: &str| json!({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": message});
    write_status(
        plane,
        "replicaset",
        &name,
        json!({"observedGeneration": 1, "replicas": 0, "conditions": [failure(&refusal)]}),
    );
    deployment_status(plane, 0, json!([not_available(), failure(&refusal)]));

    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: 0 of 2 replicas ready (0 up to date)"),
            format!("ReplicaSet {NS}/{name} cannot create pods (FailedCreate): {refusal}"),
        ]
    );
    assert_eq!(
        hint,
        format!(
            "kubectl -n {NS} describe replicaset {name} (the message names what refuses the pods: a SecurityContextConstraints, Pod Security, a ResourceQuota, a webhook)"
        )
    );
    reset(plane);
}

/// The image cannot be pulled: the kubelet's waiting reason and message.
#[test]
fn an_image_that_cannot_be_pulled_is_named_with_the_pod() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    let image = image(plane);
    let name = replica_set(plane, json!({"observedGeneration": 1, "replicas": 2}));
    let message = format!(
        "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
    );
    let waiting = json!({"waiting": {"reason": "ImagePullBackOff", "message": message}});
    for suffix in ["x7k2p", "b4n9q"] {
        let status = container_status(&image, false, 0, waiting.clone(), json!({}));
        pod(plane, &name, suffix, status);
    }
    deployment_status(plane, 2, json!([not_available()]));

    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: 0 of 2 replicas ready (2 up to date)"),
            format!(
                "Pod {NS}/{name}-b4n9q: container webhook cannot pull its image (ImagePullBackOff): {message}"
            ),
        ]
    );
    assert_eq!(hint, format!("kubectl -n {NS} describe pod {name}-b4n9q"));
    reset(plane);
}

/// The container crashes: how it last ended, and where its log is.
#[test]
fn a_crash_looping_container_is_named_with_how_it_ended() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    let image = image(plane);
    let name = replica_set(plane, json!({"observedGeneration": 1, "replicas": 2}));
    let pod_name = format!("{name}-x7k2p");
    let state = json!({"waiting": {"reason": "CrashLoopBackOff",
        "message": format!("back-off 2m40s restarting failed container=webhook pod={pod_name}_{NS}(uid)")}});
    let last = json!({"terminated": {"exitCode": 1, "reason": "Error",
        "startedAt": "2025-01-01T00:04:00Z", "finishedAt": "2025-01-01T00:04:01Z"}});
    pod(
        plane,
        &name,
        "x7k2p",
        container_status(&image, false, 5, state, last),
    );
    deployment_status(plane, 2, json!([not_available()]));

    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: 0 of 2 replicas ready (2 up to date)"),
            format!(
                "Pod {NS}/{pod_name}: container webhook keeps crashing (CrashLoopBackOff, 5 restarts): it last exited with code 1 (Error)"
            ),
        ]
    );
    assert_eq!(
        hint,
        format!("kubectl -n {NS} logs {pod_name} -c webhook --previous")
    );
    reset(plane);
}

/// No node fits the pod: the scheduler's condition on it, over its Event.
#[test]
fn a_pod_that_cannot_be_scheduled_is_named_with_the_scheduler_s_message() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    let name = replica_set(plane, json!({"observedGeneration": 1, "replicas": 2}));
    let message = "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient memory. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.";
    let status = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": message}]});
    let (pod_name, uid) = pod(plane, &name, "x7k2p", status);
    let last = "2025-01-01T00:05:00Z";
    warning_event(plane, (&pod_name, &uid), "FailedScheduling", message, last);
    deployment_status(plane, 2, json!([not_available()]));

    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: 0 of 2 replicas ready (2 up to date)"),
            format!("Pod {NS}/{pod_name} cannot be scheduled (Unschedulable): {message}"),
        ]
    );
    assert_eq!(hint, format!("kubectl -n {NS} describe pod {pod_name}"));
    reset(plane);
}

/// The container runs, not ready: its status says no more, its Warning Event
/// (read by the pod's UID) says why.
#[test]
fn a_container_that_runs_not_ready_is_named_with_its_warning_event() {
    let installed = installed();
    let plane = installed.plane;
    reset(plane);
    let image = image(plane);
    let name = replica_set(plane, json!({"observedGeneration": 1, "replicas": 2}));
    let running = json!({"running": {"startedAt": "2025-01-01T00:00:00Z"}});
    let status = container_status(&image, false, 0, running, json!({}));
    let (pod_name, uid) = pod(plane, &name, "x7k2p", status);
    let message = "Readiness probe failed: Get \"http://10.244.1.7:9090/readyz\": dial tcp 10.244.1.7:9090: connect: connection refused";
    let last = "2025-01-01T00:05:00Z";
    warning_event(plane, (&pod_name, &uid), "Unhealthy", message, last);
    // A later Event of another object in the namespace: not the pod's, not read.
    let other = ("someone-else", "4f1c1a3e-0000-4000-8000-000000000000");
    warning_event(
        plane,
        other,
        "Unhealthy",
        "not this",
        "2025-01-01T00:09:00Z",
    );
    deployment_status(plane, 2, json!([not_available()]));

    let (lines, hint) = deployment_check(&installed);
    assert_eq!(
        lines,
        [
            format!("Deployment {NS}/{WEBHOOK}: 0 of 2 replicas ready (2 up to date)"),
            format!("Pod {NS}/{pod_name}: Unhealthy: {message}"),
        ]
    );
    assert_eq!(hint, format!("kubectl -n {NS} describe pod {pod_name}"));
    reset(plane);
}

/// `check` as a user without rights: the API server's 403, its message once,
/// with its reason and code; `uninstall` alike.
#[test]
fn an_api_error_is_the_api_server_s_message_once() {
    let installed = installed();
    let message = "namespaces is forbidden: User \"nobody\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope";
    let out = check(&installed, &["--as=nobody", "--wait=0s", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let (_, seen) = read_json(&out.stdout);
    let namespace = seen
        .iter()
        .find(|s| s.description == "linkerd-multus extension Namespace exists")
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(
        namespace.error,
        format!("cannot list Namespaces: {message} (Forbidden, 403)")
    );
    for s in seen.iter().filter(|s| s.result != "success") {
        assert!(
            s.error.matches("forbidden").count() == 1 && s.error.ends_with("(Forbidden, 403)"),
            "each API error once, the server's message: {s:#?}"
        );
    }
    let table = check(&installed, &["--as=nobody", "--wait=0s"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains(&format!(
            "× linkerd-multus extension Namespace exists\n    cannot list Namespaces: {message} (Forbidden, 403)\n"
        )),
        "{table}"
    );

    let out = std::process::Command::new(crate::common::bin())
        .arg("uninstall")
        .arg("--kubeconfig")
        .arg(&installed.kubeconfig)
        .arg("--as=nobody")
        .guarded_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: reading the cluster for linkerd-multus's objects: listing Namespaces: {message} (Forbidden, 403); pass --kubeconfig or --context for the cluster it is installed in\n"
        )
    );
}

#[test]
fn install_prints_an_api_error_once() {
    let installed = installed();
    let out = std::process::Command::new(crate::common::bin())
        .arg("install")
        .arg("--kubeconfig")
        .arg(&installed.kubeconfig)
        .arg("--as=nobody")
        .guarded_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(out.stdout, b"", "nothing to apply");
    assert_eq!(
        stderr,
        "error: reading the cluster for the extension's namespace and the webhook's certificates: reading the Namespace linkerd-multus: namespaces \"linkerd-multus\" is forbidden: User \"nobody\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"linkerd-multus\" (Forbidden, 403); pass --ignore-cluster to render without reading it (or --kubeconfig, --context for the cluster)\n"
    );
}
