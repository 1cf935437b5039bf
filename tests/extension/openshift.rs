//! `install` for OpenShift against a real kube-apiserver: a mirror's image on every
//! container, OpenShift's Prometheus namespaces, and namespaces kept away from the
//! webhook, by name and by prefix, which the API server admits pods in without calling
//! it. An API server of its own: the install registers a `failurePolicy: Fail` webhook
//! for pods in every namespace, which no replica serves here (no kubelet runs its pods),
//! so a pod sent to it is refused: exactly what an excluded namespace must never see.

use super::common::kube_apiserver::ControlPlane;
use super::lifecycle::{APPLY, extension};

const NS: &str = "linkerd-multus";
const WEBHOOK: &str = "linkerd-multus-webhook";
const IMAGE: &str = "mirror.example:5000/linkerd/linkerd-multus@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A server-side dry-run create of a pod in `namespace`: `Ok` when admitted, the API
/// server's message when refused.
fn create_pod(plane: &ControlPlane, namespace: &str) -> Result<(), String> {
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\n  namespace: {namespace}\nspec:\n  containers:\n  - name: app\n    image: registry.k8s.io/pause:3.10\n"
    );
    let out = plane.kubectl_input(&["create", "--dry-run=server", "-f", "-"], &pod);
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

#[test]
fn install_for_openshift_keeps_its_namespaces_away_from_the_webhook() {
    let plane = ControlPlane::own();
    let image = format!("--image={IMAGE}");
    let run = extension(
        plane,
        &[
            "install",
            "--platform=openshift",
            &image,
            "--webhook-excluded-namespace=legacy-apps,batch-*",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    plane.kubectl_ok(&APPLY, &run.stdout);

    // Every container of the stored Deployment runs the mirror's image.
    let images = plane.kubectl(&[
        "get",
        "deployment",
        WEBHOOK,
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.template.spec.initContainers[*].image} {.spec.template.spec.containers[*].image}",
    ]);
    assert_eq!(images.trim(), IMAGE);
    // OpenShift's Prometheus may scrape the metrics.
    let metrics = plane.kubectl(&[
        "get",
        "networkpolicy",
        WEBHOOK,
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.ingress[1].from[0].namespaceSelector.matchExpressions[0].values}",
    ]);
    assert_eq!(
        metrics,
        r#"["openshift-monitoring","openshift-user-workload-monitoring"]"#
    );

    // Kept away, by the platform and by the flag, names and prefixes: admitted without a
    // call. Elsewhere the unreachable webhook refuses the pod (failurePolicy Fail),
    // the near misses of a name or a prefix included.
    for (namespace, kept_away) in [
        ("openshift", true),
        ("openshift-monitoring", true),
        ("legacy-apps", true),
        ("batch-nightly", true),
        ("legacy-apps-v2", false),
        ("batch", false),
    ] {
        plane.kubectl(&["create", "namespace", namespace]);
        match (create_pod(plane, namespace), kept_away) {
            (Ok(()), true) => {}
            (Err(message), false) => assert!(
                message.contains("failed calling webhook \"attach.multus.linkerd.io\""),
                "{namespace}: {message}"
            ),
            (got, _) => panic!("{namespace}: kept away {kept_away}, but {got:?}"),
        }
    }
}
