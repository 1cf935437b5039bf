//! The package checks' unit tests: NADs, networks annotations, isolation.

use super::*;
use crate::k8s::resource::identify;
use crate::krm::function_config::SettingsKind;
use crate::yaml::parse_stream;

fn results(input: &str, settings: &Settings) -> Vec<String> {
    let items = parse_stream(input).unwrap();
    validate(&items, &identify(&items).unwrap(), settings)
        .into_results()
        .iter()
        .map(|r| {
            format!(
                "{} {}: {}: {}",
                match r.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                    Severity::Info => "info",
                },
                r.resource
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                r.field.as_deref().unwrap_or_default(),
                r.message
            )
        })
        .collect()
}

const NAD: &str = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: NAME\n  namespace: demo\n";

#[test]
fn nads() {
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "net",
            "spec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}'\n",
            None,
        ),
        (
            "Net_1",
            "spec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}'\n",
            Some(
                "error NetworkAttachmentDefinition demo/Net_1: metadata.name: NetworkAttachmentDefinition name \"Net_1\" is not a DNS-1123 label",
            ),
        ),
        (
            "net",
            "spec:\n  config: '{\"cniVersion\": \"0.3.1\"}'\n",
            Some(
                "error NetworkAttachmentDefinition demo/net: spec.config: CNI configuration has no \"type\"",
            ),
        ),
        (
            "net",
            "spec:\n  config:\n    cniVersion: 0.3.1\n",
            Some(
                "error NetworkAttachmentDefinition demo/net: spec.config: spec.config is a mapping, not a string",
            ),
        ),
        (
            "net",
            "spec: []\n",
            Some(
                "error NetworkAttachmentDefinition demo/net: spec: spec is a sequence, not a mapping",
            ),
        ),
        (
            "net",
            "spec: {}\n",
            Some(
                "info NetworkAttachmentDefinition demo/net: spec.config: no spec.config: Multus reads the CNI configuration named \"net\"",
            ),
        ),
        (
            "net",
            "spec:\n  config: ''\n",
            Some("info NetworkAttachmentDefinition demo/net: spec.config: no spec.config"),
        ),
    ];
    for (name, spec, want) in cases {
        let input = format!("{}{spec}", NAD.replace("NAME", name));
        let got = results(&input, &Settings::default());
        assert!(
            got[0].starts_with("info : : linkerd-multus validate: 1 NetworkAttachmentDefinition and 0 workloads checked;"),
            "{got:?}"
        );
        match want {
            None => assert_eq!(got.len(), 1, "{input}: {got:?}"),
            Some(want) => {
                assert_eq!(got.len(), 2, "{input}: {got:?}");
                assert!(
                    got[1].starts_with(want),
                    "{input}:\n  got  {}\n  want {want}",
                    got[1]
                );
            }
        }
    }
}

fn deployment(namespace: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n{namespace}spec:\n  template:\n    metadata:\n      annotations:\n{annotations}    spec:\n      containers: []\n"
    )
}

#[test]
fn networks_annotations() {
    let field = "spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks";
    let default_field = "spec.template.metadata.annotations.v1.multus-cni.io/default-network";
    let cases: &[(&str, Option<String>)] = &[
        (
            "        k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
            None,
        ),
        (
            "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\", \"namespace\": \"x\"}]'\n",
            None,
        ),
        ("        k8s.v1.cni.cncf.io/networks: ''\n", None),
        (
            "        v1.multus-cni.io/default-network: kube-system/ovn\n",
            None,
        ),
        (
            "        k8s.v1.cni.cncf.io/networks: a,,b\n",
            Some(format!(
                "error Deployment demo/web: {field}: Multus rejects the networks annotation: item 2 \"\": empty item"
            )),
        ),
        (
            "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\"}'\n",
            Some(format!(
                "error Deployment demo/web: {field}: Multus rejects the networks annotation: invalid JSON"
            )),
        ),
        (
            "        k8s.v1.cni.cncf.io/networks: {name: a}\n",
            Some(format!(
                "error Deployment demo/web: {field}: the networks annotation is a mapping, not a string"
            )),
        ),
        (
            "        v1.multus-cni.io/default-network: a, b\n",
            Some(format!(
                "error Deployment demo/web: {default_field}: the default-network annotation selects 2 networks; Multus takes exactly one"
            )),
        ),
        (
            "        v1.multus-cni.io/default-network: ''\n",
            Some(format!(
                "error Deployment demo/web: {default_field}: the default-network annotation selects 0 networks"
            )),
        ),
    ];
    for (annotations, want) in cases {
        let input = deployment("  namespace: demo\n", annotations);
        let got = results(&input, &Settings::default());
        match want {
            None => assert_eq!(got.len(), 1, "{input}: {got:?}"),
            Some(want) => {
                assert_eq!(got.len(), 2, "{input}: {got:?}");
                assert!(
                    got[1].starts_with(want.as_str()),
                    "{input}:\n  got  {}\n  want {want}",
                    got[1]
                );
            }
        }
    }
}

