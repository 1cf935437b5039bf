//! The admission rules' unit tests.

use std::collections::BTreeMap;

use base64::Engine;
use proptest::prelude::*;
use serde_json::json;

use super::response::PREFIX;
use super::*;

const CREATE: &str = include_str!("../../../shared/fixtures/admission/pod-create.json");
const DRY_RUN: &str = include_str!("../../../shared/fixtures/admission/pod-create-dryrun.json");

fn enabled_namespace() -> BTreeMap<String, String> {
    [
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "enabled"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn response(answer: &Answer) -> Value {
    let review: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(review["apiVersion"], API_VERSION);
    assert_eq!(review["kind"], KIND);
    review["response"].clone()
}

fn patch_of(response: &Value) -> Value {
    let b64 = response["patch"].as_str().expect("a patch");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

/// The missing-NAD check: what each policy answers for a pod the rules
/// attach, with and without the NAD in its namespace.
#[test]
fn a_missing_nad_is_denied_or_warned_of_as_the_policy_says() {
    let ns = enabled_namespace();
    let with_nad = crate::network_resources::nad_table(&[("demo", "linkerd-cni", &[])]);
    let without = crate::network_resources::nad_table(&[("demo", "other", &[])]);
    let deny = "namespace demo has no NetworkAttachmentDefinition linkerd-cni, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the webhook with --manage-nads so that it makes it";
    let making = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni yet: the NAD controller (--manage-nads) is making it; until it exists the pod's sandbox fails and kubelet retries it";
    let attach = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni: the pod cannot start until it exists (--missing-nad attach)";
    type Case<'a> = (
        &'a str,
        &'a dyn Nads,
        MissingNad,
        bool,
        OnError,
        Outcome,
        &'a [&'a str],
    );
    let cases: &[Case] = &[
        (
            "present, deny",
            &with_nad,
            MissingNad::Deny,
            false,
            OnError::Allow,
            Outcome::Patched,
            &[],
        ),
        (
            "present, attach",
            &with_nad,
            MissingNad::Attach,
            true,
            OnError::Allow,
            Outcome::Patched,
            &[],
        ),
        (
            "missing, deny",
            &without,
            MissingNad::Deny,
            false,
            OnError::Allow,
            Outcome::Denied,
            &[],
        ),
        (
            "missing, deny even with the controller",
            &without,
            MissingNad::Deny,
            true,
            OnError::Allow,
            Outcome::Denied,
            &[],
        ),
        (
            "missing, the controller makes it",
            &without,
            MissingNad::Attach,
            true,
            OnError::Allow,
            Outcome::Patched,
            &[making],
        ),
        (
            "missing, attach",
            &without,
            MissingNad::Attach,
            false,
            OnError::Allow,
            Outcome::Patched,
            &[attach],
        ),
        (
            "missing, ignore",
            &without,
            MissingNad::Ignore,
            false,
            OnError::Allow,
            Outcome::Patched,
            &[],
        ),
    ];
    for &(name, nads, policy, managed, on_error, outcome, warnings) in cases {
        let request = parse(CREATE.as_bytes()).unwrap();
        let check = NadCheck {
            nads,
            policy,
            managed,
        };
        let answer = answer(
            &request,
            &ns,
            &Settings::default(),
            None,
            Some(&check),
            on_error,
        );
        assert_eq!(answer.outcome, outcome, "{name}");
        let response = response(&answer);
        match outcome {
            Outcome::Denied => {
                assert_eq!(response["allowed"], false, "{name}");
                assert_eq!(
                    response["status"]["message"],
                    format!("linkerd-multus: {deny}"),
                    "{name}"
                );
            }
            _ => {
                let got: Vec<&str> = response["warnings"]
                    .as_array()
                    .map(|w| w.iter().map(|w| w.as_str().unwrap()).collect())
                    .unwrap_or_default();
                assert_eq!(got, warnings, "{name}");
            }
        }
    }
    // A pod the rules do not attach is never checked.
    let body = review("CREATE", "pods", json!({"metadata": {"name": "p"}}));
    let request = parse(body.as_bytes()).unwrap();
    let empty = BTreeMap::new();
    let check = NadCheck {
        nads: &without,
        policy: MissingNad::Deny,
        managed: false,
    };
    let answer = answer(
        &request,
        &empty,
        &Settings::default(),
        None,
        Some(&check),
        OnError::Allow,
    );
    assert_eq!(answer.outcome, Outcome::Unchanged);
}

#[test]
fn the_captured_request_gets_the_minimal_patch() {
    let ns = enabled_namespace();
    for fixture in [CREATE, DRY_RUN] {
        let request = parse(fixture.as_bytes()).unwrap();
        let answer = answer(
            &request,
            &ns,
            &Settings::default(),
            None,
            None,
            OnError::Allow,
        );
        assert_eq!(answer.outcome, Outcome::Patched);
        let response = response(&answer);
        assert_eq!(response["uid"], *request.uid);
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        assert_eq!(
            patch_of(&response),
            json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"}
            ])
        );
    }
}

