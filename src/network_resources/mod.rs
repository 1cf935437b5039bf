//! The network-resources rules (after network-resources-injector): what a pod
//! template gets from the NetworkAttachmentDefinitions it selects. Pure code,
//! shared by the KRM function, the renderer and the webhook.
//!
//! For every selection in `k8s.v1.cni.cncf.io/networks` and
//! `v1.multus-cni.io/default-network`, the selected NAD must exist. Each NAD's
//! resource name (one of the configured annotation keys) counts one; the
//! totals go into the first container's requests and limits, leaving alone a
//! resource the user set in any container, or, with `honorResources`, added to
//! the first container's own value. Each NAD's node selector is merged into
//! `spec.nodeSelector`. Optionally the `podnetinfo` downward-API volume
//! exposes labels, annotations and hugepages. Injections add annotations to
//! pods labelled `<label>: "true"`. With `interfaceNames: deterministic`, every
//! selection without an interface gets the Kaloom podagent name
//! ([`crate::multus::interface_name`]). What the rules add is recorded on the
//! workload ([`record::RECORD_ANNOTATION`]), so a later render changes or
//! removes exactly that.
//!
//! This module holds one pod template's rules and the NADs they see; the
//! edits are in `injections`, `resources`, `node_selector` and
//! `downward_api`; [`package`] applies the rules to a whole package and
//! [`settings`] reads the `NetworkResources` kind.

mod downward_api;
mod injections;
mod node_selector;
pub mod package;
pub mod record;
mod resources;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};

use crate::k8s::namespace::Lookup;
use crate::k8s::resource;
use crate::k8s::workload::{
    WorkloadKind, metadata_is_a_map, remove_annotation, template_annotations, template_labels,
};
use crate::multus::interface_name::InterfaceNameError;
use crate::multus::networks::{
    DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, Networks, NetworksError,
};
use crate::yaml::{Map, Node, Scalar, Style};

use record::{RECORD_ANNOTATION, Record};
use settings::{InterfaceNames, Settings};

/// The NAD annotation naming the node label a network needs (`key=value` or `key`).
pub const NODE_SELECTOR_ANNOTATION: &str = "k8s.v1.cni.cncf.io/nodeSelector";
/// The downward-API volume (and its mounts).
pub const PODNETINFO: &str = "podnetinfo";
/// Where the volume is mounted.
pub const PODNETINFO_PATH: &str = "/etc/podnetinfo";
/// The variable telling a container its name, for its hugepage files.
pub const CONTAINER_NAME_ENV: &str = "CONTAINER_NAME";

/// The NetworkAttachmentDefinitions the rules can see.
pub trait Nads {
    /// The annotations of NAD `name` in `namespace`, if it exists.
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup>;
}

/// The NAD annotations the rules read: the resource-name keys and the node
/// selector. The function and the webhook's cache keep only these.
pub fn nad_annotation_keys(resource_name_keys: &[String]) -> Vec<String> {
    let mut keys = resource_name_keys.to_vec();
    keys.push(NODE_SELECTOR_ANNOTATION.to_string());
    keys
}

/// NADs by namespace and name, with their annotations: what the function
/// finds in its input. Looked up without building a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NadTable(BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>);

impl NadTable {
    /// Adds a NAD; false when one of that namespace and name was there already.
    pub fn insert(
        &mut self,
        namespace: String,
        name: String,
        annotations: BTreeMap<String, String>,
    ) -> bool {
        self.0
            .entry(namespace)
            .or_default()
            .insert(name, annotations)
            .is_none()
    }
}

impl FromIterator<((String, String), BTreeMap<String, String>)> for NadTable {
    fn from_iter<I: IntoIterator<Item = ((String, String), BTreeMap<String, String>)>>(
        iter: I,
    ) -> Self {
        let mut table = NadTable::default();
        for ((namespace, name), annotations) in iter {
            table.insert(namespace, name, annotations);
        }
        table
    }
}

impl Nads for NadTable {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.0.get(namespace)?.get(name).map(|a| a as &dyn Lookup)
    }
}

/// A test NAD: namespace, name and annotations.
#[cfg(test)]
pub(crate) type TestNad<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

/// A NAD table for tests.
#[cfg(test)]
pub(crate) fn nad_table(entries: &[TestNad]) -> NadTable {
    entries
        .iter()
        .map(|(ns, name, annotations)| {
            let annotations = annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            ((ns.to_string(), name.to_string()), annotations)
        })
        .collect()
}

