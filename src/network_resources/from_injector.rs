//! network-resources-injector's own settings (its command-line flags and the
//! `config.json` of its `nri-control-switches` ConfigMap) turned into the
//! equivalent [`Settings`], and those written as a `NetworkResources` object.
//! Pure code: text in, settings and notes out.

use std::collections::BTreeMap;

use serde_json::{Map as JsonMap, Value, json};

use super::settings::{InterfaceNames, KIND, Settings, injectable_networks};
use crate::k8s::names::is_qualified_name;
use crate::krm::function_config::API_VERSION;
use crate::multus::networks::{Form, NETWORKS_ANNOTATION, Networks, NetworksError};
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
    /// `-h` or `-help`: Go's flag package prints the usage and exits.
    #[error(
        "flag {0}: network-resources-injector prints its usage and exits instead of running; remove the flag"
    )]
    Help(String),
    /// A resource-name key that is not an annotation key.
    #[error("flag -network-resource-name-keys: {0:?} is not a valid annotation key")]
    ResourceNameKey(String),
    /// A user-defined injection the injector applies that the settings cannot carry.
    #[error("{CONFIG_KEY}: user-defined injection {label:?}: {problem}")]
    Injection {
        /// The injection's key, the pod label it is for.
        label: String,
        /// What keeps it from being carried over.
        problem: Box<InjectionProblem>,
    },
}

/// Why a user-defined injection the injector applies cannot be carried over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectionProblem {
    /// `value` is not a map of strings; the injector's type assertions panic.
    #[error(
        "its value is not a map of annotation keys to strings, on which the injector's webhook fails for pods with the label; make it one or remove the injection"
    )]
    NotAnnotations,
    /// An annotation key the API server refuses.
    #[error(
        "{0:?} is not a valid annotation key, so the API server refuses the pods the injector adds it to; correct or remove it"
    )]
    AnnotationKey(String),
    /// A networks value Multus refuses.
    #[error(
        "{NETWORKS_ANNOTATION} {value:?} is not a networks value Multus reads ({source}), so the injector refuses pods with the label; correct it"
    )]
    Networks {
        /// The value.
        value: String,
        /// Why Multus refuses it.
        source: NetworksError,
    },
    /// A networks value with no selection.
    #[error(
        "{NETWORKS_ANNOTATION} {value:?} selects no network (where the injector applies it, it empties the pod's own); remove it from the injection"
    )]
    NoNetworks {
        /// The value.
        value: String,
    },
    /// A selection that is more than a network name.
    #[error(
        "{NETWORKS_ANNOTATION} {value:?}: {what}, and NetworkResources injections add networks by name, from the pod's own namespace; list it in the labelled workloads' own {NETWORKS_ANNOTATION} instead, or change the injection to name networks only"
    )]
    NotByName {
        /// The value.
        value: String,
        /// The selection and what it has beyond a name.
        what: String,
    },
}

/// The translation: the settings, and what the user should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The equivalent settings.
    pub settings: Settings,
    /// Where the injector and these settings part, one line each.
    pub notes: Vec<String>,
}

