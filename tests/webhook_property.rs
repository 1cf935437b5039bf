//! The webhook and the KRM function decide a pod the same way: over generated
//! pods and namespaces, the pod the webhook's JSONPatch produces (applied with
//! an independent JSONPatch implementation) equals the pod the KRM function
//! writes, and a pod one of them refuses, the other refuses too.

use linkerd_multus::admission::{self, NamespaceState, OnError, Outcome};
use linkerd_multus::krm;
use linkerd_multus::settings::Settings;
use linkerd_multus::yaml;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Map, Value, json};

const CONFIG_MAP: &str = include_str!("../../shared/fixtures/linkerd-cni/version-2.19.yaml");

fn pick(options: &'static [Option<&'static str>]) -> impl Strategy<Value = Option<&'static str>> {
    proptest::sample::select(options)
}

const MULTUS: &[Option<&str>] = &[None, Some("enabled"), Some("disabled"), Some("")];
const INJECT: &[Option<&str>] = &[None, Some("enabled"), Some("ingress"), Some("disabled")];
const RANGE: &[Option<&str>] = &[None, Some("1000680000/10000"), Some("1000/100"), Some("x")];
const NETWORKS: &[Option<&str>] = &[
    None,
    Some("a"),
    Some("a, other/b@net2"),
    Some("linkerd-cni"),
    Some("demo/linkerd-cni"),
    Some("linkerd-cni@eth9"),
    Some(r#"[{"name": "a", "ips": ["10.0.0.1/24"]}]"#),
    Some(r#"[{"name": "linkerd-cni", "interface": "x"}]"#),
    Some("a,,b"),
];
const PROXY_UID: &[Option<&str>] = &[None, Some("7"), Some("1000682102")];
const OWNED: &[Option<&str>] = &[
    None,
    Some("network=created"),
    Some("network=appended,proxy-uid=1000682102"),
    Some("bogus"),
];
const CONTROL_PLANE: &[Option<&str>] = &[None, Some("destination"), Some("")];

#[derive(Debug, Clone)]
struct Case {
    namespace: &'static str,
    /// The namespace's annotations; `None` when the namespace is unknown.
    namespace_annotations: Option<Map<String, Value>>,
    pod: Value,
}

fn annotations(pairs: &[(&str, Option<&str>)]) -> Map<String, Value> {
    pairs
        .iter()
        .filter_map(|(k, v)| Some((k.to_string(), json!((*v)?))))
        .collect()
}

fn case() -> impl Strategy<Value = Case> {
    let namespace = (
        proptest::bool::weighted(0.85),
        pick(MULTUS),
        pick(INJECT),
        pick(RANGE),
    )
        .prop_map(|(known, multus, inject, range)| {
            known.then(|| {
                annotations(&[
                    ("linkerd.io/multus", multus),
                    ("linkerd.io/inject", inject),
                    ("openshift.io/sa.scc.uid-range", range),
                ])
            })
        });
    let pod = (
        pick(MULTUS),
        pick(INJECT),
        pick(NETWORKS),
        pick(PROXY_UID),
        pick(OWNED),
        pick(CONTROL_PLANE),
        proptest::bool::ANY,
    );
    (proptest::sample::select(&["demo", "linkerd"][..]), namespace, pod).prop_map(
        |(ns, namespace_annotations, (multus, inject, networks, uid, owned, cp, labels))| {
            let mut metadata = json!({"name": "p", "namespace": ns});
            let annotations = annotations(&[
                ("linkerd.io/multus", multus),
                ("linkerd.io/inject", inject),
                ("k8s.v1.cni.cncf.io/networks", networks),
                ("config.linkerd.io/proxy-uid", uid),
                ("multus.linkerd.io/owned", owned),
            ]);
            if !annotations.is_empty() {
                metadata["annotations"] = Value::Object(annotations);
            }
            if let Some(cp) = cp {
                metadata["labels"] = json!({"linkerd.io/control-plane-component": cp});
            } else if labels {
                metadata["labels"] = json!({"app": "web"});
            }
            Case {
                namespace: ns,
                namespace_annotations,
                pod: json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": metadata,
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }),
            }
        },
    )
}

/// The webhook's answer: the patched pod, or `None` when it refused to act.
fn by_webhook(case: &Case) -> Option<Value> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": case.namespace,
            "operation": "CREATE",
            "object": case.pod,
        }
    });
    let request = admission::parse(review.to_string().as_bytes()).unwrap();
    let known = case.namespace_annotations.as_ref().map(|a| {
        a.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    });
    let state = match &known {
        Some(a) => NamespaceState::Known(a),
        None => NamespaceState::Unknown,
    };
    let answer = admission::answer(&request, state, &Settings::default(), None, OnError::Allow);
    let response: Value = serde_json::from_slice(&answer.body).unwrap();
    let response = &response["response"];
    assert_eq!(response["allowed"], true);
    match answer.outcome {
        Outcome::Warned => {
            assert!(response.get("patch").is_none());
            None
        }
        Outcome::Unchanged => Some(case.pod.clone()),
        Outcome::Patched => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(response["patch"].as_str().unwrap())
                .unwrap();
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
            let mut pod = case.pod.clone();
            json_patch::patch(&mut pod, &patch).unwrap();
            Some(pod)
        }
        other => panic!("unexpected outcome {other}"),
    }
}

/// The KRM function's output pod, or `None` when it reported an error on the pod.
fn by_function(case: &Case) -> Option<Value> {
    let config_map = yaml::parse_document(CONFIG_MAP).unwrap().to_json();
    let mut items = vec![config_map];
    if let Some(annotations) = &case.namespace_annotations {
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": case.namespace, "annotations": annotations}
        }));
    }
    items.push(case.pod.clone());
    let input =
        json!({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items});
    let outcome = krm::run(&input.to_string());
    let list = yaml::parse_document(&outcome.stdout).unwrap().to_json();
    let pod_error = list["results"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["severity"] == "error" && r["resourceRef"]["kind"] == "Pod");
    if pod_error {
        return None;
    }
    assert_eq!(outcome.code, 0, "{}", outcome.stdout);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "Pod")
        .cloned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn webhook_and_function_agree(case in case()) {
        let webhook = by_webhook(&case);
        let function = by_function(&case);
        prop_assert_eq!(webhook, function, "namespace {} {:?}", case.namespace, case.namespace_annotations);
    }
}

#[test]
fn the_generator_reaches_every_outcome() {
    // Guards the property against a generator that only makes trivial pods.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut patched, mut unchanged, mut refused) = (0, 0, 0);
    for _ in 0..300 {
        let case = case().new_tree(&mut runner).unwrap().current();
        match by_webhook(&case) {
            None => refused += 1,
            Some(pod) if pod == case.pod => unchanged += 1,
            Some(_) => patched += 1,
        }
    }
    assert!(
        patched > 30 && unchanged > 30 && refused > 10,
        "{patched} {unchanged} {refused}"
    );
}
