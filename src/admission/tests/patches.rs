//! The patches: the annotation edits against the diff of the trees.

use super::*;

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