#[test]
fn multus_values_other_than_enabled_and_disabled() {
    let namespace = |annotations: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n  annotations: {{{annotations}}}\n"
        )
    };
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: demo\n  annotations:\n    linkerd.io/multus: \"yes\"\nspec: {}\n";
    let cases: &[(String, Option<&str>)] = &[
        (namespace("linkerd.io/multus: enabled"), None),
        (namespace("linkerd.io/multus: disabled"), None),
        (namespace("linkerd.io/inject: enabled"), None),
        (
            namespace("linkerd.io/multus: enable"),
            Some(
                "error Namespace demo: metadata.annotations.linkerd.io/multus: \"enable\" is neither enabled nor disabled: linkerd-multus and its webhook treat the namespace as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?",
            ),
        ),
        (
            namespace("linkerd.io/multus: ''"),
            Some(
                "error Namespace demo: metadata.annotations.linkerd.io/multus: \"\" is neither enabled nor disabled: linkerd-multus and its webhook treat the namespace as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; set it to enabled or disabled",
            ),
        ),
        (
            deployment(
                "  namespace: demo\n",
                "        linkerd.io/multus: enabled\n",
            ),
            None,
        ),
        // Empty on a pod template: unset, the namespace decides.
        (
            deployment("  namespace: demo\n", "        linkerd.io/multus: ''\n"),
            None,
        ),
        (
            deployment(
                "  namespace: demo\n",
                "        linkerd.io/multus: \"true\"\n",
            ),
            Some(
                "error Deployment demo/web: spec.template.metadata.annotations.linkerd.io/multus: \"true\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod template as not enabled, so its pods are not attached to Linkerd-CNI, whatever their namespace says; did you mean enabled?",
            ),
        ),
        (
            pod.to_string(),
            Some(
                "error Pod demo/p: metadata.annotations.linkerd.io/multus: \"yes\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod as not enabled, so it is not attached to Linkerd-CNI, whatever its namespace says; did you mean enabled?",
            ),
        ),
    ];
    for (input, want) in cases {
        let got = results(input, &Settings::default());
        let want: Vec<&str> = want.iter().copied().collect();
        assert_eq!(got[1..], want, "{input}");
    }
}

#[test]
fn namespace_isolation() {
    let isolated = Settings {
        namespace_isolation: true,
        ..Settings::default()
    };
    let comma = "        k8s.v1.cni.cncf.io/networks: a, demo/b, default/c, openshift-multus/d, other/e@net1, other/e@net2\n";
    let json = "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"f\", \"namespace\": \"third\"}, {\"name\": \"g\", \"namespace\": \"demo\"}]'\n";
    let got = results(&deployment("  namespace: demo\n", comma), &isolated);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[1].ends_with("selects other/e, but with namespace isolation a pod in namespace demo may select only NADs in demo or in a global namespace (default, openshift-multus, openshift-sriov-network-operator)"),
        "{}",
        got[1]
    );
    let got = results(&deployment("  namespace: demo\n", json), &isolated);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[1].contains("selects third/f, but"), "{}", got[1]);
    // Off: nothing.
    assert_eq!(
        results(
            &deployment("  namespace: demo\n", comma),
            &Settings::default()
        )
        .len(),
        1
    );
    // Global namespaces replace the default list.
    let custom = Settings {
        global_namespaces: vec!["other".into()],
        ..isolated.clone()
    };
    let got = results(&deployment("  namespace: demo\n", comma), &custom);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[1].contains("selects default/c"), "{}", got[1]);
    assert!(got[2].contains("selects openshift-multus/d"), "{}", got[2]);
    // No namespace: a warning, unless defaultNamespace says where it goes.
    let got = results(&deployment("", comma), &isolated);
    assert!(
        got[1].starts_with("warning Deployment web:") && got[1].contains("no metadata.namespace"),
        "{got:?}"
    );
    let in_other = Settings {
        default_namespace: Some("other".into()),
        ..isolated
    };
    let got = results(&deployment("", comma), &in_other);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[1].contains("selects demo/b, but with namespace isolation a pod in namespace other"),
        "{}",
        got[1]
    );
}

#[test]
fn pods_custom_kinds_and_local_config() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: demo\n  annotations:\n    k8s.v1.cni.cncf.io/networks: 'a@b@c'\nspec: {}\n";
    let got = results(pod, &Settings::default());
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[1].starts_with("error Pod demo/p: metadata.annotations.k8s.v1.cni.cncf.io/networks:"),
        "{}",
        got[1]
    );
    let local = pod.replace(
        "  annotations:\n",
        "  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
    );
    assert_eq!(results(&local, &Settings::default()).len(), 1);
    let rollout = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata:\n  name: r\n  namespace: demo\nspec:\n  template:\n    metadata:\n      annotations:\n        k8s.v1.cni.cncf.io/networks: 'A'\n";
    assert_eq!(results(rollout, &Settings::default()).len(), 1);
    let mut settings = Settings::default();
    settings
        .override_with([(
            "workloadKinds",
            "[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]",
        )])
        .unwrap();
    let got = results(rollout, &settings);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[1].contains("network name \"A\" is not a DNS-1123 label"),
        "{}",
        got[1]
    );
}
