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
//! ([`crate::k8s::interface_name`]). What the rules add is recorded on the
//! workload ([`record::RECORD_ANNOTATION`]), so a later render changes or
//! removes exactly that.

pub mod record;
pub mod render;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};

use crate::k8s::interface_name::{self, InterfaceNameError};
use crate::k8s::namespace::Lookup;
use crate::k8s::networks::{
    DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, Networks, NetworksError, Selection,
};
use crate::k8s::resource;
use crate::k8s::workload::{
    WorkloadKind, metadata_is_a_map, remove_annotation, set_annotation, template_annotations,
    template_labels,
};
use crate::yaml::{Map, Node, Scalar, Seq, Style};

use record::{RECORD_ANNOTATION, Record, Share};
use settings::{InterfaceNames, Settings};

/// The NAD annotation naming the node label a network needs (`key=value` or `key`).
pub const NODE_SELECTOR_ANNOTATION: &str = "k8s.v1.cni.cncf.io/nodeSelector";
/// The downward-API volume (and its mounts).
pub const PODNETINFO: &str = "podnetinfo";
/// Where the volume is mounted.
pub const PODNETINFO_PATH: &str = "/etc/podnetinfo";
/// The variable telling a container its name, for its hugepage files.
pub const CONTAINER_NAME_ENV: &str = "CONTAINER_NAME";

