//! The opt-in annotations written wrong, through the real API server as a user meets them:
//! `kubectl` prints the webhook's admission warnings (`Warning: linkerd-multus: ...` on stderr) for a
//! Namespace created or annotated with a `linkerd.io/multus` or restart opt-in value that is
//! neither enabled nor disabled or a misspelt key, and for a pod created with them, while
//! each is admitted as written. The Namespaces' webhook is registered as deploy/ ships it (its
//! rule, failure policy and matchConditions), scoped to this test's Namespaces by a label.

use super::config_hash::{Registration, pod};
use super::*;

/// The label that sends this test's Namespaces, and only them, to its webhook.
const SCOPE: &str = "tests.linkerd-multus.io/opt-ins";

/// The Namespaces' webhook of deploy/mutatingwebhookconfiguration.yaml, calling `addr` and
/// sent only the Namespaces labelled [`SCOPE`]=`scope`; deleted when dropped.
struct NamespacesRegistration {
    plane: &'static ControlPlane,
    name: String,
}

impl NamespacesRegistration {
    fn new(plane: &'static ControlPlane, scope: &str, addr: &str, ca: &str) -> Self {
        let shipped = std::fs::read_to_string(common::repo_path(
            "deploy/mutatingwebhookconfiguration.yaml",
        ))
        .unwrap();
        let configuration =
            crate::deploy::to_json(&common::parse_yaml_stream(&shipped).unwrap()[0]);
        let mut hook = configuration["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "namespaces.multus.linkerd.io")
            .expect("the Namespaces' webhook")
            .clone();
        let name = plane.unique_name("opt-ins");
        hook["name"] = json!(format!("{name}.multus.linkerd.io"));
        hook["clientConfig"] = json!({
            "url": format!("https://{addr}/mutate"),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
        });
        hook["objectSelector"] = json!({"matchLabels": {SCOPE: scope}});
        let registration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook],
        });
        plane.apply(&registration.to_string());
        NamespacesRegistration { plane, name }
    }
}

impl Drop for NamespacesRegistration {
    fn drop(&mut self) {
        self.plane
            .kubectl(&["delete", "mutatingwebhookconfiguration", &self.name]);
    }
}

/// A Namespace named `name`, labelled into `scope`, with `annotations`.
fn namespace(name: &str, scope: &str, annotations: Value) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {SCOPE: scope}, "annotations": annotations},
    })
    .to_string()
}

/// Runs kubectl as the admin with `stdin`: it succeeds, and its warnings (the lines of its
/// stderr after `Warning: `) are returned.
fn warned(plane: &ControlPlane, args: &[&str], stdin: &str) -> Vec<String> {
    let out = plane.kubectl_input(args, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kubectl {}: {stderr}", args.join(" "));
    stderr
        .lines()
        .map(|l| {
            l.strip_prefix("Warning: ")
                .unwrap_or_else(|| panic!("not a warning: {stderr}"))
                .to_string()
        })
        .collect()
}

const NAMESPACE_ENABLE: &str = "linkerd-multus: metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?";
const NAMESPACE_MUTLUS: &str = "linkerd-multus: metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?";
const NAMESPACE_RESTART: &str = "linkerd-multus: metadata.annotations.multus.linkerd.io/restart-on-config-change is \"yes\", neither enabled nor disabled: the namespace is treated as not opted in, so the NAD controller restarts none of its workloads when its NAD's config changes, but those whose pod templates say enabled; did you mean enabled?";

#[test]
fn namespaces_and_pods_written_wrong_are_warned_of_and_admitted_as_written() {
    let c = cluster();
    let ca = Ca::new("opt-ins CA");
    let webhook = Webhook::start(&c.webhook_account(), &ca.leaf(&["127.0.0.1"]), &[]);
    let scope = c.plane.unique_name("scope");
    let _namespaces = NamespacesRegistration::new(c.plane, &scope, &webhook.addr, &ca.pem);

    // The API server has loaded the registration once a dry run is warned of.
    let probe = namespace(
        &c.plane.unique_name("probe"),
        &scope,
        json!({"linkerd.io/mutlus": "enabled"}),
    );
    let create = ["create", "-f", "-"];
    let dry_run = ["create", "--dry-run=server", "-f", "-"];
    let deadline = Instant::now() + Duration::from_secs(60);
    while warned(c.plane, &dry_run, &probe).is_empty() {
        assert!(Instant::now() < deadline, "the registration never loaded");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Created with a value that is neither enabled nor disabled: warned, stored as written.
    let name = c.plane.unique_name("enable");
    let written = json!({"linkerd.io/multus": "enable", "linkerd.io/inject": "enabled"});
    let manifest = namespace(&name, &scope, written.clone());
    assert_eq!(warned(c.plane, &create, &manifest), [NAMESPACE_ENABLE]);
    let stored = c.plane.kubectl(&["get", "namespace", &name, "-o", "json"]);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["metadata"]["annotations"], written);

    // Annotated later (an UPDATE): a misspelt key and a restart opt-in of "yes", each named.
    let annotate = [
        "annotate",
        "namespace",
        &name,
        "--overwrite",
        "linkerd.io/multus=enabled",
        "linkerd.io/mutlus=enabled",
        "multus.linkerd.io/restart-on-config-change=yes",
    ];
    assert_eq!(
        warned(c.plane, &annotate, ""),
        [NAMESPACE_MUTLUS, NAMESPACE_RESTART]
    );
    // Written right: not a word.
    let fixed = [
        "annotate",
        "namespace",
        &name,
        "--overwrite",
        "linkerd.io/mutlus-",
        "multus.linkerd.io/restart-on-config-change=enabled",
    ];
    assert_eq!(warned(c.plane, &fixed, ""), Vec::<String>::new());

    // A pod created with them: warned with its other admission warnings, and admitted.
    let _pods = Registration::new(c.plane, &c.demo, &webhook.addr, &ca.pem);
    let written = json!({
        "linkerd.io/mutlus": "enabled",
        "multus.linkerd.io/evict-on-config-change": "true",
    });
    let manifest = pod(&c.demo, "misspelt", written);
    let deadline = Instant::now() + Duration::from_secs(60);
    let warnings = loop {
        let warnings = warned(c.plane, &dry_run, &manifest);
        if !warnings.is_empty() {
            break warnings;
        }
        assert!(
            Instant::now() < deadline,
            "the pods' registration never loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        warnings,
        [
            "linkerd-multus: metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?",
            "linkerd-multus: metadata.annotations.multus.linkerd.io/evict-on-config-change is \"true\", neither enabled nor disabled: the value is ignored, and the namespace's decides whether the NAD controller evicts the pod when its NAD's config changes; did you mean enabled?",
        ]
    );
    assert_eq!(warned(c.plane, &create, &manifest), warnings);
    let stored = c
        .plane
        .kubectl(&["get", "pod", "-n", &c.demo, "misspelt", "-o", "json"]);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        stored["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"], "linkerd-cni",
        "attached as its namespace says: {stored}"
    );
}
