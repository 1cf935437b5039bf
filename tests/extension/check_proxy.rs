//! `check --proxy` as a user reads it on a cluster where Git holds the workloads: a
//! Deployment's pods on an older config are named under the Deployment (the one to restart),
//! and a Deployment the NAD controller said it leaves to the user (its pod template is Git's)
//! is named in "the NAD controller leaves no workload on an older config to you"; a meshed
//! pod whose networks select a NAD that is gone is named with the NAD, which plain `check`
//! also catches; each hint fits how the controller runs (here: not installed).

use serde_json::json;

use super::check::{failures, meshed_pod, restarts_event, set_log_level};
use super::check_harness::{DEMO, installed};

#[test]
fn a_deployment_on_an_older_config_is_named_and_so_is_what_the_controller_leaves() {
    let installed = installed();
    let plane = installed.plane;
    // A pod of Deployment web-app (through its ReplicaSet, as the Deployment controller makes
    // them), created through the webhook under the current config.
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-app-5d8f-x2k", "namespace": DEMO,
            "labels": {"app": "web-app", "pod-template-hash": "5d8f"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-app-5d8f",
                                 "uid": "6f0d5a8e-0000-4000-8000-000000000001", "controller": true}],
        },
        "spec": {"containers": [
            {"name": "app", "image": "registry.k8s.io/pause:3.10"},
            {"name": "linkerd-proxy", "image": "registry.k8s.io/pause:3.10"},
        ]},
    });
    installed.kubectl_ok(&["create", "-f", "-"], &pod.to_string());
    meshed_pod(&installed, DEMO, "naked", false);
    set_log_level(plane, "debug");
    // The NAD controller's note: Git holds the Deployment's pod template.
    let regarding = json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": DEMO, "name": "web-app"});
    installed.kubectl_ok(
        &["create", "-f", "-"],
        &restarts_event(
            "e-git",
            regarding,
            "StaleConfig",
            "its pod template is managed from Git: render it with configRollout and apply",
            "linkerd-multus-controller",
        ),
    );

    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert_eq!(code, 0, "warnings only: {table}");
    let seen: Vec<(&str, &str)> = failing
        .iter()
        .map(|s| (s.description.as_str(), s.error.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "meshed pods run with their namespace's current linkerd-cni config",
                "created under an older config than their namespace's NAD holds (multus.linkerd.io/config-hash differs): Deployment demo/web-app (demo/web-app-5d8f-x2k), Pod demo/naked"
            ),
            (
                "the NAD controller leaves no workload on an older config to you",
                "these run an older Linkerd-CNI config and the NAD controller does not restart them: Deployment demo/web-app (its pod template is managed from Git: render it with configRollout and apply)"
            ),
        ],
        "{table}"
    );
    let hint = &failing[0].hint;
    assert!(
        hint.contains(
            "install it with linkerd multus install --manage-nads --restart-stale-workloads"
        ),
        "no NAD controller runs here: {hint}"
    );

    plane.kubectl(&["delete", "events.events.k8s.io", "e-git", "-n", DEMO]);
    plane.kubectl(&["delete", "pod", "web-app-5d8f-x2k", "naked", "-n", DEMO]);
    set_log_level(plane, "info");
}

#[test]
fn a_meshed_pod_selecting_a_nad_that_is_gone_is_named() {
    let installed = installed();
    let plane = installed.plane;
    let nad = json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "storage", "namespace": DEMO},
        "spec": {"config": r#"{"cniVersion": "0.3.1", "name": "storage", "type": "bridge"}"#},
    });
    installed.kubectl_ok(&["create", "-f", "-"], &nad.to_string());
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "storage-user", "namespace": DEMO,
                     "annotations": {"k8s.v1.cni.cncf.io/networks": "storage"}},
        "spec": {"containers": [
            {"name": "app", "image": "registry.k8s.io/pause:3.10"},
            {"name": "linkerd-proxy", "image": "registry.k8s.io/pause:3.10"},
        ]},
    });
    installed.kubectl_ok(&["create", "-f", "-"], &pod.to_string());
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert!(failing.is_empty() && code == 0, "{table}");

    plane.kubectl(&[
        "delete",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "storage",
        "-n",
        DEMO,
    ]);
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    let seen: Vec<(&str, &str, &str)> = failing
        .iter()
        .map(|s| (s.description.as_str(), s.result.as_str(), s.error.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(
            "meshed pods select only NADs that exist",
            "error",
            "these select NetworkAttachmentDefinitions that are gone, so once recreated (a restart, an eviction, a node drained) they cannot start: demo/storage-user (demo/storage)"
        )],
        "{table}"
    );
    assert_eq!(code, 1, "{table}");
    assert!(
        failing[0].hint.starts_with("make the NADs again"),
        "{table}"
    );

    plane.kubectl(&["delete", "pod", "storage-user", "-n", DEMO]);
}
