//! The CNI and Multus vocabulary: the checks of a NAD's CNI configuration,
//! what net-attach-def-admission-controller and libcni would refuse. Shared by
//! the `validate` rules and the NAD controller's check of the live ConfigMap.

use serde_json::{Map as JsonMap, Value};

use crate::multus::nad::CNI_VERSIONS;
use crate::yaml::{JsonError, describe_json};

/// Why a NAD's CNI configuration would be refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CniConfigError {
    /// Not JSON at all.
    #[error("is not valid JSON: {0}")]
    Json(JsonError),
    /// JSON, but not an object.
    #[error("is {0}, not a JSON object")]
    NotObject(&'static str),
    /// A required field is absent (or null).
    #[error("has no \"{field}\"{why}")]
    Missing {
        /// The field, as a path in the configuration.
        field: String,
        /// Why it is needed, starting with a space, or empty.
        why: &'static str,
    },
    /// A field of the wrong JSON type.
    #[error("\"{field}\" is {found}, not {expected}")]
    WrongType {
        /// The field, as a path in the configuration.
        field: String,
        /// What it is.
        found: &'static str,
        /// What libcni reads it as.
        expected: &'static str,
    },
    /// A plugin type that is the empty string.
    #[error("\"{0}\" is empty")]
    Empty(String),
    /// A `cniVersion` that no CNI spec has.
    #[error("\"cniVersion\" {0:?} is not a CNI spec version; valid: {versions}", versions = CNI_VERSIONS.join(", "))]
    Version(String),
    /// A configuration list without plugins.
    #[error("\"plugins\" is empty; a configuration list needs at least one plugin")]
    NoPlugins,
}

/// Every problem of a CNI configuration (a single configuration or a
/// configuration list), in the order the fields are checked; empty when it is valid.
pub fn check_cni_config(config: &str) -> Vec<CniConfigError> {
    let value: Value = match serde_json::from_str(config) {
        Ok(v) => v,
        Err(e) => return vec![CniConfigError::Json(e.into())],
    };
    let Value::Object(object) = value else {
        return vec![CniConfigError::NotObject(describe_json(&value))];
    };
    let mut errors = Vec::new();
    if object.contains_key("plugins") {
        // A configuration list, as libcni's ConfListFromBytes reads it.
        match object.get("name") {
            None | Some(Value::Null) => errors.push(CniConfigError::Missing {
                field: "name".into(),
                why: " (a configuration list needs one)",
            }),
            Some(v) => {
                expect(&mut errors, "name", v, Kind::String);
            }
        }
        check_version(&object, &mut errors);
        if let Some(v) = object.get("disableCheck") {
            expect(&mut errors, "disableCheck", v, Kind::Bool);
        }
        match object.get("plugins") {
            Some(Value::Array(plugins)) if plugins.is_empty() => {
                errors.push(CniConfigError::NoPlugins)
            }
            Some(Value::Array(plugins)) => {
                for (i, plugin) in plugins.iter().enumerate() {
                    let at = format!("plugins[{i}]");
                    match plugin {
                        Value::Object(plugin) => {
                            check_type(plugin, &format!("{at}."), &mut errors);
                            if let Some(v) = plugin.get("cniVersion") {
                                expect(&mut errors, &format!("{at}.cniVersion"), v, Kind::String);
                            }
                            check_net_conf(plugin, &format!("{at}."), &mut errors);
                        }
                        other => errors.push(CniConfigError::WrongType {
                            field: at,
                            found: describe_json(other),
                            expected: "an object",
                        }),
                    }
                }
            }
            Some(other) => errors.push(CniConfigError::WrongType {
                field: "plugins".into(),
                found: describe_json(other),
                expected: "a list",
            }),
            None => unreachable!("checked above"),
        }
    } else {
        // A single configuration, as libcni's ConfFromBytes reads it. A
        // missing name is fine: Multus gives it the NAD's name.
        check_version(&object, &mut errors);
        check_type(&object, "", &mut errors);
        check_net_conf(&object, "", &mut errors);
    }
    errors
}

