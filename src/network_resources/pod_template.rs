//! The rules for one pod template: the networks it selects, what their NADs
//! ask for, and the edits, checked before any is made so that an error leaves
//! the template as it was.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::error::Error;
use super::nads::{NODE_SELECTOR_ANNOTATION, Nads};
use super::record::{RECORD_ANNOTATION, Record};
use super::settings::{InterfaceNames, Settings};
use crate::k8s::resource;
use crate::k8s::workload::{
    WorkloadKind, metadata_is_a_map, remove_annotation, template_annotations, template_labels,
};
use crate::multus::networks::{DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, Networks};
use crate::work::Distinct;
use crate::yaml::{Map, Node, Scalar, Style};

mod choices;
mod downward_api;
mod injections;
mod node_selector;
mod resources;

pub use choices::{CONTAINER_ANNOTATION, OPT_OUT_ANNOTATION};

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
    let choices = choices::choices(template)?;
    if choices.opted_out && before.is_empty() {
        return Ok(Applied::default());
    }
    let settings = judged_by(settings, choices.opted_out);
    let settings = settings.as_ref();
    let chosen = choices
        .container
        .filter(|_| !choices.opted_out)
        .map(str::to_string);
    let mut out = Applied::default();
    let head = metadata_rules(template, settings, pod_namespace, before, &mut out)?;
    let selected = match (choices.opted_out, &head) {
        (true, _) => Vec::new(),
        (false, Some(head)) => selections(head, pod_namespace)?,
        (false, None) => selections(template, pod_namespace)?,
    };
    let mut wanted = wanted(&selected, settings, nads)?;
    let spec = template.get("spec").and_then(Node::as_map);
    choices::without_claimed(spec, settings, &mut wanted.counts, &mut out)?;
    let downward = settings.downward_api && !wanted.counts.is_empty();
    let resources_needed =
        !(wanted.counts.is_empty() && before.requests.is_empty() && before.limits.is_empty());
    let target = check_spec(
        template,
        &wanted.counts,
        resources_needed,
        downward,
        &chosen,
    )?;
    let spec = spec_of(template)?;
    // First, as its conflicts are found before it edits anything.
    node_selector::node_selector(spec, &wanted.node_selector, before, &mut out)?;
    if resources_needed {
        let target = resources::Target {
            index: target,
            chosen,
        };
        resources::resources(spec, settings, &wanted.counts, before, target, &mut out)?;
    }
    downward_api::downward_api(spec, downward, before, &mut out)?;
    if let Some(metadata) = head.and_then(|mut head| head.remove("metadata")) {
        template.insert("metadata", metadata);
    }
    Ok(out)
}

/// The settings a workload is judged by: one that opts out keeps nothing of
/// the rules, which take back what they recorded, as if it selected no
/// network and had no label.
fn judged_by(settings: &Settings, opted_out: bool) -> Cow<'_, Settings> {
    if !opted_out {
        return Cow::Borrowed(settings);
    }
    Cow::Owned(Settings {
        injections: BTreeMap::new(),
        interface_names: InterfaceNames::Keep,
        ..settings.clone()
    })
}

/// The metadata rules (injections, interface names), when any can apply:
/// they work on a copy of the metadata (a few annotations and labels),
/// returned to go back into the template once every check has passed. The
/// spec is edited in place, but only after `check_spec` and the node-selector
/// conflicts have passed, so an error leaves the template as it was without
/// copying the whole template.
fn metadata_rules(
    template: &Map,
    settings: &Settings,
    pod_namespace: &str,
    before: &Record,
    out: &mut Applied,
) -> Result<Option<Map>, Error> {
    let apply = !settings.injections.is_empty()
        || !before.annotations.is_empty()
        || !before.networks.is_empty()
        || settings.interface_names == InterfaceNames::Deterministic;
    if !apply {
        return Ok(None);
    }
    let mut head = Map::default();
    if let Some(metadata) = template.get("metadata") {
        head.insert("metadata", metadata.clone());
    }
    injections::inject(&mut head, settings, pod_namespace, before, out)?;
    if settings.interface_names == InterfaceNames::Deterministic {
        injections::name_interfaces(&mut head, out)?;
    }
    Ok(Some(head))
}

/// Checks every shape the spec edits rely on before any is made, so that once
/// it passes they cannot fail half-way; returns the index of the container
/// that receives the resources.
fn check_spec(
    template: &Map,
    counts: &BTreeMap<String, u64>,
    resources: bool,
    downward: bool,
    chosen: &Option<String>,
) -> Result<usize, Error> {
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
    let target = choices::target(spec, chosen.as_deref())?;
    if resources {
        match all.get(target) {
            None if counts.is_empty() => {}
            None => {
                return Err(Error::Shape(
                    "spec.containers is empty or missing: the network resources have no container to go in"
                        .into(),
                ));
            }
            Some(c) => {
                let at = format!("spec.containers[{target}]");
                let c = c
                    .as_map()
                    .ok_or_else(|| shape(at.clone(), "a mapping", c))?;
                if let Some(r) = present(c.get("resources")) {
                    let r = r
                        .as_map()
                        .ok_or_else(|| shape(format!("{at}.resources"), "a mapping", r))?;
                    for field in ["requests", "limits"] {
                        if let Some(f) = present(r.get(field)).filter(|f| f.as_map().is_none()) {
                            let path = format!("{at}.resources.{field}");
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
    Ok(target)
}

/// A field that is there and not null.
fn present(node: Option<&Node>) -> Option<&Node> {
    node.filter(|n| !n.is_null())
}

/// Whether a template the rules own nothing on selects a network, chooses a
/// container or has an injection's label: most templates do none of these
/// and are left without a copy.
fn asks_for_anything(t: &Map, settings: &Settings) -> bool {
    let selects = template_annotations(t).is_some_and(|a| {
        a.get(NETWORKS_ANNOTATION).is_some()
            || a.get(DEFAULT_NETWORK_ANNOTATION).is_some()
            || a.get(CONTAINER_ANNOTATION).is_some()
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

/// What the NADs `selected` (`(namespace, name)`) ask for; every one must exist.
fn wanted(
    selected: &[(String, String)],
    settings: &Settings,
    nads: &dyn Nads,
) -> Result<Wanted, Error> {
    let mut wanted = Wanted::default();
    let mut missing: Distinct<String> = Distinct::default();
    for (namespace, name) in selected {
        crate::work::count(1);
        let id = || format!("{namespace}/{name}");
        let Some(annotations) = nads.annotations(namespace, name) else {
            missing.insert(id());
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
        return Err(Error::MissingNads(missing.into_vec()));
    }
    Ok(wanted)
}

/// The containers of a pod spec.
fn containers(spec: &Map) -> &[Node] {
    spec.get("containers")
        .and_then(Node::as_seq)
        .map_or(&[], |s| s.items.as_slice())
}

/// The containers of a pod spec, to edit.
fn containers_mut(spec: &mut Map) -> &mut [Node] {
    match spec.get_mut("containers") {
        Some(Node::Seq(s)) => s.items.as_mut_slice(),
        _ => &mut [],
    }
}

/// A container's name, empty when it has none.
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
#[path = "pod_template_tests.rs"]
mod tests;