#[test]
fn a_pod_left_alone_gets_no_patch() {
    let request = parse(CREATE.as_bytes()).unwrap();
    let empty = BTreeMap::new();
    let answer = answer(
        &request,
        &empty,
        &Settings::default(),
        None,
        None,
        OnError::Allow,
    );
    assert_eq!(answer.outcome, Outcome::Unchanged);
    let response = response(&answer);
    assert_eq!(response, json!({"uid": *request.uid, "allowed": true}));
}

#[test]
fn bodies_that_are_not_reviews_are_refused() {
    for (body, want) in [
        ("nope", "not a JSON object"),
        ("[]", "not a JSON object"),
        (
            r#"{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}"#,
            "admissionReviewVersions: [v1]",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
            "has no request",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}"#,
            "request does not parse",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}"#,
            "does not parse",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": {"metadata": "x"}}}"#,
            "request does not parse: invalid type: string",
        ),
    ] {
        let err = parse(body.as_bytes()).unwrap_err().to_string();
        assert!(err.contains(want), "{body}: {err}");
    }
    let mut bytes = CREATE.replacen("pod2", "pod\u{1}", 1).into_bytes();
    let at = bytes.iter().position(|b| *b == 1).unwrap();
    bytes[at] = 0xff;
    let err = parse(&bytes).unwrap_err().to_string();
    assert!(err.contains("not a JSON object: invalid unicode"), "{err}");
}

/// The body of a review of `object`.
fn review(operation: &str, resource: &str, object: Value) -> String {
    review_in("demo", operation, resource, object)
}

/// The body of a review of `object` in namespace `namespace`.
fn review_in(namespace: &str, operation: &str, resource: &str, object: Value) -> String {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "request": {
            "uid": "u1",
            "resource": {"group": "", "version": "v1", "resource": resource},
            "namespace": namespace,
            "operation": operation,
            "object": object,
        }
    })
    .to_string()
}

#[test]
fn what_the_webhook_cannot_act_on() {
    let ns = enabled_namespace();
    let bad_networks =
        json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a,,b"}}});
    let cases: Vec<(&str, String, &dyn Lookup, OnError, Outcome, &str)> = vec![
        (
            "not pods",
            review("CREATE", "services", json!({})),
            &ns,
            OnError::Deny,
            Outcome::Warned,
            "/services is not pods",
        ),
        (
            "delete",
            review("DELETE", "pods", json!({})),
            &ns,
            OnError::Deny,
            Outcome::Warned,
            "operation \"DELETE\"",
        ),
        (
            "bad annotation, allow",
            review("CREATE", "pods", bad_networks.clone()),
            &ns,
            OnError::Allow,
            Outcome::Warned,
            "annotation k8s.v1.cni.cncf.io/networks: item 2",
        ),
        (
            "bad annotation, deny",
            review("CREATE", "pods", bad_networks),
            &ns,
            OnError::Deny,
            Outcome::Denied,
            "annotation k8s.v1.cni.cncf.io/networks: item 2",
        ),
        (
            "annotations not a map",
            review("UPDATE", "pods", json!({"metadata": {"annotations": "x"}})),
            &ns,
            OnError::Allow,
            Outcome::Warned,
            "metadata.annotations is not a mapping",
        ),
    ];
    for (name, body, ns, on_error, outcome, message) in cases {
        let request = parse(body.as_bytes()).unwrap();
        let answer = answer(&request, ns, &Settings::default(), None, None, on_error);
        assert_eq!(answer.outcome, outcome, "{name}");
        let response = response(&answer);
        assert_eq!(response["uid"], "u1", "{name}");
        let text = if outcome == Outcome::Denied {
            assert_eq!(response["allowed"], false, "{name}");
            assert_eq!(response["status"]["code"], 403, "{name}");
            response["status"]["message"].as_str().unwrap().to_string()
        } else {
            assert_eq!(response["allowed"], true, "{name}");
            response["warnings"][0].as_str().unwrap().to_string()
        };
        assert!(text.starts_with(PREFIX), "{name}: {text}");
        assert!(text.contains(message), "{name}: {text}");
    }
}

