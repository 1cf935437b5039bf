//! The day-2 settings, the same in `install` and the chart (whose values carry the same keys):
//! each container's resources, the log level, the webhook's `--on-error` and `--missing-nad`,
//! and the labels and annotations added to the pods, the webhook's Service and its
//! MutatingWebhookConfiguration. Read from the flags or the file, checked, each problem naming
//! the flag, the field and what to do.

use std::collections::BTreeMap;

use crate::k8s::names::is_qualified_name;
use crate::yaml::{Map, Node};

/// Labels or annotations: key to value.
pub type Pairs = BTreeMap<String, String>;

/// A container's resources as given, over the package's: each quantity of `requests` and
/// `limits`, `None` removing the package's (`null`, as Helm removes a value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// The requests given.
    pub requests: BTreeMap<String, Option<String>>,
    /// The limits given.
    pub limits: BTreeMap<String, Option<String>>,
}

/// The webhook's answer for a pod it cannot act on (its `--on-error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnError {
    /// Admit it unchanged, with a warning.
    #[default]
    #[value(name = "allow")]
    Allow,
    /// Deny it, saying why.
    #[value(name = "deny")]
    Deny,
}

/// What the webhook does with a pod whose namespace lacks the NAD (its `--missing-nad`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MissingNad {
    /// Deny it (the default without the NAD controller).
    #[value(name = "deny")]
    Deny,
    /// Attach it with a warning (the default with the NAD controller, which makes the NAD).
    #[value(name = "attach")]
    Attach,
    /// Do not look.
    #[value(name = "ignore")]
    Ignore,
}

impl OnError {
    /// As the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Allow => "allow",
            OnError::Deny => "deny",
        }
    }
}

impl MissingNad {
    /// As the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            MissingNad::Deny => "deny",
            MissingNad::Attach => "attach",
            MissingNad::Ignore => "ignore",
        }
    }
}

/// The file's keys of these settings, with the flags that set them, in the order the docs
/// list them.
pub const FIELDS: &[(&str, &str)] = &[
    ("webhookResources", "--webhook-resources"),
    ("controllerResources", "--controller-resources"),
    ("logLevel", "--log-level"),
    ("onError", "--on-error"),
    ("missingNAD", "--missing-nad"),
    ("podLabels", "--pod-label"),
    ("podAnnotations", "--pod-annotation"),
    ("serviceLabels", "--service-label"),
    ("serviceAnnotations", "--service-annotation"),
    (
        "webhookConfigurationLabels",
        "--webhook-configuration-label",
    ),
    (
        "webhookConfigurationAnnotations",
        "--webhook-configuration-annotation",
    ),
];

/// The day-2 settings given: `None` where not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Day2Settings {
    /// The webhook container's resources.
    pub webhook_resources: Option<Resources>,
    /// The NAD controller container's resources.
    pub controller_resources: Option<Resources>,
    /// The log filter of both.
    pub log_level: Option<String>,
    /// The webhook's `--on-error`.
    pub on_error: Option<OnError>,
    /// The webhook's `--missing-nad`.
    pub missing_nad: Option<MissingNad>,
    /// Labels of both Deployments' pods.
    pub pod_labels: Option<Pairs>,
    /// Annotations of both Deployments' pods.
    pub pod_annotations: Option<Pairs>,
    /// Labels of the webhook's Service.
    pub service_labels: Option<Pairs>,
    /// Annotations of the webhook's Service.
    pub service_annotations: Option<Pairs>,
    /// Labels of the MutatingWebhookConfiguration.
    pub webhook_configuration_labels: Option<Pairs>,
    /// Annotations of the MutatingWebhookConfiguration.
    pub webhook_configuration_annotations: Option<Pairs>,
}

/// The day-2 settings checked, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Day2 {
    /// The webhook container's resources over the package's (default: the package's).
    pub webhook_resources: Resources,
    /// The NAD controller container's over the package's; with the restarts, its 64Mi memory
    /// limit is raised to 128Mi.
    pub controller_resources: Resources,
    /// The log filter (default `info`).
    pub log_level: String,
    /// The webhook's `--on-error` (default `allow`).
    pub on_error: OnError,
    /// The webhook's `--missing-nad` (default `attach` with the NAD controller, else `deny`).
    pub missing_nad: MissingNad,
    /// Labels of both Deployments' pods.
    pub pod_labels: Pairs,
    /// Annotations of both Deployments' pods.
    pub pod_annotations: Pairs,
    /// Labels of the webhook's Service.
    pub service_labels: Pairs,
    /// Annotations of the webhook's Service.
    pub service_annotations: Pairs,
    /// Labels of the MutatingWebhookConfiguration.
    pub webhook_configuration_labels: Pairs,
    /// Annotations of the MutatingWebhookConfiguration.
    pub webhook_configuration_annotations: Pairs,
}

