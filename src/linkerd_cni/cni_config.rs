//! The Linkerd-CNI ConfigMap, turned into the CNI config a NAD carries.
//!
//! Every field of `cni_network_config` is kept, whatever the Linkerd generation:
//! only the legacy `policy` object is dropped (its placeholders mean nothing in a
//! NAD, and one stands for a service-account token), the kubeconfig placeholder
//! gets the real path, and `cniVersion` is added when absent.

use serde_json::{Map as JsonMap, Value};

use crate::krm::results::Position;
use crate::linkerd_cni::settings::Settings;
use crate::multus::cni_config::plugin_types;
use crate::yaml::{JsonError, Map, describe_json};

/// Name of the Linkerd-CNI ConfigMap.
pub const CONFIG_MAP_NAME: &str = "linkerd-cni-config";
/// The ConfigMap key holding the CNI JSON.
pub const NETWORK_CONFIG_KEY: &str = "cni_network_config";
/// The ConfigMap key holding the CNI config directory on the nodes.
pub const NET_DIR_KEY: &str = "dest_cni_net_dir";
/// The CNI plugin type of Linkerd-CNI, in a NAD's config.
pub const PLUGIN_TYPE: &str = "linkerd-cni";
/// The placeholder Linkerd's installer replaces with the kubeconfig path.
pub const KUBECONFIG_PLACEHOLDER: &str = "__KUBECONFIG_FILEPATH__";
/// The kubeconfig file Linkerd's installer writes into the CNI config directory.
const KUBECONFIG_FILE: &str = "ZZZ-linkerd-cni-kubeconfig";
const DEFAULT_NET_DIR: &str = "/etc/cni/net.d";

/// Why the ConfigMap cannot give a NAD config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CniConfigError {
    /// `data` or its key is missing.
    #[error("data.{NETWORK_CONFIG_KEY} is missing or not a string")]
    Missing,
    /// The JSON does not parse.
    #[error("data.{NETWORK_CONFIG_KEY} is not valid JSON: {0}")]
    InvalidJson(JsonError),
    /// The JSON is not an object.
    #[error("data.{NETWORK_CONFIG_KEY} must be a JSON object, not {0}")]
    NotObject(&'static str),
    /// A placeholder the installer would fill in is left.
    #[error(
        "data.{NETWORK_CONFIG_KEY}: placeholder {placeholder} at {path} has no value at render time; remove it or give the value"
    )]
    Placeholder {
        /// The placeholder.
        placeholder: String,
        /// Where it is, as a dotted JSON path.
        path: String,
    },
    /// The net dir is not a string.
    #[error("data.{NET_DIR_KEY} must be an absolute path")]
    BadNetDir,
}

impl CniConfigError {
    /// The problem as a result says it: the message, and where in the value
    /// when the JSON does not parse (for the front to name the file's line).
    pub fn located(self) -> (String, Option<Position>) {
        match self {
            CniConfigError::InvalidJson(JsonError { message, at }) => (
                format!("data.{NETWORK_CONFIG_KEY} is not valid JSON: {message}"),
                at.map(Position::InValue),
            ),
            other => (other.to_string(), None),
        }
    }
}

/// What a NAD's `spec.config` runs when no plugin of it is Linkerd-CNI: its
/// plugin types (`macvlan`, `bridge, then tuning`), `no CNI plugin`, or `no
/// valid CNI configuration`; `None` when one of its plugins is Linkerd-CNI.
/// A NAD of the rules' name that runs another network would put the pods
/// attached to it on that network instead.
pub fn other_network(config: &str) -> Option<String> {
    match plugin_types(config) {
        Some(types) if types.iter().any(|t| t == PLUGIN_TYPE) => None,
        Some(types) if types.is_empty() => Some("no CNI plugin".into()),
        Some(types) => Some(types.join(", then ")),
        None => Some("no valid CNI configuration".into()),
    }
}