/// Why a pod template cannot get its network resources. Nothing changes then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A networks annotation Multus would reject.
    #[error("annotation {annotation}: {source}")]
    Networks {
        /// The annotation.
        annotation: &'static str,
        /// What is wrong.
        source: NetworksError,
    },
    /// The default-network annotation selects more or fewer than one network.
    #[error("annotation {DEFAULT_NETWORK_ANNOTATION}: selects {0} networks; it takes exactly one")]
    DefaultNetworkCount(usize),
    /// Selected NADs that do not exist.
    #[error("{}", missing(.0))]
    MissingNads(Vec<String>),
    /// A NAD's node selector is malformed.
    #[error(
        "NetworkAttachmentDefinition {nad}: annotation {NODE_SELECTOR_ANNOTATION} {value:?} has more than one \"=\""
    )]
    NodeSelector {
        /// The NAD, `namespace/name`.
        nad: String,
        /// The annotation's value.
        value: String,
    },
    /// Two sources want different values for one node label.
    #[error(
        "spec.nodeSelector {key}: {first} asks for {first_value:?} but {second} for {second_value:?}"
    )]
    NodeSelectorConflict {
        /// The node label.
        key: String,
        /// Where the first value comes from.
        first: String,
        /// The first value.
        first_value: String,
        /// Where the second value comes from.
        second: String,
        /// The second value.
        second_value: String,
    },
    /// Two injections set one annotation to different values.
    #[error(
        "injections {first} and {second} set annotation {key} to different values; the pod has both labels"
    )]
    InjectionConflict {
        /// The annotation.
        key: String,
        /// The first injection's label.
        first: String,
        /// The second injection's label.
        second: String,
    },
    /// Interfaces cannot be named deterministically.
    #[error("annotation {NETWORKS_ANNOTATION}: {0}{hint}", hint = interface_hint(.0))]
    InterfaceNames(InterfaceNameError),
    /// A field has the wrong shape.
    #[error("{0}")]
    Shape(String),
}

fn interface_hint(e: &InterfaceNameError) -> &'static str {
    match e {
        InterfaceNameError::Collision { .. } => {
            " (interfaceNames: deterministic hashes the network name only); give one of them an explicit interface"
        }
        _ => "",
    }
}

fn missing(nads: &[String]) -> String {
    match nads {
        [one] => format!("selects NetworkAttachmentDefinition {one}, which does not exist"),
        [rest @ .., last] => format!(
            "selects NetworkAttachmentDefinitions {} and {last}, which do not exist",
            rest.join(", ")
        ),
        [] => "selects no missing NetworkAttachmentDefinition".into(),
    }
}

/// What the rules did to one pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// What the rules now own on the workload.
    pub record: Record,
    /// What changed, one line each.
    pub changes: Vec<String>,
    /// Things the user should know.
    pub warnings: Vec<String>,
}

/// Brings one workload object (a Pod or a resource holding a pod template) in
/// line with the rules and records what they own on it; `None` when it has no
/// pod template. On error nothing changes.
pub fn workload(
    object: &mut Node,
    kind: &WorkloadKind,
    settings: &Settings,
    pod_namespace: &str,
    nads: &dyn Nads,
) -> Result<Option<Applied>, Error> {
    if object.as_map().is_none() {
        return Err(Error::Shape(format!(
            "the object is {}, not a mapping",
            object.kind_name()
        )));
    }
    // The record goes in metadata.annotations, so its shape is checked before
    // the template changes.
    let meta = object.as_map().and_then(|o| o.get("metadata"));
    if let Some(meta) = present(meta) {
        let shape = |path: &str, node: &Node| {
            Error::Shape(format!("{path} is {}, not a mapping", node.kind_name()))
        };
        let meta = meta.as_map().ok_or_else(|| shape("metadata", meta))?;
        if let Some(a) = present(meta.get("annotations")).filter(|a| a.as_map().is_none()) {
            return Err(shape("metadata.annotations", a));
        }
    }
    let before = match resource::annotation(object, RECORD_ANNOTATION) {
        Some(text) => Record::parse(text)
            .map_err(|e| Error::Shape(format!("annotation {RECORD_ANNOTATION}: {e}")))?,
        None => Record::default(),
    };
    let Some(template) = kind.pod_template_mut(object).map_err(Error::Shape)? else {
        return Ok(None);
    };
    let applied = apply(template, settings, pod_namespace, nads, &before)?;
    if applied.record != before {
        let object = object.as_map_mut().expect("checked above");
        if applied.record.is_empty() {
            remove_annotation(object, RECORD_ANNOTATION);
        } else {
            let annotations = object
                .map_entry("metadata")
                .and_then(|m| m.map_entry("annotations"))
                .ok_or_else(|| Error::Shape("metadata.annotations is not a mapping".into()))?;
            // JSON reads best single-quoted: no escaped double quotes.
            annotations.insert(
                RECORD_ANNOTATION,
                Node::Scalar(Scalar {
                    value: applied.record.to_text().into(),
                    style: Style::SingleQuoted,
                    props: None,
                }),
            );
        }
    }
    Ok(Some(applied))
}

