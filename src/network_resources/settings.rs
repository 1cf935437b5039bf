//! The `NetworkResources` function configuration: what the network-resources
//! rules do, read from a functionConfig's `spec` (or a ConfigMap's `data`).

use std::collections::BTreeMap;

use crate::k8s::names::is_qualified_name;
use crate::k8s::workload::WorkloadKind;
use crate::krm::function_config::{
    SettingsError, SettingsKind, annotation_sets, bad, boolean, label, structured, text,
    workload_kinds,
};
use crate::multus::networks::{Form, NETWORKS_ANNOTATION, Networks, Selection};
use crate::yaml::{Map, Node};

/// The kind of the typed configuration object (API version [`crate::krm::function_config::API_VERSION`]).
pub const KIND: &str = "NetworkResources";

/// The NAD annotation naming a device-plugin resource, read by default.
pub const RESOURCE_NAME_ANNOTATION: &str = "k8s.v1.cni.cncf.io/resourceName";

/// Every setting of the kind, in the order the docs list them.
pub const KEYS: &[&str] = &[
    "resourceNameKeys",
    "honorResources",
    "downwardAPI",
    "injections",
    "interfaceNames",
    "claimedResourceNames",
    "workloadKinds",
    "defaultNamespace",
];

/// How interface names are given to selections that have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterfaceNames {
    /// Left to Multus (`net1`, `net2`, ... in selection order).
    #[default]
    Keep,
    /// `net` + the first 12 hex characters of the MD5 of the network name.
    Deterministic,
}

/// What the network-resources rules work with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// NAD annotations naming the resource each selection requests.
    pub resource_name_keys: Vec<String>,
    /// Add the count to the receiving container's own value instead of leaving
    /// a resource the user set alone.
    pub honor_resources: bool,
    /// Expose labels, annotations and hugepages through the `podnetinfo`
    /// downward-API volume in workloads that get network resources.
    pub downward_api: bool,
    /// Pod label (set to `true`) to the annotations it adds.
    pub injections: BTreeMap<String, BTreeMap<String, String>>,
    /// How selections without an interface are named.
    pub interface_names: InterfaceNames,
    /// Resource names whose devices come through Dynamic Resource Allocation
    /// in a pod template with `spec.resourceClaims`: it gets no device-plugin
    /// request for them. `None`: every resource name.
    pub claimed_resource_names: Option<Vec<String>>,
    /// Workload kinds beyond the built-in ones.
    pub workload_kinds: Vec<WorkloadKind>,
    /// The namespace of resources that have no `metadata.namespace`.
    pub default_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            resource_name_keys: vec![RESOURCE_NAME_ANNOTATION.to_string()],
            honor_resources: false,
            downward_api: false,
            injections: BTreeMap::new(),
            interface_names: InterfaceNames::Keep,
            claimed_resource_names: None,
            workload_kinds: Vec::new(),
            default_namespace: None,
        }
    }
}

impl SettingsKind for Settings {
    const KIND: &'static str = KIND;
    const KEYS: &'static [&'static str] = KEYS;

    fn apply(&mut self, spec: &Map, from_config_map: bool) -> Result<(), SettingsError> {
        for (key, value) in &spec.entries {
            let key = key.as_str().unwrap_or_default();
            match key {
                "resourceNameKeys" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.resource_name_keys = resource_name_keys(key, &parsed)?;
                }
                "honorResources" => self.honor_resources = boolean(key, value)?,
                "downwardAPI" => self.downward_api = boolean(key, value)?,
                "injections" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.injections = injections(key, &parsed)?;
                }
                "interfaceNames" => {
                    self.interface_names = match text(key, value)?.as_str() {
                        "keep" => InterfaceNames::Keep,
                        "deterministic" => InterfaceNames::Deterministic,
                        other => {
                            return Err(bad(
                                key,
                                format!("{other:?} is not one of keep, deterministic"),
                            ));
                        }
                    }
                }
                "claimedResourceNames" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.claimed_resource_names = Some(claimed_resource_names(key, &parsed)?);
                }
                "workloadKinds" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.workload_kinds = workload_kinds(key, &parsed)?;
                }
                "defaultNamespace" => self.default_namespace = Some(label(key, value)?),
                _ => {
                    return Err(SettingsError::UnknownKeys {
                        keys: vec![key.to_string()],
                        valid: KEYS,
                    });
                }
            }
        }
        Ok(())
    }
}

fn resource_name_keys(key: &str, value: &Node) -> Result<Vec<String>, SettingsError> {
    let items = value
        .as_seq()
        .ok_or_else(|| bad(key, "must be a list of NAD annotation keys"))?;
    let mut keys: Vec<String> = Vec::new();
    for item in &items.items {
        let k = item
            .as_text()
            .ok_or_else(|| bad(key, "must be a list of NAD annotation keys"))?;
        if !is_qualified_name(k) {
            return Err(bad(key, format!("{k:?} is not a valid annotation key")));
        }
        if keys.iter().any(|seen| seen == k) {
            return Err(bad(key, format!("{k:?} is listed twice")));
        }
        keys.push(k.to_string());
    }
    if keys.is_empty() {
        return Err(bad(key, "must list at least one NAD annotation key"));
    }
    Ok(keys)
}