/// Builds the NAD config from the ConfigMap's `data`.
pub fn nad_config(data: Option<&Map>, settings: &Settings) -> Result<Value, CniConfigError> {
    let data = data.ok_or(CniConfigError::Missing)?;
    let text = data
        .get_text(NETWORK_CONFIG_KEY)
        .ok_or(CniConfigError::Missing)?;
    let mut config: JsonMap<String, Value> = match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => return Err(CniConfigError::NotObject(describe_json(&other))),
        Err(e) => return Err(CniConfigError::InvalidJson(e.into())),
    };
    let kubeconfig = match &settings.cni_kubeconfig {
        Some(path) => path.clone(),
        None => {
            let dir = match data.get(NET_DIR_KEY) {
                None => DEFAULT_NET_DIR,
                Some(n) => n
                    .as_text()
                    .filter(|d| d.starts_with('/'))
                    .ok_or(CniConfigError::BadNetDir)?,
            };
            format!("{}/{KUBECONFIG_FILE}", dir.trim_end_matches('/'))
        }
    };
    config.shift_remove("policy");
    if !config.contains_key("cniVersion") {
        config.shift_insert(
            0,
            "cniVersion".into(),
            Value::String(settings.cni_version.clone()),
        );
    }
    let mut config = Value::Object(config);
    fill_placeholder(&mut config, &kubeconfig);
    if let Some((placeholder, path)) = find_placeholder(&config, &mut Vec::new()) {
        return Err(CniConfigError::Placeholder { placeholder, path });
    }
    Ok(config)
}

/// The NAD's `spec.config` text for a config: JSON, two-space indented.
pub fn to_text(config: &Value) -> String {
    serde_json::to_string_pretty(config).expect("a JSON value always serializes")
}

fn fill_placeholder(value: &mut Value, kubeconfig: &str) {
    match value {
        Value::String(s) if s.contains(KUBECONFIG_PLACEHOLDER) => {
            *s = s.replace(KUBECONFIG_PLACEHOLDER, kubeconfig);
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| fill_placeholder(v, kubeconfig)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| fill_placeholder(v, kubeconfig)),
        _ => {}
    }
}

/// The first `__UPPER_CASE__` placeholder left in a string or a key, with its path:
/// the installer fills placeholders in the text wherever they are.
fn find_placeholder(value: &Value, path: &mut Vec<String>) -> Option<(String, String)> {
    match value {
        Value::String(s) => placeholder_in(s).map(|p| (p.to_string(), path.join("."))),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            path.push(i.to_string());
            let found = find_placeholder(v, path);
            path.pop();
            found
        }),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            path.push(k.clone());
            let found = match placeholder_in(k) {
                Some(p) => Some((p.to_string(), path.join("."))),
                None => find_placeholder(v, path),
            };
            path.pop();
            found
        }),
        _ => None,
    }
}