/// Brings a pod template in line with the rules, given what they owned before.
pub fn apply(
    template: &mut Map,
    settings: &Settings,
    pod_namespace: &str,
    nads: &dyn Nads,
    before: &Record,
) -> Result<Applied, Error> {
    metadata_is_a_map(template).map_err(Error::Shape)?;
    if before.is_empty() && !asks_for_anything(template, settings) {
        return Ok(Applied::default());
    }
    // The metadata rules, when any can apply, work on a copy of the metadata
    // (a few annotations and labels); the spec is edited in place, but only
    // after `check_spec` and the node-selector conflicts have passed, so an
    // error leaves the template as it was without copying the whole template.
    let metadata_rules = !settings.injections.is_empty()
        || !before.annotations.is_empty()
        || !before.networks.is_empty()
        || settings.interface_names == InterfaceNames::Deterministic;
    let mut head = Map::default();
    let mut out = Applied::default();
    if metadata_rules {
        if let Some(metadata) = template.get("metadata") {
            head.insert("metadata", metadata.clone());
        }
        injections::inject(&mut head, settings, pod_namespace, before, &mut out)?;
        if settings.interface_names == InterfaceNames::Deterministic {
            injections::name_interfaces(&mut head, &mut out)?;
        }
    }
    let selected = selections(if metadata_rules { &head } else { template }, pod_namespace)?;
    let wanted = wanted(&selected, settings, nads)?;
    let downward = settings.downward_api && !wanted.counts.is_empty();
    let resources_needed =
        !(wanted.counts.is_empty() && before.requests.is_empty() && before.limits.is_empty());
    check_spec(template, &wanted.counts, resources_needed, downward)?;
    let spec = spec_of(template)?;
    // First, as its conflicts are found before it edits anything.
    node_selector::node_selector(spec, &wanted.node_selector, before, &mut out)?;
    if resources_needed {
        resources::resources(spec, settings, &wanted.counts, before, &mut out)?;
    }
    downward_api::downward_api(spec, downward, before, &mut out)?;
    if let Some(metadata) = head.remove("metadata") {
        template.insert("metadata", metadata);
    }
    Ok(out)
}

/// Checks every shape the spec edits rely on before any is made, so that once
/// it passes they cannot fail half-way.
fn check_spec(
    template: &Map,
    counts: &BTreeMap<String, u64>,
    resources: bool,
    downward: bool,
) -> Result<(), Error> {
    let shape = |path: String, what: &str, node: &Node| {
        Error::Shape(format!("{path} is {}, not {what}", node.kind_name()))
    };
    let empty = Map::default();
    let spec = match present(template.get("spec")) {
        None => &empty,
        Some(Node::Map(spec)) => spec,
        Some(other) => return Err(shape("spec".into(), "a mapping", other)),
    };
    let all = containers(spec);
    if resources {
        match all.first() {
            None if counts.is_empty() => {}
            None => {
                return Err(Error::Shape(
                    "spec.containers is empty or missing: the network resources have no container to go in"
                        .into(),
                ));
            }
            Some(first) => {
                let first = first
                    .as_map()
                    .ok_or_else(|| shape("spec.containers[0]".into(), "a mapping", first))?;
                if let Some(r) = present(first.get("resources")) {
                    let r = r.as_map().ok_or_else(|| {
                        shape("spec.containers[0].resources".into(), "a mapping", r)
                    })?;
                    for field in ["requests", "limits"] {
                        if let Some(f) = present(r.get(field)).filter(|f| f.as_map().is_none()) {
                            let path = format!("spec.containers[0].resources.{field}");
                            return Err(shape(path, "a mapping", f));
                        }
                    }
                }
            }
        }
    }
    if downward {
        if let Some(v) = present(spec.get("volumes")).filter(|v| v.as_seq().is_none()) {
            return Err(shape("spec.volumes".into(), "a list", v));
        }
        for (i, c) in all.iter().enumerate() {
            let Some(c) = c.as_map() else { continue };
            for key in ["volumeMounts", "env"] {
                if let Some(v) = present(c.get(key)).filter(|v| v.as_seq().is_none()) {
                    return Err(shape(format!("spec.containers[{i}].{key}"), "a list", v));
                }
            }
        }
    }
    Ok(())
}

