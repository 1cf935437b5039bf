//! The config-hash stamp: the exact patch for each case, on both the pod
//! path and the tree path (network-resources rules on), and no patch when the
//! API server calls again with the patched pod.

use super::*;
use crate::linkerd_cni::rollout::{self, HASH_ANNOTATION, Unstamped};
use crate::network_resources::NadTable;

/// The config of the cluster's `linkerd-cni` NAD in namespace `demo`.
const CONFIG: &str = r#"{"cniVersion":"1.0.0","name":"linkerd-cni","type":"linkerd-cni"}"#;
/// Its hash: the first 16 hex characters of its SHA-256.
const HASH: &str = "a6c07c0f59f1dd14";
/// A hash a render recorded for another config.
const OLD: &str = "0123456789abcdef";

const NETWORKS: &str = "/metadata/annotations/k8s.v1.cni.cncf.io~1networks";
const OWNED: &str = "/metadata/annotations/multus.linkerd.io~1owned";
const STAMP: &str = "/metadata/annotations/multus.linkerd.io~1config-hash";

/// The cluster's NADs: their annotations, and the hashes of their configs.
#[derive(Default)]
struct Cluster {
    table: NadTable,
    hashes: BTreeMap<(String, String), String>,
}

impl Cluster {
    /// `demo/linkerd-cni` as `nad` says: with [`CONFIG`], without a config, or absent.
    fn with(nad: Nad) -> Self {
        let mut cluster = Cluster::default();
        if nad != Nad::Missing {
            let key = ("demo".to_string(), "linkerd-cni".to_string());
            cluster
                .table
                .insert(key.0.clone(), key.1.clone(), BTreeMap::new());
            if nad == Nad::Config {
                cluster.hashes.insert(key, rollout::config_hash(CONFIG));
            }
        }
        cluster
    }
}

impl Nads for Cluster {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.table.annotations(namespace, name)
    }
}

