//! Settings given as text, each a [`Value`] that names where it came from:
//! environment variables (`LINKERD_MULTUS_*` for every host, and what Argo CD
//! gives a config-management plugin: the application's `env`, prefixed
//! `ARGOCD_ENV_`, and its `parameters`) and command-line flags. They are the
//! `LinkerdMultus` settings' keys.

use crate::k8s::names::nearest;
use crate::linkerd_cni::settings::KEYS;

/// Prefix of the environment variable of each setting.
pub const PREFIX: &str = "LINKERD_MULTUS_";
/// Argo CD's prefix for the variables of an Application's `plugin.env`.
pub const ARGOCD_ENV_PREFIX: &str = "ARGOCD_ENV_";
/// The webhook's variable of `--network-resources`: read under [`PREFIX`]
/// beside the settings' own.
pub const NETWORK_RESOURCES_VARIABLE: &str = "LINKERD_MULTUS_NETWORK_RESOURCES";
/// Argo CD's JSON list of an Application's `plugin.parameters`.
pub const ARGOCD_PARAMETERS: &str = "ARGOCD_APP_PARAMETERS";
/// Argo CD's prefix for one variable per parameter.
pub const ARGOCD_PARAM_PREFIX: &str = "PARAM_";

/// One setting's value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The settings key.
    pub key: &'static str,
    /// Its text.
    pub value: String,
    /// Where it was set, for messages.
    pub source: String,
}

impl Value {
    /// A setting given as the command-line flag `--name`.
    pub fn flag(name: &str, key: &'static str, value: String) -> Self {
        Value {
            key,
            value,
            source: format!("--{name}"),
        }
    }
}

/// A variable that does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct EnvError {
    /// The variable.
    pub variable: String,
    /// What is wrong.
    pub problem: String,
}

/// The environment a front reads settings from.
#[derive(Clone, Copy)]
pub struct Environment<'a> {
    /// Reads a variable.
    pub read: &'a dyn Fn(&str) -> Option<String>,
    /// Whether Argo CD's plugin `env` and `parameters` count too.
    pub argocd: bool,
    /// Variables naming the namespace the host puts resources without one in
    /// (Argo CD's `ARGOCD_APP_NAMESPACE`): the `defaultNamespace` when no
    /// setting gives one.
    pub namespace_variables: &'static [&'static str],
}

impl Environment<'_> {
    /// The settings the variables give, lowest precedence first:
    /// `LINKERD_MULTUS_*`, then Argo CD's plugin `env` and its parameters.
    pub fn values(&self) -> Result<Vec<Value>, EnvError> {
        let mut values = prefixed(self.read, PREFIX);
        if self.argocd {
            values.extend(prefixed(self.read, &format!("{ARGOCD_ENV_PREFIX}{PREFIX}")));
            values.extend(argocd_parameters(self.read)?);
        }
        Ok(values)
    }

    /// The first of [`Environment::namespace_variables`] that is set and not
    /// empty, and its value.
    pub fn namespace(&self) -> Option<(&'static str, String)> {
        self.namespace_variables
            .iter()
            .find_map(|&v| (self.read)(v).filter(|n| !n.is_empty()).map(|n| (v, n)))
    }
}