/// `cniVersion` is there and is a version.
fn check_version(object: &JsonMap<String, Value>, errors: &mut Vec<CniConfigError>) {
    match object.get("cniVersion") {
        None | Some(Value::Null) => errors.push(CniConfigError::Missing {
            field: "cniVersion".into(),
            why: " (the CNI spec requires it)",
        }),
        Some(Value::String(v)) if !CNI_VERSIONS.contains(&v.as_str()) => {
            errors.push(CniConfigError::Version(v.clone()))
        }
        Some(v) => {
            expect(errors, "cniVersion", v, Kind::String);
        }
    }
}

/// `type` is a non-empty string.
fn check_type(object: &JsonMap<String, Value>, at: &str, errors: &mut Vec<CniConfigError>) {
    let field = format!("{at}type");
    match object.get("type") {
        None | Some(Value::Null) => errors.push(CniConfigError::Missing {
            field,
            why: if at.is_empty() {
                " (a single configuration needs one; a list needs \"plugins\")"
            } else {
                ""
            },
        }),
        Some(Value::String(t)) if t.is_empty() => errors.push(CniConfigError::Empty(field)),
        Some(v) => {
            expect(errors, &field, v, Kind::String);
        }
    }
}

/// The other fields libcni reads into its `NetConf`, with their Go types.
fn check_net_conf(object: &JsonMap<String, Value>, at: &str, errors: &mut Vec<CniConfigError>) {
    if let Some(v) = object.get("name") {
        expect(errors, &format!("{at}name"), v, Kind::String);
    }
    if let Some(v) = object.get("capabilities") {
        let field = format!("{at}capabilities");
        if expect(errors, &field, v, Kind::Object)
            && let Value::Object(capabilities) = v
        {
            for (name, v) in capabilities {
                expect(errors, &format!("{field}.{name}"), v, Kind::Bool);
            }
        }
    }
    if let Some(v) = object.get("ipam") {
        let field = format!("{at}ipam");
        if expect(errors, &field, v, Kind::Object)
            && let Value::Object(ipam) = v
            && let Some(t) = ipam.get("type")
        {
            expect(errors, &format!("{field}.type"), t, Kind::String);
        }
    }
    if let Some(v) = object.get("dns") {
        let field = format!("{at}dns");
        if expect(errors, &field, v, Kind::Object)
            && let Value::Object(dns) = v
        {
            if let Some(d) = dns.get("domain") {
                expect(errors, &format!("{field}.domain"), d, Kind::String);
            }
            for key in ["nameservers", "search", "options"] {
                if let Some(list) = dns.get(key) {
                    let field = format!("{field}.{key}");
                    if expect(errors, &field, list, Kind::List)
                        && let Value::Array(items) = list
                    {
                        for (i, item) in items.iter().enumerate() {
                            expect(errors, &format!("{field}[{i}]"), item, Kind::String);
                        }
                    }
                }
            }
        }
    }
}

/// The JSON types libcni reads fields as.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Bool,
    Object,
    List,
}

/// Records a wrong type; `null` is accepted, as Go's JSON reader accepts it
/// for any field. Returns whether the value is of the kind.
fn expect(errors: &mut Vec<CniConfigError>, field: &str, value: &Value, kind: Kind) -> bool {
    let (ok, expected) = match kind {
        Kind::String => (value.is_string(), "a string"),
        Kind::Bool => (value.is_boolean(), "a boolean"),
        Kind::Object => (value.is_object(), "an object"),
        Kind::List => (value.is_array(), "a list"),
    };
    if !ok && !value.is_null() {
        errors.push(CniConfigError::WrongType {
            field: field.to_string(),
            found: describe_json(value),
            expected,
        });
    }
    ok
}

