//! The functionConfig: a settings object, as a ResourceList or a settings
//! file holds it: the `spec` of a typed kind (API version [`API_VERSION`]) or
//! the `data` of a ConfigMap (values as text); the settings of a kind
//! ([`SettingsKind`]), the errors that name a key, and the readers of the
//! values every kind shares.

use std::collections::BTreeMap;

use crate::k8s::names::is_dns1123_label;
use crate::k8s::workload::WorkloadKind;
use crate::yaml::{Map, Node, parse_document};

/// The API version of the typed settings objects.
pub const API_VERSION: &str = "multus.linkerd.io/v1alpha1";

/// A settings problem, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The object is of a kind the reader does not take.
    #[error(
        "functionConfig must be a {expected} ({API_VERSION}) or a ConfigMap, not {kind} ({api_version})"
    )]
    WrongKind {
        /// The kinds it takes, as a phrase: `A`, or `A, B or C`.
        expected: String,
        /// Its kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// A key that does not exist.
    #[error("unknown setting {key:?}; valid settings are {}", valid.join(", "))]
    UnknownKey {
        /// The key.
        key: String,
        /// The keys of the kind being read.
        valid: &'static [&'static str],
    },
    /// A key whose value is not valid.
    #[error("setting {key}: {problem}")]
    BadValue {
        /// The key.
        key: String,
        /// What is wrong, with the valid choices.
        problem: String,
    },
    /// A structural problem with the object itself.
    #[error("functionConfig {0}")]
    Shape(String),
}

pub(crate) fn bad(key: &str, problem: impl Into<String>) -> SettingsError {
    SettingsError::BadValue {
        key: key.to_string(),
        problem: problem.into(),
    }
}

/// A settings object as its apiVersion and kind make it: the one place they
/// are read.
#[derive(Debug, Clone, Copy)]
pub enum SettingsObject<'a> {
    /// A typed object of [`API_VERSION`]: its kind and the object.
    Typed {
        /// Its kind.
        kind: &'a str,
        /// The object.
        object: &'a Map,
    },
    /// A ConfigMap: settings as text under `data`.
    ConfigMap(&'a Map),
    /// Any other object: its kind and apiVersion as written.
    Other {
        /// Its kind.
        kind: &'a str,
        /// Its apiVersion.
        api_version: &'a str,
    },
}

impl<'a> SettingsObject<'a> {
    /// What `node` is; an error when it is not a mapping.
    pub fn of(node: &'a Node) -> Result<Self, SettingsError> {
        let map = node.as_map().ok_or_else(|| {
            SettingsError::Shape(format!("is {}, not a mapping", node.kind_name()))
        })?;
        let kind = map.get_text("kind").unwrap_or_default();
        let api_version = map.get_text("apiVersion").unwrap_or_default();
        Ok(match (api_version, kind) {
            (API_VERSION, kind) => SettingsObject::Typed { kind, object: map },
            ("v1", "ConfigMap") => SettingsObject::ConfigMap(map),
            (api_version, kind) => SettingsObject::Other { kind, api_version },
        })
    }

    /// Its kind as written (`ConfigMap` for a ConfigMap).
    pub fn kind(&self) -> &'a str {
        match self {
            SettingsObject::Typed { kind, .. } | SettingsObject::Other { kind, .. } => kind,
            SettingsObject::ConfigMap(_) => "ConfigMap",
        }
    }

    /// The error for an object of a kind the reader does not take; `expected`
    /// names the kinds it takes.
    pub fn wrong_kind(&self, expected: impl Into<String>) -> SettingsError {
        let api_version = match self {
            SettingsObject::Typed { .. } => API_VERSION,
            SettingsObject::ConfigMap(_) => "v1",
            SettingsObject::Other { api_version, .. } => api_version,
        };
        SettingsError::WrongKind {
            expected: expected.into(),
            kind: self.kind().to_string(),
            api_version: api_version.to_string(),
        }
    }
}

/// The settings of one kind of settings object: a rule set's, with its
/// defaults. Read from an object of that kind (or a ConfigMap), then from text
/// values (environment variables, flags).
pub trait SettingsKind: Default {
    /// The kind of the typed object (API version [`API_VERSION`]).
    const KIND: &'static str;
    /// Every settings key, in the order the docs list them.
    const KEYS: &'static [&'static str];

    /// Applies settings: a typed object's `spec`, or `text` values as a
    /// ConfigMap's `data` holds them (structured ones as YAML or JSON text).
    fn apply(&mut self, settings: &Map, text: bool) -> Result<(), SettingsError>;

    /// Reads the settings of an object of this kind, or of a ConfigMap: a
    /// typed object's `spec` (it may have no other top-level field but
    /// `apiVersion`, `kind` and `metadata`), a ConfigMap's `data`.
    fn from_object(node: &Node) -> Result<Self, SettingsError> {
        let object = SettingsObject::of(node)?;
        let (map, key, text) = match object {
            SettingsObject::Typed { kind, object } if kind == Self::KIND => {
                typed_fields(object)?;
                (object, "spec", false)
            }
            SettingsObject::ConfigMap(map) => (map, "data", true),
            _ => return Err(object.wrong_kind(Self::KIND)),
        };
        let mut settings = Self::default();
        if let Some(section) = section(map, key)? {
            settings.apply(section, text)?;
        }
        Ok(settings)
    }

    /// Overrides settings with text values, each checked as in a ConfigMap.
    fn override_with<'a>(
        &mut self,
        values: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), SettingsError> {
        let mut map = Map::default();
        for (key, value) in values {
            map.insert(key, Node::string(value));
        }
        self.apply(&map, true)
    }
}