impl NadConfigs for Cluster {
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        let key = (namespace.to_string(), name.to_string());
        self.hashes.get(&key).map(String::as_str)
    }
    fn other_network(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn ipam(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&Result<crate::multus::ipam::Ipam, crate::multus::ipam::IpamError>> {
        None
    }
    fn plugin_settings(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&crate::linkerd_cni::skip_subnets::PluginSettings> {
        None
    }
}

/// The state of the pod's NAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nad {
    Config,
    NoConfig,
    Missing,
}

/// A stamp case: its name, the operation, whether the namespace enables the
/// rules, the pod's annotations (`None`: no map), the NAD, the missing-NAD
/// policy, the exact patch (`[]`: none) and the stamp's change.
struct Case {
    name: &'static str,
    operation: &'static str,
    enabled: bool,
    annotations: Option<Value>,
    nad: Nad,
    policy: MissingNad,
    patch: Value,
    stamp: Option<rollout::Change>,
}

fn case(name: &'static str, annotations: Option<Value>, patch: Value) -> Case {
    Case {
        name,
        operation: "CREATE",
        enabled: true,
        annotations,
        nad: Nad::Config,
        policy: MissingNad::Deny,
        patch,
        stamp: Some(rollout::Change::Set(HASH.into())),
    }
}

/// A pod attached by its own annotation, with a render's hash of another config.
fn stale() -> Value {
    json!({"k8s.v1.cni.cncf.io/networks": "linkerd-cni", HASH_ANNOTATION: OLD})
}

/// The hash removed, for this reason.
fn removed(why: Unstamped) -> Option<rollout::Change> {
    Some(rollout::Change::Removed(why))
}

fn cases() -> Vec<Case> {
    let mut cases = stamped_cases();
    cases.extend(unstamped_cases());
    cases
}

/// Pods the webhook stamps with the NAD's config.
fn stamped_cases() -> Vec<Case> {
    let attached = json!({"k8s.v1.cni.cncf.io/networks": "linkerd-cni"});
    vec![
        case(
            "a pod the rules attach gets the hash after the attachment",
            Some(json!({"a": "b"})),
            json!([
                {"op": "add", "path": NETWORKS, "value": "linkerd-cni"},
                {"op": "add", "path": OWNED, "value": "network=created"},
                {"op": "add", "path": STAMP, "value": HASH},
            ]),
        ),
        case(
            "without annotations, the map is added whole, the hash last",
            None,
            json!([{"op": "add", "path": "/metadata/annotations", "value": {
                "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
                "multus.linkerd.io/owned": "network=created",
                HASH_ANNOTATION: HASH,
            }}]),
        ),
        case(
            "a pod attached by its own annotation gets the hash alone",
            Some(attached),
            json!([{"op": "add", "path": STAMP, "value": HASH}]),
        ),
        Case {
            stamp: Some(rollout::Change::Changed {
                from: OLD.into(),
                to: HASH.into(),
            }),
            ..case(
                "a render's hash of another config is replaced: the pod gets this one",
                Some(stale()),
                json!([{"op": "replace", "path": STAMP, "value": HASH}]),
            )
        },
        Case {
            stamp: None,
            ..case(
                "the hash of this config already: no patch",
                Some(json!({"k8s.v1.cni.cncf.io/networks": "linkerd-cni", HASH_ANNOTATION: HASH})),
                json!([]),
            )
        },
    ]
}

/// Pods that carry no hash after the webhook, or keep the one they have.
fn unstamped_cases() -> Vec<Case> {
    vec![
        Case {
            nad: Nad::NoConfig,
            stamp: removed(Unstamped::NoConfig),
            ..case(
                "a NAD without spec.config: no hash, a render's removed",
                Some(stale()),
                json!([{"op": "remove", "path": STAMP}]),
            )
        },
        Case {
            nad: Nad::Missing,
            policy: MissingNad::Attach,
            stamp: None,
            ..case(
                "a missing NAD under --missing-nad attach: attached without a hash",
                Some(json!({"a": "b"})),
                json!([
                    {"op": "add", "path": NETWORKS, "value": "linkerd-cni"},
                    {"op": "add", "path": OWNED, "value": "network=created"},
                ]),
            )
        },
        Case {
            nad: Nad::Missing,
            policy: MissingNad::Attach,
            stamp: removed(Unstamped::NoNad),
            ..case(
                "a missing NAD: a render's hash is removed, nothing being known",
                Some(json!({"a": "b", HASH_ANNOTATION: OLD})),
                json!([
                    {"op": "remove", "path": STAMP},
                    {"op": "add", "path": NETWORKS, "value": "linkerd-cni"},
                    {"op": "add", "path": OWNED, "value": "network=created"},
                ]),
            )
        },
        Case {
            enabled: false,
            stamp: None,
            ..case(
                "a pod the rules do not attach: no hash",
                Some(json!({"a": "b"})),
                json!([]),
            )
        },
        Case {
            enabled: false,
            stamp: removed(Unstamped::NotAttached),
            ..case(
                "a pod the rules do not attach: a render's hash is removed",
                Some(json!({"a": "b", HASH_ANNOTATION: OLD})),
                json!([{"op": "remove", "path": STAMP}]),
            )
        },
        Case {
            operation: "UPDATE",
            stamp: None,
            ..case(
                "UPDATE leaves the hash: the pod runs under the config it was created with",
                Some(stale()),
                json!([]),
            )
        },
        Case {
            policy: MissingNad::Ignore,
            stamp: None,
            ..case(
                "--missing-nad ignore reads no NAD: the hash is left as it is",
                Some(stale()),
                json!([]),
            )
        },
    ]
}

/// The pod of a case, with `annotations` as given.
fn pod(annotations: &Option<Value>) -> Value {
    let mut pod = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    });
    if let Some(annotations) = annotations {
        pod["metadata"]["annotations"] = annotations.clone();
    }
    pod
}

/// The webhook's answer to `object` in a case, with the network-resources
/// rules (the tree path) when `tree`.
fn stamp_answer(case: &Case, object: &Value, tree: bool) -> Answer {
    let ns = if case.enabled {
        enabled_namespace()
    } else {
        BTreeMap::new()
    };
    let cluster = Cluster::with(case.nad);
    let check = NadCheck {
        nads: &cluster,
        policy: case.policy,
    };
    let nr_settings = network_resources::settings::Settings::default();
    let nr = NetworkResources {
        settings: &nr_settings,
        nads: &cluster,
    };
    let body = review(case.operation, "pods", object.clone());
    let request = parse(body.as_bytes()).unwrap();
    let nr = tree.then_some(&nr);
    answer(
        &request,
        &ns,
        &Settings::default(),
        nr,
        Some(&check),
        OnError::Deny,
    )
}

