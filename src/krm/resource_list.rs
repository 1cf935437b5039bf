//! The KRM `ResourceList`: what a host sends a function and reads back.

use crate::krm::results::FnResult;
use crate::yaml::{self, Map, Node, ParseError};

/// The ResourceList apiVersion kpt and kustomize send.
pub const API_VERSION: &str = "config.kubernetes.io/v1";
/// The older apiVersion some hosts still send.
const LEGACY_API_VERSION: &str = "config.kubernetes.io/v1alpha1";
/// The ResourceList kind.
pub const KIND: &str = "ResourceList";

/// Why the input is not a ResourceList.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceListError {
    /// The input is not YAML (or JSON).
    #[error("the input is not valid YAML: {0}")]
    Yaml(#[from] ParseError),
    /// It is YAML but not a ResourceList.
    #[error("the input is not a ResourceList ({API_VERSION}): {0}")]
    Shape(String),
}

/// A parsed ResourceList.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceList {
    /// The apiVersion it came with, written back as is.
    pub api_version: String,
    /// The resources.
    pub items: Vec<Node>,
    /// The function's configuration.
    pub function_config: Option<Node>,
}

impl ResourceList {
    /// Parses a ResourceList from YAML or JSON text.
    pub fn parse(text: &str) -> Result<Self, ResourceListError> {
        let doc = yaml::parse_document(text)?;
        let Node::Map(map) = doc else {
            return Err(ResourceListError::Shape(format!(
                "the document is {}, not a mapping",
                doc.kind_name()
            )));
        };
        let kind = map.get_text("kind").unwrap_or_default();
        let api_version = map.get_text("apiVersion").unwrap_or_default().to_string();
        if kind != KIND || !matches!(api_version.as_str(), API_VERSION | LEGACY_API_VERSION) {
            return Err(ResourceListError::Shape(format!(
                "found kind {kind:?} apiVersion {api_version:?}"
            )));
        }
        let mut items = Vec::new();
        let mut function_config = None;
        for (key, value) in map.entries {
            match key.as_str() {
                Some("items") => {
                    items = match value {
                        Node::Seq(seq) => seq.items,
                        v if v.is_null() => Vec::new(),
                        v => {
                            return Err(ResourceListError::Shape(format!(
                                "items is {}, not a list",
                                v.kind_name()
                            )));
                        }
                    }
                }
                Some("functionConfig") if !value.is_null() => function_config = Some(value),
                _ => {}
            }
        }
        // Items written wholly in flow style came from JSON files (or a JSON
        // ResourceList): that is their file format, so they are written as blocks.
        for item in items.iter_mut().chain(function_config.as_mut()) {
            if item.is_flow() {
                item.into_block_style();
            }
        }
        Ok(ResourceList {
            api_version,
            items,
            function_config,
        })
    }

    /// The ResourceList with results, as a tree for [`emit`] to write.
    pub fn into_node(self, results: Vec<FnResult>) -> Node {
        let mut map = Map::default();
        map.insert("apiVersion", Node::string(self.api_version));
        map.insert("kind", Node::string(KIND));
        map.insert(
            "items",
            Node::Seq(yaml::Seq {
                items: self.items,
                ..Default::default()
            }),
        );
        if let Some(config) = self.function_config {
            map.insert("functionConfig", config);
        }
        if !results.is_empty() {
            map.insert(
                "results",
                Node::Seq(yaml::Seq {
                    items: results.into_iter().map(FnResult::into_node).collect(),
                    ..Default::default()
                }),
            );
        }
        Node::Map(map)
    }
}

/// Writes a ResourceList ([`ResourceList::into_node`]) as block YAML, appended to `out`: a
/// buffer sized ahead takes the output without being grown through smaller ones.
pub fn emit(list: &Node, out: &mut String) {
    // kpt writes each item to a file of its own: an alias must not reach into another.
    yaml::emit_document_of_items(list, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yaml_and_json() {
        for src in [
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n",
            r#"{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}]}"#,
        ] {
            let list = ResourceList::parse(src).unwrap();
            assert_eq!(list.items.len(), 1);
            assert!(list.function_config.is_none());
        }
    }

    #[test]
    fn rejects_what_is_not_a_resource_list() {
        for (src, want) in [
            ("a: [", "the input is not valid YAML: line 2 column 1:"),
            (
                "- a",
                "the input is not a ResourceList (config.kubernetes.io/v1): the document is a sequence, not a mapping",
            ),
            (
                "kind: List\napiVersion: v1\n",
                "the input is not a ResourceList (config.kubernetes.io/v1): found kind \"List\" apiVersion \"v1\"",
            ),
            (
                "kind: ResourceList\napiVersion: config.kubernetes.io/v1\nitems: {}\n",
                "the input is not a ResourceList (config.kubernetes.io/v1): items is a mapping, not a list",
            ),
        ] {
            let err = ResourceList::parse(src).unwrap_err().to_string();
            assert!(err.starts_with(want), "{src}: {err}");
        }
    }
}
