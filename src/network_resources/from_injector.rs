//! network-resources-injector's own settings (its command-line flags and the
//! `config.json` of its `nri-control-switches` ConfigMap) turned into the
//! equivalent [`Settings`], and those written as a `NetworkResources` object.
//! Pure code: text in, settings and notes out.

use std::collections::BTreeMap;

use serde_json::{Map as JsonMap, Value, json};

use super::settings::{InterfaceNames, KIND, Settings};
use crate::k8s::names::is_qualified_name;
use crate::krm::function_config::API_VERSION;
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks};
use crate::yaml::{Map, Node, Seq, emit_document};

/// The ConfigMap the injector watches in its namespace.
pub const CONFIG_MAP: &str = "nri-control-switches";

/// The key of that ConfigMap the injector reads.
pub const CONFIG_KEY: &str = "config.json";

/// Why the injector's settings cannot be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A flag the injector does not define (it refuses to start with one).
    #[error("flag {0}: network-resources-injector has no such flag")]
    UnknownFlag(String),
    /// A flag without the value it takes.
    #[error("flag -{0} needs a value")]
    MissingValue(String),
    /// A boolean flag with a value Go's strconv.ParseBool refuses.
    #[error("flag -{flag}: {value:?} is not a boolean")]
    NotBoolean {
        /// The flag.
        flag: String,
        /// Its value.
        value: String,
    },
    /// A resource-name key that is not an annotation key.
    #[error("flag -network-resource-name-keys: {0:?} is not a valid annotation key")]
    ResourceNameKey(String),
}

/// The translation: the settings, and what the user should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The equivalent settings.
    pub settings: Settings,
    /// Where the injector and these settings part, one line each.
    pub notes: Vec<String>,
}

/// The injector's flags that take a value (its own and glog's); every other
/// flag it defines is a boolean.
const VALUE_FLAGS: &[&str] = &[
    "port",
    "bind-address",
    "tls-cert-file",
    "tls-private-key-file",
    "client-ca",
    "health-check-port",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-curve-preferences",
    "network-resource-name-keys",
    "v",
    "vmodule",
    "log_dir",
    "log_backtrace_at",
    "stderrthreshold",
];
const BOOL_FLAGS: &[&str] = &[
    "insecure",
    "enable-http2",
    "injectHugepageDownApi",
    "honor-resources",
    "logtostderr",
    "alsologtostderr",
];

/// The three flags that carry settings, as Go's flag package reads them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Flags {
    hugepages: bool,
    honor: bool,
    keys: Option<String>,
}

/// Reads the injector's command line (its container's `args`) as Go's flag
/// package does: `-f`, `--f`, `-f=v`, `-f v` for flags with a value; parsing
/// stops at `--` or the first argument that is not a flag.
fn flags(args: &[String]) -> Result<Flags, Error> {
    let mut out = Flags::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            break;
        };
        if flag.is_empty() {
            break;
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        if BOOL_FLAGS.contains(&name) {
            let value = match inline.as_deref() {
                None => true,
                Some(v) => go_bool(v).ok_or_else(|| Error::NotBoolean {
                    flag: name.into(),
                    value: v.into(),
                })?,
            };
            match name {
                "injectHugepageDownApi" => out.hugepages = value,
                "honor-resources" => out.honor = value,
                _ => {}
            }
        } else if VALUE_FLAGS.contains(&name) {
            let value = match inline {
                Some(v) => v,
                None => rest
                    .next()
                    .cloned()
                    .ok_or_else(|| Error::MissingValue(name.into()))?,
            };
            if name == "network-resource-name-keys" {
                out.keys = Some(value);
            }
        } else {
            return Err(Error::UnknownFlag(arg.clone()));
        }
    }
    Ok(out)
}

/// Go's strconv.ParseBool.
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The settings the injector runs with, given its flags and the text of
/// `config.json` in its ConfigMap (`None`: no ConfigMap, or no such key).
/// What the injector ignores (a switch or injection it cannot read) is
/// ignored here too, with a note.
pub fn translate(args: &[String], config_json: Option<&str>) -> Result<Translation, Error> {
    let flags = flags(args)?;
    let mut notes = Vec::new();
    let mut settings = Settings {
        honor_resources: flags.honor,
        downward_api: true,
        ..Settings::default()
    };
    if let Some(keys) = &flags.keys {
        settings.resource_name_keys = resource_name_keys(keys)?;
    }
    let mut hugepages = flags.hugepages;
    if let Some(text) = config_json {
        match serde_json::from_str::<JsonMap<String, Value>>(text) {
            Err(e) => notes.push(format!(
                "{CONFIG_KEY} is not a JSON object ({e}): the injector ignores it and runs with its flags"
            )),
            Ok(config) => {
                if let Some(features) = config.get("features") {
                    features_of(features, &mut settings, &mut hugepages, &mut notes);
                }
                if let Some(injections) = config.get("user-defined-injections") {
                    settings.injections = injections_of(injections, &mut notes);
                }
                for key in config.keys() {
                    if !["features", "user-defined-injections"].contains(&key.as_str()) {
                        notes.push(format!(
                            "{CONFIG_KEY}: the injector does not read {key:?}; it is left out"
                        ));
                    }
                }
            }
        }
    }
    if !hugepages {
        notes.push(
            "downwardAPI: true, as the injector always mounts podnetinfo where it adds resources; it also exposes hugepages, which the injector did only with its hugepage switch on".into(),
        );
    }
    Ok(Translation { settings, notes })
}

