//! `install`, `install` again and `uninstall` against a real kube-apiserver, as a user runs
//! them: `install | kubectl apply --server-side -f -`, then `uninstall | kubectl delete -f -`.
//!
//! An API server of its own (`ControlPlane::own`): the install registers a
//! MutatingWebhookConfiguration with `failurePolicy: Fail` for pods in every namespace, which
//! no webhook serves here, and its cluster-scoped objects (ClusterRoles, the configuration)
//! have fixed names, so no other test may share it. A lone API server has no namespace
//! controller: a deleted namespace stays Terminating, with its objects, for ever; the tests
//! check that the deletion was asked (its deletionTimestamp), not that it completed.
//!
//! What `install` and `uninstall` refuse to touch: a namespace that exists without
//! install's mark, or that is reserved (Kubernetes's, Linkerd's, ...); a Secret install did
//! not make (replaced, none of its CAs trusted) or a CA planted beside install's (dropped).

use base64::Engine;

use super::common::https::Ca;
use super::common::kube_apiserver::ControlPlane;
use super::common::{Run, Yaml, parse_yaml_stream, run_with_args};

const MARK: &str = "multus.linkerd.io/namespace-owner=linkerd-multus";

/// What install says of the webhook's port where the API server lists no address of its own,
/// as on a lone API server on a loopback address (whose Endpoints it never writes).
const UNLISTED: &str = "warning: the NetworkPolicy admits the webhook's port 8443 from every address: the EndpointSlice default/kubernetes lists no address of the API server; pass --api-server-cidr (apiServerCIDRs) with your control plane's addresses, once for each range, to admit only the API server";

pub(super) const APPLY: [&str; 5] = [
    "apply",
    "--server-side",
    "--field-manager=linkerd-multus-install",
    "-f",
    "-",
];

/// The extension's command against `plane`, as its admin.
pub(super) fn extension(plane: &ControlPlane, args: &[&str]) -> Run {
    let kubeconfig = format!("--kubeconfig={}", plane.admin_kubeconfig.display());
    let mut all = args.to_vec();
    all.push(&kubeconfig);
    run_with_args(b"", &all)
}

/// `kind/namespace/name=resourceVersion` of each object of `yaml`, as the API server has them.
pub(super) fn versions(plane: &ControlPlane, yaml: &str) -> Vec<String> {
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
    assert!(first.stderr.contains(UNLISTED), "{}", first.stderr);
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

    secrets_install_did_not_make_are_not_trusted(plane, &namespace, &flags, &first.stdout);
    the_api_server_s_addresses_narrow_the_webhook_port(plane, &flags);
    uninstall_removes_only_what_install_made(plane, &namespace, &cni);
}

/// Where the cluster lists the API server's addresses (the EndpointSlice default/kubernetes),
/// the webhook's port admits those alone. A lone API server on a loopback address writes no
/// such slice (Kubernetes refuses loopback endpoints), so the test writes the one an API
/// server at 192.0.2.10 and 2001:db8::10 would; unready addresses are left out.
fn the_api_server_s_addresses_narrow_the_webhook_port(plane: &ControlPlane, flags: &[&str]) {
    plane.apply(
        &serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["192.0.2.10"], "conditions": {"ready": true}},
                {"addresses": ["192.0.2.99"], "conditions": {"ready": false}},
            ],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]
        })
        .to_string(),
    );
    let run = extension(plane, flags);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("note: the NetworkPolicy admits the webhook's port 8443 only from the API server's addresses, as the EndpointSlice default/kubernetes lists them (192.0.2.10/32); if it calls webhooks from other addresses"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("warning: the NetworkPolicy"),
        "{}",
        run.stderr
    );
    let docs = parse_yaml_stream(&run.stdout).unwrap();
    let policy = docs
        .iter()
        .find(|d| {
            d.str_at(&["kind"]) == Some("NetworkPolicy")
                && d.str_at(&["metadata", "name"]) == Some("linkerd-multus-webhook")
        })
        .unwrap();
    let https = &policy.get("spec").unwrap().get("ingress").unwrap().seq()[0];
    let from: Vec<_> = https
        .get("from")
        .unwrap()
        .seq()
        .iter()
        .map(|peer| peer.str_at(&["ipBlock", "cidr"]).unwrap().to_string())
        .collect();
    assert_eq!(from, ["192.0.2.10/32"]);
    plane.kubectl(&["delete", "endpointslice", "kubernetes", "-n", "default"]);
}

/// The PEM certificates of base64 `data`.
fn certificates_of(data: &str) -> Vec<String> {
    let text = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    text.split_inclusive("-----END CERTIFICATE-----\n")
        .map(str::to_string)
        .collect()
}