/// The webhook reads a namespace only for the reviews the rules act on, and
/// answers a pod it cannot decide on as `--on-error` says.
#[test]
fn reviews_that_need_the_namespace_and_the_answer_without_it() {
    for (name, body, acts) in [
        ("pod create", review("CREATE", "pods", json!({})), true),
        ("pod update", review("UPDATE", "pods", json!({})), true),
        ("not pods", review("CREATE", "services", json!({})), false),
        ("delete", review("DELETE", "pods", json!({})), false),
        (
            "no object",
            json!({"apiVersion": API_VERSION, "kind": KIND, "request": {"uid": "u1", "resource": {"resource": "pods"}, "operation": "CREATE"}}).to_string(),
            false,
        ),
    ] {
        assert_eq!(acts_on(&parse(body.as_bytes()).unwrap()), acts, "{name}");
    }
    let body = review("CREATE", "pods", json!({}));
    let request = parse(body.as_bytes()).unwrap();
    let why = "namespace demo could not be read: timed out".to_string();
    let allowed = unavailable(&request, OnError::Allow, why.clone());
    assert_eq!(allowed.outcome, Outcome::Warned);
    let allowed = response(&allowed);
    assert_eq!(allowed["allowed"], true);
    assert!(allowed.get("patch").is_none());
    assert_eq!(allowed["warnings"], json!([format!("{PREFIX}{why}")]));
    let denied = unavailable(&request, OnError::Deny, why.clone());
    assert_eq!(denied.outcome, Outcome::Denied);
    let denied = response(&denied);
    assert_eq!(denied["allowed"], false);
    assert_eq!(denied["status"]["message"], format!("{PREFIX}{why}"));
}