/// Hugepage quantities exposed through the downward API: field, resource, file prefix.
const HUGEPAGES: [(&str, &str, &str); 4] = [
    ("requests", "hugepages-1Gi", "hugepages_1G_request"),
    ("requests", "hugepages-2Mi", "hugepages_2M_request"),
    ("limits", "hugepages-1Gi", "hugepages_1G_limit"),
    ("limits", "hugepages-2Mi", "hugepages_2M_limit"),
];

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
                    tag: None,
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
        inject(&mut head, settings, pod_namespace, before, &mut out)?;
        if settings.interface_names == InterfaceNames::Deterministic {
            name_interfaces(&mut head, &mut out)?;
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
    node_selector(spec, &wanted.node_selector, before, &mut out)?;
    if resources_needed {
        resources(spec, settings, &wanted.counts, before, &mut out)?;
    }
    downward_api(spec, downward, before, &mut out)?;
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

/// Adds the annotations of the injections whose label is `true`, removes those
/// it added that are no longer wanted.
fn inject(
    t: &mut Map,
    settings: &Settings,
    pod_namespace: &str,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let labels = template_labels(t);
    let mut wanted: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for (label, annotations) in &settings.injections {
        let on = labels
            .and_then(|l| l.get_text(label))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !on {
            continue;
        }
        for (key, value) in annotations {
            match wanted.get(key.as_str()) {
                Some((v, first)) if v != value => {
                    return Err(Error::InjectionConflict {
                        key: key.clone(),
                        first: first.to_string(),
                        second: label.clone(),
                    });
                }
                _ => {
                    wanted.insert(key, (value, label));
                }
            }
        }
    }
    let networks: Vec<&str> = wanted
        .remove(NETWORKS_ANNOTATION)
        .map(|(v, _)| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let current = |t: &Map, key: &str| {
        template_annotations(t)
            .and_then(|a| a.get_text(key))
            .map(str::to_string)
    };
    for (key, ours) in &before.annotations {
        if wanted.contains_key(key.as_str()) {
            continue;
        }
        match current(t, key) {
            Some(v) if v == *ours => {
                remove_annotation(t, key);
                out.changes
                    .push(format!("removed injected annotation {key}"));
            }
            Some(_) => out.changes.push(format!(
                "injected annotation {key} was edited by hand; it is left to the user"
            )),
            None => {}
        }
    }
    for (key, (value, label)) in wanted {
        let ours = before.annotations.get(key);
        match current(t, key) {
            Some(v) if ours == Some(&v) => {
                if v != value {
                    set(t, key, value)?;
                    out.changes
                        .push(format!("set annotation {key} (injection {label})"));
                }
                out.record.annotations.insert(key.into(), value.into());
            }
            Some(_) if ours.is_some() => out.changes.push(format!(
                "injected annotation {key} was edited by hand; it is left to the user"
            )),
            Some(v) if v == value => {}
            Some(_) => out.warnings.push(format!(
                "annotation {key} is already set; injection {label} leaves it as it is"
            )),
            None => {
                set(t, key, value)?;
                out.changes
                    .push(format!("set annotation {key} (injection {label})"));
                out.record.annotations.insert(key.into(), value.into());
            }
        }
    }
    inject_networks(t, &networks, pod_namespace, before, out)
}

fn set(t: &mut Map, key: &str, value: &str) -> Result<(), Error> {
    set_annotation(t, key, value.to_string()).map_err(Error::Shape)
}

/// Appends the injected networks to the networks annotation, each as a plain
/// selection, and removes those it appended that are no longer wanted.
fn inject_networks(
    t: &mut Map,
    wanted: &[&str],
    pod_namespace: &str,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let networks_error = |source| Error::Networks {
        annotation: NETWORKS_ANNOTATION,
        source,
    };
    let mut text = template_annotations(t)
        .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
        .map(str::to_string);
    let original = text.clone();
    for name in &before.networks {
        if wanted.contains(&name.as_str()) {
            continue;
        }
        let Some(current) = &text else { continue };
        let parsed = Networks::parse(current).map_err(networks_error)?;
        match parsed.without_first(|s| injected_entry(s, name)) {
            Some(rest) => {
                text = Some(rest);
                out.changes
                    .push(format!("removed injected network {name}"));
            }
            None => out.warnings.push(format!(
                "the {name} entry an injection added to {NETWORKS_ANNOTATION} is gone or was edited; the annotation is left as it is"
            )),
        }
    }
    for name in wanted {
        let parsed = text
            .as_deref()
            .map(Networks::parse)
            .transpose()
            .map_err(networks_error)?;
        let referenced = parsed
            .as_ref()
            .is_some_and(|n| n.references(name, pod_namespace));
        if !referenced {
            text = Some(match &parsed {
                Some(n) => n.with_appended(name),
                None => name.to_string(),
            });
            out.changes.push(format!("added injected network {name}"));
            out.record.networks.insert(name.to_string());
        } else if before.networks.contains(*name)
            && parsed.is_some_and(|n| n.selections().iter().any(|s| injected_entry(s, name)))
        {
            out.record.networks.insert(name.to_string());
        }
    }
    if text != original {
        match text.filter(|t| !t.trim().is_empty()) {
            Some(t2) => set(t, NETWORKS_ANNOTATION, &t2)?,
            None => remove_annotation(t, NETWORKS_ANNOTATION),
        }
    }
    Ok(())
}

/// Gives every selection without an interface its deterministic name. Names are
/// not recorded: once given, they are what the pod's software sees, so turning
/// the setting off leaves them in place.
fn name_interfaces(t: &mut Map, out: &mut Applied) -> Result<(), Error> {
    let Some(text) = template_annotations(t).and_then(|a| a.get_text(NETWORKS_ANNOTATION)) else {
        return Ok(());
    };
    if let Some(named) = interface_name::name_interfaces(text).map_err(|e| match e {
        InterfaceNameError::Networks(source) => Error::Networks {
            annotation: NETWORKS_ANNOTATION,
            source,
        },
        e => Error::InterfaceNames(e),
    })? {
        set(t, NETWORKS_ANNOTATION, &named)?;
        out.changes
            .push(format!("named the interfaces in {NETWORKS_ANNOTATION}"));
    }
    Ok(())
}

/// Whether `s` is the entry an injection appended for network `name`: the plain
/// name, or the name with its deterministic interface.
fn injected_entry(s: &Selection, name: &str) -> bool {
    (s.is_plain() && s.name == name) || s.is_exactly(name, &interface_name::deterministic(name))
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

/// A quantity as written: a whole number, or something else the rules do not add to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Quantity {
    Count(u64),
    Other(String),
}

fn quantity(node: &Node) -> Quantity {
    let text = node.as_text().unwrap_or_default();
    match text.trim().parse::<u64>() {
        Ok(n) => Quantity::Count(n),
        Err(_) => Quantity::Other(text.to_string()),
    }
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

/// Sets or removes the first container's requests and limits; `check_spec`
/// has checked their shapes.
fn resources(
    spec: &mut Map,
    settings: &Settings,
    counts: &BTreeMap<String, u64>,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let all = containers(spec);
    // `check_spec` has made sure there is a first container when counts ask for one.
    let Some(first) = all.first().filter(|c| c.as_map().is_some()) else {
        return Ok(());
    };
    let first_name = container_name(first);
    let names: BTreeSet<&String> = counts
        .keys()
        .chain(before.requests.keys())
        .chain(before.limits.keys())
        .collect();
    let mut writes: Vec<Write> = Vec::new();
    for name in names {
        let count = counts.get(name).copied().unwrap_or(0);
        let mut bases = Vec::with_capacity(2);
        for (field, owned) in [("requests", &before.requests), ("limits", &before.limits)] {
            let current = resource_value(first, field, name).map(quantity);
            let base = match (owned.get(name), &current) {
                (Some(Share::Set(n)), Some(Quantity::Count(c))) if c == n => None,
                (Some(Share::Added(n)), Some(Quantity::Count(c))) if c >= n => {
                    Some(Quantity::Count(c - n))
                }
                (Some(_), Some(_)) => {
                    out.changes.push(format!(
                        "{field} of {name} in container {first_name} was edited by hand; it is left to the user"
                    ));
                    current.clone()
                }
                _ => current.clone(),
            };
            bases.push((field, current, base));
        }
        let user_elsewhere = all[1..].iter().any(|c| {
            resource_value(c, "requests", name).is_some()
                || resource_value(c, "limits", name).is_some()
        });
        let user_first = bases.iter().any(|(_, _, base)| base.is_some());
        for (field, current, base) in bases {
            let record = if field == "requests" {
                &mut out.record.requests
            } else {
                &mut out.record.limits
            };
            let target = match (&base, count) {
                (_, 0) => base.clone(),
                (Some(Quantity::Other(text)), _) if settings.honor_resources => {
                    out.warnings.push(format!(
                        "{field} of {name} in container {first_name} is {text:?}, not a whole number: {count} cannot be added to it"
                    ));
                    base.clone()
                }
                (Some(Quantity::Count(b)), _) if settings.honor_resources => {
                    record.insert(name.clone(), Share::Added(count));
                    Some(Quantity::Count(b + count))
                }
                (None, _) if settings.honor_resources || !(user_first || user_elsewhere) => {
                    record.insert(name.clone(), Share::Set(count));
                    Some(Quantity::Count(count))
                }
                _ => base.clone(),
            };
            if target != current {
                let value = match target {
                    Some(Quantity::Count(n)) => Some(n),
                    Some(Quantity::Other(_)) => unreachable!("a text value is never written"),
                    None => None,
                };
                let verb = match (&current, value) {
                    (_, None) => Verb::Removed,
                    (None, Some(_)) => Verb::Set,
                    (Some(_), Some(_)) => Verb::Changed,
                };
                writes.push(Write {
                    field,
                    name: name.clone(),
                    value,
                    verb,
                });
            }
        }
    }
    out.changes.extend(write_messages(&writes, &first_name));
    let Some(first) = containers_mut(spec).first_mut().and_then(Node::as_map_mut) else {
        return Ok(());
    };
    for w in writes {
        write_quantity(first, w.field, &w.name, w.value)?;
    }
    Ok(())
}

/// What an edit of a quantity does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Set,
    Changed,
    Removed,
}

/// One edit of `resources.<field>.<name>` of the first container.
struct Write {
    field: &'static str,
    name: String,
    value: Option<u64>,
    verb: Verb,
}

/// The change messages for the edits of one container, short for the common
/// case: a resource whose requests and limits get the same edit is named once,
/// and resources with the same edit share one message, e.g. "set requests and
/// limits r/a, r/b to 1 in container app".
fn write_messages(writes: &[Write], container: &str) -> Vec<String> {
    // (verb, value, fields) -> names, in the order first seen.
    let mut groups: Vec<(Verb, Option<u64>, &str, Vec<&str>)> = Vec::new();
    let mut i = 0;
    while i < writes.len() {
        let w = &writes[i];
        let both = writes.get(i + 1).filter(|n| {
            n.name == w.name && n.field != w.field && n.verb == w.verb && n.value == w.value
        });
        let fields = match both {
            Some(_) => "requests and limits",
            None => w.field,
        };
        i += if both.is_some() { 2 } else { 1 };
        match groups
            .iter_mut()
            .find(|(verb, value, f, _)| (*verb, *value, *f) == (w.verb, w.value, fields))
        {
            Some(group) => group.3.push(&w.name),
            None => groups.push((w.verb, w.value, fields, vec![&w.name])),
        }
    }
    groups
        .into_iter()
        .map(|(verb, value, fields, names)| {
            let names = names.join(", ");
            match (verb, value) {
                (Verb::Removed, _) | (_, None) => {
                    format!("removed {fields} {names} from container {container}")
                }
                (Verb::Set, Some(n)) => {
                    format!("set {fields} {names} to {n} in container {container}")
                }
                (Verb::Changed, Some(n)) => {
                    format!("changed {fields} {names} to {n} in container {container}")
                }
            }
        })
        .collect()
}

/// Sets `resources.<field>.<name>` of a container, keeping the style of an
/// existing value, or removes it and the maps it leaves empty.
fn write_quantity(
    container: &mut Map,
    field: &str,
    name: &str,
    value: Option<u64>,
) -> Result<(), Error> {
    let shape = || {
        Error::Shape(format!(
            "spec.containers[0].resources.{field} is not a mapping"
        ))
    };
    match value {
        Some(n) => {
            let map = container
                .map_entry("resources")
                .and_then(|r| r.map_entry(field))
                .ok_or_else(shape)?;
            match map.get_mut(name) {
                Some(Node::Scalar(s)) => s.value = n.to_string().into(),
                _ => map.insert(name, Node::string(n.to_string())),
            }
        }
        None => {
            let Some(resources) = container.get_mut("resources").and_then(Node::as_map_mut) else {
                return Ok(());
            };
            if let Some(map) = resources.get_mut(field).and_then(Node::as_map_mut) {
                map.remove(name);
                if map.is_empty() {
                    resources.remove(field);
                }
            }
            if resources.is_empty() {
                container.remove("resources");
            }
        }
    }
    Ok(())
}

/// Merges the NADs' node labels into `spec.nodeSelector`.
fn node_selector(
    spec: &mut Map,
    wanted: &BTreeMap<String, (String, String)>,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    if wanted.is_empty() && before.node_selector.is_empty() {
        return Ok(());
    }
    let current: BTreeMap<String, String> = match spec.get("nodeSelector") {
        None => BTreeMap::new(),
        Some(n) if n.is_null() => BTreeMap::new(),
        Some(Node::Map(m)) => m
            .entries
            .iter()
            .filter_map(|(k, v)| Some((k.as_text()?.to_string(), v.as_text()?.to_string())))
            .collect(),
        Some(other) => {
            return Err(Error::Shape(format!(
                "spec.nodeSelector is {}, not a mapping",
                other.kind_name()
            )));
        }
    };
    let mut sets: Vec<(&str, &str)> = Vec::new();
    let mut removes: Vec<&str> = Vec::new();
    for (key, ours) in &before.node_selector {
        match current.get(key) {
            Some(v) if v == ours && !wanted.contains_key(key) => {
                removes.push(key);
                out.changes.push(format!("removed spec.nodeSelector {key}"));
            }
            Some(v) if v == ours => {}
            Some(_) => out.changes.push(format!(
                "spec.nodeSelector {key} was edited by hand; it is left to the user"
            )),
            None => {}
        }
    }
    for (key, (value, source)) in wanted {
        let owned = before
            .node_selector
            .get(key)
            .is_some_and(|ours| current.get(key) == Some(ours));
        match current.get(key) {
            Some(v) if owned => {
                if v != value {
                    sets.push((key, value));
                    out.changes.push(format!(
                        "set spec.nodeSelector {key} to {value:?} ({source})"
                    ));
                }
                out.record.node_selector.insert(key.clone(), value.clone());
            }
            Some(v) if v == value => {}
            Some(v) => {
                return Err(Error::NodeSelectorConflict {
                    key: key.clone(),
                    first: source.clone(),
                    first_value: value.clone(),
                    second: "the workload's own spec.nodeSelector".into(),
                    second_value: v.clone(),
                });
            }
            None => {
                sets.push((key, value));
                out.changes.push(format!(
                    "set spec.nodeSelector {key} to {value:?} ({source})"
                ));
                out.record.node_selector.insert(key.clone(), value.clone());
            }
        }
    }
    if sets.is_empty() && removes.is_empty() {
        return Ok(());
    }
    let map = spec
        .map_entry("nodeSelector")
        .ok_or_else(|| Error::Shape("spec.nodeSelector is not a mapping".into()))?;
    for key in removes {
        map.remove(key);
    }
    for (key, value) in sets {
        match map.get_mut(key) {
            Some(Node::Scalar(s)) => s.value = value.into(),
            _ => map.insert(key, Node::string(value)),
        }
    }
    if map.is_empty() {
        spec.remove("nodeSelector");
    }
    Ok(())
}

fn field_ref(path: &str, field: &str) -> Node {
    Node::mapping([
        ("path", Node::string(path)),
        (
            "fieldRef",
            Node::mapping([("fieldPath", Node::string(field))]),
        ),
    ])
}

/// Whether a quantity is set and not zero.
fn nonzero(node: &Node) -> bool {
    node.as_text().is_some_and(|t| {
        let digits: String = t
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        digits.chars().any(|c| c.is_ascii_digit() && c != '0')
    })
}

/// The hugepage files of one container: `(file, resource)`.
fn hugepage_files(container: &Node) -> Vec<(String, String)> {
    let name = container_name(container);
    HUGEPAGES
        .iter()
        .filter(|(field, resource, _)| {
            resource_value(container, field, resource).is_some_and(nonzero)
        })
        .map(|(field, resource, file)| (format!("{file}_{name}"), format!("{field}.{resource}")))
        .collect()
}

/// The `podnetinfo` volume for these containers.
fn podnetinfo_volume(containers: &[Node]) -> Node {
    let mut items = vec![
        field_ref("labels", "metadata.labels"),
        field_ref("annotations", "metadata.annotations"),
    ];
    for container in containers {
        for (file, resource) in hugepage_files(container) {
            items.push(Node::mapping([
                ("path", Node::string(file)),
                (
                    "resourceFieldRef",
                    Node::mapping([
                        ("containerName", Node::string(container_name(container))),
                        ("resource", Node::string(resource)),
                        ("divisor", Node::string("1Mi")),
                    ]),
                ),
            ]));
        }
    }
    Node::mapping([
        ("name", Node::string(PODNETINFO)),
        (
            "downwardAPI",
            Node::mapping([(
                "items",
                Node::Seq(Seq {
                    items,
                    ..Seq::default()
                }),
            )]),
        ),
    ])
}

fn named<'a>(list: Option<&'a Node>, name: &str) -> Option<&'a Node> {
    list?
        .as_seq()?
        .items
        .iter()
        .find(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(name))
}