/// The Secret's `ca.crt` and the configuration's caBundle of an install's output: the same.
fn bundle_of(yaml: &str) -> Vec<String> {
    let docs = parse_yaml_stream(yaml).unwrap();
    let of = |kind: &str| -> &Yaml {
        docs.iter()
            .find(|d| d.str_at(&["kind"]) == Some(kind))
            .unwrap()
    };
    let secret = of("Secret").str_at(&["data", "ca.crt"]).unwrap();
    let hook = &of("MutatingWebhookConfiguration")
        .get("webhooks")
        .unwrap()
        .seq()[0];
    assert_eq!(hook.str_at(&["clientConfig", "caBundle"]), Some(secret));
    certificates_of(secret)
}

/// Someone who may write Secrets in the extension's namespace plants a CA beside
/// install's, then a Secret of their own: neither CA reaches the caBundle.
fn secrets_install_did_not_make_are_not_trusted(
    plane: &ControlPlane,
    namespace: &str,
    flags: &[&str],
    installed: &str,
) {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let secret = "linkerd-multus-webhook-tls";
    let planted = Ca::new("planted");
    let ca = plane.kubectl(&[
        "get",
        "secret",
        secret,
        "-n",
        namespace,
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    let mut bundle = certificates_of(&ca).concat();
    bundle.push_str(&planted.pem);
    let patch = |data: serde_json::Value| {
        plane.kubectl(&[
            "patch",
            "secret",
            secret,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            &serde_json::json!({ "data": data }).to_string(),
        ])
    };
    patch(serde_json::json!({ "ca.crt": b64(&bundle) }));
    let run = extension(plane, flags);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "kept the webhook's certificates of {namespace}/{secret}; its ca.crt is rebuilt from the CA that issued tls.crt and the previous one, without 1 certificate(s) install did not put there\n\
             {UNLISTED}\n"
        )
    );
    assert!(
        run.stdout == installed,
        "the planted CA is dropped, nothing else changes"
    );

    // A Secret of someone else's, for the right names, from a CA that may sign anything.
    let names: Vec<String> = ["", ".svc", ".svc.cluster.local"]
        .iter()
        .map(|suffix| format!("linkerd-multus-webhook.{namespace}{suffix}"))
        .chain(["linkerd-multus-webhook".to_string()])
        .collect();
    let leaf = planted.leaf(&names.iter().map(String::as_str).collect::<Vec<_>>());
    patch(serde_json::json!({
        "ca.crt": b64(&planted.pem),
        "tls.crt": b64(&leaf.cert),
        "tls.key": b64(&leaf.key),
    }));
    let run = extension(plane, flags);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.starts_with(&format!(
            "replaced the Secret {namespace}/{secret}: install did not make it (the CA that signed tls.crt is not limited to pathLen 0); made new webhook certificates, and none of its CAs is trusted\n"
        )),
        "{}",
        run.stderr
    );
    let trusted = bundle_of(&run.stdout);
    assert_eq!(trusted.len(), 1, "only the new CA: {trusted:?}");
    assert!(!trusted.contains(&planted.pem));
    assert!(!bundle_of(installed).contains(&trusted[0]), "a new CA");
}