#[test]
fn updates_detach_what_the_webhook_added() {
    let pod = json!({"metadata": {"annotations": {
        "multus.linkerd.io/owned": "network=created",
        "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
        "linkerd.io/multus": "disabled"
    }}});
    let ns = enabled_namespace();
    let answer = answer(
        &parse(review("UPDATE", "pods", pod).as_bytes()).unwrap(),
        &ns,
        &Settings::default(),
        None,
        None,
        OnError::Allow,
    );
    assert_eq!(answer.changes, [Change::Detached]);
    assert_eq!(
        patch_of(&response(&answer)),
        json!([
            {"op": "remove", "path": "/metadata/annotations/multus.linkerd.io~1owned"},
            {"op": "remove", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"}
        ])
    );
}

fn sriov_nads() -> network_resources::NadTable {
    network_resources::nad_table(&[
        (
            "demo",
            "sriov",
            &[
                ("k8s.v1.cni.cncf.io/resourceName", "intel.com/sriov"),
                ("k8s.v1.cni.cncf.io/nodeSelector", "sriov=true"),
            ],
        ),
        ("demo", "linkerd-cni", &[]),
        (
            "demo",
            "elsewhere",
            &[("k8s.v1.cni.cncf.io/nodeSelector", "sriov=false")],
        ),
    ])
}

fn selecting(networks: &str) -> Value {
    json!({
        "metadata": {"name": "web", "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
        "spec": {"containers": [{"name": "app", "image": "app"}]}
    })
}

#[test]
fn network_resources_on_create_only_after_the_linkerd_rules() {
    let ns = enabled_namespace();
    let nads = sriov_nads();
    let settings = network_resources::settings::Settings::default();
    let nr = NetworkResources {
        settings: &settings,
        nads: &nads,
    };
    let create = answer(
        &parse(review("CREATE", "pods", selecting("sriov, sriov")).as_bytes()).unwrap(),
        &ns,
        &Settings::default(),
        Some(&nr),
        None,
        OnError::Allow,
    );
    assert_eq!(create.outcome, Outcome::Patched, "{:?}", create.warnings);
    assert_eq!(create.changes, [Change::Attached]);
    assert_eq!(
        patch_of(&response(&create)),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov, sriov, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": r#"{"requests":{"intel.com/sriov":{"set":2}},"limits":{"intel.com/sriov":{"set":2}},"nodeSelector":{"sriov":"true"}}"#},
            {"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"intel.com/sriov": "2"}, "limits": {"intel.com/sriov": "2"}}},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"sriov": "true"}}
        ])
    );
    let update = answer(
        &parse(review("UPDATE", "pods", selecting("sriov, sriov")).as_bytes()).unwrap(),
        &ns,
        &Settings::default(),
        Some(&nr),
        None,
        OnError::Allow,
    );
    let ops = patch_of(&response(&update));
    assert_eq!(ops.as_array().unwrap().len(), 2, "{ops}");
    assert!(
        !ops.to_string().contains("/spec"),
        "UPDATE gets the Linkerd-CNI rules only: {ops}"
    );
}

#[test]
fn what_the_network_resources_rules_deny_or_refuse() {
    let ns = BTreeMap::new();
    let nads = sriov_nads();
    let settings = network_resources::settings::Settings::default();
    let known = NetworkResources {
        settings: &settings,
        nads: &nads,
    };
    let cases = [
        (
            "missing NADs deny whatever --on-error says",
            selecting("sriov, gone, other/gone@net2"),
            &known,
            Outcome::Denied,
            "pod demo/web: selects NetworkAttachmentDefinitions demo/gone and other/gone, which do not exist",
        ),
        (
            "node selectors in conflict deny",
            selecting("sriov, elsewhere"),
            &known,
            Outcome::Denied,
            "pod demo/web: spec.nodeSelector sriov: NetworkAttachmentDefinition demo/sriov asks for \"true\" but NetworkAttachmentDefinition demo/elsewhere for \"false\"",
        ),
        (
            "other rule errors follow --on-error",
            json!({"metadata": {"annotations": {"v1.multus-cni.io/default-network": "a, b"}}}),
            &known,
            Outcome::Warned,
            "annotation v1.multus-cni.io/default-network: selects 2 networks; it takes exactly one",
        ),
    ];
    for (name, pod, nr, outcome, message) in cases {
        let answer = answer(
            &parse(review("CREATE", "pods", pod).as_bytes()).unwrap(),
            &ns,
            &Settings::default(),
            Some(nr),
            None,
            OnError::Allow,
        );
        assert_eq!(answer.outcome, outcome, "{name}");
        let response = response(&answer);
        assert!(response.get("patch").is_none(), "{name}");
        let text = match outcome {
            Outcome::Denied => response["status"]["message"].clone(),
            _ => response["warnings"][0].clone(),
        };
        assert_eq!(text, format!("{PREFIX}{message}"), "{name}");
    }
}

#[test]
fn the_object_is_read_as_far_as_the_rules_go() {
    let request = parse(CREATE.as_bytes()).unwrap();
    let full: Value = serde_json::from_str(CREATE).unwrap();
    let object = request.object.as_ref().unwrap();
    let metadata = object.metadata.as_ref().unwrap();
    let annotations = metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations.to_value().unwrap(),
        full["request"]["object"]["metadata"]["annotations"]
    );
    let applied = "kubectl.kubernetes.io/last-applied-configuration";
    assert_eq!(
        annotations.lookup(applied),
        full["request"]["object"]["metadata"]["annotations"][applied].as_str()
    );
    assert_eq!(
        metadata.labels.as_ref().unwrap().lookup("app"),
        Some("pod2")
    );
    let view = object.to_value().unwrap();
    assert_eq!(view["spec"], full["request"]["object"]["spec"]);
    assert_eq!(view["metadata"]["name"], "pod2");
    assert!(view.get("status").is_none());
    assert!(view["metadata"].get("managedFields").is_none());
}