/// The patch of an answer, `[]` for none.
fn patch_or_none(answer: &Answer) -> Value {
    let response = response(answer);
    match response.get("patch") {
        Some(_) => patch_of(&response),
        None => json!([]),
    }
}

#[test]
fn the_stamp_of_each_case_is_the_exact_patch_and_reinvocation_adds_nothing() {
    assert_eq!(rollout::config_hash(CONFIG), HASH);
    for case in cases() {
        let name = case.name;
        let object = pod(&case.annotations);
        let answer = stamp_answer(&case, &object, false);
        assert_ne!(
            answer.outcome,
            Outcome::Denied,
            "{name}: {:?}",
            answer.warnings
        );
        let patch = patch_or_none(&answer);
        assert_eq!(patch, case.patch, "{name}");
        assert_eq!(answer.stamp, case.stamp, "{name}");
        // The network-resources rules change nothing on this pod: the tree
        // path gives the same patch (not when they deny its missing NAD).
        if case.operation == "CREATE" && case.nad != Nad::Missing {
            let tree = stamp_answer(&case, &object, true);
            assert_eq!(patch_or_none(&tree), case.patch, "{name}: the tree path");
            assert_eq!(tree.stamp, case.stamp, "{name}: the tree path");
        }
        // reinvocationPolicy: IfNeeded calls again with the patched pod.
        let mut patched = object;
        let patch: ::json_patch::Patch = serde_json::from_value(patch).unwrap();
        ::json_patch::patch(&mut patched, &patch).unwrap();
        let again = stamp_answer(&case, &patched, false);
        assert_eq!(again.outcome, Outcome::Unchanged, "{name}: reinvoked");
        assert_eq!(again.stamp, None, "{name}: reinvoked");
    }
}

/// With the network-resources rules, the stamp comes with the Linkerd-CNI
/// rules' edits, before theirs; what they change is as without it.
#[test]
fn the_network_resources_rules_are_unaffected_by_the_stamp() {
    let mut cluster = Cluster::with(Nad::Config);
    let sriov = [
        ("k8s.v1.cni.cncf.io/resourceName", "intel.com/sriov"),
        ("k8s.v1.cni.cncf.io/nodeSelector", "sriov=true"),
    ];
    let sriov = sriov.map(|(k, v)| (k.to_string(), v.to_string()));
    cluster
        .table
        .insert("demo".into(), "sriov".into(), sriov.into_iter().collect());
    let nr_settings = network_resources::settings::Settings::default();
    let nr = NetworkResources {
        settings: &nr_settings,
        nads: &cluster,
    };
    let check = NadCheck {
        nads: &cluster,
        policy: MissingNad::Deny,
    };
    let object = json!({
        "metadata": {"name": "web", "annotations": {"k8s.v1.cni.cncf.io/networks": "sriov, sriov"}},
        "spec": {"containers": [{"name": "app", "image": "app"}]}
    });
    let body = review("CREATE", "pods", object);
    let request = parse(body.as_bytes()).unwrap();
    let ns = enabled_namespace();
    let settings = Settings::default();
    let with = answer(
        &request,
        &ns,
        &settings,
        Some(&nr),
        Some(&check),
        OnError::Allow,
    );
    let without = answer(&request, &ns, &settings, Some(&nr), None, OnError::Allow);
    assert_eq!(with.network_resources, without.network_resources);
    assert_eq!(with.changes[..], [Change::Attached]);
    assert_eq!(with.stamp, Some(rollout::Change::Set(HASH.into())));
    assert_eq!(
        patch_of(&response(&with)),
        json!([
            {"op": "replace", "path": NETWORKS, "value": "sriov, sriov, linkerd-cni"},
            {"op": "add", "path": OWNED, "value": "network=appended"},
            {"op": "add", "path": STAMP, "value": HASH},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": r#"{"requests":{"intel.com/sriov":{"set":2}},"limits":{"intel.com/sriov":{"set":2}},"nodeSelector":{"sriov":"true"}}"#},
            {"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"intel.com/sriov": "2"}, "limits": {"intel.com/sriov": "2"}}},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"sriov": "true"}}
        ])
    );
    let mut without_stamp = patch_of(&response(&with));
    without_stamp.as_array_mut().unwrap().remove(2);
    assert_eq!(without_stamp, patch_of(&response(&without)));
}