/// The environment variable of a setting: `proxyUIDOffset` is `PROXY_UID_OFFSET`.
pub fn variable(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        // An acronym's plural `s` (`clusterCIDRs`) belongs to it: CLUSTER_CIDRS.
        let plural = chars.get(i + 1) == Some(&'s') && chars.get(i + 2).is_none();
        let boundary = i > 0
            && c.is_ascii_uppercase()
            && (chars[i - 1].is_ascii_lowercase()
                || !plural && chars.get(i + 1).is_some_and(char::is_ascii_lowercase));
        if boundary {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// A warning for each variable among `names` that looks meant for
/// linkerd-multus (`LINKERD_MULTUS_*`, or Argo CD's
/// `ARGOCD_ENV_LINKERD_MULTUS_*`, in any case) but is none it reads: it names
/// the variable and the one probably meant, when one is close.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let known: Vec<String> = KEYS
        .iter()
        .map(|key| variable(key))
        .chain([NETWORK_RESOURCES_VARIABLE[PREFIX.len()..].to_string()])
        .collect();
    let argo_prefix = format!("{ARGOCD_ENV_PREFIX}{PREFIX}");
    let mut warnings = Vec::new();
    for name in names {
        let upper = name.to_ascii_uppercase();
        // Argo CD passes an Application's plugin env entry NAME as ARGOCD_ENV_NAME.
        let (suffix, argo) = if let Some(suffix) = upper.strip_prefix(&argo_prefix) {
            (suffix, true)
        } else if let Some(suffix) = upper.strip_prefix(PREFIX) {
            (suffix, false)
        } else {
            continue;
        };
        if known.iter().any(|k| k == suffix) && upper == name {
            continue;
        }
        if !argo && is_service_link(suffix) {
            continue;
        }
        let written = if argo {
            format!(
                "{name} ({} in the Application's plugin env)",
                &name[ARGOCD_ENV_PREFIX.len()..]
            )
        } else {
            name.to_string()
        };
        warnings.push(match nearest(suffix, known.iter().map(String::as_str)) {
            Some(k) => format!(
                "environment variable {written} is not one linkerd-multus reads; did you mean {PREFIX}{k}?"
            ),
            None => format!(
                "environment variable {written} is not one linkerd-multus reads; it reads {PREFIX}<NAME> for NAME in {}",
                known.join(", ")
            ),
        });
    }
    warnings
}

/// Whether `suffix` (a variable's name after `LINKERD_MULTUS_`) is one of the
/// Service-link variables the kubelet gives every container for each Service
/// of its namespace (`{SERVICE}_SERVICE_HOST`, `{SERVICE}_SERVICE_PORT[_NAME]`,
/// and Docker's links `{SERVICE}_PORT[_N_PROTO[_PROTO|_PORT|_ADDR]]`): a
/// Service named `linkerd-multus-*` gives them this project's prefix, yet they
/// are no setting, so they get no warning.
fn is_service_link(suffix: &str) -> bool {
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    let link = |rest: &str| match rest {
        "SERVICE_HOST" | "SERVICE_PORT" | "PORT" => true,
        _ => {
            if let Some(port_name) = rest.strip_prefix("SERVICE_PORT_") {
                return word(port_name);
            }
            let Some(docker) = rest.strip_prefix("PORT_") else {
                return false;
            };
            let mut parts = docker.splitn(3, '_');
            let (number, protocol, field) = (parts.next(), parts.next(), parts.next());
            number.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && matches!(protocol, Some("TCP" | "UDP" | "SCTP"))
                && matches!(field, None | Some("PROTO" | "PORT" | "ADDR"))
        }
    };
    suffix
        .match_indices('_')
        .any(|(at, _)| word(&suffix[..at]) && link(&suffix[at + 1..]))
}

/// [`unknown_variables`] of this process's environment.
pub fn unknown_variables_here() -> Vec<String> {
    let names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    unknown_variables(names.iter().map(String::as_str))
}

/// Settings from variables named `prefix` + [`variable`], in key order.
pub fn prefixed(env: &dyn Fn(&str) -> Option<String>, prefix: &str) -> Vec<Value> {
    KEYS.iter()
        .filter_map(|&key| {
            let name = format!("{prefix}{}", variable(key));
            env(&name).map(|value| Value {
                key,
                value,
                source: format!("environment variable {name}"),
            })
        })
        .collect()
}

/// The command-line flag of a setting: `proxyUIDOffset` is `--proxy-uid-offset`.
pub fn flag_name(key: &str) -> String {
    variable(key).to_ascii_lowercase().replace('_', "-")
}

/// Settings given as command-line flags named after their keys.
pub fn flags(flags: Vec<(&'static str, String)>) -> Vec<Value> {
    flags
        .into_iter()
        .map(|(key, value)| Value::flag(&flag_name(key), key, value))
        .collect()
}

/// Settings from an Argo CD Application's parameters: `ARGOCD_APP_PARAMETERS`
/// when set, else the `PARAM_*` variables. Parameters are named after the
/// settings keys. Structured settings are YAML or JSON strings, or Argo CD's
/// own shapes: `namespaces` a map of namespace name to its annotations (one
/// YAML or JSON mapping), `workloadKinds` an array of YAML or JSON mappings.
pub fn argocd_parameters(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Value>, EnvError> {
    let Some(json) = env(ARGOCD_PARAMETERS) else {
        return Ok(argocd_param_variables(env));
    };
    let error = |problem: String| EnvError {
        variable: format!("environment variable {ARGOCD_PARAMETERS}"),
        problem,
    };
    let list: Vec<serde_json::Value> = match serde_json::from_str(&json) {
        Ok(serde_json::Value::Null) => return Ok(Vec::new()),
        Ok(v) => serde_json::from_value(v)
            .map_err(|_| error("is not a JSON list of parameters".into()))?,
        Err(e) => return Err(error(format!("is not valid JSON: {e}"))),
    };
    let mut out = Vec::new();
    for param in list {
        let name = param
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| error("a parameter has no name".into()))?;
        let key = KEYS.iter().find(|k| **k == name).ok_or_else(|| {
            error(format!(
                "unknown parameter {name:?}; valid parameters are {}",
                KEYS.join(", ")
            ))
        })?;
        let value = if let Some(s) = param.get("string").and_then(|s| s.as_str()) {
            s.to_string()
        } else if let Some(map) = param.get("map").and_then(|m| m.as_object()) {
            // namespace name -> its annotations, each a YAML or JSON mapping.
            map.iter()
                .map(|(name, annotations)| {
                    let annotations = annotations.as_str().unwrap_or_default();
                    format!("{}: {{annotations: {annotations}}}\n", json_string(name))
                })
                .collect()
        } else if let Some(array) = param.get("array").and_then(|a| a.as_array()) {
            // One YAML or JSON item per element.
            array
                .iter()
                .map(|item| format!("- {}\n", item.as_str().unwrap_or_default()))
                .collect()
        } else {
            return Err(error(format!(
                "parameter {name:?} has no string, map or array value"
            )));
        };
        out.push(Value {
            key,
            value,
            source: format!("Argo CD parameter {name}"),
        });
    }
    Ok(out)
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `PARAM_<NAME>`: Argo CD upper-cases a parameter's name and turns every
/// character that is not a letter or digit into `_`, so `cniNamespace` is
/// `PARAM_CNINAMESPACE`. Only string parameters are read this way.
fn argocd_param_variables(env: &dyn Fn(&str) -> Option<String>) -> Vec<Value> {
    KEYS.iter()
        .filter_map(|&key| {
            let name = format!("{ARGOCD_PARAM_PREFIX}{}", key.to_ascii_uppercase());
            env(&name).map(|value| Value {
                key,
                value,
                source: format!("environment variable {name}"),
            })
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An environment of these variables only.
    pub(in crate::pipeline) fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// The kubelet's Service-link variables of a Service named
    /// `linkerd-multus-webhook` (port 443 named https) get no warning; a
    /// setting misspelt still does.
    #[test]
    fn service_links_are_not_settings() {
        let links = [
            "LINKERD_MULTUS_WEBHOOK_SERVICE_HOST",
            "LINKERD_MULTUS_WEBHOOK_SERVICE_PORT",
            "LINKERD_MULTUS_WEBHOOK_SERVICE_PORT_HTTPS",
            "LINKERD_MULTUS_WEBHOOK_PORT",
            "LINKERD_MULTUS_WEBHOOK_PORT_443_TCP",
            "LINKERD_MULTUS_WEBHOOK_PORT_443_TCP_PROTO",
            "LINKERD_MULTUS_WEBHOOK_PORT_443_TCP_PORT",
            "LINKERD_MULTUS_WEBHOOK_PORT_443_TCP_ADDR",
            "LINKERD_MULTUS_METRICS_PORT_9090_UDP",
        ];
        assert_eq!(unknown_variables(links), Vec::<String>::new());
        for (name, warned) in [
            ("LINKERD_MULTUS_PORT", true),
            ("LINKERD_MULTUS_WEBHOOK_PORT_HTTPS_TCP", true),
            ("LINKERD_MULTUS_WEBHOOK_PORT_443_TLS", true),
            ("LINKERD_MULTUS_WEBHOOK_SERVICE_PORT_", true),
            ("LINKERD_MULTUS_NAD_NAMES", true),
            ("ARGOCD_ENV_LINKERD_MULTUS_WEBHOOK_SERVICE_HOST", true),
        ] {
            assert_eq!(
                unknown_variables([name]).len(),
                usize::from(warned),
                "{name}"
            );
        }
    }

    #[test]
    fn variable_names() {
        for (key, want) in [
            ("cniNamespace", "CNI_NAMESPACE"),
            ("proxyUIDOffset", "PROXY_UID_OFFSET"),
            ("uidRangeAnnotation", "UID_RANGE_ANNOTATION"),
            ("nadName", "NAD_NAME"),
            ("namespaces", "NAMESPACES"),
            ("defaultNamespace", "DEFAULT_NAMESPACE"),
            ("configRollout", "CONFIG_ROLLOUT"),
            ("clusterCIDRs", "CLUSTER_CIDRS"),
            ("protectedCIDRs", "PROTECTED_CIDRS"),
            ("skipSecondarySubnets", "SKIP_SECONDARY_SUBNETS"),
        ] {
            assert_eq!(variable(key), want);
        }
    }

    #[test]
    fn reads_prefixed_variables() {
        let e = env(&[
            ("LINKERD_MULTUS_NAD_NAME", "net"),
            ("ARGOCD_ENV_LINKERD_MULTUS_CNI_NAMESPACE", "cni"),
            ("LINKERD_MULTUS_UNKNOWN", "x"),
        ]);
        let plain = prefixed(&e, PREFIX);
        assert_eq!(plain.len(), 1);
        assert_eq!(
            (
                plain[0].key,
                plain[0].value.as_str(),
                plain[0].source.as_str()
            ),
            (
                "nadName",
                "net",
                "environment variable LINKERD_MULTUS_NAD_NAME"
            )
        );
        let argo = prefixed(&e, &format!("{ARGOCD_ENV_PREFIX}{PREFIX}"));
        assert_eq!(argo[0].key, "cniNamespace");
    }

    #[test]
    fn warns_of_variables_it_does_not_read() {
        let warnings = unknown_variables([
            "LINKERD_MULTUS_NAD_NAME",
            "LINKERD_MULTUS_NETWORK_RESOURCES",
            "ARGOCD_ENV_LINKERD_MULTUS_CNI_NAMESPACE",
            "PATH",
            "LINKERD_MULTUS_NAD_NAMES",
            "LINKERD_MULTUS_PROXY_UID_OFSET",
            "linkerd_multus_nad_name",
            "ARGOCD_ENV_LINKERD_MULTUS_CNINAMESPACE",
            "LINKERD_MULTUS_COLOUR",
        ]);
        assert_eq!(
            warnings,
            [
                "environment variable LINKERD_MULTUS_NAD_NAMES is not one linkerd-multus reads; did you mean LINKERD_MULTUS_NAD_NAME?",
                "environment variable LINKERD_MULTUS_PROXY_UID_OFSET is not one linkerd-multus reads; did you mean LINKERD_MULTUS_PROXY_UID_OFFSET?",
                "environment variable linkerd_multus_nad_name is not one linkerd-multus reads; did you mean LINKERD_MULTUS_NAD_NAME?",
                "environment variable ARGOCD_ENV_LINKERD_MULTUS_CNINAMESPACE (LINKERD_MULTUS_CNINAMESPACE in the Application's plugin env) is not one linkerd-multus reads; did you mean LINKERD_MULTUS_CNI_NAMESPACE?",
                "environment variable LINKERD_MULTUS_COLOUR is not one linkerd-multus reads; it reads LINKERD_MULTUS_<NAME> for NAME in CNI_NAMESPACE, LINKERD_NAMESPACE, NAD_NAME, CNI_KUBECONFIG, CNI_VERSION, UID_RANGE_ANNOTATION, PROXY_UID_OFFSET, NAMESPACES, WORKLOAD_KINDS, DEFAULT_NAMESPACE, CONFIG_ROLLOUT, NAD_SYNC_WAVE, SKIP_SECONDARY_SUBNETS, CLUSTER_CIDRS, PROTECTED_CIDRS, NETWORK_RESOURCES",
            ]
        );
    }

    #[test]
    fn reads_argocd_parameters() {
        let e = env(&[(
            ARGOCD_PARAMETERS,
            r#"[{"name":"nadName","string":"net"},{"name":"namespaces","map":{"demo":"{linkerd.io/multus: enabled}"}},{"name":"workloadKinds","array":["{apiVersion: x/v1, kind: K, podTemplatePath: /spec/template}"]}]"#,
        )]);
        let values = argocd_parameters(&e).unwrap();
        let got: Vec<_> = values.iter().map(|v| (v.key, v.value.as_str())).collect();
        assert_eq!(
            got,
            [
                ("nadName", "net"),
                (
                    "namespaces",
                    "\"demo\": {annotations: {linkerd.io/multus: enabled}}\n"
                ),
                (
                    "workloadKinds",
                    "- {apiVersion: x/v1, kind: K, podTemplatePath: /spec/template}\n"
                ),
            ]
        );
        let fallback = argocd_parameters(&env(&[("PARAM_NADNAME", "net")])).unwrap();
        assert_eq!(fallback[0].key, "nadName");
        assert!(
            argocd_parameters(&env(&[(ARGOCD_PARAMETERS, "null")]))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn argocd_parameter_errors() {
        for (json, want) in [
            (
                "[",
                "environment variable ARGOCD_APP_PARAMETERS: is not valid JSON",
            ),
            (
                "{}",
                "environment variable ARGOCD_APP_PARAMETERS: is not a JSON list",
            ),
            (
                r#"[{"name":"nadname","string":"x"}]"#,
                "environment variable ARGOCD_APP_PARAMETERS: unknown parameter \"nadname\"; valid parameters are cniNamespace,",
            ),
            (
                r#"[{"name":"nadName"}]"#,
                "environment variable ARGOCD_APP_PARAMETERS: parameter \"nadName\" has no string",
            ),
        ] {
            let err = argocd_parameters(&env(&[(ARGOCD_PARAMETERS, json)]))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{json}: {err}");
        }
    }
}
