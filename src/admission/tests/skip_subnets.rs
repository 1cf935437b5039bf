//! The secondary-network rule in the webhook: the exact patch on the pod path, the same pod
//! on the tree path, nothing more when the API server calls again, the `--on-error` answer
//! for what would open the mesh (the cluster's networks, the protected ones), and another
//! namespace's NAD warned about, never read.

use super::*;
use crate::linkerd_cni::rollout;
use crate::linkerd_cni::skip_subnets::{self, OPT_IN_ANNOTATION, PluginSettings};
use crate::multus::ipam::{self, Ipam, IpamError};
use crate::network_resources::NadTable;

/// The Linkerd-CNI NAD's config in `demo`: it skips 192.0.2.0/24 itself.
const LINKERD: &str = r#"{"cniVersion":"1.0.0","name":"linkerd-cni","plugins":[{"type":"linkerd-cni","linkerd":{"subnets-to-ignore":["192.0.2.0/24"]}}]}"#;
const STORAGE: &str = r#"{"type":"macvlan","ipam":{"type":"whereabouts","range":"10.10.0.0/24","routes":[{"dst":"172.20.0.0/16"}]}}"#;
const WIDE: &str = r#"{"type":"macvlan","ipam":{"type":"host-local","subnet":"10.0.0.0/8"}}"#;
const LEASE: &str = r#"{"type":"macvlan","ipam":{"type":"dhcp"}}"#;
/// In the protected node network 192.168.0.0/16.
const NODES: &str = r#"{"type":"macvlan","ipam":{"type":"whereabouts","range":"192.168.5.0/24"}}"#;
/// Namespace `other`'s: none of its ranges may reach a pod of `demo`.
const SHARED: &str = r#"{"type":"macvlan","ipam":{"type":"whereabouts","range":"198.18.0.0/24","routes":[{"dst":"198.19.0.0/16"}]}}"#;

const SKIP: &str = "/metadata/annotations/config.linkerd.io~1skip-subnets";
const RECORD: &str = "/metadata/annotations/multus.linkerd.io~1skip-subnets";

/// The cluster's NADs in `demo` and `other`, as the NAD cache keeps them.
struct Cluster {
    table: NadTable,
    ipams: BTreeMap<(&'static str, &'static str), Result<Ipam, IpamError>>,
    plugin: PluginSettings,
    hash: String,
}

impl Cluster {
    fn new() -> Self {
        let mut table = NadTable::default();
        let mut ipams = BTreeMap::new();
        for (namespace, name, config) in [
            ("demo", "storage", STORAGE),
            ("demo", "wide", WIDE),
            ("demo", "lease", LEASE),
            ("demo", "nodes", NODES),
            ("other", "shared", SHARED),
        ] {
            table.insert(namespace.into(), name.into(), BTreeMap::new());
            ipams.insert((namespace, name), ipam::read(config));
        }
        table.insert("demo".into(), "linkerd-cni".into(), BTreeMap::new());
        Cluster {
            table,
            ipams,
            plugin: skip_subnets::plugin_settings(LINKERD),
            hash: rollout::config_hash(LINKERD),
        }
    }
}

impl Nads for Cluster {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.table.annotations(namespace, name)
    }
}

impl NadConfigs for Cluster {
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        (namespace == "demo" && name == "linkerd-cni").then_some(self.hash.as_str())
    }
    fn other_network(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        (self.ipams.iter())
            .find(|((ns, n), _)| *ns == namespace && *n == name)
            .map(|(_, ipam)| ipam)
    }
    fn plugin_settings(&self, namespace: &str, name: &str) -> Option<&PluginSettings> {
        (namespace == "demo" && name == "linkerd-cni").then_some(&self.plugin)
    }
}

fn settings() -> Settings {
    Settings {
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        protected_cidrs: vec!["192.168.0.0/16".parse().unwrap()],
        ..Settings::default()
    }
}

