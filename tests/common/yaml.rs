//! A small YAML tree, built on `saphyr-parser` events and independent of the crate's own YAML
//! code, for checks on meaning rather than bytes.

use saphyr_parser::{Event, Parser, ScalarStyle};

/// A YAML node: scalars keep their value, whether they were plain, and their tag.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Scalar {
        value: String,
        plain: bool,
        style: ScalarStyle,
        tag: Option<String>,
    },
    Seq(Vec<Yaml>),
    Map(Vec<(Yaml, Yaml)>),
}

impl Yaml {
    /// A scalar's value, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// The value under string key `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Walks a path of mapping keys.
    pub fn at(&self, path: &[&str]) -> Option<&Yaml> {
        path.iter().try_fold(self, |node, key| node.get(key))
    }

    /// The string under a path of mapping keys.
    pub fn str_at(&self, path: &[&str]) -> Option<&str> {
        self.at(path).and_then(Yaml::as_str)
    }

    /// A sequence's items (empty for anything else).
    pub fn seq(&self) -> &[Yaml] {
        match self {
            Yaml::Seq(items) => items,
            _ => &[],
        }
    }

    /// A mapping's entries (empty for anything else).
    pub fn entries(&self) -> &[(Yaml, Yaml)] {
        match self {
            Yaml::Map(entries) => entries,
            _ => &[],
        }
    }

    /// The keys of a mapping, as strings.
    pub fn keys(&self) -> Vec<&str> {
        self.entries()
            .iter()
            .filter_map(|(k, _)| k.as_str())
            .collect()
    }

    /// `kind`, `metadata.namespace` (or ""), `metadata.name` of a resource.
    pub fn id(&self) -> (String, String, String) {
        (
            self.str_at(&["kind"]).unwrap_or("").to_string(),
            self.str_at(&["metadata", "namespace"])
                .unwrap_or("")
                .to_string(),
            self.str_at(&["metadata", "name"]).unwrap_or("").to_string(),
        )
    }

    /// An annotation of a resource's top-level metadata.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.str_at(&["metadata", "annotations", key])
    }
}

/// Parses the first document of `text`.
pub fn parse_yaml(text: &str) -> Result<Yaml, String> {
    parse_yaml_stream(text)?
        .into_iter()
        .next()
        .ok_or_else(|| "empty YAML".to_string())
}

/// Parses every document of `text`; empty documents are left out.
pub fn parse_yaml_stream(text: &str) -> Result<Vec<Yaml>, String> {
    let mut docs = Vec::new();
    let mut stack: Vec<Yaml> = Vec::new();
    // For maps under construction: a pending key.
    let mut keys: Vec<Option<Yaml>> = Vec::new();
    let mut done: Option<Yaml> = None;
    fn push(stack: &mut [Yaml], keys: &mut [Option<Yaml>], done: &mut Option<Yaml>, node: Yaml) {
        match stack.last_mut() {
            None => *done = Some(node),
            Some(Yaml::Seq(items)) => items.push(node),
            Some(Yaml::Map(entries)) => {
                let slot = keys.last_mut().expect("key slot");
                match slot.take() {
                    None => *slot = Some(node),
                    Some(k) => entries.push((k, node)),
                }
            }
            Some(Yaml::Scalar { .. }) => unreachable!(),
        }
    }
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| format!("YAML error: {e}"))?;
        match ev {
            Event::Scalar(value, style, _, tag) => {
                let node = Yaml::Scalar {
                    value: value.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    style,
                    tag: tag.map(|t| format!("{}{}", t.handle, t.suffix)),
                };
                push(&mut stack, &mut keys, &mut done, node);
            }
            Event::SequenceStart(..) => {
                stack.push(Yaml::Seq(Vec::new()));
                keys.push(None);
            }
            Event::MappingStart(..) => {
                stack.push(Yaml::Map(Vec::new()));
                keys.push(None);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = stack.pop().expect("balanced");
                keys.pop();
                push(&mut stack, &mut keys, &mut done, node);
            }
            Event::Alias(_) => {
                return Err(format!(
                    "alias at line {} not supported by the test parser",
                    span.start.line()
                ));
            }
            Event::DocumentEnd => {
                docs.extend(done.take().filter(|d| {
                    !matches!(d, Yaml::Scalar { value, plain: true, .. } if value.is_empty() || value == "null" || value == "~")
                }));
            }
            _ => {}
        }
    }
    Ok(docs)
}

/// The items of a ResourceList text.
pub fn items_of(resource_list: &Yaml) -> Vec<Yaml> {
    resource_list
        .get("items")
        .map(|i| i.seq().to_vec())
        .unwrap_or_default()
}

/// The results of a ResourceList text.
pub fn results_of(resource_list: &Yaml) -> Vec<Yaml> {
    resource_list
        .get("results")
        .map(|i| i.seq().to_vec())
        .unwrap_or_default()
}
