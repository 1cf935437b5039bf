//! Settings objects, as a `functionConfig` or a settings file holds them: the
//! `spec` of a typed kind (API version [`API_VERSION`]) or the `data` of a
//! ConfigMap (values as text), the errors that name a key, and the readers of
//! the values every kind shares.

use std::collections::BTreeMap;

use crate::k8s::names::is_dns1123_label;
use crate::k8s::workload::WorkloadKind;
use crate::yaml::{Map, Node, parse_document};

/// The API version of the typed settings object.
pub const API_VERSION: &str = "multus.linkerd.io/v1alpha1";
/// A settings problem, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The functionConfig is of a kind this function does not read.
    #[error(
        "functionConfig must be a LinkerdMultus, NetworkResources or Validation ({API_VERSION}) or a ConfigMap, not {kind} ({api_version})"
    )]
    WrongKind {
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

/// The settings of a settings object: the `spec` of a `kind`
/// (`multus.linkerd.io/v1alpha1`, with no stray top-level field) or the `data`
/// of a ConfigMap, and whether it is the ConfigMap form; `None` when that
/// section is absent or null.
pub(crate) fn settings_section<'a>(
    config: &'a Node,
    kind: &str,
) -> Result<(Option<&'a Map>, bool), SettingsError> {
    let map = config
        .as_map()
        .ok_or_else(|| SettingsError::Shape(format!("is {}, not a mapping", config.kind_name())))?;
    let found = map.get_text("kind").unwrap_or_default();
    let api_version = map.get_text("apiVersion").unwrap_or_default();
    let (key, from_config_map) = match (api_version, found) {
        (API_VERSION, found) if found == kind => {
            typed_fields(map)?;
            ("spec", false)
        }
        ("v1", "ConfigMap") => ("data", true),
        _ => {
            return Err(SettingsError::WrongKind {
                kind: found.to_string(),
                api_version: api_version.to_string(),
            });
        }
    };
    Ok((section(map, key)?, from_config_map))
}

/// Settings given as text (flags, environment variables) as the `data` of a
/// ConfigMap holds them, for a kind's `apply`.
pub(crate) fn text_settings<'a>(values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Map {
    let mut map = Map::default();
    for (key, value) in values {
        map.insert(key, Node::string(value));
    }
    map
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
