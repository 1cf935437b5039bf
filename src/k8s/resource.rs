//! A KRM resource: its identity and the annotations its host sets.

use std::collections::BTreeMap;
use std::fmt;

use crate::yaml::{Map, Node, Text};

/// The path annotations kpt and kustomize set; both are kept and both are written.
pub const PATH_ANNOTATIONS: [&str; 2] = [
    "internal.config.kubernetes.io/path",
    "config.kubernetes.io/path",
];
/// The index annotations that go with [`PATH_ANNOTATIONS`].
pub const INDEX_ANNOTATIONS: [&str; 2] = [
    "internal.config.kubernetes.io/index",
    "config.kubernetes.io/index",
];
/// Marks a resource that configures the package and is not applied.
pub const LOCAL_CONFIG_ANNOTATION: &str = "config.kubernetes.io/local-config";

/// Who a resource is: what a result's `resourceRef` holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceRef {
    /// `group/version` or `version`.
    pub api_version: Text,
    /// The kind.
    pub kind: Text,
    /// `metadata.name`.
    pub name: Text,
    /// `metadata.namespace`, if any.
    pub namespace: Option<Text>,
}

impl ResourceRef {
    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The file a resource came from, as the host recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileRef {
    /// Path relative to the package root.
    pub path: String,
    /// Position of the document in the file, from 0 as kpt counts; shown from 1.
    pub index: Option<u32>,
}

impl fmt::Display for FileRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) if i > 0 => write!(f, "{} (document {})", self.path, u64::from(i) + 1),
            _ => f.write_str(&self.path),
        }
    }
}

/// Why an item is not a KRM resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct NotAResource {
    /// The missing or malformed field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// The API group of an `apiVersion`.
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Reads the identity of a resource.
pub fn resource_ref(item: &Node) -> Result<ResourceRef, NotAResource> {
    let map = item.as_map().ok_or(NotAResource {
        field: "item",
        problem: "is not a mapping",
    })?;
    let text = |field: &'static str| {
        map.get_text(field)
            .filter(|s| !s.is_empty())
            .map(Text::from)
            .ok_or(NotAResource {
                field,
                problem: "is missing or not a string",
            })
    };
    let api_version = text("apiVersion")?;
    let kind = text("kind")?;
    let meta = map
        .get("metadata")
        .and_then(Node::as_map)
        .ok_or(NotAResource {
            field: "metadata",
            problem: "is missing or not a mapping",
        })?;
    let name = meta
        .get_text("name")
        .filter(|s| !s.is_empty())
        .ok_or(NotAResource {
            field: "metadata.name",
            problem: "is missing or not a string",
        })?
        .into();
    let namespace = match meta.get("namespace") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => Some(
            n.as_str()
                .ok_or(NotAResource {
                    field: "metadata.namespace",
                    problem: "is not a string",
                })?
                .into(),
        ),
    };
    Ok(ResourceRef {
        api_version,
        kind,
        name,
        namespace: namespace.filter(|n: &Text| !n.is_empty()),
    })
}

/// `metadata`, if it is a mapping.
pub fn metadata(item: &Node) -> Option<&Map> {
    item.as_map()?.get("metadata")?.as_map()
}

/// `metadata.annotations`, if it is a mapping.
pub fn annotations(item: &Node) -> Option<&Map> {
    metadata(item)?.get("annotations")?.as_map()
}

/// The string annotations of a resource, sorted by key.
pub fn string_annotations(item: &Node) -> BTreeMap<String, String> {
    annotations(item)
        .map(|a| {
            a.entries
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// One annotation's value.
pub fn annotation<'a>(item: &'a Node, key: &str) -> Option<&'a str> {
    annotations(item)?.get_text(key)
}

/// The file the host read a resource from.
pub fn file_ref(item: &Node) -> Option<FileRef> {
    let annotations = annotations(item)?;
    let path = PATH_ANNOTATIONS
        .iter()
        .find_map(|k| annotations.get_text(k))?;
    let index = INDEX_ANNOTATIONS
        .iter()
        .find_map(|k| annotations.get_text(k))
        .and_then(|i| i.parse().ok());
    Some(FileRef {
        path: path.to_string(),
        index,
    })
}

/// Whether the resource is marked `config.kubernetes.io/local-config: "true"`.
pub fn is_local_config(item: &Node) -> bool {
    annotation(item, LOCAL_CONFIG_ANNOTATION) == Some("true")
}

/// An item that is not a KRM resource: the input is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// Position of the item in the input.
    pub index: usize,
    /// Its file, when the host said.
    pub file: Option<FileRef>,
    /// What is wrong.
    pub problem: NotAResource,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "items[{}]", self.index)?;
        if let Some(file) = &self.file {
            write!(f, " ({file})")?;
        }
        write!(f, ": {}", self.problem)
    }
}

/// The identity of every item; an item that is not a resource fails the input.
pub fn identify(items: &[Node]) -> Result<Vec<ResourceRef>, InputError> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            resource_ref(item).map_err(|problem| InputError {
                index,
                file: file_ref(item),
                problem,
            })
        })
        .collect()
}

/// The file of every item.
pub fn files(items: &[Node]) -> Vec<Option<FileRef>> {
    items.iter().map(file_ref).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    #[test]
    fn reads_identity_and_origin() {
        let item = parse_document(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: demo\n  annotations:\n    config.kubernetes.io/path: apps/web.yaml\n    config.kubernetes.io/index: '1'\n",
        )
        .unwrap();
        let r = resource_ref(&item).unwrap();
        assert_eq!(r.to_string(), "Deployment demo/web");
        assert_eq!(r.group(), "apps");
        let file = file_ref(&item).unwrap();
        assert_eq!(file.to_string(), "apps/web.yaml (document 2)");
    }

    #[test]
    fn names_what_is_missing() {
        for (src, field) in [
            ("- a", "item"),
            ("kind: Pod\nmetadata: {name: a}", "apiVersion"),
            ("apiVersion: v1\nmetadata: {name: a}", "kind"),
            ("apiVersion: v1\nkind: Pod", "metadata"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {}", "metadata.name"),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: [x]}",
                "metadata.namespace",
            ),
        ] {
            let err = resource_ref(&parse_document(src).unwrap()).unwrap_err();
            assert_eq!(err.field, field, "{src}");
        }
    }
}