/// Finds `__X__` where X is upper-case letters, digits and single underscores.
fn placeholder_in(s: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(start) = s[from..].find("__").map(|i| i + from) {
        let body_start = start + 2;
        let body_len = s[body_start..]
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(s.len() - body_start);
        let body = &s[body_start..body_start + body_len];
        // The body runs into the closing `__`; the shortest match ends at its first `__`.
        if let Some(end) = body.find("__").filter(|&e| e > 0) {
            return Some(&s[start..body_start + end + 2]);
        }
        from = body_start;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Node, parse_document};

    fn fixture(name: &str) -> Node {
        let path = format!(
            "{}/../shared/fixtures/linkerd-cni/{name}.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        parse_document(&text).unwrap()
    }

    fn data(cm: &Node) -> Option<&Map> {
        cm.as_map()?.get("data")?.as_map()
    }

    #[test]
    fn every_generation_keeps_its_fields() {
        for (generation, want_mode) in [
            ("stable-2.11", None),
            ("edge-24.5", Some("legacy")),
            ("version-2.18", Some("legacy")),
            ("version-2.19", Some("nft")),
        ] {
            let cm = fixture(generation);
            let config = nad_config(data(&cm), &Settings::default()).unwrap();
            let original: Value =
                serde_json::from_str(data(&cm).unwrap().get_text(NETWORK_CONFIG_KEY).unwrap())
                    .unwrap();
            assert_eq!(config["cniVersion"], "0.3.0", "{generation}");
            assert_eq!(
                config.as_object().unwrap().keys().next().unwrap(),
                "cniVersion"
            );
            assert!(config.get("policy").is_none(), "{generation}");
            assert_eq!(
                config["kubernetes"]["kubeconfig"],
                "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
            );
            assert_eq!(
                config["linkerd"], original["linkerd"],
                "{generation}: linkerd fields changed"
            );
            assert_eq!(
                config["linkerd"]
                    .get("iptables-mode")
                    .and_then(Value::as_str),
                want_mode
            );
            for key in ["name", "type", "log_level"] {
                assert_eq!(config[key], original[key]);
            }
        }
    }

    #[test]
    fn settings_and_net_dir_shape_the_kubeconfig_and_version() {
        let cm = parse_document(
            "data:\n  dest_cni_net_dir: /var/run/multus/cni/net.d/\n  cni_network_config: '{\"cniVersion\": \"1.0.0\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}}'\n",
        )
        .unwrap();
        let config = nad_config(data(&cm), &Settings::default()).unwrap();
        assert_eq!(config["cniVersion"], "1.0.0");
        assert_eq!(
            config["kubernetes"]["kubeconfig"],
            "/var/run/multus/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
        );
        let settings = Settings {
            cni_kubeconfig: Some("/host/kc".into()),
            ..Settings::default()
        };
        let config = nad_config(data(&cm), &settings).unwrap();
        assert_eq!(config["kubernetes"]["kubeconfig"], "/host/kc");
    }

    #[test]
    fn bad_configs_are_named() {
        let cases = [
            ("{}", "data.cni_network_config is missing or not a string"),
            (
                "{cni_network_config: '{\"a\": '}",
                "data.cni_network_config is not valid JSON: EOF while parsing a value at line 1 column 6 of the value",
            ),
            (
                "{cni_network_config: '[1]'}",
                "data.cni_network_config must be a JSON object, not a list",
            ),
            (
                "{cni_network_config: '{\"linkerd\": {\"token\": \"Bearer __SERVICEACCOUNT_TOKEN__\"}}'}",
                "data.cni_network_config: placeholder __SERVICEACCOUNT_TOKEN__ at linkerd.token has no value at render time; remove it or give the value",
            ),
            // Found by fuzzing: a placeholder in a key is one too.
            (
                "{cni_network_config: '{\"linkerd\": {\"https://__HOST__:4143\": 1}}'}",
                "data.cni_network_config: placeholder __HOST__ at linkerd.https://__HOST__:4143 has no value at render time; remove it or give the value",
            ),
            (
                "{dest_cni_net_dir: relative, cni_network_config: '{}'}",
                "data.dest_cni_net_dir must be an absolute path",
            ),
        ];
        for (src, want) in cases {
            let data = parse_document(src).unwrap();
            let err = nad_config(data.as_map(), &Settings::default()).unwrap_err();
            assert_eq!(err.to_string(), want, "{src}");
        }
    }

    /// Found by fuzzing: a number beyond 64 bits came out as a float that read back as
    /// another one, so the NAD config changed each time it was read.
    #[test]
    fn numbers_read_back_the_same() {
        for number in [
            "2199999999999999999999902",
            "1.7976931348623157e308",
            "0.1",
            "-0",
        ] {
            let src =
                format!("{{cni_network_config: '{{\"linkerd\": {{\"proxy-gid\": {number}}}}}'}}");
            let data = parse_document(&src).unwrap();
            let config = nad_config(data.as_map(), &Settings::default()).unwrap();
            let read: Value = serde_json::from_str(&to_text(&config)).unwrap();
            assert_eq!(read, config, "{number}");
        }
    }

    #[test]
    fn placeholder_scan() {
        for (s, want) in [
            ("__A__", Some("__A__")),
            ("https://__HOST__:__PORT__", Some("__HOST__")),
            ("__lower__", None),
            ("a__B_C__d", Some("__B_C__")),
            ("____", None),
            ("__", None),
            ("/etc/x", None),
        ] {
            assert_eq!(placeholder_in(s), want, "{s}");
        }
    }
}
