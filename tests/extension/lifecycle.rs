//! `install`, `install` again and `uninstall` against a real kube-apiserver, as a user runs
//! them: `install | kubectl apply --server-side -f -`, then `uninstall | kubectl delete -f -`.
//!
//! An API server of its own (`ControlPlane::own`): the install registers a
//! MutatingWebhookConfiguration with `failurePolicy: Fail` for pods in every namespace, which
//! no webhook serves here, and its cluster-scoped objects (ClusterRoles, the configuration)
//! have fixed names, so no other test may share it. A lone API server has no namespace
//! controller: a deleted namespace stays Terminating, with its objects, for ever; the tests
//! check that the deletion was asked (its deletionTimestamp), not that it completed.

use super::common::kube_apiserver::ControlPlane;
use super::common::{Run, parse_yaml_stream, run_with_args};

const APPLY: [&str; 5] = [
    "apply",
    "--server-side",
    "--field-manager=linkerd-multus-install",
    "-f",
    "-",
];

/// The extension's command against `plane`, as its admin.
fn extension(plane: &ControlPlane, args: &[&str]) -> Run {
    let kubeconfig = format!("--kubeconfig={}", plane.admin_kubeconfig.display());
    let mut all = args.to_vec();
    all.push(&kubeconfig);
    run_with_args(b"", &all)
}

/// `kind/namespace/name=resourceVersion` of each object of `yaml`, as the API server has them.
fn versions(plane: &ControlPlane, yaml: &str) -> Vec<String> {
    let template = r#"{range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}"#;
    let text = plane.kubectl_ok(
        &["get", "-f", "-", "-o", &format!("jsonpath={template}")],
        yaml,
    );
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// Whether `kind/name` (in `namespace`) exists.
fn exists(plane: &ControlPlane, kind: &str, name: &str, namespace: Option<&str>) -> bool {
    let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    !plane.kubectl(&args).trim().is_empty()
}

#[test]
fn install_applies_again_without_change_and_uninstall_removes_only_it() {
    let plane = ControlPlane::own();
    plane.install_nad_crd();

    // Nothing installed: nothing to print, and it says so.
    let none = extension(plane, &["uninstall"]);
    assert_eq!((none.code, none.stdout.as_str()), (0, ""), "{none:?}");
    assert!(none.stderr.contains("not installed"), "{}", none.stderr);

    let cni = plane.namespace("cni", &[]);
    let namespace = plane.unique_name("mesh");
    let ns_flag = format!("--namespace={namespace}");
    let cni_flag = format!("--cni-namespace={cni}");
    let flags = [
        "install",
        ns_flag.as_str(),
        "--manage-nads",
        cni_flag.as_str(),
        "--network-resources",
    ];

    // First install: new certificates, applied server-side.
    let first = extension(plane, &flags);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stderr.contains("made new webhook certificates"),
        "{}",
        first.stderr
    );
    plane.kubectl_ok(&APPLY, &first.stdout);
    let before = versions(plane, &first.stdout);
    assert_eq!(
        before.len(),
        parse_yaml_stream(&first.stdout).unwrap().len()
    );

    // Again, reading the cluster: the same bytes, and applying them changes nothing.
    let second = extension(plane, &flags);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second.stderr.contains("kept the webhook's certificates"),
        "{}",
        second.stderr
    );
    assert!(
        second.stdout == first.stdout,
        "a second install printed other objects"
    );
    let applied = plane.kubectl_ok(&APPLY, &second.stdout);
    assert_eq!(
        versions(plane, &second.stdout),
        before,
        "applying again changed:\n{applied}"
    );
    let diff = plane.kubectl_input(
        &[
            "diff",
            "--server-side",
            "--field-manager=linkerd-multus-install",
            "-f",
            "-",
        ],
        &second.stdout,
    );
    assert_eq!(
        diff.status.code(),
        Some(0),
        "kubectl diff: {}{}",
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&diff.stderr)
    );

    uninstall_removes_only_what_install_made(plane, &namespace, &cni);
}

/// Objects that are not the extension's, then `uninstall | kubectl delete -f -`.
fn uninstall_removes_only_what_install_made(plane: &ControlPlane, namespace: &str, cni: &str) {
    let users = plane.namespace("users", &[]);
    let nad = |name: &str, labels: &str| {
        format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: {name}\n  namespace: {users}\n  labels: {{{labels}}}\nspec:\n  config: '{{\"cniVersion\": \"0.3.0\", \"type\": \"bridge\"}}'\n"
        )
    };
    // A user's NAD, even labelled as the extension's, and one the NAD controller made.
    plane.apply(&nad("mine", "linkerd.io/extension: multus"));
    plane.apply(&nad(
        "linkerd-cni",
        "app.kubernetes.io/managed-by: linkerd-multus-controller",
    ));
    plane.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: someone-else\nrules: []\n",
    );

    let run = extension(plane, &["uninstall"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let docs = parse_yaml_stream(&run.stdout).unwrap();
    let ids: Vec<String> = docs
        .iter()
        .map(|d| {
            let (kind, ns, name) = d.id();
            format!("{kind}/{ns}/{name}")
        })
        .collect();
    let mut want = vec![
        "MutatingWebhookConfiguration//linkerd-multus-webhook".to_string(),
        "ClusterRoleBinding//linkerd-multus-nad-controller".into(),
        "ClusterRoleBinding//linkerd-multus-webhook".into(),
        "ClusterRoleBinding//linkerd-multus-webhook-network-resources".into(),
        "ClusterRole//linkerd-multus-nad-controller".into(),
        "ClusterRole//linkerd-multus-webhook".into(),
        "ClusterRole//linkerd-multus-webhook-network-resources".into(),
        format!("RoleBinding/{cni}/linkerd-multus-nad-controller"),
        format!("Role/{cni}/linkerd-multus-nad-controller"),
    ];
    want.push(format!("Namespace//{namespace}"));
    assert_eq!(ids, want, "what uninstall prints");

    plane.kubectl_ok(&["delete", "--wait=false", "-f", "-"], &run.stdout);
    removed_only(plane, &want, namespace, cni, &users);
}

/// After the delete: `want` is gone, the extension's `namespace` is being deleted, and
/// what is not the extension's stays.
fn removed_only(plane: &ControlPlane, want: &[String], namespace: &str, cni: &str, users: &str) {
    for id in &want[..want.len() - 1] {
        let mut parts = id.split('/');
        let (kind, ns, name) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let ns = (!ns.is_empty()).then_some(ns);
        assert!(!exists(plane, kind, name, ns), "{id} is still there");
    }
    // The namespace is being deleted (a lone API server never finishes: no namespace controller).
    let deleting = plane.kubectl(&[
        "get",
        "namespace",
        namespace,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(
        !deleting.trim().is_empty(),
        "namespace {namespace} is not being deleted"
    );
    // What was not the extension's stays: the CNI namespace, the NADs, another ClusterRole.
    for (kind, name, ns) in [
        ("namespace", cni, None),
        ("namespace", users, None),
        ("net-attach-def", "mine", Some(users)),
        ("net-attach-def", "linkerd-cni", Some(users)),
        ("clusterrole", "someone-else", None),
    ] {
        assert!(exists(plane, kind, name, ns), "{kind} {name} was removed");
    }
    for ns in [cni, users] {
        let deleting = plane.kubectl(&[
            "get",
            "namespace",
            ns,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ]);
        assert!(
            deleting.trim().is_empty(),
            "namespace {ns} is being deleted"
        );
    }
}