fn resource_name_keys(flag: &str) -> Result<Vec<String>, Error> {
    let mut keys: Vec<String> = Vec::new();
    for key in flag.split(',').map(str::trim) {
        if !is_qualified_name(key) {
            return Err(Error::ResourceNameKey(key.into()));
        }
        if !keys.iter().any(|k| k == key) {
            keys.push(key.into());
        }
    }
    Ok(keys)
}

/// The `features` switches, which override the flags; a value that is not a
/// boolean makes the injector ignore them all.
fn features_of(features: &Value, s: &mut Settings, hugepages: &mut bool, notes: &mut Vec<String>) {
    let Some(switches) = features
        .as_object()
        .filter(|f| f.values().all(Value::is_boolean))
    else {
        notes.push(format!(
            "{CONFIG_KEY}: features is not an object of booleans: the injector ignores every switch and runs with its flags"
        ));
        return;
    };
    for (name, on) in switches {
        let on = on.as_bool().unwrap_or_default();
        match name.as_str() {
            "enableHonorExistingResources" => s.honor_resources = on,
            "enableHugePageDownApi" => *hugepages = on,
            other => notes.push(format!(
                "{CONFIG_KEY}: the injector has no switch {other:?}; it is left out"
            )),
        }
    }
}

/// The user-defined injections: label to the annotations its patch adds.
/// Those the injector skips (another path or operation, a value that is not
/// a map of strings) are left out, with a note.
fn injections_of(
    injections: &Value,
    notes: &mut Vec<String>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(injections) = injections.as_object() else {
        notes.push(format!(
            "{CONFIG_KEY}: user-defined-injections is not an object: the injector reads none"
        ));
        return out;
    };
    for (label, patch) in injections {
        let skip = |why: &str| format!("user-defined injection {label:?} is left out: {why}");
        if !is_qualified_name(label) {
            notes.push(skip("it is not a valid label key"));
            continue;
        }
        if patch["path"] != "/metadata/annotations" {
            notes.push(skip(
                "its path is not /metadata/annotations, the only one the injector applies",
            ));
            continue;
        }
        if patch["op"] != "add" {
            notes.push(skip("its op is not add, the only one the injector applies"));
            continue;
        }
        let Some(value) = patch["value"].as_object() else {
            notes.push(skip("its value is not a map of annotations"));
            continue;
        };
        let mut annotations = BTreeMap::new();
        for (key, v) in value {
            match v.as_str() {
                Some(v) if valid_injection(key, v) => {
                    annotations.insert(key.clone(), v.to_string());
                }
                _ => notes.push(skip(&format!(
                    "annotation {key} is not one the NetworkResources kind takes (a string; networks as a comma list of names)"
                ))),
            }
        }
        if annotations.len() == value.len() {
            if annotations.contains_key(NETWORKS_ANNOTATION) {
                notes.push(format!(
                    "user-defined injection {label:?}: its networks are appended to the pod's own; the injector replaced them"
                ));
            }
            out.insert(label.clone(), annotations);
        }
    }
    out
}

fn valid_injection(key: &str, value: &str) -> bool {
    is_qualified_name(key)
        && (key != NETWORKS_ANNOTATION
            || Networks::parse(value).is_ok_and(|n| n.selections().iter().all(|s| s.is_plain())))
}

/// The text of `config.json` in the injector's ConfigMap, if it has one.
pub fn config_json(config_map: &Node) -> Option<&str> {
    config_map
        .as_map()?
        .get("data")?
        .as_map()?
        .get_text(CONFIG_KEY)
}

/// The settings as a `NetworkResources` object (a local-config one, as kpt
/// takes a function's config), with only the keys that differ from the
/// defaults.
pub fn to_object(settings: &Settings, name: &str) -> String {
    let defaults = Settings::default();
    let mut spec = JsonMap::new();
    if settings.resource_name_keys != defaults.resource_name_keys {
        spec.insert(
            "resourceNameKeys".into(),
            json!(settings.resource_name_keys),
        );
    }
    if settings.honor_resources {
        spec.insert("honorResources".into(), json!(true));
    }
    if settings.downward_api {
        spec.insert("downwardAPI".into(), json!(true));
    }
    if !settings.injections.is_empty() {
        let injections: JsonMap<String, Value> = settings
            .injections
            .iter()
            .map(|(label, a)| (label.clone(), json!({ "annotations": a })))
            .collect();
        spec.insert("injections".into(), Value::Object(injections));
    }
    if settings.interface_names == InterfaceNames::Deterministic {
        spec.insert("interfaceNames".into(), json!("deterministic"));
    }
    let object = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "annotations": {"config.kubernetes.io/local-config": "true"},
        },
        "spec": spec,
    });
    emit_document(&tree(&object))
}

/// The tree of a JSON value, strings plain where YAML reads them back as
/// the same strings.
fn tree(value: &Value) -> Node {
    match value {
        Value::String(s) => Node::string(s.as_str()),
        Value::Array(items) => Node::Seq(Seq {
            items: items.iter().map(tree).collect(),
            ..Seq::default()
        }),
        Value::Object(entries) => Node::Map(Map {
            entries: entries
                .iter()
                .map(|(k, v)| (Node::string(k.as_str()), tree(v)))
                .collect(),
            ..Map::default()
        }),
        other => Node::from_json(other),
    }
}

#[cfg(test)]
#[path = "from_injector_tests.rs"]
mod tests;