/// The plugin types a CNI configuration runs, in order: its `type`, or each
/// `plugins[].type` of a configuration list; `None` when it is not a JSON
/// object. Types that are not strings are left out.
pub fn plugin_types(config: &str) -> Option<Vec<String>> {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(config) else {
        return None;
    };
    let type_of =
        |o: &JsonMap<String, Value>| o.get("type").and_then(Value::as_str).map(str::to_string);
    Some(match object.get("plugins") {
        Some(Value::Array(plugins)) => plugins
            .iter()
            .filter_map(Value::as_object)
            .filter_map(type_of)
            .collect(),
        _ => type_of(&object).into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CNI configs the checks refuse, and the start of the one error each gets.
    const INVALID: &[(&str, &str)] = &[
        ("{\"cniVersion\": \"0.3.1\" x}", "is not valid JSON: "),
        ("[]", "is a list, not a JSON object"),
        ("\"text\"", "is a string, not a JSON object"),
        (
            r#"{"name": "a", "type": "macvlan"}"#,
            "has no \"cniVersion\" (the CNI spec requires it)",
        ),
        (
            r#"{"cniVersion": 1, "type": "macvlan"}"#,
            "\"cniVersion\" is a number, not a string",
        ),
        (
            r#"{"cniVersion": "0.5.0", "type": "macvlan"}"#,
            "\"cniVersion\" \"0.5.0\" is not a CNI spec version; valid: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "a"}"#,
            "has no \"type\" (a single configuration needs one; a list needs \"plugins\")",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": ""}"#,
            "\"type\" is empty",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": ["macvlan"]}"#,
            "\"type\" is a list, not a string",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": "macvlan", "name": 7}"#,
            "\"name\" is a number, not a string",
        ),
        (
            r#"{"cniVersion": "0.3.1", "plugins": [{"type": "a"}]}"#,
            "has no \"name\" (a configuration list needs one)",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": []}"#,
            "\"plugins\" is empty; a configuration list needs at least one plugin",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": null}"#,
            "\"plugins\" is null, not a list",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": {"type": "a"}}"#,
            "\"plugins\" is an object, not a list",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": [{"type": "a"}, {"mtu": 1500}]}"#,
            "has no \"plugins[1].type\"",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": ["bridge"]}"#,
            "\"plugins[0]\" is a string, not an object",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "disableCheck": "yes", "plugins": [{"type": "a"}]}"#,
            "\"disableCheck\" is a string, not a boolean",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": "a", "capabilities": {"mac": "true"}}"#,
            "\"capabilities.mac\" is a string, not a boolean",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": "a", "ipam": "host-local"}"#,
            "\"ipam\" is a string, not an object",
        ),
        (
            r#"{"cniVersion": "0.3.1", "type": "a", "dns": {"nameservers": "10.0.0.1"}}"#,
            "\"dns.nameservers\" is a string, not a list",
        ),
        (
            r#"{"cniVersion": "0.3.1", "name": "l", "plugins": [{"type": "a", "ipam": {"type": 1}}]}"#,
            "\"plugins[0].ipam.type\" is a number, not a string",
        ),
    ];

    #[test]
    fn valid_cni_configs_pass() {
        let ok = [
            r#"{"cniVersion": "0.3.1", "name": "a", "type": "macvlan"}"#,
            r#"{"cniVersion": "1.0.0", "type": "bridge"}"#,
            r#"{"cniVersion": "0.4.0", "name": "l", "plugins": [{"type": "bridge"}, {"type": "tuning", "capabilities": {"mac": true}}]}"#,
            r#"{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "host-local"}, "dns": {"nameservers": ["10.0.0.1"], "domain": "x"}, "name": null}"#,
            r#"{"cniVersion": "1.1.0", "name": "l", "disableCheck": true, "plugins": [{"type": "a", "cniVersion": "1.1.0"}]}"#,
        ];
        for config in ok {
            assert_eq!(check_cni_config(config), vec![], "{config}");
        }
    }

    #[test]
    fn invalid_cni_configs_are_refused() {
        for &(config, want) in INVALID {
            let errors = check_cni_config(config);
            assert_eq!(errors.len(), 1, "{config}: {errors:?}");
            let got = errors[0].to_string();
            assert!(
                got.starts_with(want),
                "{config}:\n  got  {got}\n  want {want}"
            );
        }
        // Every problem is reported, not only the first.
        assert_eq!(check_cni_config(r#"{"type": ""}"#).len(), 2);
    }

    #[test]
    fn plugin_types_of_configs_and_lists() {
        let types = |t: &[&str]| Some(t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        for (config, want) in [
            (r#"{"type": "linkerd-cni"}"#, types(&["linkerd-cni"])),
            (
                r#"{"plugins": [{"type": "macvlan"}, {"type": "linkerd-cni"}]}"#,
                types(&["macvlan", "linkerd-cni"]),
            ),
            (r#"{"plugins": [{"type": 7}, "x"]}"#, types(&[])),
            (r#"{"name": "no type"}"#, types(&[])),
            ("[]", None),
            ("not json", None),
        ] {
            assert_eq!(plugin_types(config), want, "{config}");
        }
    }
}