#[test]
fn strings_with_escapes_are_read_too() {
    let body = r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u\u0031", "object": {"metadata": {"annotations": {"a\"b": "c\nd", "n": 5, "m": {}, "z": null}}}}}"#;
    let request = parse(body.as_bytes()).unwrap();
    assert_eq!(request.uid, "u1");
    let metadata = request.object.as_ref().unwrap().metadata.as_ref().unwrap();
    let annotations = metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations.lookup("a\"b"), Some("c\nd"));
    for (name, kind) in [("n", "a scalar"), ("m", "a mapping"), ("z", "null")] {
        assert_eq!(annotations.lookup(name), None, "{name}");
        assert_eq!(annotations.get(name).unwrap().kind_name(), kind, "{name}");
    }
}

#[test]
fn labels_and_annotations_that_are_not_objects() {
    for (value, want) in [
        (json!("x"), Strings::Other(json!("x"))),
        (json!([1]), Strings::Other(json!([1]))),
        (json!(7), Strings::Other(json!(7))),
    ] {
        let body = review("UPDATE", "pods", json!({"metadata": {"labels": value}}));
        let request = parse(body.as_bytes()).unwrap();
        let metadata = request.object.unwrap().metadata.unwrap();
        assert_eq!(metadata.labels, Some(want));
    }
}

/// The patch the tree path gives: the pod as a tree, [`attach::workload`],
/// and the diff of the two trees; `None` when the rules cannot act on it.
fn tree_patch(object: &Value, pod_namespace: &str, namespace: &dyn Lookup) -> Option<Value> {
    let mut pod = Node::from_json(object);
    let settings = Settings::default();
    match attach::workload(&mut pod, &POD, &settings, pod_namespace, namespace, || true) {
        Ok(WorkloadOutcome::Decided { applied: Ok(_), .. }) => {}
        _ => return None,
    }
    Some(serde_json::to_value(json_patch::diff(object, &pod.to_json())).unwrap())
}

/// The webhook's patch of `metadata` (`[]` for none); `None` when it
/// could not act on the pod.
fn webhook_patch(
    metadata: &Value,
    pod_namespace: &str,
    namespace: &BTreeMap<String, String>,
) -> Option<Value> {
    let body = review_in(
        pod_namespace,
        "CREATE",
        "pods",
        json!({"metadata": metadata}),
    );
    let request = parse(body.as_bytes()).unwrap();
    let answer = answer(
        &request,
        namespace,
        &Settings::default(),
        None,
        None,
        OnError::Allow,
    );
    match answer.outcome {
        Outcome::Patched => Some(patch_of(&response(&answer))),
        Outcome::Unchanged => Some(json!([])),
        _ => None,
    }
}

fn pick(options: &'static [Option<&'static str>]) -> impl Strategy<Value = Option<&'static str>> {
    proptest::sample::select(options)
}

proptest! {
    /// Over generated pods and namespaces, the patch written from the
    /// annotation edits is the diff of the trees, operation for operation.
    #[test]
    fn annotation_patches_are_the_tree_diffs_for_any_pod(
        pod_namespace in proptest::sample::select(&["demo", "linkerd"][..]),
        enabled in proptest::bool::ANY,
        range in pick(&[None, Some("1000680000/10000"), Some("x")]),
        name in proptest::bool::weighted(0.8),
        annotations in proptest::bool::weighted(0.8),
        networks in pick(&[None, Some("a"), Some("linkerd-cni"), Some("x, linkerd-cni"), Some("linkerd-cni@eth9"), Some(r#"[{"name": "linkerd-cni"}]"#), Some("demo/linkerd-cni"), Some("a,,b")]),
        owned in pick(&[None, Some("network=created"), Some("network=appended"), Some("network=created,proxy-uid=1000680002"), Some("proxy-uid=5"), Some("bogus")]),
        uid in pick(&[None, Some("5"), Some("1000680002")]),
        multus in pick(&[None, Some("enabled"), Some("disabled")]),
        other in pick(&[None, Some("b")]),
        control_plane in pick(&[None, Some("destination")]),
    ) {
        let mut namespace = if enabled { enabled_namespace() } else { BTreeMap::new() };
        if let Some(range) = range {
            namespace.insert("openshift.io/sa.scc.uid-range".into(), range.into());
        }
        let mut metadata = serde_json::Map::new();
        // A pod always has a name or a generateName, so its metadata
        // never empties (a template's may, and the tree path removes it).
        if name {
            metadata.insert("name".into(), json!("p"));
        } else {
            metadata.insert("generateName".into(), json!("p-"));
        }
        if annotations {
            let members: serde_json::Map<String, Value> = [
                ("a/b~c", other),
                ("k8s.v1.cni.cncf.io/networks", networks),
                ("multus.linkerd.io/owned", owned),
                ("config.linkerd.io/proxy-uid", uid),
                ("linkerd.io/multus", multus),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), json!(v?))))
            .collect();
            metadata.insert("annotations".into(), Value::Object(members));
        }
        if let Some(component) = control_plane {
            metadata.insert("labels".into(), json!({"linkerd.io/control-plane-component": component}));
        }
        let metadata = Value::Object(metadata);
        let object = json!({"metadata": metadata});
        prop_assert_eq!(
            webhook_patch(&metadata, pod_namespace, &namespace),
            tree_patch(&object, pod_namespace, &namespace)
        );
    }
}

