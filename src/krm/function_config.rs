//! The functionConfig: a settings object, as a ResourceList or a settings
//! file holds it: the `spec` of a typed kind (API version [`API_VERSION`]) or
//! the `data` of a ConfigMap (values as text); the settings of a kind
//! ([`SettingsKind`]), the errors that name a key, and the readers of the
//! values every kind shares.

use std::collections::BTreeMap;

use crate::k8s::names::{is_dns1123_label, nearest};
use crate::k8s::resource::group_of;
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
    /// Keys that do not exist, every one of the object, each with the valid
    /// key it is nearest to when one is close.
    #[error("{}; valid settings are {}", unknown_phrase(keys, valid), valid.join(", "))]
    UnknownKeys {
        /// The keys, in the order written.
        keys: Vec<String>,
        /// The keys of the kind being read.
        valid: &'static [&'static str],
    },
    /// An object of the settings' API group, or of one of their kinds, that
    /// is not one of them: a near-miss apiVersion or kind.
    #[error("{object}: {problem}")]
    NearMiss {
        /// The object: its kind and name as written.
        object: String,
        /// What is wrong and what to write instead.
        problem: String,
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

/// `unknown setting "nadNme" (did you mean nadName?)`, or `unknown settings
/// "a", "b" and "c"` with a guess after each that has one.
fn unknown_phrase(keys: &[String], valid: &[&str]) -> String {
    let each: Vec<String> = keys
        .iter()
        .map(|key| match nearest(key, valid.iter().copied()) {
            Some(meant) => format!("{key:?} (did you mean {meant}?)"),
            None => format!("{key:?}"),
        })
        .collect();
    match each.as_slice() {
        [one] => format!("unknown setting {one}"),
        [first @ .., last] => format!("unknown settings {} and {last}", first.join(", ")),
        [] => "no unknown setting".to_string(),
    }
}

/// The error for the keys of `settings` that are not among `valid`, all of
/// them at once; `Ok` when every key is valid.
pub fn check_keys(settings: &Map, valid: &'static [&'static str]) -> Result<(), SettingsError> {
    let keys: Vec<String> = (settings.entries.iter())
        .map(|(key, _)| key.as_str().unwrap_or_default())
        .filter(|key| !valid.contains(key))
        .map(str::to_string)
        .collect();
    if keys.is_empty() {
        Ok(())
    } else {
        Err(SettingsError::UnknownKeys { keys, valid })
    }
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

/// The error for an object that comes near a settings object of `kinds`
/// without being one: of their API group with another version or a kind none
/// of them has (`multus.linkerd.io/v1`, `LinkerdMultis`), or of one of their
/// kinds with another apiVersion (`linkerd.io/v1alpha1`). `None` for a
/// settings object and for any other object.
pub fn near_miss(node: &Node, kinds: &[&str]) -> Option<SettingsError> {
    let map = node.as_map()?;
    let kind = map.get_text("kind").unwrap_or_default();
    let api_version = map.get_text("apiVersion").unwrap_or_default();
    let known_kind = kinds.contains(&kind);
    let our_group = group_of(api_version) == group_of(API_VERSION);
    if !our_group && !known_kind || api_version == API_VERSION && known_kind {
        return None;
    }
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    if api_version != API_VERSION {
        problems.push(format!(
            "apiVersion {api_version:?} is not one linkerd-multus reads"
        ));
        fixes.push(format!("apiVersion: {API_VERSION}"));
    }
    if !known_kind {
        problems.push(format!("{API_VERSION} has no kind {kind:?}"));
        match nearest(kind, kinds.iter().copied()) {
            Some(meant) => fixes.push(format!("kind: {meant}")),
            None => fixes.push(format!("a kind of {}", or_list(kinds))),
        }
    }
    let name = map
        .get("metadata")
        .and_then(Node::as_map)
        .and_then(|m| m.get_text("name"))
        .unwrap_or("(no name)");
    Some(SettingsError::NearMiss {
        object: format!("{kind} {name}"),
        problem: format!("{}; write {}", problems.join(", and "), fixes.join(" and ")),
    })
}

/// `A`, `A or B`, `A, B or C`.
fn or_list(items: &[&str]) -> String {
    match items {
        [first @ .., last] if !first.is_empty() => format!("{} or {last}", first.join(", ")),
        _ => items.join(""),
    }
}

/// The name kpt gives the ConfigMap it makes of the `key=value` arguments
/// after `--` (`kpt fn eval --exec ... -- nadName=x`).
const KPT_ARGUMENTS: &str = "function-input";

/// How the user wrote `keys` of the functionConfig `node` when kpt made it of
/// the arguments after `--`: ``the argument `nadNme=x` after `--` ``;
/// `None` for any other functionConfig, or no key.
pub fn as_arguments(node: &Node, keys: &[String]) -> Option<String> {
    let map = node.as_map()?;
    let metadata = map.get("metadata")?.as_map()?;
    let made_by_kpt = matches!(SettingsObject::of(node), Ok(SettingsObject::ConfigMap(_)))
        && metadata.entries.len() == 1
        && metadata.get_text("name") == Some(KPT_ARGUMENTS);
    let data = map.get("data")?.as_map()?;
    if !made_by_kpt || keys.is_empty() {
        return None;
    }
    let written: Vec<String> = keys
        .iter()
        .map(|key| {
            let value = data.get_text(key).unwrap_or_default();
            format!("`{key}={value}`")
        })
        .collect();
    Some(match written.as_slice() {
        [one] => format!("the argument {one} after `--`"),
        [first @ .., last] => format!("the arguments {} and {last} after `--`", first.join(", ")),
        [] => unreachable!("keys is not empty"),
    })
}

impl SettingsError {
    /// The settings keys it is about.
    pub fn keys(&self) -> Vec<String> {
        match self {
            SettingsError::UnknownKeys { keys, .. } => keys.clone(),
            SettingsError::BadValue { key, .. } => vec![key.clone()],
            _ => Vec::new(),
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
            check_keys(section, Self::KEYS)?;
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
        check_keys(&map, Self::KEYS)?;
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