/// A field that is there and not null.
fn present(node: Option<&Node>) -> Option<&Node> {
    node.filter(|n| !n.is_null())
}

/// Whether a template the rules own nothing on selects a network or has an
/// injection's label: most templates do neither and are left without a copy.
fn asks_for_anything(t: &Map, settings: &Settings) -> bool {
    let selects = template_annotations(t).is_some_and(|a| {
        a.get(NETWORKS_ANNOTATION).is_some() || a.get(DEFAULT_NETWORK_ANNOTATION).is_some()
    });
    let labelled =
        template_labels(t).is_some_and(|l| settings.injections.keys().any(|k| l.get(k).is_some()));
    selects || labelled
}

/// The pod template's `spec`, created when missing.
fn spec_of(t: &mut Map) -> Result<&mut Map, Error> {
    t.map_entry("spec")
        .ok_or_else(|| Error::Shape("spec is not a mapping".into()))
}

/// The selected networks, `(namespace, name)`, the default network first.
fn selections(t: &Map, pod_namespace: &str) -> Result<Vec<(String, String)>, Error> {
    let annotations = template_annotations(t);
    let mut out = Vec::new();
    for annotation in [DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION] {
        let Some(value) = annotations.and_then(|a| a.get(annotation)) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        let text = value.as_str().ok_or_else(|| {
            Error::Shape(format!(
                "annotation {annotation} is {}, not a string",
                value.kind_name()
            ))
        })?;
        let networks =
            Networks::parse(text).map_err(|source| Error::Networks { annotation, source })?;
        let selections = networks.selections();
        if annotation == DEFAULT_NETWORK_ANNOTATION && selections.len() > 1 {
            return Err(Error::DefaultNetworkCount(selections.len()));
        }
        out.extend(
            selections
                .iter()
                .map(|s| (s.namespace_or(pod_namespace).to_string(), s.name.clone())),
        );
    }
    Ok(out)
}

/// What the selected NADs ask for.
#[derive(Default)]
struct Wanted {
    /// Resource name to count.
    counts: BTreeMap<String, u64>,
    /// Node label to its value and the NAD asking for it.
    node_selector: BTreeMap<String, (String, String)>,
}