impl Default for Day2 {
    fn default() -> Self {
        Day2Settings::default()
            .resolve(false)
            .expect("the defaults are valid")
    }
}

impl Day2Settings {
    /// `self`, each setting overridden by `flags`' where given.
    pub fn overridden_by(self, flags: Day2Settings) -> Day2Settings {
        Day2Settings {
            webhook_resources: flags.webhook_resources.or(self.webhook_resources),
            controller_resources: flags.controller_resources.or(self.controller_resources),
            log_level: flags.log_level.or(self.log_level),
            on_error: flags.on_error.or(self.on_error),
            missing_nad: flags.missing_nad.or(self.missing_nad),
            pod_labels: flags.pod_labels.or(self.pod_labels),
            pod_annotations: flags.pod_annotations.or(self.pod_annotations),
            service_labels: flags.service_labels.or(self.service_labels),
            service_annotations: flags.service_annotations.or(self.service_annotations),
            webhook_configuration_labels: flags
                .webhook_configuration_labels
                .or(self.webhook_configuration_labels),
            webhook_configuration_annotations: flags
                .webhook_configuration_annotations
                .or(self.webhook_configuration_annotations),
        }
    }

    /// Reads the file's `key` (one of `FIELDS`); the problem names `spec.KEY`.
    pub fn read(&mut self, key: &str, value: &Node) -> Result<(), String> {
        let field = format!("spec.{key}");
        let text = || {
            value
                .as_text()
                .map(str::to_string)
                .ok_or_else(|| format!("{field}: must be a string, not {}", value.kind_name()))
        };
        let choice = |valid: &str| format!("{field}: must be {valid}, not {:?}", value.as_text());
        match key {
            "webhookResources" => self.webhook_resources = Some(resources_of(value, &field)?),
            "controllerResources" => {
                self.controller_resources = Some(resources_of(value, &field)?);
            }
            "logLevel" => self.log_level = Some(text()?),
            "onError" => {
                self.on_error = Some(match value.as_text() {
                    Some("allow") => OnError::Allow,
                    Some("deny") => OnError::Deny,
                    _ => return Err(choice("allow or deny")),
                });
            }
            "missingNAD" => {
                self.missing_nad = Some(match value.as_text() {
                    Some("deny") => MissingNad::Deny,
                    Some("attach") => MissingNad::Attach,
                    Some("ignore") => MissingNad::Ignore,
                    _ => return Err(choice("deny, attach or ignore")),
                });
            }
            _ => {
                let pairs = Some(pairs_of(value, &field)?);
                match key {
                    "podLabels" => self.pod_labels = pairs,
                    "podAnnotations" => self.pod_annotations = pairs,
                    "serviceLabels" => self.service_labels = pairs,
                    "serviceAnnotations" => self.service_annotations = pairs,
                    "webhookConfigurationLabels" => self.webhook_configuration_labels = pairs,
                    _ => self.webhook_configuration_annotations = pairs,
                }
            }
        }
        Ok(())
    }

    /// The settings checked, the defaults where not given; `manage_nads` chooses
    /// `--missing-nad`'s.
    pub fn resolve(self, manage_nads: bool) -> Result<Day2, String> {
        let day2 = Day2 {
            webhook_resources: self.webhook_resources.unwrap_or_default(),
            controller_resources: self.controller_resources.unwrap_or_default(),
            log_level: self.log_level.unwrap_or_else(|| "info".into()),
            on_error: self.on_error.unwrap_or_default(),
            missing_nad: self.missing_nad.unwrap_or(match manage_nads {
                true => MissingNad::Attach,
                false => MissingNad::Deny,
            }),
            pod_labels: self.pod_labels.unwrap_or_default(),
            pod_annotations: self.pod_annotations.unwrap_or_default(),
            service_labels: self.service_labels.unwrap_or_default(),
            service_annotations: self.service_annotations.unwrap_or_default(),
            webhook_configuration_labels: self.webhook_configuration_labels.unwrap_or_default(),
            webhook_configuration_annotations: self
                .webhook_configuration_annotations
                .unwrap_or_default(),
        };
        day2.check()?;
        Ok(day2)
    }
}

/// `--flag (key)`, as a refusal names a setting.
fn named(key: &str) -> String {
    let flag = FIELDS.iter().find(|(k, _)| *k == key).map_or("", |f| f.1);
    format!("{flag} ({key})")
}

