//! The config-hash stamp through the real API server: the API server calls the
//! webhook on pod creations, and the pods it stores carry the hash of the
//! config of their namespace's NAD at their creation. A pod created before the
//! NAD's config changed keeps the old hash, which is how `linkerd multus check
//! --proxy` names the pods started under an older config.

use super::*;

/// The NAD's config after a change, and its hash.
const NEW_CONFIG: &str = r#"{"cniVersion": "1.0.0", "name": "linkerd-cni", "type": "linkerd-cni"}"#;
const NEW_HASH: &str = "844afbeb4d99fb0a";
/// A hash a render recorded for a config the cluster does not have.
const RENDERED: &str = "0123456789abcdef";

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const OWNED: &str = "multus.linkerd.io/owned";
const HASH: &str = "multus.linkerd.io/config-hash";

/// A MutatingWebhookConfiguration sending the pod creations and updates of
/// one namespace to a webhook; deleted when dropped.
pub(super) struct Registration {
    plane: &'static ControlPlane,
    name: String,
}

impl Registration {
    pub(super) fn new(plane: &'static ControlPlane, namespace: &str, addr: &str, ca: &str) -> Self {
        let name = plane.unique_name("stamp");
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        plane.apply(&format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: {name}\nwebhooks:\n- name: {name}.multus.linkerd.io\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n  reinvocationPolicy: IfNeeded\n  timeoutSeconds: 5\n  clientConfig:\n    url: https://{addr}/mutate\n    caBundle: {ca}\n  rules:\n  - operations: [CREATE, UPDATE]\n    apiGroups: ['']\n    apiVersions: [v1]\n    resources: [pods]\n  namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: {namespace}\n"
        ));
        Registration { plane, name }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.plane
            .kubectl(&["delete", "mutatingwebhookconfiguration", &self.name]);
    }
}

/// A pod named `name` in `namespace` with `annotations`.
pub(super) fn pod(namespace: &str, name: &str, annotations: Value) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}
    })
    .to_string()
}

/// The annotations of the pod the API server stores (or, with `dry_run`,
/// would store) for `manifest`.
pub(super) fn created(c: &Cluster, manifest: &str, dry_run: bool) -> Value {
    let pod: Value = serde_json::from_str(manifest).unwrap();
    let created = c
        .plane
        .create_pod(&pod, dry_run)
        .unwrap_or_else(|e| panic!("creating {manifest}: {e}"));
    created["metadata"]["annotations"].clone()
}

/// The annotations of pod `namespace/name` as stored.
fn stored(c: &Cluster, namespace: &str, name: &str) -> Value {
    let out = c
        .plane
        .kubectl(&["get", "pod", "-n", namespace, name, "-o", "json"]);
    serde_json::from_str::<Value>(&out).unwrap()["metadata"]["annotations"].clone()
}

/// Waits until a pod created now (dry run) would carry `hash`: the API server
/// has loaded the registration and the webhook knows the NAD's config.
fn wait_for_hash(c: &Cluster, namespace: &str, hash: &str) {
    wait_for_annotation(c, &pod(namespace, "probe", json!({})), HASH, hash);
}

/// Waits until `probe` created now (dry run) would carry annotation `key` with `value`.
pub(super) fn wait_for_annotation(c: &Cluster, probe: &str, key: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let annotations = created(c, probe, true);
        if annotations[key] == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "a pod never got {key}: {value}: {annotations}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stored_pods_carry_the_hash_of_the_nad_config_they_were_created_under() {
    let c = cluster();
    let namespace = c
        .plane
        .namespace("stamped", &[(MULTUS, "enabled"), (INJECT, "enabled")]);
    c.put_nad(&namespace, "linkerd-cni", &[]);
    let ca = Ca::new("config-hash CA");
    let webhook = Webhook::start(&c.webhook_account(), &ca.leaf(&["127.0.0.1"]), &[]);
    let _registration = Registration::new(c.plane, &namespace, &webhook.addr, &ca.pem);
    wait_for_hash(&c, &namespace, NAD_HASH);

    // Attached, and stamped with the hash of the NAD's config.
    let annotations = created(&c, &pod(&namespace, "first", json!({})), false);
    assert_eq!(
        annotations,
        json!({NETWORKS: "linkerd-cni", OWNED: "network=created", HASH: NAD_HASH})
    );
    // A rendered pod's hash of another config is replaced by the one it gets.
    let rendered = json!({NETWORKS: "linkerd-cni", HASH: RENDERED});
    let annotations = created(&c, &pod(&namespace, "rendered", rendered), false);
    assert_eq!(
        annotations,
        json!({NETWORKS: "linkerd-cni", HASH: NAD_HASH})
    );
    // A pod the rules do not attach gets no hash.
    let opted_out = json!({INJECT: "disabled"});
    let annotations = created(&c, &pod(&namespace, "opted-out", opted_out.clone()), false);
    assert_eq!(annotations, opted_out);

    // The NAD's config changes: pods created from now on carry the new hash.
    c.put_nad_config(&namespace, "linkerd-cni", &[], NEW_CONFIG);
    wait_for_hash(&c, &namespace, NEW_HASH);
    let annotations = created(&c, &pod(&namespace, "second", json!({})), false);
    assert_eq!(annotations[HASH], NEW_HASH);
    // The first pod keeps the old one, even through an UPDATE the webhook
    // answers: it runs under the config it was created with.
    let unchanged = "linkerd_multus_admission_requests_total{outcome=\"unchanged\"}";
    let before = webhook.metric(unchanged);
    c.plane.kubectl(&[
        "annotate",
        "pod",
        "-n",
        &namespace,
        "first",
        "example.com/touched=yes",
    ]);
    assert_eq!(
        webhook.metric(unchanged),
        before + 1.0,
        "the UPDATE's answer"
    );
    let first = stored(&c, &namespace, "first");
    assert_eq!(first["example.com/touched"], "yes");
    assert_eq!(first[HASH], NAD_HASH, "{first}");
}
