//! `check` of the NAD controller installed apart from the webhook (`install --manage-nads`):
//! its Deployment's readiness, its leadership (a ready pod of its own holds the Lease,
//! renewed), `--pre`'s question for the restarts' policy, and the webhook of an earlier
//! release's layout, which ran the controller in its own process. A cluster of its own, with the stand-ins of check_harness.rs: the
//! Deployment's status, its pods and their readiness written as their controllers would.

use k8s_openapi::jiff::{Timestamp, ToSpan};
use serde_json::json;

use super::common::kube_apiserver::ControlPlane;
use super::lifecycle::extension;
use super::reinstall::seen;

const NS: &str = "linkerd-multus";
const CONTROLLER: &str = "linkerd-multus-nad-controller";
const READY: &str = "linkerd-multus-nad-controller Deployment is ready";
const LEADS: &str = "linkerd-multus-nad-controller holds its Lease";

/// The result and error of the check described `description`.
fn outcome(plane: &ControlPlane, description: &str) -> (String, String) {
    let check = seen(plane, &[], description);
    let text = |key: &str| check[key].as_str().unwrap_or_default().to_string();
    (text("result"), text("error"))
}

/// The Lease held by `holder`, renewed `ago` seconds ago.
fn lease(plane: &ControlPlane, holder: &str, ago: i64) {
    let renewed = Timestamp::now() - ago.seconds();
    let time = format!("{}.000000Z", renewed.strftime("%Y-%m-%dT%H:%M:%S"));
    plane.apply(
        &json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": CONTROLLER, "namespace": NS},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "acquireTime": time, "renewTime": time, "leaseTransitions": 0}
        })
        .to_string(),
    );
}

#[test]
fn the_controller_s_readiness_and_leadership_are_checked_and_an_earlier_layout_named() {
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    let install = extension(plane, &["install", "--manage-nads"]);
    assert_eq!(install.code, 0, "{}", install.stderr);
    plane.kubectl_ok(&["apply", "--server-side", "-f", "-"], &install.stdout);

    // No controller manager here: the Deployment has no status yet.
    let (result, error) = outcome(plane, READY);
    assert_eq!(result, "error", "{error}");
    assert!(
        error.contains(&format!("Deployment {NS}/{CONTROLLER}")),
        "{error}"
    );
    let status = json!({"status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "readyReplicas": 2, "availableReplicas": 2}});
    plane.kubectl(&[
        "patch",
        "deployment",
        CONTROLLER,
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    for pod in ["controller-a", "controller-b"] {
        plane.apply(
            &json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": NS,
                             "labels": {"app.kubernetes.io/name": CONTROLLER}},
                "spec": {"containers": [{"name": "controller", "image": "registry.example/c:1"}]}
            })
            .to_string(),
        );
        let ready = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        plane.kubectl(&[
            "patch",
            "pod",
            pod,
            "-n",
            NS,
            "--subresource=status",
            "--type=merge",
            "-p",
            &ready.to_string(),
        ]);
    }
    assert_eq!(outcome(plane, READY).0, "success");

    for (holder, ago, want) in [
        (None, 0, Some("not found: no replica has taken it")),
        (
            Some("linkerd-multus-webhook-5d8f7-x2x4q"),
            0,
            Some(
                "held by linkerd-multus-webhook-5d8f7-x2x4q, which is not a ready pod of Deployment linkerd-multus-nad-controller (controller-a, controller-b)",
            ),
        ),
        (
            Some("controller-b"),
            60,
            // The seconds counted when check runs: 60 or more on a loaded machine.
            Some("not renewed by controller-b for 6"),
        ),
        (Some(""), 0, Some("released: no replica holds it")),
        (Some("controller-a"), 0, None),
    ] {
        if let Some(holder) = holder {
            lease(plane, holder, ago);
        }
        let (result, error) = outcome(plane, LEADS);
        match want {
            None => assert_eq!(result, "success", "{holder:?}: {error}"),
            Some(want) => {
                assert_eq!(result, "error", "{holder:?}");
                assert!(
                    error.starts_with(&format!("Lease {NS}/{CONTROLLER}")),
                    "{error}"
                );
                assert!(error.contains(want), "{error}");
                if holder == Some("controller-b") {
                    assert!(error.contains(" s, longer than its 15 s"), "{error}");
                }
            }
        }
    }

    // With the restarts, --pre asks whether the API server serves their policy (1.30+).
    let pre = seen(
        plane,
        &["--pre", "--manage-nads", "--restart-stale-workloads"],
        "the API server serves ValidatingAdmissionPolicies (the restarts' policy)",
    );
    assert_eq!(pre["result"], "success", "{pre}");

    // The webhook of an earlier release's layout: it runs the controller in its process.
    let description = "linkerd-multus-webhook runs no NAD controller";
    let all = seen(plane, &[], "linkerd-multus-webhook Deployment is ready");
    assert!(all.is_object());
    let patch = r#"[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--manage-nads=true"}]"#;
    plane.kubectl(&[
        "patch",
        "deployment",
        "linkerd-multus-webhook",
        "-n",
        NS,
        "--type=json",
        "-p",
        patch,
    ]);
    let (result, error) = outcome(plane, description);
    assert_eq!(result, "error");
    assert!(
        error.contains("runs the NAD controller in the webhook's process (--manage-nads=true, an earlier release's layout)"),
        "{error}"
    );
}
