//! Config restarts (`--restart-stale-workloads`) through the real API server, with exactly
//! the rights of deploy/, deploy-nad-controller/ and deploy-restarts/, read back from the
//! API server's audit log. There is no controller manager, scheduler or kubelet here: the test
//! makes each Deployment's ReplicaSet and pods itself, and writes the Deployment's rollout
//! status (`kubectl patch --subresource=status`) where the Deployment controller would.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use linkerd_multus::linkerd_cni::rollout::config_hash;
use serde_json::{Value, json};

use super::audit::{requests, service_account};
use super::harness::{
    BOUND, Controller, Setup, eventually, labelled_by_controller, read, setup_with,
};

const OPT_IN: &str = "multus.linkerd.io/restart-on-config-change";
const HASH: &str = "multus.linkerd.io/config-hash";
/// A hash no config of this test has: what pods started under an older config carry.
const OLD: &str = "0123456789abcdef";

/// Makes Deployment `name` in `namespace` (its pod template annotated `template`), its
/// ReplicaSet and one pod of it carrying the config hash `pod_hash`, its rollout complete.
fn workload(s: &Setup, namespace: &str, name: &str, template: Value, pod_hash: &str) {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": template},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    });
    s.plane.apply(&deployment.to_string());
    complete(s, namespace, name);
    let uid = |kind: &str, object: &str| {
        s.plane.kubectl(&[
            "get",
            kind,
            "-n",
            namespace,
            object,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let owner = |kind: &str, object: &str, uid: String| json!([{"apiVersion": "apps/v1", "kind": kind, "name": object, "uid": uid, "controller": true}]);
    let rs = format!("{name}-1");
    s.plane.apply(
        &json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": rs, "namespace": namespace,
                         "ownerReferences": owner("Deployment", name, uid("deployment", name))},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        })
        .to_string(),
    );
    s.plane.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-1-a"), "namespace": namespace,
                         "labels": {"app": name},
                         "annotations": {HASH: pod_hash},
                         "ownerReferences": owner("ReplicaSet", &rs, uid("replicaset", &rs))},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        })
        .to_string(),
    );
}

/// Writes Deployment `name`'s rollout status as complete for its current generation, as the
/// Deployment controller would once its new pods are available; returns when it started the
/// write (nothing that follows the write can be earlier).
fn complete(s: &Setup, namespace: &str, name: &str) -> Timestamp {
    let started = Timestamp::now();
    let generation = s.plane.kubectl(&[
        "get",
        "deployment",
        "-n",
        namespace,
        name,
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let status = json!({"status": {
        "observedGeneration": generation.trim().parse::<i64>().unwrap(),
        "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1
    }});
    s.plane.kubectl(&[
        "patch",
        "deployment",
        "-n",
        namespace,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    started
}

/// The hash Deployment `name`'s pod template carries.
fn template_hash(s: &Setup, namespace: &str, name: &str) -> String {
    let out = s
        .plane
        .kubectl(&["get", "deployment", "-n", namespace, name, "-o", "json"]);
    let deployment: Value = serde_json::from_str(&out).unwrap();
    deployment["spec"]["template"]["metadata"]["annotations"][HASH]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The patches of Deployments the controller's account sent, as `name` and when received.
fn patches(s: &Setup, log: &std::path::Path) -> Vec<(String, Timestamp)> {
    requests(log, &service_account(&s.home, &s.account))
        .into_iter()
        .filter(|r| r.resource == "deployments" && r.verb == "patch")
        .map(|r| (r.name, r.received))
        .collect()
}

#[test]
fn stale_opted_in_workloads_are_restarted_once_each_paced_and_not_after_a_restart() {
    let s = setup_with(|rbac| format!("{rbac}\n---\n{}", read("deploy-restarts/rbac.yaml")));
    let audited = s.audited_server();
    let kubeconfig = s.kubeconfig_on(&audited.server, &s.account);
    let app = s.plane.namespace(
        "app",
        &[("linkerd.io/multus", "enabled"), (OPT_IN, "enabled")],
    );
    let flags = ["--restart-stale-workloads", "--restart-deadline=2m"];
    let mut controller = Controller::start_args(&s, "first", &kubeconfig, "3s", &flags);
    eventually("the controller's NAD", BOUND, || {
        s.nad(&app).is_some_and(|n| labelled_by_controller(&n))
    });
    let nad = s.nad(&app).unwrap();
    let current = config_hash(nad["spec"]["config"].as_str().unwrap());
    // Two stale workloads opted in through their namespace; one current; one opted out.
    workload(&s, &app, "api", json!({}), OLD);
    workload(&s, &app, "web", json!({}), OLD);
    workload(&s, &app, "fresh", json!({HASH: current}), &current);
    workload(&s, &app, "out", json!({OPT_IN: "disabled"}), OLD);
    // A naked pod of the old config: reported, never restarted (not opted in to eviction).
    s.plane.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "naked", "namespace": app, "annotations": {HASH: OLD}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        })
        .to_string(),
    );

    // One at a time: api first (by name), and web not while api's rollout is incomplete.
    eventually("api restarted", BOUND, || {
        template_hash(&s, &app, "api") == current
    });
    // The naked pod is reported by an Event on it, not evicted (no second opt-in).
    eventually("the StaleConfig Event on the naked pod", BOUND, || {
        s.events_about(&app, "naked")
            .iter()
            .any(|e| e["reason"] == "StaleConfig" && e["type"] == "Warning")
    });
    std::thread::sleep(Duration::from_secs(5));
    let naked = s
        .plane
        .kubectl(&["get", "pod", "-n", &app, "naked", "-o", "name"]);
    assert_eq!(naked.trim(), "pod/naked", "not evicted");
    assert_eq!(
        template_hash(&s, &app, "web"),
        "",
        "web waits for api's rollout"
    );
    let api_done = complete(&s, &app, "api");
    eventually("web restarted", BOUND, || {
        template_hash(&s, &app, "web") == current
    });
    complete(&s, &app, "web");

    // A new controller (a restart, a new leader, a fresh list): nothing is patched again,
    // though the stale pods are still there (no kubelet replaces them here).
    controller.kill();
    let second = Controller::start_args(&s, "second", &kubeconfig, "3s", &flags);
    eventually("the second controller leads", BOUND, || {
        second.leader() == Some(1.0)
    });
    // It has planned over the same cluster once it reports the naked pod; a few passes more.
    eventually("the second controller's first plan", BOUND, || {
        second.metric("linkerd_multus_config_stale_reported ") == Some(1.0)
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(template_hash(&s, &app, "out"), "", "opted out");
    assert_eq!(template_hash(&s, &app, "fresh"), current);

    let patches = patches(&s, &audited.log);
    let names: Vec<&str> = patches.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["api", "web"],
        "one patch per stale workload, none for current or opted-out ones, none after the restart:\n{}",
        second.log()
    );
    assert!(
        patches[1].1 > api_done,
        "web was restarted after api's rollout completed ({} < {api_done})",
        patches[1].1
    );
    assert_eq!(
        second.metric("linkerd_multus_config_restarts_total "),
        Some(0.0),
        "the second controller restarted nothing"
    );
}