#[test]
fn annotation_patches_are_the_tree_diffs() {
    let on = enabled_namespace();
    let mut range = enabled_namespace();
    range.insert(
        "openshift.io/sa.scc.uid-range".into(),
        "1000680000/10000".into(),
    );
    let off = BTreeMap::new();
    let owned = "multus.linkerd.io/owned";
    let networks = "k8s.v1.cni.cncf.io/networks";
    let uid = "config.linkerd.io/proxy-uid";
    let cases: Vec<(&str, Value, &BTreeMap<String, String>)> = vec![
        ("no annotations", json!({"name": "p"}), &on),
        ("no annotations, a UID range", json!({"name": "p"}), &range),
        (
            "empty annotations",
            json!({"name": "p", "annotations": {}}),
            &range,
        ),
        (
            "other annotations",
            json!({"name": "p", "annotations": {"a": "b"}}),
            &range,
        ),
        (
            "the user's networks",
            json!({"annotations": {networks: "x, y@eth1", "a/b~c": "d"}}),
            &on,
        ),
        (
            "a user's proxy UID",
            json!({"annotations": {uid: "7"}}),
            &range,
        ),
        (
            "detach the last annotations",
            json!({"name": "p", "annotations": {owned: "network=created", networks: "linkerd-cni"}}),
            &off,
        ),
        (
            "detach among others",
            json!({"annotations": {"a": "b", owned: "network=appended,proxy-uid=1000682102", networks: "x, linkerd-cni", uid: "1000682102"}}),
            &off,
        ),
        (
            "a new proxy UID over the owned one",
            json!({"annotations": {networks: "linkerd-cni", owned: "network=created,proxy-uid=5", uid: "5"}}),
            &range,
        ),
        (
            "nothing to do",
            json!({"annotations": {networks: "linkerd-cni"}}),
            &on,
        ),
    ];
    for (name, metadata, namespace) in cases {
        let object = json!({"metadata": metadata});
        let want = tree_patch(&object, "demo", namespace).expect(name);
        assert_eq!(
            webhook_patch(&metadata, "demo", namespace),
            Some(want),
            "{name}"
        );
    }
}

#[test]
fn missing_or_null_maps_are_added_whole() {
    let ns = enabled_namespace();
    let added = json!({
        "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
        "multus.linkerd.io/owned": "network=created"
    });
    for (object, path, value) in [
        (
            json!({"spec": {}}),
            "/metadata",
            json!({"annotations": added}),
        ),
        (
            json!({"metadata": null}),
            "/metadata",
            json!({"annotations": added}),
        ),
        (
            json!({"metadata": {"name": "p", "annotations": null}}),
            "/metadata/annotations",
            added.clone(),
        ),
    ] {
        let body = review("CREATE", "pods", object.clone());
        let request = parse(body.as_bytes()).unwrap();
        let answer = answer(
            &request,
            &ns,
            &Settings::default(),
            None,
            None,
            OnError::Deny,
        );
        let patch = patch_of(&response(&answer));
        assert_eq!(patch, json!([{"op": "add", "path": path, "value": value}]));
        let mut pod = object;
        ::json_patch::patch(
            &mut pod,
            &serde_json::from_value::<::json_patch::Patch>(patch).unwrap(),
        )
        .unwrap();
        assert_eq!(pod["metadata"]["annotations"], added);
    }
}