/// The namespace: meshed, attached, and opted in to the rule.
fn opted_in_namespace() -> BTreeMap<String, String> {
    let mut ns = enabled_namespace();
    ns.insert(OPT_IN_ANNOTATION.into(), "enabled".into());
    ns
}

fn pod(networks: &str) -> Value {
    json!({
        "metadata": {"name": "web", "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
        "spec": {"containers": [{"name": "app", "image": "app"}]}
    })
}

/// The answer to `operation` of `object`; with the network-resources rules (the tree path)
/// when `tree`; without the NAD reads (`--missing-nad ignore`) when `check` is false.
fn skip_answer(
    operation: &str,
    object: &Value,
    tree: bool,
    check: bool,
    on_error: OnError,
) -> Answer {
    let cluster = Cluster::new();
    let nad_check = NadCheck {
        nads: &cluster,
        policy: MissingNad::Deny,
    };
    let nr_settings = network_resources::settings::Settings::default();
    let nr = NetworkResources {
        settings: &nr_settings,
        nads: &cluster,
    };
    let body = review(operation, "pods", object.clone());
    let request = parse(body.as_bytes()).unwrap();
    answer(
        &request,
        &opted_in_namespace(),
        &settings(),
        tree.then_some(&nr),
        check.then_some(&nad_check),
        on_error,
    )
}

fn patched(object: &Value, answer: &Answer) -> Value {
    let response = response(answer);
    let mut pod = object.clone();
    if response.get("patch").is_some() {
        let patch: ::json_patch::Patch = serde_json::from_value(patch_of(&response)).unwrap();
        ::json_patch::patch(&mut pod, &patch).unwrap();
    }
    pod
}

#[test]
fn an_opted_in_pod_gets_its_networks_subnets_after_the_plugins_list() {
    let object = pod("storage");
    let answer = skip_answer("CREATE", &object, false, true, OnError::Deny);
    assert_eq!(answer.outcome, Outcome::Patched, "{:?}", answer.warnings);
    let value = "192.0.2.0/24,10.10.0.0/24,172.20.0.0/16";
    assert_eq!(
        patch_of(&response(&answer)),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "storage,linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": SKIP, "value": value},
            {"op": "add", "path": RECORD, "value": value},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": rollout::config_hash(LINKERD)},
        ])
    );
    assert_eq!(
        answer.skip_subnets,
        Some(skip_subnets::Change::Set(value.into()))
    );
    let after = patched(&object, &answer);
    // The tree path (network-resources rules on) makes the same pod.
    let tree = skip_answer("CREATE", &object, true, true, OnError::Deny);
    assert_eq!(patched(&object, &tree), after);
    // reinvocationPolicy: IfNeeded calls again with the patched pod: nothing more.
    for tree in [false, true] {
        let again = skip_answer("CREATE", &after, tree, true, OnError::Deny);
        assert_eq!(
            again.outcome,
            Outcome::Unchanged,
            "tree {tree}: {:?}",
            again.warnings
        );
    }
}

#[test]
fn an_update_leaves_skip_subnets_as_linkerd_cni_read_them() {
    let mut object = pod("storage,linkerd-cni");
    object["metadata"]["annotations"]["multus.linkerd.io/owned"] = json!("network=appended");
    let answer = skip_answer("UPDATE", &object, false, true, OnError::Deny);
    assert_eq!(answer.outcome, Outcome::Unchanged, "{:?}", answer.warnings);
}

#[test]
fn what_would_open_the_mesh_gets_the_on_error_answer() {
    let object = pod("wide");
    let denied = skip_answer("CREATE", &object, false, true, OnError::Deny);
    assert_eq!(denied.outcome, Outcome::Denied);
    assert_eq!(
        response(&denied)["status"]["message"],
        "linkerd-multus: NetworkAttachmentDefinition demo/wide brings 10.0.0.0/8, which overlaps the cluster network 10.244.0.0/16: skipping it would take meshed traffic away from the proxy (no mTLS, no policy); give the secondary network a range of its own, or correct the clusterCIDRs setting"
    );
    for tree in [false, true] {
        let allowed = skip_answer("CREATE", &object, tree, true, OnError::Allow);
        assert_eq!(allowed.outcome, Outcome::Warned, "tree {tree}");
        assert!(response(&allowed).get("patch").is_none());
    }
}

