//! The config-hash stamp: the webhook that reads the NADs (its missing-NAD
//! check) stamps a pod on CREATE exactly as the function with `configRollout:
//! all` stamps a template, given the NADs the function's output holds (what
//! the cluster holds once the package is applied): the same hash function of
//! the same config, added, replaced, removed or kept in the same cases, over
//! pods carrying no hash, a render's hash of another config, or the hash of
//! the config.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use linkerd_multus::admission::NadConfigs;
use linkerd_multus::k8s::namespace::Lookup;
use linkerd_multus::linkerd_cni::cni_config;
use linkerd_multus::linkerd_cni::rollout::{self, HASH_ANNOTATION};
use linkerd_multus::linkerd_cni::skip_subnets::{self, PluginSettings};
use linkerd_multus::multus::ipam::{self, Ipam, IpamError};
use linkerd_multus::network_resources::{NadTable, Nads};
use linkerd_multus::yaml;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

use super::{CONFIG_MAP, Case, by_function_with, case, function, webhook_answer};

/// The config hash a generated pod carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stamp {
    /// No hash.
    None,
    /// A render's hash of a config the cluster does not have.
    Other,
    /// The hash of the config of the NAD the function generates.
    Current,
}

impl Case {
    /// The case with its pod carrying its [`Stamp`].
    pub(super) fn stamped(&self) -> Case {
        let mut case = self.clone();
        let hash = match self.stamp {
            Stamp::None => return case,
            Stamp::Other => "0123456789abcdef".to_string(),
            Stamp::Current => GENERATED_HASH.clone(),
        };
        let metadata = &mut case.pod["metadata"];
        if !metadata["annotations"].is_object() {
            metadata["annotations"] = json!({});
        }
        metadata["annotations"][HASH_ANNOTATION] = json!(hash);
        case
    }
}

/// The hash of the config of the NAD the function generates from
/// [`CONFIG_MAP`], read from its output.
static GENERATED_HASH: LazyLock<String> = LazyLock::new(|| {
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "demo", "annotations": {"linkerd.io/multus": "enabled"}}
    });
    let config_map = yaml::parse_document(CONFIG_MAP).unwrap().to_json();
    let (items, _) = function(vec![config_map, namespace], None);
    let nads = ClusterNads::of(&items);
    nads.config_hash("demo", "linkerd-cni").unwrap().to_string()
});

/// The LinkerdMultus settings of the stamp properties.
pub(super) fn rollout_all() -> Value {
    json!({
        "apiVersion": "multus.linkerd.io/v1alpha1",
        "kind": "LinkerdMultus",
        "metadata": {"name": "linkerd-multus"},
        "spec": {"configRollout": "all"}
    })
}

/// The NADs of a function's output, as the webhook's NAD cache keeps them:
/// their annotations, the hashes of their configs, and what those run when
/// it is not Linkerd-CNI.
#[derive(Debug, Default)]
pub(super) struct ClusterNads {
    table: NadTable,
    hashes: BTreeMap<(String, String), String>,
    others: BTreeMap<(String, String), String>,
    ipams: BTreeMap<(String, String), Result<Ipam, IpamError>>,
    plugins: BTreeMap<(String, String), PluginSettings>,
}

impl ClusterNads {
    pub(super) fn of(items: &[Value]) -> Self {
        let mut nads = ClusterNads::default();
        for nad in items
            .iter()
            .filter(|i| i["kind"] == "NetworkAttachmentDefinition")
        {
            let meta = &nad["metadata"];
            let key = (
                meta["namespace"].as_str().unwrap().to_string(),
                meta["name"].as_str().unwrap().to_string(),
            );
            let annotations = meta["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            nads.table.insert(key.0.clone(), key.1.clone(), annotations);
            if let Some(config) = nad["spec"]["config"].as_str() {
                let ours = meta["labels"]["app.kubernetes.io/managed-by"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("linkerd-multus"));
                if let Some(runs) = cni_config::other_network(config).filter(|_| !ours) {
                    nads.others.insert(key.clone(), runs);
                }
                let parsed: Value = serde_json::from_str(config).unwrap_or(Value::Null);
                match skip_subnets::linkerd_cni_settings(&parsed) {
                    Some(plugin) => {
                        nads.plugins.insert(key.clone(), plugin);
                    }
                    None => {
                        nads.ipams.insert(key.clone(), ipam::read(config));
                    }
                }
                nads.hashes.insert(key, rollout::config_hash(config));
            }
        }
        nads
    }
}

impl Nads for ClusterNads {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.table.annotations(namespace, name)
    }
}