/// The injector's flags that take a value; every other flag it defines is a
/// boolean. Its own are in `cmd/webhook/main.go` and
/// `pkg/controlswitches/controlswitches.go` (network-resources-injector at
/// 61d01b9); glog v1.2.5, from its go.mod, adds `log_dir`, `log_link` and
/// `logbuflevel` (`glog_file.go`) and the others (`glog_flags.go`).
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
    "log_dir",
    "log_link",
    "logbuflevel",
    "v",
    "vmodule",
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
        } else if name == "h" || name == "help" {
            return Err(Error::Help(arg.clone()));
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
/// ignored here too, with a note; an injection it applies that the settings
/// cannot carry is an error.
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
                    settings.injections = injections_of(injections, &mut notes)?;
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
/// Those the injector never applies (a label no pod can carry, another path
/// or operation, a patch it cannot decode) are left out, with a note; one it
/// applies that the settings cannot carry is an error.
fn injections_of(
    injections: &Value,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, Error> {
    let mut out = BTreeMap::new();
    let Some(injections) = injections.as_object() else {
        notes.push(format!(
            "{CONFIG_KEY}: user-defined-injections is not an object: the injector reads none"
        ));
        return Ok(out);
    };
    for (label, patch) in injections {
        let skip = |why: &str| format!("user-defined injection {label:?} is left out: {why}");
        let refuse = |problem| Error::Injection {
            label: label.clone(),
            problem: Box::new(problem),
        };
        if !is_qualified_name(label) {
            notes.push(skip(
                "it is not a valid label key, so no pod has its label and the injector never applies it",
            ));
            continue;
        }
        let Some(patch) = patch.as_object() else {
            notes.push(skip("it is not a JSON object, which the injector skips"));
            continue;
        };
        let (op, path) = (go_field(patch, "op"), go_field(patch, "path"));
        if [op, path].iter().any(|f| f.is_some_and(|v| !v.is_string())) {
            notes.push(skip(
                "its op or path is not a string, which the injector skips",
            ));
            continue;
        }
        if path.and_then(Value::as_str) != Some("/metadata/annotations") {
            notes.push(skip(
                "its path is not /metadata/annotations, the only one the injector applies",
            ));
            continue;
        }
        if op.and_then(Value::as_str) != Some("add") {
            notes.push(skip("its op is not add, the only one the injector applies"));
            continue;
        }
        let value = go_field(patch, "value").and_then(Value::as_object);
        let Some(value) = value.filter(|v| v.values().all(Value::is_string)) else {
            return Err(refuse(InjectionProblem::NotAnnotations));
        };
        let mut annotations = BTreeMap::new();
        for (key, v) in value {
            let v = v.as_str().unwrap_or_default();
            if !is_qualified_name(key) {
                return Err(refuse(InjectionProblem::AnnotationKey(key.clone())));
            }
            let v = match key == NETWORKS_ANNOTATION {
                true => injected_networks(v).map_err(refuse)?,
                false => v.to_string(),
            };
            annotations.insert(key.clone(), v);
        }
        if annotations.contains_key(NETWORKS_ANNOTATION) {
            notes.push(format!(
                "user-defined injection {label:?}: its networks are appended to the pod's own; the injector replaced them"
            ));
        }
        out.insert(label.clone(), annotations);
    }
    Ok(out)
}

/// The member `field` of an object as Go's encoding/json decodes it into a
/// struct field: keys match regardless of case, and the last one wins.
fn go_field<'v>(object: &'v JsonMap<String, Value>, field: &str) -> Option<&'v Value> {
    object
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(field))
        .map(|(_, v)| v)
}

/// An injected networks value as the settings hold it: a comma list of
/// network names, kept as written or, from the JSON form or with empty
/// parts (`net@`), rewritten as names; anything more is a problem.
fn injected_networks(value: &str) -> Result<String, InjectionProblem> {
    if injectable_networks(value) {
        return Ok(value.to_string());
    }
    let networks = Networks::parse(value).map_err(|source| InjectionProblem::Networks {
        value: value.to_string(),
        source,
    })?;
    let selections = networks.selections();
    if selections.is_empty() {
        return Err(InjectionProblem::NoNetworks {
            value: value.to_string(),
        });
    }
    let mut names = Vec::new();
    for s in selections {
        let what = match (&s.namespace, &s.interface) {
            (Some(ns), Some(interface)) => {
                format!("selection {s} names namespace {ns} and interface {interface}")
            }
            (Some(ns), None) => format!("selection {s} names namespace {ns}"),
            (None, Some(interface)) => format!("selection {s} names interface {interface}"),
            (None, None) if networks.form() == Form::Json && !s.is_plain() => {
                format!("the element for {} has members besides \"name\"", s.name)
            }
            (None, None) => {
                names.push(s.name.as_str());
                continue;
            }
        };
        return Err(InjectionProblem::NotByName {
            value: value.to_string(),
            what,
        });
    }
    Ok(names.join(", "))
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