#[test]
fn dhcp_is_attached_with_a_warning_and_no_subnet() {
    let object = pod("lease");
    let answer = skip_answer("CREATE", &object, false, true, OnError::Deny);
    assert_eq!(answer.outcome, Outcome::Patched);
    assert_eq!(answer.skip_subnets, None);
    assert!(
        answer.warnings.iter().any(|w| w.starts_with(
            "linkerd-multus: NetworkAttachmentDefinition demo/lease gets its addresses by DHCP"
        )),
        "{:?}",
        answer.warnings
    );
    let patch = patch_of(&response(&answer)).to_string();
    assert!(!patch.contains("skip-subnets"), "{patch}");
}

#[test]
fn without_nad_reads_an_opted_in_pod_with_secondary_networks_is_a_problem() {
    let answer = skip_answer("CREATE", &pod("storage"), false, false, OnError::Allow);
    assert_eq!(answer.outcome, Outcome::Warned);
    assert!(
        answer.warnings[0].contains("this webhook reads no NetworkAttachmentDefinition"),
        "{:?}",
        answer.warnings
    );
}

#[test]
fn a_network_that_overlaps_a_protected_one_gets_the_on_error_answer() {
    let object = pod("storage,nodes");
    let denied = skip_answer("CREATE", &object, false, true, OnError::Deny);
    assert_eq!(denied.outcome, Outcome::Denied);
    assert_eq!(
        response(&denied)["status"]["message"],
        "linkerd-multus: NetworkAttachmentDefinition demo/nodes brings 192.168.5.0/24, which overlaps the protected network 192.168.0.0/16: skipping it would take traffic from that network away from the proxy (no mTLS, no policy); give the secondary network a range of its own, or correct the protectedCIDRs setting"
    );
    for tree in [false, true] {
        let allowed = skip_answer("CREATE", &object, tree, true, OnError::Allow);
        assert_eq!(allowed.outcome, Outcome::Warned, "tree {tree}");
        assert!(response(&allowed).get("patch").is_none());
    }
}

/// Another namespace's NAD (known to the cache) gives a warning naming it and nothing else:
/// the pod's own network's subnets alone are written, and no range of the other NAD is shown.
#[test]
fn another_namespaces_nad_is_warned_about_and_never_read() {
    let warning = "linkerd-multus: NetworkAttachmentDefinition other/shared is in namespace other, not the pod's namespace demo: only the NADs of the pod's own namespace give subnets to skip, so none of it is skipped and inbound TCP on that network is still sent to the proxy, which refuses it; select a NAD of namespace demo for that network";
    let object = pod("storage,other/shared");
    let answer = skip_answer("CREATE", &object, false, true, OnError::Deny);
    assert_eq!(answer.outcome, Outcome::Patched, "{:?}", answer.warnings);
    let value = "192.0.2.0/24,10.10.0.0/24,172.20.0.0/16";
    assert_eq!(
        patch_of(&response(&answer)),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "storage,other/shared,linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": SKIP, "value": value},
            {"op": "add", "path": RECORD, "value": value},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": rollout::config_hash(LINKERD)},
        ])
    );
    assert_eq!(answer.warnings, [warning]);
    // Alone, it gives no skip-subnets at all, and the same warning.
    let alone = skip_answer("CREATE", &pod("other/shared"), false, true, OnError::Deny);
    assert_eq!(alone.outcome, Outcome::Patched);
    assert_eq!(alone.skip_subnets, None);
    assert_eq!(alone.warnings, [warning]);
    let patch = patch_of(&response(&alone)).to_string();
    assert!(!patch.contains("skip-subnets"), "{patch}");
    for range in ["198.18", "198.19"] {
        assert!(
            !patch.contains(range) && !warning.contains(range),
            "{range}"
        );
    }
}