impl NadConfigs for ClusterNads {
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        let key = (namespace.to_string(), name.to_string());
        self.hashes.get(&key).map(String::as_str)
    }
    fn other_network(&self, namespace: &str, name: &str) -> Option<&str> {
        let key = (namespace.to_string(), name.to_string());
        self.others.get(&key).map(String::as_str)
    }
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.ipams.get(&(namespace.to_string(), name.to_string()))
    }
    fn plugin_settings(&self, namespace: &str, name: &str) -> Option<&PluginSettings> {
        self.plugins.get(&(namespace.to_string(), name.to_string()))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The webhook reading the NADs stamps a pod as `configRollout: all`
    /// stamps a template, given the NADs the function's output holds.
    #[test]
    fn the_webhook_stamps_as_config_rollout_all_renders(case in case()) {
        let case = case.stamped();
        let (function, nads) = by_function_with(&case, Some(&rollout_all()));
        let webhook = webhook_answer(&case, None, Some(&nads));
        prop_assert_eq!(webhook, function, "namespace {} {:?}", case.namespace, case.namespace_annotations);
    }
}

/// A rendered template and a pod the webhook stamps carry the same hash for
/// the same config: a pod made from a template the function rendered with
/// `configRollout: all` gets no patch from the webhook over the NADs of the
/// render; without the hash, it gets exactly the render's.
#[test]
fn a_rendered_template_and_a_stamped_pod_carry_the_same_hash() {
    let config_map = yaml::parse_document(CONFIG_MAP).unwrap().to_json();
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    });
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "demo", "annotations": {
            "linkerd.io/multus": "enabled", "linkerd.io/inject": "enabled"
        }}
    });
    let (items, refused) = function(
        vec![config_map, namespace.clone(), deployment],
        Some(&rollout_all()),
    );
    assert!(!refused);
    let nads = ClusterNads::of(&items);
    let rendered = items.iter().find(|i| i["kind"] == "Deployment").unwrap();
    let template = &rendered["spec"]["template"];
    let hash = template["metadata"]["annotations"][HASH_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(hash, nads.config_hash("demo", "linkerd-cni").unwrap());
    assert_eq!(hash, *GENERATED_HASH);
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!("web-1");
    let case = Case {
        namespace: "demo",
        namespace_annotations: namespace["metadata"]["annotations"].as_object().cloned(),
        pod: pod.clone(),
        stamp: Stamp::Current,
    };
    assert_eq!(
        webhook_answer(&case, None, Some(&nads)),
        Some(pod.clone()),
        "no patch"
    );
    let mut unstamped = case.clone();
    let annotations = unstamped.pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap();
    annotations.remove(HASH_ANNOTATION);
    assert_eq!(
        webhook_answer(&unstamped, None, Some(&nads)),
        Some(pod),
        "the render's hash"
    );
}

#[test]
fn the_stamp_generator_reaches_every_change_of_the_hash() {
    // Guards the stamp property against pods whose hash never changes: the
    // webhook sets, replaces, removes and keeps it.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = BTreeMap::<&str, usize>::new();
    for _ in 0..300 {
        let case = case().new_tree(&mut runner).unwrap().current().stamped();
        let (_, nads) = by_function_with(&case, Some(&rollout_all()));
        let Some(pod) = webhook_answer(&case, None, Some(&nads)) else {
            continue;
        };
        let hash = |pod: &Value| {
            pod["metadata"]["annotations"][HASH_ANNOTATION]
                .as_str()
                .map(str::to_string)
        };
        let change = match (hash(&case.pod), hash(&pod)) {
            (None, Some(_)) => "set",
            (Some(a), Some(b)) if a != b => "replaced",
            (Some(_), None) => "removed",
            (Some(_), Some(_)) => "kept",
            (None, None) => "none",
        };
        *seen.entry(change).or_default() += 1;
    }
    for change in ["set", "replaced", "removed", "kept", "none"] {
        assert!(seen.get(change).copied().unwrap_or(0) > 5, "{seen:?}");
    }
}