impl Day2 {
    fn check(&self) -> Result<(), String> {
        if self.log_level.is_empty() || self.log_level.contains(char::is_whitespace) {
            return Err(format!(
                "{} {:?} is not a log filter: a level (error, warn, info, debug, trace) or tracing directives such as info,linkerd_multus=debug, without spaces",
                named("logLevel"),
                self.log_level
            ));
        }
        for (key, resources) in [
            ("webhookResources", &self.webhook_resources),
            ("controllerResources", &self.controller_resources),
        ] {
            for (name, quantity) in resources.requests.iter().chain(&resources.limits) {
                if !is_qualified_name(name) {
                    return Err(format!(
                        "{} {name:?} is not a resource name such as cpu, memory or ephemeral-storage",
                        named(key)
                    ));
                }
                if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                    return Err(format!(
                        "{} {name}: {q:?} is not a quantity: a number with an optional suffix, such as 250m, 128Mi or 1",
                        named(key)
                    ));
                }
            }
        }
        for (key, pairs, labels) in [
            ("podLabels", &self.pod_labels, true),
            ("podAnnotations", &self.pod_annotations, false),
            ("serviceLabels", &self.service_labels, true),
            ("serviceAnnotations", &self.service_annotations, false),
            (
                "webhookConfigurationLabels",
                &self.webhook_configuration_labels,
                true,
            ),
            (
                "webhookConfigurationAnnotations",
                &self.webhook_configuration_annotations,
                false,
            ),
        ] {
            for (k, v) in pairs {
                if !is_qualified_name(k) {
                    return Err(format!(
                        "{} {k:?} is not a label or annotation key: an optional DNS prefix and '/', then letters, digits, '-', '_' and '.', at most 63, starting and ending with a letter or digit",
                        named(key)
                    ));
                }
                if labels && !is_label_value(v) {
                    return Err(format!(
                        "{} {k}: {v:?} is not a label value: letters, digits, '-', '_' and '.', at most 63, starting and ending with a letter or digit (or empty)",
                        named(key)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The settings as lines of a `LinkerdMultusInstall`'s spec (`  key: value`, JSON values).
    pub fn file_lines(&self) -> String {
        let json = |value: serde_json::Value| value.to_string();
        let pairs = |p: &Pairs| json(serde_json::json!(p));
        let resources =
            |r: &Resources| json(serde_json::json!({"requests": r.requests, "limits": r.limits}));
        [
            ("webhookResources", resources(&self.webhook_resources)),
            ("controllerResources", resources(&self.controller_resources)),
            ("logLevel", json(self.log_level.clone().into())),
            ("onError", self.on_error.as_str().into()),
            ("missingNAD", self.missing_nad.as_str().into()),
            ("podLabels", pairs(&self.pod_labels)),
            ("podAnnotations", pairs(&self.pod_annotations)),
            ("serviceLabels", pairs(&self.service_labels)),
            ("serviceAnnotations", pairs(&self.service_annotations)),
            (
                "webhookConfigurationLabels",
                pairs(&self.webhook_configuration_labels),
            ),
            (
                "webhookConfigurationAnnotations",
                pairs(&self.webhook_configuration_annotations),
            ),
        ]
        .iter()
        .map(|(key, value)| format!("  {key}: {value}\n"))
        .collect()
    }
}

/// `KEY=VALUE`, a value of `flag`.
pub fn pair(text: &str, flag: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{flag} {text:?}: write KEY=VALUE, e.g. team=mesh"))
}

/// A container's resources written as YAML (`{limits: {memory: 256Mi}}`), a value of `flag`.
pub fn resources(text: &str, flag: &str) -> Result<Resources, String> {
    let node = crate::yaml::parse_document(text).map_err(|e| format!("{flag}: not YAML: {e}"))?;
    resources_of(&node, flag)
}

fn resources_of(node: &Node, field: &str) -> Result<Resources, String> {
    let usage = "write a mapping of requests and limits, e.g. {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 256Mi}}";
    let Some(map) = node.as_map() else {
        return Err(format!("{field}: is {}: {usage}", node.kind_name()));
    };
    let mut out = Resources::default();
    for (key, value) in &map.entries {
        let section = match key.as_str() {
            Some("requests") => &mut out.requests,
            Some("limits") => &mut out.limits,
            other => {
                let other = other.unwrap_or_default();
                return Err(format!(
                    "{field}: {other:?} is neither requests nor limits: {usage}"
                ));
            }
        };
        let Some(items) = value.as_map() else {
            return Err(format!(
                "{field}: {} is {}: {usage}",
                key.as_str().unwrap_or_default(),
                value.kind_name()
            ));
        };
        for (name, quantity) in &items.entries {
            let name = name.as_str().unwrap_or_default().to_string();
            let quantity = match quantity {
                q if q.is_null() => None,
                q => Some(q.as_text().map(str::to_string).ok_or_else(|| {
                    format!("{field}: {name} is {}, not a quantity", q.kind_name())
                })?),
            };
            section.insert(name, quantity);
        }
    }
    Ok(out)
}

fn pairs_of(node: &Node, field: &str) -> Result<Pairs, String> {
    let Some(Map { entries, .. }) = node.as_map() else {
        return Err(format!(
            "{field}: must be a mapping of strings, not {}",
            node.kind_name()
        ));
    };
    entries
        .iter()
        .map(|(k, v)| match (k.as_str(), v.as_text()) {
            (Some(k), Some(v)) => Ok((k.to_string(), v.to_string())),
            _ => Err(format!(
                "{field}: each value must be a string, not {}",
                v.kind_name()
            )),
        })
        .collect()
}

/// A Kubernetes quantity: a decimal number (sign, digits, fraction) and an optional binary
/// (Ki…Ei), decimal (m, k, M…E) or exponent suffix.
pub fn is_quantity(text: &str) -> bool {
    let text = text.strip_prefix(['+', '-']).unwrap_or(text);
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let number_ok = number.matches('.').count() <= 1 && number.chars().any(|c| c.is_ascii_digit());
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()));
    number_ok
        && (exponent
            || matches!(
                suffix,
                "" | "m"
                    | "k"
                    | "M"
                    | "G"
                    | "T"
                    | "P"
                    | "E"
                    | "Ki"
                    | "Mi"
                    | "Gi"
                    | "Ti"
                    | "Pi"
                    | "Ei"
            ))
}

/// A label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending
/// with a letter or digit.
fn is_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_qualified_name(value) && !value.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_label_values() {
        for (text, ok) in [
            ("250m", true),
            ("1", true),
            ("0.5", true),
            ("128Mi", true),
            ("1e3", true),
            ("1.5Gi", true),
            ("", false),
            ("Mi", false),
            ("128MB", false),
            ("1.2.3", false),
            ("12 Mi", false),
        ] {
            assert_eq!(is_quantity(text), ok, "{text}");
        }
        for (text, ok) in [
            ("", true),
            ("mesh", true),
            ("a.b_c-d", true),
            ("-a", false),
            ("a/b", false),
        ] {
            assert_eq!(is_label_value(text), ok, "{text}");
        }
    }

    #[test]
    fn flags_and_file_values_are_read_and_checked() {
        assert_eq!(
            pair("team=mesh=1", "--pod-label"),
            Ok(("team".into(), "mesh=1".into()))
        );
        assert!(
            pair("team", "--pod-label")
                .unwrap_err()
                .contains("write KEY=VALUE")
        );
        let r = resources(
            "{requests: {cpu: 50m, memory: null}, limits: {memory: 256Mi}}",
            "--webhook-resources",
        )
        .unwrap();
        assert_eq!(r.requests["cpu"].as_deref(), Some("50m"));
        assert_eq!(r.requests["memory"], None);
        assert_eq!(r.limits["memory"].as_deref(), Some("256Mi"));
        assert!(
            resources("{limit: {memory: 1Gi}}", "--webhook-resources")
                .unwrap_err()
                .contains("\"limit\" is neither requests nor limits")
        );
        for (settings, refusal) in [
            (
                Day2Settings {
                    log_level: Some("".into()),
                    ..Default::default()
                },
                "--log-level (logLevel) \"\" is not a log filter",
            ),
            (
                Day2Settings {
                    controller_resources: Some(
                        resources("{limits: {memory: 256MB}}", "x").unwrap(),
                    ),
                    ..Default::default()
                },
                "--controller-resources (controllerResources) memory: \"256MB\" is not a quantity",
            ),
            (
                Day2Settings {
                    service_labels: Some(Pairs::from([("team".into(), "a b".into())])),
                    ..Default::default()
                },
                "--service-label (serviceLabels) team: \"a b\" is not a label value",
            ),
            (
                Day2Settings {
                    pod_annotations: Some(Pairs::from([("-x".into(), "a b".into())])),
                    ..Default::default()
                },
                "--pod-annotation (podAnnotations) \"-x\" is not a label or annotation key",
            ),
        ] {
            let got = settings.resolve(false).unwrap_err();
            assert!(got.contains(refusal), "{got}");
        }
        assert_eq!(
            Day2Settings::default().resolve(true).unwrap().missing_nad,
            MissingNad::Attach
        );
        assert_eq!(Day2::default().missing_nad, MissingNad::Deny);
    }
}