/// A list field of a map (`volumes`, `volumeMounts`, `env`), created when missing.
fn list_entry<'a>(map: &'a mut Map, key: &str) -> Result<&'a mut Vec<Node>, Error> {
    if map.get(key).is_none_or(Node::is_null) {
        map.insert(key, Node::Seq(Seq::default()));
    }
    match map.get_mut(key) {
        Some(Node::Seq(s)) => Ok(&mut s.items),
        _ => Err(Error::Shape(format!("{key} is not a list"))),
    }
}

/// Removes the item named `name` from a list field, and the field when it is left empty.
fn remove_named(map: &mut Map, key: &str, name: &str) -> bool {
    let Some(Node::Seq(seq)) = map.get_mut(key) else {
        return false;
    };
    let Some(at) = seq
        .items
        .iter()
        .position(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(name))
    else {
        return false;
    };
    seq.items.remove(at);
    if seq.items.is_empty() {
        map.remove(key);
    }
    true
}

/// Adds or removes the `podnetinfo` volume, its mounts and `CONTAINER_NAME`.
fn downward_api(
    spec: &mut Map,
    want: bool,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    if !want && !before.volume && before.mounts.is_empty() && before.env.is_empty() {
        return Ok(());
    }
    let volume = podnetinfo_volume(containers(spec));
    let existing = named(spec.get("volumes"), PODNETINFO).cloned();
    match (want, existing) {
        (true, None) => {
            list_entry(spec, "volumes")?.push(volume);
            out.record.volume = true;
            out.changes.push(format!("added volume {PODNETINFO}"));
        }
        (true, Some(v)) if before.volume => {
            if v != volume {
                let list = list_entry(spec, "volumes")?;
                if let Some(slot) = list
                    .iter_mut()
                    .find(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(PODNETINFO))
                {
                    *slot = volume;
                }
                out.changes.push(format!("updated volume {PODNETINFO}"));
            }
            out.record.volume = true;
        }
        (true, Some(v)) => {
            if v != volume {
                out.warnings.push(format!(
                    "volume {PODNETINFO} is the workload's own, so it is left as it is; the downward-API files this function would expose in it are not added"
                ));
            }
        }
        (false, Some(_)) if before.volume => {
            remove_named(spec, "volumes", PODNETINFO);
            out.changes.push(format!("removed volume {PODNETINFO}"));
        }
        (false, _) => {}
    }
    let hugepages: BTreeSet<String> = containers(spec)
        .iter()
        .filter(|c| !hugepage_files(c).is_empty())
        .map(container_name)
        .collect();
    for container in containers_mut(spec) {
        let name = container_name(container);
        let Some(c) = container.as_map_mut() else {
            continue;
        };
        let mounted = c
            .get("volumeMounts")
            .and_then(Node::as_seq)
            .is_some_and(|s| {
                s.items.iter().any(|m| {
                    let m = m.as_map();
                    m.and_then(|m| m.get_text("name")) == Some(PODNETINFO)
                        || m.and_then(|m| m.get_text("mountPath")) == Some(PODNETINFO_PATH)
                })
            });
        match (want, mounted, before.mounts.contains(&name)) {
            (true, true, true) => {
                out.record.mounts.insert(name.clone());
            }
            (true, true, false) => {}
            (true, false, _) => {
                list_entry(c, "volumeMounts")?.push(Node::mapping([
                    ("name", Node::string(PODNETINFO)),
                    ("mountPath", Node::string(PODNETINFO_PATH)),
                    ("readOnly", Node::plain("true")),
                ]));
                out.record.mounts.insert(name.clone());
                out.changes
                    .push(format!("mounted {PODNETINFO} in container {name}"));
            }
            (false, _, true) => {
                if remove_named(c, "volumeMounts", PODNETINFO) {
                    out.changes
                        .push(format!("unmounted {PODNETINFO} from container {name}"));
                }
            }
            (false, _, false) => {}
        }
        let has_env = named(c.get("env"), CONTAINER_NAME_ENV).is_some();
        let wants_env = want && hugepages.contains(&name);
        match (wants_env, has_env, before.env.contains(&name)) {
            (true, true, true) => {
                out.record.env.insert(name.clone());
            }
            (true, true, false) => {}
            (true, false, _) => {
                list_entry(c, "env")?.push(Node::mapping([
                    ("name", Node::string(CONTAINER_NAME_ENV)),
                    ("value", Node::string(name.clone())),
                ]));
                out.record.env.insert(name.clone());
                out.changes
                    .push(format!("set {CONTAINER_NAME_ENV} in container {name}"));
            }
            (false, true, true) => {
                remove_named(c, "env", CONTAINER_NAME_ENV);
                out.changes.push(format!(
                    "removed {CONTAINER_NAME_ENV} from container {name}"
                ));
            }
            (false, _, _) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

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

    #[test]
    fn write_messages_group_like_edits() {
        let w = |field, name: &str, value, verb| Write {
            field,
            name: name.into(),
            value,
            verb,
        };
        let cases: [(Vec<Write>, &[&str]); 4] = [
            (
                vec![
                    w("requests", "r/a", Some(1), Verb::Set),
                    w("limits", "r/a", Some(1), Verb::Set),
                    w("requests", "r/b", Some(1), Verb::Set),
                    w("limits", "r/b", Some(1), Verb::Set),
                ],
                &["set requests and limits r/a, r/b to 1 in container app"],
            ),
            (
                vec![
                    w("requests", "r/a", Some(2), Verb::Changed),
                    w("limits", "r/a", Some(3), Verb::Changed),
                ],
                &[
                    "changed requests r/a to 2 in container app",
                    "changed limits r/a to 3 in container app",
                ],
            ),
            (
                vec![
                    w("requests", "r/a", None, Verb::Removed),
                    w("limits", "r/a", None, Verb::Removed),
                    w("limits", "r/b", Some(1), Verb::Set),
                ],
                &[
                    "removed requests and limits r/a from container app",
                    "set limits r/b to 1 in container app",
                ],
            ),
            (vec![], &[]),
        ];
        for (writes, want) in cases {
            assert_eq!(write_messages(&writes, "app"), want);
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
