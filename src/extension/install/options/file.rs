//! Reading the settings from a `LinkerdMultusInstall` file (`--config`): every
//! field's type and value, each problem naming the field; the values are
//! checked together in [`super::checks`].

use std::path::Path;
use std::time::Duration;

use crate::k8s::names::nearest;
use crate::krm::function_config::API_VERSION;
use crate::yaml::{Map, Node, parse_document};

use super::super::exclusions::Platform;
use super::{Certs, FailurePolicy, KEYS, KIND, OptionsError, Settings};

/// The error for the keys of `spec` that are not settings, every one at once,
/// each with the setting it is nearest to when one is close.
fn unknown_keys(spec: &Map) -> Result<(), String> {
    let unknown: Vec<String> = (spec.entries.iter())
        .map(|(key, _)| key.as_str().unwrap_or_default())
        .filter(|key| !KEYS.contains(key))
        .map(|key| match nearest(key, KEYS.iter().copied()) {
            Some(meant) => format!("spec.{key} (did you mean spec.{meant}?)"),
            None => format!("spec.{key}"),
        })
        .collect();
    let phrase = match unknown.as_slice() {
        [] => return Ok(()),
        [one] => format!("unknown setting {one}"),
        [first @ .., last] => format!("unknown settings {} and {last}", first.join(", ")),
    };
    Err(format!("{phrase}; valid settings are {}", KEYS.join(", ")))
}