/// `install` refuses a namespace that exists without its mark, one being deleted and a
/// reserved one, with exit 1, nothing on stdout and what to do; it takes one it marked.
#[test]
fn install_takes_only_a_namespace_of_its_own() {
    let plane = ControlPlane::shared();
    let team = plane.namespace("team", &[]);
    let run = extension(plane, &["install", &format!("--namespace={team}")]);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{run:?}");
    assert_eq!(
        run.stderr,
        format!(
            "error: namespace \"{team}\" exists and linkerd-multus install did not make it (it lacks the annotation {MARK}): install puts the extension only in a namespace of its own, which uninstall deletes with everything in it. Pass --namespace with a namespace that does not exist yet; or, if {team} holds nothing but linkerd-multus (installed before install marked its namespace), mark it: kubectl annotate namespace {team} {MARK}\n"
        )
    );
    // The same with cert-manager, which reads no Secret.
    let run = extension(
        plane,
        &[
            "install",
            &format!("--namespace={team}"),
            "--certs=cert-manager",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .starts_with(&format!("error: namespace \"{team}\" exists")),
        "{}",
        run.stderr
    );

    // Marked as the refusal says: taken.
    plane.kubectl(&["annotate", "namespace", &team, MARK]);
    let run = extension(plane, &["install", &format!("--namespace={team}")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.starts_with(&format!(
            "made new webhook certificates (no Secret {team}/linkerd-multus-webhook-tls)\n"
        )),
        "{}",
        run.stderr
    );
    let namespace = &parse_yaml_stream(&run.stdout).unwrap()[0];
    assert_eq!(namespace.str_at(&["metadata", "name"]), Some(team.as_str()));

    // Being deleted (a lone API server never finishes it).
    let going = plane.namespace("going", &[]);
    plane.kubectl(&["annotate", "namespace", &going, MARK]);
    plane.kubectl(&["delete", "namespace", &going, "--wait=false"]);
    let run = extension(plane, &["install", &format!("--namespace={going}")]);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{run:?}");
    assert_eq!(
        run.stderr,
        format!(
            "error: namespace \"{going}\" is being deleted: the API server refuses new objects in it until it is gone, and its certificates go with it, so install printed nothing; wait until it is gone (kubectl wait --for=delete namespace/{going} --timeout=5m), then run install again\n"
        )
    );

    // Reserved: refused before the cluster is read, marked or not.
    plane.kubectl(&["annotate", "namespace", "kube-public", MARK]);
    for (namespace, whose) in [
        ("kube-public", "Kubernetes's own"),
        ("default", "Kubernetes's own"),
        ("linkerd", "the Linkerd control plane's"),
        ("linkerd-cni", "Linkerd-CNI's"),
        ("linkerd-viz", "a Linkerd extension's"),
        ("openshift-monitoring", "OpenShift's own"),
    ] {
        let run = extension(plane, &["install", &format!("--namespace={namespace}")]);
        assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{run:?}");
        assert_eq!(
            run.stderr,
            format!(
                "error: --namespace (namespace) \"{namespace}\" is {whose}: install puts linkerd-multus only in a namespace of its own, which uninstall deletes with everything in it; choose another (the default is linkerd-multus)\n"
            )
        );
    }
    plane.kubectl(&[
        "annotate",
        "namespace",
        "kube-public",
        "multus.linkerd.io/namespace-owner-",
    ]);
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
        "app.kubernetes.io/created-by: linkerd-multus-controller",
    ));
    plane.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: someone-else\nrules: []\n",
    );
    // A namespace an older install labelled, without the mark: one of the extension's
    // objects in it, and one of its users' under the extension's label.
    let legacy = plane.unique_name("legacy");
    let label = "labels: {linkerd.io/extension: multus}";
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {legacy}\n  {label}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: linkerd-multus-webhook\n  namespace: {legacy}\n  {label}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: users-settings\n  namespace: {legacy}\n  {label}\n"
    ));
    // A reserved namespace labelled and marked by hand.
    plane.kubectl(&[
        "label",
        "namespace",
        "default",
        "linkerd.io/extension=multus",
    ]);
    plane.kubectl(&["annotate", "namespace", "default", MARK]);

    let run = extension(plane, &["uninstall"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kept = |namespace: &str, why: &str| {
        format!(
            "namespace {namespace} is not deleted: {why}; its linkerd-multus objects are listed one by one instead, and it keeps its label (kubectl label namespace {namespace} linkerd.io/extension-)\n"
        )
    };
    assert_eq!(
        run.stderr,
        [
            kept("default", "it is Kubernetes's own"),
            kept(
                &legacy,
                "linkerd-multus did not make it (it lacks the annotation multus.linkerd.io/namespace-owner=linkerd-multus)"
            ),
        ]
        .concat()
    );
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
        format!("ServiceAccount/{legacy}/linkerd-multus-webhook"),
        format!("RoleBinding/{cni}/linkerd-multus-nad-controller"),
        "RoleBinding/default/linkerd-multus-nad-controller-events".into(),
        format!("Role/{cni}/linkerd-multus-nad-controller"),
        "Role/default/linkerd-multus-nad-controller-events".into(),
    ];
    want.push(format!("Namespace//{namespace}"));
    assert_eq!(ids, want, "what uninstall prints");
    for never in [legacy.as_str(), "default"] {
        assert!(!ids.contains(&format!("Namespace//{never}")), "{never}");
    }

    plane.kubectl_ok(&["delete", "--wait=false", "-f", "-"], &run.stdout);
    removed_only(plane, &want, namespace, cni, &users);
    assert!(exists(plane, "configmap", "users-settings", Some(&legacy)));
    for ns in [legacy.as_str(), "default"] {
        assert!(!being_deleted(plane, ns), "namespace {ns} is being deleted");
    }
}

/// Whether namespace `ns` has a deletion timestamp.
fn being_deleted(plane: &ControlPlane, ns: &str) -> bool {
    let deleting = plane.kubectl(&[
        "get",
        "namespace",
        ns,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    !deleting.trim().is_empty()
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
    assert!(
        being_deleted(plane, namespace),
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
        assert!(!being_deleted(plane, ns), "namespace {ns} is being deleted");
    }
}
