//! The NetworkAttachmentDefinitions the rules see, and what the selected ones
//! ask for: resources to count and node labels.

use std::collections::{BTreeMap, BTreeSet};

use super::error::Error;
use super::settings::Settings;
use crate::k8s::namespace::Lookup;

/// The NAD annotation naming the node label a network needs (`key=value` or `key`).
pub const NODE_SELECTOR_ANNOTATION: &str = "k8s.v1.cni.cncf.io/nodeSelector";

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

/// What the selected NADs ask for.
#[derive(Default)]
pub(super) struct Wanted {
    /// Resource name to count.
    pub(super) counts: BTreeMap<String, u64>,
    /// Node label to its value and the NAD asking for it.
    pub(super) node_selector: BTreeMap<String, (String, String)>,
}

/// What the NADs `selected` (`(namespace, name)`) ask for; every one must exist.
pub(super) fn wanted(
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