fn claimed_resource_names(key: &str, value: &Node) -> Result<Vec<String>, SettingsError> {
    let what = "must be a list of resource names";
    let items = value.as_seq().ok_or_else(|| bad(key, what))?;
    let mut names: Vec<String> = Vec::new();
    for item in &items.items {
        let name = item.as_text().ok_or_else(|| bad(key, what))?;
        if !is_qualified_name(name) {
            return Err(bad(key, format!("{name:?} is not a valid resource name")));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

fn injections(
    key: &str,
    value: &Node,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, SettingsError> {
    let sets = annotation_sets(key, value, "pod label keys", |label| {
        (!is_qualified_name(label)).then(|| format!("{label:?} is not a valid label key"))
    })?;
    for (label, annotations) in &sets {
        for (k, v) in annotations {
            if !is_qualified_name(k) {
                return Err(bad(
                    key,
                    format!("{label}.annotations: {k:?} is not a valid annotation key"),
                ));
            }
            if k == NETWORKS_ANNOTATION && !injectable_networks(v) {
                return Err(bad(
                    key,
                    format!(
                        "{label}.annotations: {NETWORKS_ANNOTATION} {v:?} must be a comma list of network names: its networks are added to the pod's own"
                    ),
                ));
            }
        }
    }
    Ok(sets)
}

/// Whether `value` is what an injected networks annotation holds: a comma
/// list of network names (the pod's namespace, no interface), which are
/// appended to the pod's own selections.
pub fn injectable_networks(value: &str) -> bool {
    Networks::parse(value)
        .is_ok_and(|n| n.form() == Form::Comma && n.selections().iter().all(Selection::is_plain))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    #[test]
    fn network_resources_in_either_form() {
        let read = crate::krm::function_config::read::<Settings>;
        let typed = read(
            "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nmetadata: {name: x}\nspec:\n  honorResources: true\n  resourceNameKeys: [example.com/resource]\n",
        )
        .unwrap();
        let cm = read(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  honorResources: 'true'\n  resourceNameKeys: '[example.com/resource]'\n",
        )
        .unwrap();
        assert_eq!(typed, cm);
        assert!(typed.honor_resources);
        assert_eq!(typed.resource_name_keys, ["example.com/resource"]);
        for (src, want) in [
            (
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\n",
                "not LinkerdMultus (multus.linkerd.io/v1alpha1)",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\ndata: {downwardAPI: maybe}\n",
                "setting downwardAPI: must be true or false",
            ),
            (
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\ndata: {}\n",
                "unexpected top-level field \"data\"",
            ),
            ("[]", "is a sequence, not a mapping"),
            (
                "apiVersion: v1\nkind: ConfigMap\ndata: {honourResources: 'true', downwardApi: 'true'}\n",
                "unknown settings \"honourResources\" (did you mean honorResources?) and \"downwardApi\" (did you mean downwardAPI?); valid settings are resourceNameKeys,",
            ),
        ] {
            let err = read(src).unwrap_err().to_string();
            assert!(err.contains(want), "{src}: {err}");
        }
    }

    fn read(src: &str, from_config_map: bool) -> Result<Settings, SettingsError> {
        let node = parse_document(src).unwrap();
        let mut settings = Settings::default();
        settings.apply(node.as_map().unwrap(), from_config_map)?;
        Ok(settings)
    }

    #[test]
    fn reads_every_setting() {
        let typed = read(
            "resourceNameKeys: [example.com/resource, k8s.v1.cni.cncf.io/resourceName]
honorResources: true
downwardAPI: true
injections: {nri-inject-annotation: {annotations: {top-secret: 'yes'}}}
interfaceNames: deterministic
claimedResourceNames: [intel.com/sriov_vf]
defaultNamespace: apps
",
            false,
        )
        .unwrap();
        let from_config_map = read(
            "resourceNameKeys: '[example.com/resource, k8s.v1.cni.cncf.io/resourceName]'
honorResources: 'true'
downwardAPI: 'true'
injections: '{nri-inject-annotation: {annotations: {top-secret: \"yes\"}}}'
interfaceNames: deterministic
claimedResourceNames: '[intel.com/sriov_vf]'
defaultNamespace: apps
",
            true,
        )
        .unwrap();
        assert_eq!(typed, from_config_map);
        assert_eq!(
            typed.resource_name_keys,
            ["example.com/resource", RESOURCE_NAME_ANNOTATION]
        );
        assert!(typed.honor_resources && typed.downward_api);
        assert_eq!(typed.interface_names, InterfaceNames::Deterministic);
        assert_eq!(
            typed.claimed_resource_names.as_deref(),
            Some(&["intel.com/sriov_vf".to_string()][..])
        );
        assert_eq!(
            typed.injections["nri-inject-annotation"]["top-secret"],
            "yes"
        );
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (src, want) in [
            (
                "colour: red",
                "unknown setting \"colour\"; valid settings are resourceNameKeys,",
            ),
            (
                "honorResources: yes-please",
                "setting honorResources: must be true or false",
            ),
            ("resourceNameKeys: []", "must list at least one"),
            (
                "resourceNameKeys: ['not a key']",
                "\"not a key\" is not a valid annotation key",
            ),
            ("resourceNameKeys: [a/b, a/b]", "\"a/b\" is listed twice"),
            (
                "interfaceNames: random",
                "\"random\" is not one of keep, deterministic",
            ),
            (
                "claimedResourceNames: [a/b, 'not a name']",
                "\"not a name\" is not a valid resource name",
            ),
            (
                "claimedResourceNames: a/b",
                "setting claimedResourceNames: must be a list of resource names",
            ),
            (
                "injections: {l: {labels: {}}}",
                "l: unknown field \"labels\"",
            ),
            (
                "injections: {l: {annotations: {k8s.v1.cni.cncf.io/networks: 'other/a'}}}",
                "must be a comma list of network names",
            ),
            (
                "injections: {l: {annotations: {k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\"}]'}}}",
                "must be a comma list of network names",
            ),
            (
                "injections: {l: {annotations: {k8s.v1.cni.cncf.io/networks: ''}}}",
                "must be a comma list of network names",
            ),
        ] {
            let err = read(src, false).unwrap_err().to_string();
            assert!(err.contains(want), "{src}: {err}");
        }
    }
}
