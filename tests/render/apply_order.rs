//! `render . | kubectl apply -f -` on a cluster that has none of the package's namespaces: the
//! stream is in apply order (CRDs, Namespaces, NADs, the rest) whatever order the files sort in.

use super::*;
use common::kube_apiserver::ControlPlane;

/// A package whose files sort the wrong way: workloads and a NAD of the user's before the
/// Namespaces, a CRD last.
fn package(p: &Path, shop: &str, legacy: &str) {
    let write = |path: &str, text: String| {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "a-apps/web.yaml",
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {shop}\nspec:\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n      annotations:\n        k8s.v1.cni.cncf.io/networks: storage\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {shop}\nspec:\n  selector: {{app: web}}\n  ports:\n  - port: 80\n"
        ),
    );
    write(
        "a-apps/storage.yaml",
        format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: storage\n  namespace: {shop}\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\", \"master\": \"eth1\", \"ipam\": {{\"type\": \"dhcp\"}}}}'\n"
        ),
    );
    write(
        "b-legacy/report.yaml",
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: report\n  namespace: {legacy}\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: report\n            image: busybox:1.36\n"
        ),
    );
    write(
        "linkerd-cni/configmap.yaml",
        std::fs::read_to_string(repo_path(
            "functions/linkerd-multus/examples/kpt/linkerd-cni/configmap.yaml",
        ))
        .unwrap(),
    );
    write(
        "namespaces.yaml",
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {shop}\n  annotations:\n    linkerd.io/inject: enabled\n    linkerd.io/multus: enabled\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {legacy}\n"
        ),
    );
    write("z-crds/widgets.yaml", WIDGETS_CRD.to_string());
}

/// A CRD of the package's own, which nothing else needs: it comes first all the same.
const WIDGETS_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.apply-order.example.com\nspec:\n  group: apply-order.example.com\n  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";

fn kinds_and_names(stream: &str) -> Vec<String> {
    parse_yaml_stream(stream)
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d.str_at(&["kind"]).unwrap(),
                d.str_at(&["metadata", "name"]).unwrap()
            )
        })
        .collect()
}

#[test]
fn render_output_applies_to_a_cluster_without_its_namespaces() {
    let plane = ControlPlane::shared();
    plane.install_nad_crd();
    let (shop, legacy) = (plane.unique_name("shop"), plane.unique_name("legacy"));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    package(p, &shop, &legacy);

    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    assert_eq!(
        kinds_and_names(&out.stdout),
        [
            "CustomResourceDefinition widgets.apply-order.example.com".to_string(),
            format!("Namespace {shop}"),
            format!("Namespace {legacy}"),
            "NetworkAttachmentDefinition storage".into(),
            "NetworkAttachmentDefinition linkerd-cni".into(),
            "Deployment web".into(),
            "Service web".into(),
            "CronJob report".into(),
        ]
    );
    // Byte-identical from run to run, and the output renders to itself.
    assert_eq!(render(&["render", "."], p).stdout, out.stdout);
    let again = linkerd_multus(
        &["render", "-", "--context", "linkerd-cni"],
        &[],
        p,
        &out.stdout,
    );
    assert_eq!(
        (again.code, again.stdout.as_str()),
        (0, out.stdout.as_str())
    );

    // Plain client-side apply, as the README pipes it.
    let applied = plane.kubectl_input(&["apply", "-f", "-"], &out.stdout);
    assert!(
        applied.status.success(),
        "kubectl apply -f - refused the render's output:\n{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let nad = plane.kubectl(&[
        "get",
        "network-attachment-definitions",
        "-n",
        &shop,
        "linkerd-cni",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(nad.contains("linkerd-multus"), "{nad}");

    // post-render, which Helm feeds one stream in template order, sorts the same way.
    let stream = ["a-apps/web.yaml", "a-apps/storage.yaml", "namespaces.yaml"]
        .map(|f| std::fs::read_to_string(p.join(f)).unwrap())
        .join("---\n");
    let out = linkerd_multus(
        &["post-render", "--context", "linkerd-cni"],
        &[],
        p,
        &stream,
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        kinds_and_names(&out.stdout),
        [
            format!("Namespace {shop}"),
            format!("Namespace {legacy}"),
            "NetworkAttachmentDefinition storage".into(),
            "NetworkAttachmentDefinition linkerd-cni".into(),
            "Deployment web".into(),
            "Service web".into(),
        ]
    );
}
