//! The webhook and the KRM function decide a pod the same way: over generated
//! pods and namespaces, the pod the webhook's JSONPatch produces (applied with
//! an independent JSONPatch implementation) equals the pod the KRM function
//! writes, and a pod one of them refuses, the other refuses too. With the
//! network-resources rules on, the same holds against the function pipeline
//! LinkerdMultus then NetworkResources, over generated NADs and settings too.
//!
//! The webhook that reads the NADs stamps pods with the hash of their NAD's
//! config as the function with `configRollout: all` stamps templates
//! (`webhook_property/stamp.rs`): so the network-resources property runs the
//! function with it, over pods carrying no hash, a render's hash of another
//! config, or the hash of the config. The first property keeps the function's
//! default (`off`) and the webhook without NADs (`--missing-nad ignore`),
//! where neither touches a pod without a hash, as it did before the stamp.

mod skip_subnets;
mod stamp;

use linkerd_multus::admission::{self, MissingNad, NadCheck, NetworkResources, OnError, Outcome};
use linkerd_multus::commands::function as krm;
use linkerd_multus::krm::function_config::SettingsKind;
use linkerd_multus::linkerd_cni::settings::Settings;
use linkerd_multus::network_resources::settings;
use linkerd_multus::yaml;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Map, Value, json};
use stamp::{ClusterNads, Stamp, rollout_all};

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
    // Forms Multus reads: trimmed parts, empty namespace and interface, keys in any case,
    // the deprecated interfaceRequest.
    Some(" / linkerd-cni @ "),
    Some("a@, ns / b"),
    Some(r#"[{"Name": "a", "interfaceRequest": "eth1"}]"#),
];
const PROXY_UID: &[Option<&str>] = &[None, Some("7"), Some("1000682102"), Some("")];
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
    /// The config hash the pod carries in the stamp properties.
    stamp: Stamp,
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
    let stamp = proptest::sample::select(&[Stamp::None, Stamp::Other, Stamp::Current][..]);
    (proptest::sample::select(&["demo", "linkerd"][..]), namespace, pod, stamp).prop_map(
        |(ns, namespace_annotations, (multus, inject, networks, uid, owned, cp, labels), stamp)| {
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
                stamp,
            }
        },
    )
}

/// The webhook's answer: the patched pod, or `None` when it refused to act.
fn by_webhook(case: &Case) -> Option<Value> {
    webhook_answer(case, None, None)
}

/// The webhook's answer with the network-resources rules when given (their
/// settings object and the NADs of the cluster), and with the missing-NAD
/// check (`--missing-nad attach`), so the config-hash stamp, over `checked`.
fn webhook_answer(
    case: &Case,
    network_resources: Option<(&Value, &ClusterNads)>,
    checked: Option<&ClusterNads>,
) -> Option<Value> {
    webhook_answer_with(case, network_resources, checked, &Settings::default())
}

