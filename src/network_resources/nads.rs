//! The NetworkAttachmentDefinitions the rules see, and the annotations they
//! read.

use std::collections::BTreeMap;

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