/// Reads settings of kind `S` from the YAML text of a settings object, for tests.
#[cfg(test)]
pub(crate) fn read<S: SettingsKind>(src: &str) -> Result<S, SettingsError> {
    let node = parse_document(src).expect("the settings object is YAML");
    S::from_object(&node)
}

/// The settings mapping under `key` (`spec` or `data`); `None` when absent or null.
fn section<'a>(map: &'a Map, key: &str) -> Result<Option<&'a Map>, SettingsError> {
    match map.get(key) {
        None => Ok(None),
        Some(section) if section.is_null() => Ok(None),
        Some(Node::Map(section)) => Ok(Some(section)),
        Some(other) => Err(SettingsError::Shape(format!(
            "{key} is {}, not a mapping",
            other.kind_name()
        ))),
    }
}

/// Checks that a typed settings object has only the top-level fields it may have.
fn typed_fields(map: &Map) -> Result<(), SettingsError> {
    for (key, _) in &map.entries {
        let key = key.as_str().unwrap_or_default();
        if !matches!(key, "apiVersion" | "kind" | "metadata" | "spec") {
            return Err(SettingsError::Shape(format!(
                "has an unexpected top-level field {key:?}; settings go under spec"
            )));
        }
    }
    Ok(())
}

pub(crate) fn text(key: &str, value: &Node) -> Result<String, SettingsError> {
    value
        .as_text()
        .map(str::to_string)
        .ok_or_else(|| bad(key, format!("must be a string, not {}", value.kind_name())))
}

pub(crate) fn label(key: &str, value: &Node) -> Result<String, SettingsError> {
    let v = text(key, value)?;
    if is_dns1123_label(&v) {
        Ok(v)
    } else {
        Err(bad(
            key,
            format!(
                "{v:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
            ),
        ))
    }
}

/// A boolean setting: `true` or `false` (in a ConfigMap, the text).
pub(crate) fn boolean(key: &str, value: &Node) -> Result<bool, SettingsError> {
    match value.as_text() {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(bad(key, "must be true or false")),
    }
}

/// A structured setting: as is in the typed object, YAML or JSON text in a ConfigMap.
pub(crate) fn structured(
    key: &str,
    value: &Node,
    from_config_map: bool,
) -> Result<Node, SettingsError> {
    match value.as_text() {
        Some(text) if from_config_map => {
            parse_document(text).map_err(|e| bad(key, format!("is not valid YAML: {e}")))
        }
        _ => Ok(value.clone()),
    }
}

/// A `name: {annotations: {key: value}}` setting (`namespaces`, `injections`),
/// each name checked by `name_problem`; `names` says what the names are.
pub(crate) fn annotation_sets(
    key: &str,
    value: &Node,
    names: &str,
    name_problem: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, SettingsError> {
    let mut out = BTreeMap::new();
    if value.is_null() {
        return Ok(out);
    }
    let map = value
        .as_map()
        .ok_or_else(|| bad(key, format!("must map {names} to {{annotations: {{...}}}}")))?;
    for (name, entry) in &map.entries {
        let name = name.as_text().unwrap_or_default();
        if let Some(problem) = name_problem(name) {
            return Err(bad(key, problem));
        }
        let entry = entry
            .as_map()
            .ok_or_else(|| bad(key, format!("{name}: must be a mapping with annotations")))?;
        let mut annotations = BTreeMap::new();
        for (field, v) in &entry.entries {
            match field.as_str().unwrap_or_default() {
                "annotations" => {
                    let Some(a) = v.as_map() else {
                        return Err(bad(key, format!("{name}.annotations: must be a mapping")));
                    };
                    for (k, v) in &a.entries {
                        let (Some(k), Some(v)) = (k.as_text(), v.as_str()) else {
                            return Err(bad(
                                key,
                                format!("{name}.annotations: keys and values must be strings"),
                            ));
                        };
                        annotations.insert(k.to_string(), v.to_string());
                    }
                }
                other => {
                    return Err(bad(
                        key,
                        format!("{name}: unknown field {other:?}; valid: annotations"),
                    ));
                }
            }
        }
        out.insert(name.to_string(), annotations);
    }
    Ok(out)
}

pub(crate) fn workload_kinds(key: &str, value: &Node) -> Result<Vec<WorkloadKind>, SettingsError> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    let seq = value
        .as_seq()
        .ok_or_else(|| bad(key, "must be a list of {apiVersion, kind, podTemplatePath}"))?;
    let mut kinds: Vec<WorkloadKind> = Vec::new();
    for (i, item) in seq.items.iter().enumerate() {
        let map = item
            .as_map()
            .ok_or_else(|| bad(key, format!("item {i}: must be a mapping")))?;
        for (field, _) in &map.entries {
            let field = field.as_str().unwrap_or_default();
            if !matches!(field, "apiVersion" | "kind" | "podTemplatePath") {
                return Err(bad(
                    key,
                    format!(
                        "item {i}: unknown field {field:?}; valid: apiVersion, kind, podTemplatePath"
                    ),
                ));
            }
        }
        let field = |f: &str| {
            map.get_text(f)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad(key, format!("item {i}: {f} is required")))
        };
        let kind = WorkloadKind::custom(
            field("apiVersion")?,
            field("kind")?,
            field("podTemplatePath")?,
        )
        .map_err(|problem| bad(key, format!("item {i}: {problem}")))?;
        if kinds.iter().any(|k| k.same_kind(&kind)) {
            return Err(bad(key, format!("item {i}: {} is declared twice", kind)));
        }
        kinds.push(kind);
    }
    Ok(kinds)
}
