//! A `linkerd.io/multus` value that is neither `enabled` nor `disabled` turns Linkerd-CNI off:
//! `render` says so and goes on (exit 0), `diff` and `validate` fail on it.

use super::*;

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  annotations:\n    linkerd.io/inject: enabled\n    linkerd.io/multus: enabled\n";
const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n      annotations:\n        linkerd.io/multus: enable\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n";
const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linkerd-cni-config\n  namespace: linkerd-cni\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  cni_network_config: '{\"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}}'\n";

/// What `validate` says of the package's local-config copy of the Linkerd-CNI ConfigMap,
/// which `kubectl apply -R` would apply (tests/validate.rs holds the warning itself).
const APPLIED_BY_KUBECTL: &str = "linkerd-cni/configmap.yaml: warning: ConfigMap linkerd-cni/linkerd-cni-config: metadata.annotations.config.kubernetes.io/local-config: local-config: kpt and linkerd-multus render leave it out, but kubectl apply -R (or -f of its file) applies it, and this copy then replaces the cluster's ConfigMap of that name, which its owner (the Linkerd-CNI chart) applies: its next upgrade conflicts on .data; apply the rendered package with kpt live apply, or linkerd-multus render DIR | kubectl apply --server-side -f -\n";

/// The package of the README with `web` and `namespace.yaml` as given.
fn shop(namespace: &str, web: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("apps")).unwrap();
    std::fs::create_dir_all(p.join("linkerd-cni")).unwrap();
    std::fs::write(p.join("namespace.yaml"), namespace).unwrap();
    std::fs::write(p.join("apps/web.yaml"), web).unwrap();
    std::fs::write(p.join("linkerd-cni/configmap.yaml"), CONFIGMAP).unwrap();
    dir
}

#[test]
fn a_misspelt_value_on_a_pod_template_warns_and_fails_diff_and_validate() {
    let dir = shop(NAMESPACE, WEB);
    let p = dir.path();
    let warning = "warning: Deployment shop/web (apps/web.yaml): spec.template.metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says; did you mean enabled?\n";

    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, warning));
    assert!(
        !out.stdout.contains("k8s.v1.cni.cncf.io/networks"),
        "{}",
        out.stdout
    );

    let out = render(&["diff", "."], p);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "{warning}1 opt-in annotation above is written wrong (a value neither enabled nor disabled, or a misspelt key); the files are not checked until it is fixed\n"
        )
    );
    // render --diff shows the diff and succeeds, as it always does.
    assert_eq!(render(&["render", "--diff", "."], p).code, 0);

    let out = render(&["validate", "."], p);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "{APPLIED_BY_KUBECTL}apps/web.yaml: error: Deployment shop/web: spec.template.metadata.annotations.linkerd.io/multus: \"enable\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod template as not enabled, so its pods are not attached to Linkerd-CNI, whatever their namespace says; did you mean enabled?\nlinkerd-multus validate: 0 NetworkAttachmentDefinitions and 1 workload checked; 1 error, 1 warning\n"
        )
    );

    // Fixed: attached, and every command passes once rendered.
    std::fs::write(
        p.join("apps/web.yaml"),
        WEB.replace(": enable\n", ": enabled\n"),
    )
    .unwrap();
    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert!(
        out.stdout
            .contains("k8s.v1.cni.cncf.io/networks: linkerd-cni"),
        "{}",
        out.stdout
    );
    assert_eq!(render(&["validate", "."], p).code, 0);
    assert_eq!(render(&["diff", "."], p).code, 1);
}

#[test]
fn a_misspelt_value_on_a_namespace_warns_and_fails_diff_and_validate() {
    let web = WEB.replace(
        "      annotations:\n        linkerd.io/multus: enable\n",
        "",
    );
    let dir = shop(
        &NAMESPACE.replace("multus: enabled", "multus: \"true\""),
        &web,
    );
    let p = dir.path();
    let warning = "warning: Namespace shop (namespace.yaml): metadata.annotations.linkerd.io/multus is \"true\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?\n";

    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, warning));

    let out = render(&["diff", "."], p);
    assert_eq!((out.code, out.stdout.as_str()), (2, ""), "{}", out.stderr);
    assert_eq!(
        out.stderr,
        format!(
            "{warning}1 opt-in annotation above is written wrong (a value neither enabled nor disabled, or a misspelt key); the files are not checked until it is fixed\n"
        )
    );

    let out = render(&["validate", "."], p);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "{APPLIED_BY_KUBECTL}namespace.yaml: error: Namespace shop: metadata.annotations.linkerd.io/multus: \"true\" is neither enabled nor disabled: linkerd-multus and its webhook treat the namespace as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?\nlinkerd-multus validate: 0 NetworkAttachmentDefinitions and 1 workload checked; 1 error, 1 warning\n"
        )
    );
}

/// A meshed namespace that is not enabled: an info result, in the KRM function's results, and
/// on `render`'s stderr, as kpt shows it (an info the user must act on; the others are left
/// out); `diff` passes.
#[test]
fn a_meshed_namespace_that_is_not_enabled_gets_an_info_result() {
    let dir = shop(
        &NAMESPACE.replace("    linkerd.io/multus: enabled\n", ""),
        &WEB.replace(
            "      annotations:\n        linkerd.io/multus: enable\n",
            "",
        ),
    );
    let p = dir.path();
    let info = "info: Namespace shop (namespace.yaml): the namespace is meshed (linkerd.io/inject: enabled) but has no linkerd.io/multus annotation, so its pods are attached to Linkerd-CNI only where their own template says linkerd.io/multus: enabled; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI\n";
    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, info));
    let out = render(&["diff", "."], p);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);

    let list = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- {}",
        [NAMESPACE.replace("    linkerd.io/multus: enabled\n", "")]
            .iter()
            .map(|d| d.replace('\n', "\n  "))
            .collect::<String>()
    );
    let out = linkerd_multus(&[], &[], p, &list);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    let results: Vec<String> = docs[0]
        .get("results")
        .map(Yaml::seq)
        .unwrap_or_default()
        .iter()
        .skip(1)
        .map(|r| {
            format!(
                "{} {} {}: {}: {}",
                r.str_at(&["severity"]).unwrap_or_default(),
                r.str_at(&["resourceRef", "kind"]).unwrap_or_default(),
                r.str_at(&["resourceRef", "name"]).unwrap_or_default(),
                r.str_at(&["field", "path"]).unwrap_or_default(),
                r.str_at(&["message"]).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            "info Namespace shop: metadata.annotations: the namespace is meshed (linkerd.io/inject: enabled) but has no linkerd.io/multus annotation, so its pods are attached to Linkerd-CNI only where their own template says linkerd.io/multus: enabled; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI"
        ]
    );
}
