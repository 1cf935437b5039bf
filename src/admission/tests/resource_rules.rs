//! The network-resources rules in the webhook's answers.

use super::*;

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
    assert_eq!(create.changes[..], [Change::Attached]);
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