fn wanted(
    selected: &[(String, String)],
    settings: &Settings,
    nads: &dyn Nads,
) -> Result<Wanted, Error> {
    let mut wanted = Wanted::default();
    let mut missing: Vec<String> = Vec::new();
    for (namespace, name) in selected {
        let id = || format!("{namespace}/{name}");
        let Some(annotations) = nads.annotations(namespace, name) else {
            if !missing.contains(&id()) {
                missing.push(id());
            }
            continue;
        };
        let resources: BTreeSet<&str> = settings
            .resource_name_keys
            .iter()
            .filter_map(|k| annotations.lookup(k))
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .collect();
        for r in resources {
            *wanted.counts.entry(r.to_string()).or_default() += 1;
        }
        if let Some(value) = annotations.lookup(NODE_SELECTOR_ANNOTATION) {
            let (key, label) = match value.split('=').collect::<Vec<_>>().as_slice() {
                [key] => (key.trim(), ""),
                [key, label] => (key.trim(), label.trim()),
                _ => {
                    return Err(Error::NodeSelector {
                        nad: id(),
                        value: value.to_string(),
                    });
                }
            };
            let source = format!("NetworkAttachmentDefinition {}", id());
            match wanted.node_selector.get(key) {
                Some((v, first)) if v != label => {
                    return Err(Error::NodeSelectorConflict {
                        key: key.to_string(),
                        first: first.clone(),
                        first_value: v.clone(),
                        second: source,
                        second_value: label.to_string(),
                    });
                }
                Some(_) => {}
                None => {
                    wanted
                        .node_selector
                        .insert(key.to_string(), (label.to_string(), source));
                }
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::MissingNads(missing));
    }
    Ok(wanted)
}

fn containers(spec: &Map) -> &[Node] {
    spec.get("containers")
        .and_then(Node::as_seq)
        .map_or(&[], |s| s.items.as_slice())
}

fn containers_mut(spec: &mut Map) -> &mut [Node] {
    match spec.get_mut("containers") {
        Some(Node::Seq(s)) => s.items.as_mut_slice(),
        _ => &mut [],
    }
}

fn container_name(c: &Node) -> String {
    c.as_map()
        .and_then(|m| m.get_text("name"))
        .unwrap_or_default()
        .to_string()
}

/// `resources.<field>.<resource>` of a container.
fn resource_value<'a>(container: &'a Node, field: &str, resource: &str) -> Option<&'a Node> {
    container
        .as_map()?
        .get("resources")?
        .as_map()?
        .get(field)?
        .as_map()?
        .get(resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;
    use record::Share;

    fn nads() -> NadTable {
        nad_table(&[
            ("ns", "a", &[(settings::RESOURCE_NAME_ANNOTATION, "r/a")]),
            ("ns", "rack1", &[(NODE_SELECTOR_ANNOTATION, "rack=1")]),
            ("ns", "rack2", &[(NODE_SELECTOR_ANNOTATION, "rack = 2")]),
        ])
    }

    /// The first container's requests of `r/a` after applying the rules.
    fn requests(template: &Map) -> Option<String> {
        containers(template.get("spec")?.as_map()?)
            .first()
            .and_then(|c| resource_value(c, "requests", "r/a"))
            .and_then(Node::as_text)
            .map(str::to_string)
    }

    /// Networks, first container's requests, honor, recorded share, wanted requests and share.
    type Case = (
        &'static str,
        Option<&'static str>,
        bool,
        BTreeMap<String, Share>,
        Option<&'static str>,
        Option<Share>,
    );

    #[test]
    fn resources_by_what_was_recorded() {
        let set = |n| BTreeMap::from([("r/a".to_string(), Share::Set(n))]);
        let added = |n| BTreeMap::from([("r/a".to_string(), Share::Added(n))]);
        let cases: [Case; 8] = [
            (
                "a, a",
                None,
                false,
                BTreeMap::new(),
                Some("2"),
                Some(Share::Set(2)),
            ),
            (
                "a",
                Some("2"),
                false,
                set(2),
                Some("1"),
                Some(Share::Set(1)),
            ),
            ("", Some("2"), false, set(2), None, None),
            ("a", Some("5"), false, set(2), Some("5"), None),
            (
                "a",
                Some("4"),
                true,
                BTreeMap::new(),
                Some("5"),
                Some(Share::Added(1)),
            ),
            (
                "a, a",
                Some("5"),
                true,
                added(1),
                Some("6"),
                Some(Share::Added(2)),
            ),
            ("", Some("5"), true, added(1), Some("4"), None),
            ("a", Some("3"), false, BTreeMap::new(), Some("3"), None),
        ];
        for (networks, current, honor, owned, want, want_share) in cases {
            let resources = current
                .map(|v| format!("resources: {{requests: {{r/a: '{v}'}}, limits: {{r/a: '{v}'}}}}"))
                .unwrap_or_default();
            let src = format!(
                "metadata: {{annotations: {{k8s.v1.cni.cncf.io/networks: '{networks}'}}}}\nspec: {{containers: [{{name: c, {resources}}}]}}"
            );
            let mut template = parse_document(&src).unwrap().as_map().unwrap().clone();
            let settings = Settings {
                honor_resources: honor,
                ..Settings::default()
            };
            let before = Record {
                requests: owned.clone(),
                limits: owned,
                ..Record::default()
            };
            let applied = apply(&mut template, &settings, "ns", &nads(), &before).unwrap();
            let case = format!("{networks:?} {current:?} honor={honor}");
            assert_eq!(requests(&template).as_deref(), want, "{case}");
            assert_eq!(
                applied.record.requests.get("r/a").copied(),
                want_share,
                "{case}"
            );
            assert_eq!(applied.record.requests, applied.record.limits, "{case}");
        }
    }

    /// Every error, including those found after edits have begun in the
    /// order of the rules (here, an owned node label to remove first),
    /// leaves the template as it was.
    #[test]
    fn errors_leave_the_template_as_it_was() {
        let cases: [(&str, &str, &str); 14] = [
            (
                "labels: {blue: 'true', green: 'true'}",
                "containers: [{name: c}]",
                "injections blue and green set annotation team to different values",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a/b/c'}",
                "containers: [{name: c}]",
                "more than one \"/\"",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'ns/a, other/a'}",
                "containers: [{name: c}]",
                "give one of them an explicit interface",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'absent'}",
                "containers: [{name: c}]",
                "selects NetworkAttachmentDefinition ns/absent, which does not exist",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'rack1, rack2'}",
                "containers: [{name: c}]",
                "ns/rack1 asks for \"1\" but NetworkAttachmentDefinition ns/rack2 for \"2\"",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'rack1'}",
                "nodeSelector: {old: x, rack: '9'}, containers: [{name: c}]",
                "but the workload's own spec.nodeSelector for \"9\"",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: []",
                "spec.containers is empty or missing",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: [c]",
                "spec.containers[0] is a scalar, not a mapping",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: [{name: c, resources: x}]",
                "spec.containers[0].resources is a scalar, not a mapping",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: [{name: c, resources: {limits: [1]}}]",
                "spec.containers[0].resources.limits is a sequence, not a mapping",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, volumes: {}, containers: [{name: c}]",
                "spec.volumes is a mapping, not a list",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: [{name: c}, {name: d, volumeMounts: x}]",
                "spec.containers[1].volumeMounts is a scalar, not a list",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "nodeSelector: {old: x}, containers: [{name: c, env: {}}]",
                "spec.containers[0].env is a mapping, not a list",
            ),
            (
                "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
                "",
                "spec is a scalar, not a mapping",
            ),
        ];
        let nads = nad_table(&[
            ("ns", "a", &[(settings::RESOURCE_NAME_ANNOTATION, "r/a")]),
            ("other", "a", &[]),
            ("ns", "rack1", &[(NODE_SELECTOR_ANNOTATION, "rack=1")]),
            ("ns", "rack2", &[(NODE_SELECTOR_ANNOTATION, "rack=2")]),
        ]);
        let injection = |team: &str| BTreeMap::from([("team".to_string(), team.to_string())]);
        let settings = Settings {
            downward_api: true,
            interface_names: InterfaceNames::Deterministic,
            injections: BTreeMap::from([
                ("blue".to_string(), injection("b")),
                ("green".to_string(), injection("g")),
            ]),
            ..Settings::default()
        };
        let before = Record {
            node_selector: BTreeMap::from([("old".to_string(), "x".to_string())]),
            ..Record::default()
        };
        for (metadata, spec, want) in cases {
            let spec = if spec.is_empty() {
                "x".to_string()
            } else {
                format!("{{{spec}}}")
            };
            let src = format!("metadata: {{{metadata}}}\nspec: {spec}");
            let mut template = parse_document(&src).unwrap().as_map().unwrap().clone();
            let original = template.clone();
            let err = apply(&mut template, &settings, "ns", &nads, &before)
                .expect_err(&src)
                .to_string();
            assert!(err.contains(want), "{src}: {err}");
            assert_eq!(template, original, "{src}: an error changes nothing");
        }
    }

    /// The record needs `metadata.annotations` of the workload itself: a bad
    /// one is found before the template changes.
    #[test]
    fn a_workload_without_room_for_its_record_is_left_as_it_was() {
        let kinds = crate::k8s::workload::WorkloadKinds::new(&[]);
        let deployment = kinds.find("apps", "Deployment").unwrap();
        for (metadata, want) in [
            (
                "{name: web, annotations: [x]}",
                "metadata.annotations is a sequence, not a mapping",
            ),
            ("web", "metadata is a scalar, not a mapping"),
        ] {
            let src = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {metadata}\nspec:\n  template:\n    metadata: {{annotations: {{k8s.v1.cni.cncf.io/networks: a}}}}\n    spec: {{containers: [{{name: c}}]}}\n"
            );
            let mut object = parse_document(&src).unwrap();
            let original = object.clone();
            let err =
                workload(&mut object, deployment, &Settings::default(), "ns", &nads()).unwrap_err();
            assert_eq!(err.to_string(), want, "{metadata}");
            assert_eq!(object, original, "{metadata}: an error changes nothing");
        }
    }

    #[test]
    fn node_selectors_conflict_by_source() {
        let mut template = parse_document(
            "metadata: {annotations: {k8s.v1.cni.cncf.io/networks: 'rack1, rack2'}}\nspec: {containers: [{name: c}]}",
        )
        .unwrap()
        .as_map()
        .unwrap()
        .clone();
        let original = template.clone();
        let err = apply(
            &mut template,
            &Settings::default(),
            "ns",
            &nads(),
            &Record::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.nodeSelector rack: NetworkAttachmentDefinition ns/rack1 asks for \"1\" but NetworkAttachmentDefinition ns/rack2 for \"2\""
        );
        assert_eq!(template, original, "an error changes nothing");
    }
}