impl Settings {
    /// Reads a `LinkerdMultusInstall` file.
    pub fn from_file(path: &Path) -> Result<Settings, OptionsError> {
        let file_error = |problem: String| OptionsError::File {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        Settings::from_text(&text).map_err(file_error)
    }

    /// Reads the text of a `LinkerdMultusInstall` object; the problem names the field.
    pub fn from_text(text: &str) -> Result<Settings, String> {
        let node = parse_document(text).map_err(|e| format!("not YAML: {e}"))?;
        let map = node
            .as_map()
            .ok_or_else(|| format!("is {}, not a {KIND} object", node.kind_name()))?;
        let kind = map.get_text("kind").unwrap_or_default();
        let api_version = map.get_text("apiVersion").unwrap_or_default();
        if (api_version, kind) != (API_VERSION, KIND) {
            return Err(format!(
                "must be a {KIND} ({API_VERSION}), not {kind:?} ({api_version:?}): start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`"
            ));
        }
        for (key, _) in &map.entries {
            let key = key.as_str().unwrap_or_default();
            if !matches!(key, "apiVersion" | "kind" | "metadata" | "spec") {
                return Err(format!(
                    "unexpected top-level field {key:?}: the settings go under spec"
                ));
            }
        }
        match map.get("spec") {
            None => Ok(Settings::default()),
            Some(spec) if spec.is_null() => Ok(Settings::default()),
            Some(Node::Map(spec)) => Settings::from_spec(spec),
            Some(other) => Err(format!("spec is {}, not a mapping", other.kind_name())),
        }
    }

    fn from_spec(spec: &Map) -> Result<Settings, String> {
        unknown_keys(spec)?;
        let mut settings = Settings::default();
        for (key, value) in &spec.entries {
            let key = key.as_str().unwrap_or_default();
            let field = format!("spec.{key}");
            let text = || {
                value
                    .as_text()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{field}: must be a string, not {}", value.kind_name()))
            };
            let boolean = || match value.as_text() {
                Some("true") => Ok(true),
                Some("false") => Ok(false),
                _ => Err(format!("{field}: must be true or false")),
            };
            let list = || match value {
                Node::Seq(seq) => seq
                    .items
                    .iter()
                    .map(|item| {
                        item.as_text().map(str::to_string).ok_or_else(|| {
                            format!(
                                "{field}: each item must be a string, not {}",
                                item.kind_name()
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>(),
                other => Err(format!(
                    "{field}: must be a list of strings, not {}",
                    other.kind_name()
                )),
            };
            match key {
                "namespace" => settings.namespace = Some(text()?),
                "linkerdNamespace" => settings.linkerd_namespace = Some(text()?),
                "image" => settings.image = Some(text()?),
                "platform" => settings.platform = Some(platform(&text()?)?),
                "replicas" => settings.replicas = Some(replicas(&text()?, &field)?),
                "failurePolicy" => settings.failure_policy = Some(failure_policy(&text()?)?),
                "priorityClassName" => settings.priority_class_name = Some(text()?),
                "manageNADs" => settings.manage_nads = Some(boolean()?),
                "cniNamespace" => settings.cni_namespace = Some(text()?),
                "restartStaleWorkloads" => settings.restart_stale_workloads = Some(boolean()?),
                "restartConcurrency" => {
                    settings.restart_concurrency = Some(restart_concurrency(&text()?, &field)?);
                }
                "restartDeadline" => {
                    settings.restart_deadline = Some(restart_deadline(&text()?, &field)?);
                }
                "networkResources" => settings.network_resources = Some(boolean()?),
                "skipSecondarySubnets" => {
                    settings.skip_secondary_subnets = Some(switch(&text()?)?);
                }
                "clusterCIDRs" => settings.cluster_cidrs = Some(list()?),
                "protectedCIDRs" => settings.protected_cidrs = Some(list()?),
                "certs" => settings.certs = Some(certs(&text()?)?),
                "ignoreCluster" => settings.ignore_cluster = Some(boolean()?),
                "apiServerCIDRs" => settings.api_server_cidrs = Some(list()?),
                "metricsNamespaces" => settings.metrics_namespaces = Some(list()?),
                "monitoring" => settings.monitoring = Some(boolean()?),
                "webhookExcludedNamespaces" => settings.webhook_excluded_namespaces = Some(list()?),
                key if super::day2::FIELDS.iter().any(|(k, _)| *k == key) => {
                    settings.day2.read(key, value)?;
                }
                other => {
                    return Err(format!(
                        "unknown setting spec.{other}; valid settings are {}",
                        KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(settings)
    }
}

fn switch(text: &str) -> Result<bool, String> {
    crate::k8s::namespace::switch(text).ok_or_else(|| {
        format!("spec.skipSecondarySubnets: must be enabled or disabled, not {text:?}")
    })
}

fn platform(text: &str) -> Result<Platform, String> {
    Platform::parse(text)
        .ok_or_else(|| format!("spec.platform: must be kubernetes or openshift, not {text:?}"))
}

fn replicas(text: &str, field: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("{field}: must be a whole number, not {text:?}"))
}

/// The restarts' concurrency: 1 to 65535, as the webhook's `--restart-concurrency` takes it.
pub fn restart_concurrency(text: &str, field: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{field}: must be a whole number from 1 to 65535 (workloads rolling at once), not {text:?}"
        )),
    }
}

/// The restarts' deadline: a positive duration such as `10m` or `1h30m`, as the webhook's
/// `--restart-deadline` takes it.
pub fn restart_deadline(text: &str, field: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{field}: must be a positive duration such as 10m or 1h30m, not {text:?}"
        )),
    }
}

/// `duration` in its one written form, the chart's too (`linkerd-multus.duration`): hours,
/// minutes, seconds, ms, us and ns, each when not zero, with no spaces (`1h30m`, `10m`,
/// `24h1s500ms`); the webhook and the NAD controller read it back as the same duration.
pub fn duration_text(duration: Duration) -> String {
    let mut left = duration.as_nanos();
    let mut out = String::new();
    for (unit, nanos) in [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        let n = left / nanos;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
            left -= n * nanos;
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

fn failure_policy(text: &str) -> Result<FailurePolicy, String> {
    match text {
        "Fail" => Ok(FailurePolicy::Fail),
        "Ignore" => Ok(FailurePolicy::Ignore),
        other => Err(format!(
            "spec.failurePolicy: must be Fail or Ignore, not {other:?}"
        )),
    }
}

fn certs(text: &str) -> Result<Certs, String> {
    match text {
        "generate" => Ok(Certs::Generate),
        "cert-manager" => Ok(Certs::CertManager),
        "openshift-service-ca" => Ok(Certs::OpenShiftServiceCa),
        other => Err(format!(
            "spec.certs: must be generate, cert-manager or openshift-service-ca, not {other:?}"
        )),
    }
}