/// [`webhook_answer`] with the LinkerdMultus settings `settings`.
fn webhook_answer_with(
    case: &Case,
    network_resources: Option<(&Value, &ClusterNads)>,
    checked: Option<&ClusterNads>,
    settings: &Settings,
) -> Option<Value> {
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
    let body = review.to_string();
    let request = admission::parse(body.as_bytes()).unwrap();
    let nr_settings = network_resources.map(|(config, _)| {
        settings::Settings::from_object(&yaml::parse_document(&config.to_string()).unwrap())
            .unwrap()
    });
    let nr = network_resources.map(|(_, nads)| NetworkResources {
        settings: nr_settings.as_ref().unwrap(),
        nads,
    });
    let known = case.namespace_annotations.as_ref().map(|a| {
        a.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    });
    // A namespace the function's input lacks has no annotations for it: the
    // webhook, given a namespace without annotations, must decide the same.
    let none = std::collections::BTreeMap::new();
    let check = checked.map(|nads| NadCheck {
        nads,
        policy: MissingNad::Attach,
    });
    let answer = admission::answer(
        &request,
        known.as_ref().unwrap_or(&none),
        settings,
        nr.as_ref(),
        check.as_ref(),
        OnError::Allow,
    );
    let response: Value = serde_json::from_slice(&answer.body).unwrap();
    let response = &response["response"];
    assert_eq!(response["allowed"], answer.outcome != Outcome::Denied);
    match answer.outcome {
        Outcome::Warned | Outcome::Denied => {
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
    by_function_with(case, None).0
}

/// The KRM function's output pod with the LinkerdMultus settings `config`
/// (or `None` when it reported an error on the pod), and the NADs of its output.
fn by_function_with(case: &Case, config: Option<&Value>) -> (Option<Value>, ClusterNads) {
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
    let (items, refused) = function(items, config);
    ((!refused).then(|| pod_of(&items)), ClusterNads::of(&items))
}

/// Runs the KRM function on `items` with `config`: the items out, and whether
/// it reported an error on the pod.
fn function(items: Vec<Value>, config: Option<&Value>) -> (Vec<Value>, bool) {
    let mut input =
        json!({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items});
    if let Some(config) = config {
        input["functionConfig"] = config.clone();
    }
    let outcome = krm::run(&input.to_string());
    let list = yaml::parse_document(&outcome.stdout).unwrap().to_json();
    let pod_error = list["results"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["severity"] == "error" && r["resourceRef"]["kind"] == "Pod");
    if !pod_error {
        assert_eq!(outcome.code, 0, "{}", outcome.stdout);
    }
    (list["items"].as_array().unwrap().clone(), pod_error)
}

fn pod_of(items: &[Value]) -> Value {
    items.iter().find(|i| i["kind"] == "Pod").cloned().unwrap()
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

// ------------------------------------------------------------------------------------------
// With the network-resources rules.

const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";
const NODE_SELECTOR: &str = "k8s.v1.cni.cncf.io/nodeSelector";

/// The NADs a cluster may have in the pod's namespace (and `other`): name,
/// namespace (`None`: the pod's), annotations.
type NadChoice = (
    &'static str,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
);
const NAD_CHOICES: &[NadChoice] = &[
    (
        "sriov-a",
        None,
        &[
            (RESOURCE_NAME, "intel.com/sriov_a"),
            (NODE_SELECTOR, "sriov=true"),
        ],
    ),
    ("sriov-b", None, &[(RESOURCE_NAME, "intel.com/sriov_b")]),
    (
        "sriov-c",
        Some("other"),
        &[(RESOURCE_NAME, "intel.com/sriov_a")],
    ),
    ("plain", None, &[(NODE_SELECTOR, "sriov=false")]),
    ("linkerd-cni", None, &[]),
];

const NR_NETWORKS: &[Option<&str>] = &[
    None,
    None,
    None,
    Some("sriov-a"),
    Some("sriov-a, sriov-a@net2, sriov-b"),
    Some("sriov-b, other/sriov-c"),
    Some(r#"[{"name": "sriov-a"}, {"name": "sriov-c", "namespace": "other", "interface": "x"}]"#),
    Some("sriov-a, plain"),
    Some("plain, linkerd-cni"),
    Some("gone"),
    Some("a,,b"),
    Some("sriov-a @ , / sriov-b"),
];
const DEFAULT_NETWORK: &[Option<&str>] = &[
    None,
    None,
    None,
    None,
    Some("sriov-b"),
    Some("sriov-b, plain"),
];

/// The container chosen for the resources: none, the first, the second (when there is one), none such.
const CONTAINER: &[Option<&str>] = &[
    None,
    None,
    None,
    None,
    Some("c"),
    Some("side"),
    Some("side"),
    Some("gone"),
];
/// `claimedResourceNames`: unset (every resource of a pod with claims), one, none.
const CLAIMED: &[Option<&[&str]>] = &[None, Some(&["intel.com/sriov_a"]), Some(&[])];
/// Opting out of the network-resources rules.
const OPT_OUT: &[Option<&str>] = &[None, None, None, None, Some("disabled"), Some("enabled")];

#[derive(Debug, Clone)]
struct NrCase {
    base: Case,
    /// Which of [`NAD_CHOICES`] exist.
    nads_present: Vec<bool>,
    /// The NetworkResources settings object.
    config: Value,
}

fn nr_case() -> impl Strategy<Value = NrCase> {
    let pod = (
        pick(NR_NETWORKS),
        pick(DEFAULT_NETWORK),
        0..4usize,
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.2),
        (
            pick(CONTAINER),
            pick(OPT_OUT),
            proptest::bool::weighted(0.2),
        ),
    );
    let settings = (
        proptest::bool::ANY,
        proptest::bool::ANY,
        proptest::sample::select(CLAIMED),
    );
    // Mostly no hash or this config's: pods these rules leave alone stay common.
    let stamp = prop_oneof![
        3 => Just(Stamp::None),
        2 => Just(Stamp::Current),
        1 => Just(Stamp::Other)
    ];
    (
        (case(), stamp),
        pod,
        proptest::collection::vec(proptest::bool::weighted(0.9), NAD_CHOICES.len()),
        settings,
    )
        .prop_map(
            |(
                (base, stamp),
                (networks, default, user_resources, inject, stale, (container, opt_out, claims)),
                present,
                (honor, downward, claimed),
            )| {
                let mut base = Case { stamp, ..base }.stamped();
                let pod = &mut base.pod;
                let annotations = &mut pod["metadata"]["annotations"];
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                match networks {
                    Some(n) => annotations["k8s.v1.cni.cncf.io/networks"] = json!(n),
                    None => {
                        annotations
                            .as_object_mut()
                            .unwrap()
                            .remove("k8s.v1.cni.cncf.io/networks");
                    }
                }
                if let Some(d) = default {
                    annotations["v1.multus-cni.io/default-network"] = json!(d);
                }
                if stale {
                    // What an earlier version of the NAD asked for, recorded as the rules record it.
                    annotations["multus.linkerd.io/network-resources"] =
                        json!(r#"{"nodeSelector":{"zone":"a"}}"#);
                    pod["spec"]["nodeSelector"] = json!({"zone": "a"});
                }
                if inject {
                    pod["metadata"]["labels"]["inject-me"] = json!("true");
                }
                workload_choices(pod, container, opt_out, claims, user_resources);
                NrCase {
                    base,
                    nads_present: present,
                    config: nr_settings(honor, downward, claimed),
                }
            },
        )
}

/// What the pod chooses for itself (the receiving container, opting out,
/// DRA claims) and its containers: the user's own resources, none, in the
/// first container, in a second one; or Linkerd's proxy put first by its
/// injector (proxy-await).
fn workload_choices(
    pod: &mut Value,
    container: Option<&str>,
    opt_out: Option<&str>,
    claims: bool,
    user_resources: usize,
) {
    let annotations = &mut pod["metadata"]["annotations"];
    if let Some(container) = container {
        annotations["multus.linkerd.io/network-resources-container"] = json!(container);
    }
    if let Some(opt_out) = opt_out {
        annotations["multus.linkerd.io/network-resources-injection"] = json!(opt_out);
    }
    if claims {
        pod["spec"]["resourceClaims"] = json!([{"name": "vf", "resourceClaimTemplateName": "vf"}]);
    }
    let containers = &mut pod["spec"]["containers"];
    match user_resources {
        3 => containers.as_array_mut().unwrap().insert(
            0,
            json!({"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:edge-24.5.1"}),
        ),
        1 => containers[0]["resources"] = json!({"limits": {"intel.com/sriov_a": "4"}}),
        2 => containers.as_array_mut().unwrap().push(json!({
            "name": "side", "image": "side",
            "resources": {"requests": {"intel.com/sriov_b": "1"}, "limits": {"hugepages-2Mi": "64Mi"}}
        })),
        _ => {}
    }
}

/// The NetworkResources settings object of a case.
fn nr_settings(honor: bool, downward: bool, claimed: Option<&[&str]>) -> Value {
    let mut spec = json!({
        "honorResources": honor,
        "downwardAPI": downward,
        "injections": {"inject-me": {"annotations": {"example.com/injected": "yes"}}}
    });
    if let Some(claimed) = claimed {
        spec["claimedResourceNames"] = json!(claimed);
    }
    json!({
        "apiVersion": "multus.linkerd.io/v1alpha1",
        "kind": "NetworkResources",
        "metadata": {"name": "network-resources"},
        "spec": spec
    })
}

/// The `spec.config` of a NAD of the cluster: a macvlan network, but the
/// NAD of the rules' name, which runs Linkerd-CNI (written by hand). A
/// network of another plugin under that name is refused by the render for the
/// whole package (tests/render/foreign_nad.rs) and by the webhook for each pod
/// it would attach (tests/webhook/serving.rs), so the two do not answer alike
/// for a pod the rules leave alone: no case of this property.
fn nad_config(name: &str) -> &'static str {
    if name == "linkerd-cni" {
        r#"{"cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni"}"#
    } else {
        r#"{"cniVersion": "0.3.1", "type": "macvlan"}"#
    }
}

/// The cluster's NADs, as objects.
fn nad_objects(case: &NrCase) -> Vec<Value> {
    NAD_CHOICES
        .iter()
        .zip(&case.nads_present)
        .filter(|(_, present)| **present)
        .map(|((name, namespace, annotations), _)| {
            let annotations: Map<String, Value> = annotations
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            json!({
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {
                    "name": name,
                    "namespace": namespace.unwrap_or(case.base.namespace),
                    "annotations": annotations
                },
                "spec": {"config": nad_config(name)}
            })
        })
        .collect()
}

/// The function pipeline: LinkerdMultus (with `configRollout: all`), then
/// NetworkResources on its output. Also returns the NADs of the package after
/// the first stage (the user's and the Linkerd-CNI NAD it generates), which is
/// what the cluster holds once the package is applied: the NADs the webhook
/// then sees.
fn by_pipeline(case: &NrCase) -> (Option<Value>, ClusterNads) {
    let config_map = yaml::parse_document(CONFIG_MAP).unwrap().to_json();
    let mut items = vec![config_map];
    if let Some(annotations) = &case.base.namespace_annotations {
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": case.base.namespace, "annotations": annotations}
        }));
    }
    items.extend(nad_objects(case));
    items.push(case.base.pod.clone());
    let (items, refused) = function(items, Some(&rollout_all()));
    let nads = ClusterNads::of(&items);
    if refused {
        return (None, nads);
    }
    let (items, refused) = function(items, Some(&case.config));
    ((!refused).then(|| pod_of(&items)), nads)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn webhook_and_function_pipeline_agree_with_network_resources(case in nr_case()) {
        let (function, nads) = by_pipeline(&case);
        let webhook = webhook_answer(&case.base, Some((&case.config, &nads)), Some(&nads));
        prop_assert_eq!(webhook, function, "NADs {:?}", nads);
    }
}

#[test]
fn the_network_resources_generator_reaches_every_outcome() {
    // Guards the property against a generator that never gets resources,
    // never denies or never leaves a pod alone.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut resources, mut unchanged, mut refused, mut second) = (0, 0, 0, 0);
    for _ in 0..300 {
        let case = nr_case().new_tree(&mut runner).unwrap().current();
        let (_, nads) = by_pipeline(&case);
        match webhook_answer(&case.base, Some((&case.config, &nads)), Some(&nads)) {
            None => refused += 1,
            Some(pod) if pod == case.base.pod => unchanged += 1,
            Some(pod) if pod["spec"]["containers"][0]["resources"].is_object() => resources += 1,
            Some(pod)
                if pod["metadata"]["annotations"]["multus.linkerd.io/network-resources"]
                    .as_str()
                    .is_some_and(|r| r.contains(r#""container":"side""#)) =>
            {
                second += 1
            }
            Some(_) => {}
        }
    }
    assert!(
        resources > 30 && unchanged > 2 && refused > 30 && second > 1,
        "{resources} {unchanged} {refused} {second}"
    );
}
