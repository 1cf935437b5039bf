//! Validation: what Multus and its admission controller would refuse, found
//! before anything is applied. Pure code: resources in, results out; no item
//! is changed, so the same rules serve as a kpt validator (the `Validation`
//! function configuration) and as `linkerd-multus validate` in CI.
//!
//! * A NetworkAttachmentDefinition's `spec.config` must be CNI configuration
//!   that net-attach-def-admission-controller and libcni accept: a JSON
//!   object; a list (`plugins`) has a `name` and a non-empty list of plugins
//!   that each have a `type`; a single configuration has a `type`; the fields
//!   libcni reads have its types. The CNI spec's `cniVersion` must be there
//!   and be a version. The NAD's name must be a DNS-1123 label. A NAD without
//!   `spec.config` is allowed, as the admission controller allows it (Multus
//!   then reads the configuration of that name from each node's files).
//! * The networks annotations of every workload's pod template (and of
//!   Pods) must parse as Multus parses them; the default-network annotation
//!   must select exactly one network.
//! * With namespace isolation (as Multus runs on OpenShift), a selection may
//!   name another namespace only when it is a global one.
//!
//! A selected NAD that is not in the input is not a problem: it may be in the
//! cluster already.

use std::collections::BTreeSet;

use serde_json::{Map as JsonMap, Value};

use crate::k8s::nad;
use crate::k8s::nad::CNI_VERSIONS;
use crate::k8s::networks::{
    DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, Networks, is_dns1123_label,
};
use crate::k8s::resource::files;
use crate::k8s::resource::{self, ResourceRef};
use crate::k8s::results::{self, FnResult, Severity, plural};
use crate::k8s::settings_object::{
    API_VERSION, SettingsError, bad, boolean, label, settings_section, structured, text,
    text_settings, workload_kinds,
};
use crate::k8s::workload::{WorkloadKind, WorkloadKinds};
use crate::yaml::{Map, Node, describe_json};

/// The kind of the typed configuration object (API version [`API_VERSION`]).
pub const KIND: &str = "Validation";

/// Every setting of the kind, in the order the docs list them.
pub const KEYS: &[&str] = &[
    "namespaceIsolation",
    "globalNamespaces",
    "workloadKinds",
    "defaultNamespace",
];

/// The namespaces whose NADs any pod may select under namespace isolation,
/// when the settings name none: OpenShift's, as its cluster-network-operator
/// configures Multus (`"globalNamespaces":
/// "default,openshift-multus,openshift-sriov-network-operator"`; newer
/// releases with OpenShift Virtualization add `openshift-cnv`). Upstream
/// Multus allows only `default` (`defaultNonIsolatedNamespace` in its
/// `pkg/types/conf.go`), and a `globalNamespaces` setting replaces that list
/// rather than adding to it, as it does here.
pub const DEFAULT_GLOBAL_NAMESPACES: &[&str] = &[
    "default",
    "openshift-multus",
    "openshift-sriov-network-operator",
];

/// What validation checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whether pods may select NADs only in their own namespace and the global ones.
    pub namespace_isolation: bool,
    /// Namespaces whose NADs any pod may select under namespace isolation.
    pub global_namespaces: Vec<String>,
    /// Workload kinds beyond the built-in ones.
    pub workload_kinds: Vec<WorkloadKind>,
    /// The namespace of resources that have no `metadata.namespace`.
    pub default_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace_isolation: false,
            global_namespaces: DEFAULT_GLOBAL_NAMESPACES
                .iter()
                .map(|n| n.to_string())
                .collect(),
            workload_kinds: Vec::new(),
            default_namespace: None,
        }
    }
}

impl Settings {
    /// Applies the settings of a `spec` (typed object) or `data` (ConfigMap,
    /// where structured values are YAML text and booleans are `"true"`).
    pub fn apply(&mut self, spec: &Map, from_config_map: bool) -> Result<(), SettingsError> {
        for (key, value) in &spec.entries {
            let key = key.as_str().unwrap_or_default();
            match key {
                "namespaceIsolation" => self.namespace_isolation = boolean(key, value)?,
                "globalNamespaces" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.global_namespaces = global_namespaces(key, &parsed)?;
                }
                "workloadKinds" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.workload_kinds = workload_kinds(key, &parsed)?;
                }
                "defaultNamespace" => self.default_namespace = Some(label(key, value)?),
                _ => {
                    return Err(SettingsError::UnknownKey {
                        key: key.to_string(),
                        valid: KEYS,
                    });
                }
            }
        }
        Ok(())
    }

    /// Reads a settings file's object: a `Validation` (settings under `spec`)
    /// or a ConfigMap (settings under `data`).
    pub fn from_config(config: &Node) -> Result<Self, SettingsError> {
        let mut settings = Settings::default();
        if config.is_null() {
            return Ok(settings);
        }
        let section = settings_section(config, KIND).map_err(|e| match e {
            // Only this kind (or a ConfigMap) configures validation.
            SettingsError::WrongKind { kind, api_version } => SettingsError::Shape(format!(
                "must be a {KIND} ({API_VERSION}) or a ConfigMap, not {kind} ({api_version})"
            )),
            e => e,
        })?;
        if let (Some(section), from_config_map) = section {
            settings.apply(section, from_config_map)?;
        }
        Ok(settings)
    }

    /// Overrides settings with text values, as flags give them (and as a
    /// ConfigMap's `data` holds them).
    pub fn override_with<'a>(
        &mut self,
        values: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), SettingsError> {
        self.apply(&text_settings(values), true)
    }
}

/// A list of namespace names, or one string of comma-separated names as
/// Multus's own `globalNamespaces` is written.
fn global_namespaces(key: &str, value: &Node) -> Result<Vec<String>, SettingsError> {
    let names: Vec<String> = if let Some(seq) = value.as_seq() {
        seq.items
            .iter()
            .map(|item| {
                item.as_text()
                    .map(str::to_string)
                    .ok_or_else(|| bad(key, "must be a list of namespace names"))
            })
            .collect::<Result<_, _>>()?
    } else if value.is_null() {
        Vec::new()
    } else {
        text(key, value)?
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    if let Some(name) = names.iter().find(|n| !is_dns1123_label(n)) {
        return Err(bad(key, format!("{name:?} is not a namespace name")));
    }
    Ok(names)
}

/// Why a NAD's CNI configuration would be refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CniConfigError {
    /// Not JSON at all.
    #[error("is not valid JSON: {0}")]
    Json(String),
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
        Err(e) => return vec![CniConfigError::Json(e.to_string())],
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

/// Counts for the summary.
#[derive(Default)]
struct Checked {
    nads: usize,
    workloads: usize,
}

/// Checks every NAD and workload of the input; the results are in input
/// order, after a summary. Nothing is changed.
pub fn validate(items: &[Node], refs: &[ResourceRef], settings: &Settings) -> Vec<FnResult> {
    let files = files(items);
    let kinds = WorkloadKinds::new(&settings.workload_kinds);
    let mut results = Vec::new();
    let mut checked = Checked::default();
    for (i, item) in items.iter().enumerate() {
        let r = &refs[i];
        // Local-config resources configure the package and are never applied.
        if resource::is_local_config(item) {
            continue;
        }
        let mut problems = Vec::new();
        if nad::is_nad(r) {
            checked.nads += 1;
            check_nad(item, r, &mut problems);
        } else if let Some(kind) = kinds.find(r.group(), &r.kind) {
            checked.workloads += 1;
            check_workload(item, r, kind, settings, &mut problems);
        }
        results.extend(problems.into_iter().map(|p| {
            let mut result = FnResult::new(p.severity, p.message).on(r, files[i].as_ref());
            result.field = Some(p.field);
            result
        }));
    }
    let summary = format!(
        "linkerd-multus validate: {} and {} checked; {}",
        plural(checked.nads, "NetworkAttachmentDefinition"),
        plural(checked.workloads, "workload"),
        results::problems(&results)
    );
    results.insert(0, FnResult::new(Severity::Info, summary));
    results
}

/// One finding on a resource.
struct Problem {
    severity: Severity,
    field: String,
    message: String,
}

impl Problem {
    fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
        }
    }
}

fn check_nad(item: &Node, r: &ResourceRef, problems: &mut Vec<Problem>) {
    if !is_dns1123_label(&r.name) {
        problems.push(Problem::error(
            "metadata.name",
            format!(
                "NetworkAttachmentDefinition name {:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63): net-attach-def-admission-controller rejects it and no networks annotation can select it",
                r.name
            ),
        ));
    }
    let spec = match item.as_map().and_then(|m| m.get("spec")) {
        None => None,
        Some(spec) if spec.is_null() => None,
        Some(Node::Map(spec)) => Some(spec),
        Some(other) => {
            problems.push(Problem::error(
                "spec",
                format!("spec is {}, not a mapping", other.kind_name()),
            ));
            return;
        }
    };
    let config = match spec.and_then(|s| s.get("config")) {
        None => None,
        Some(c) if c.is_null() => None,
        Some(c @ Node::Scalar(_)) => c.as_text().filter(|t| !t.is_empty()),
        Some(other) => {
            problems.push(Problem::error(
                "spec.config",
                format!(
                    "spec.config is {}, not a string: it holds the CNI configuration as JSON text",
                    other.kind_name()
                ),
            ));
            return;
        }
    };
    let Some(config) = config else {
        problems.push(Problem {
            severity: Severity::Info,
            field: "spec.config".into(),
            message: format!(
                "no spec.config: Multus reads the CNI configuration named {:?} from each node's configuration directory; not checked",
                r.name
            ),
        });
        return;
    };
    for error in check_cni_config(config) {
        problems.push(Problem::error(
            "spec.config",
            format!("CNI configuration {error}"),
        ));
    }
}

fn check_workload(
    item: &Node,
    r: &ResourceRef,
    kind: &WorkloadKind,
    settings: &Settings,
    problems: &mut Vec<Problem>,
) {
    let template = match kind.pod_template(item) {
        Ok(Some(template)) => template,
        Ok(None) => return,
        Err(problem) => {
            problems.push(Problem::error(kind.field(""), problem));
            return;
        }
    };
    let annotations = match template.get("metadata").and_then(|m| match m {
        Node::Map(m) => m.get("annotations"),
        _ => None,
    }) {
        None => return,
        Some(a) if a.is_null() => return,
        Some(Node::Map(a)) => a,
        Some(other) => {
            problems.push(Problem::error(
                kind.field("metadata.annotations"),
                format!(
                    "metadata.annotations is {}, not a mapping",
                    other.kind_name()
                ),
            ));
            return;
        }
    };
    let namespace = r
        .namespace
        .as_deref()
        .or(settings.default_namespace.as_deref());
    for annotation in [DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION] {
        let field = kind.field(&format!("metadata.annotations.{annotation}"));
        let text = match annotations.get(annotation) {
            None => continue,
            // An empty value: no networks, or a default network Multus cannot find.
            Some(v) if v.is_null() => "",
            Some(Node::Scalar(s)) => s.value.as_str(),
            Some(other) => {
                problems.push(Problem::error(
                    field,
                    format!(
                        "annotation {annotation} is {}, not a string",
                        other.kind_name()
                    ),
                ));
                continue;
            }
        };
        let networks = match Networks::parse(text) {
            Ok(networks) => networks,
            Err(e) => {
                problems.push(Problem::error(
                    field,
                    format!("annotation {annotation}: Multus rejects it: {e}"),
                ));
                continue;
            }
        };
        if annotation == DEFAULT_NETWORK_ANNOTATION {
            let n = networks.selections().len();
            if n != 1 {
                problems.push(Problem::error(
                    field,
                    format!(
                        "annotation {annotation}: selects {}; Multus takes exactly one",
                        plural(n, "network")
                    ),
                ));
            }
            // Multus looks the default network up in its own namespace and
            // does not apply namespace isolation to it.
            continue;
        }
        if settings.namespace_isolation {
            isolation(&networks, namespace, settings, &field, problems);
        }
    }
}

/// Selections of NADs in other namespaces that are not global.
fn isolation(
    networks: &Networks<'_>,
    namespace: Option<&str>,
    settings: &Settings,
    field: &str,
    problems: &mut Vec<Problem>,
) {
    let global = || {
        if settings.global_namespaces.is_empty() {
            "none".to_string()
        } else {
            settings.global_namespaces.join(", ")
        }
    };
    let mut reported = BTreeSet::new();
    for selection in networks.selections() {
        let Some(target) = selection.namespace.as_deref() else {
            continue;
        };
        if Some(target) == namespace
            || settings.global_namespaces.iter().any(|g| g == target)
            || !reported.insert((target, selection.name.as_str()))
        {
            continue;
        }
        let message = match namespace {
            Some(ns) => format!(
                "selects {target}/{}, but with namespace isolation a pod in namespace {ns} may select only NADs in {ns} or in a global namespace ({})",
                selection.name,
                global()
            ),
            None => format!(
                "selects {target}/{}, but the workload has no metadata.namespace and no defaultNamespace is set: with namespace isolation that is allowed only in namespace {target}",
                selection.name
            ),
        };
        problems.push(Problem {
            severity: if namespace.is_some() {
                Severity::Error
            } else {
                Severity::Warning
            },
            field: field.to_string(),
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::resource::identify;
    use crate::yaml::{parse_document, parse_stream};

    #[test]
    fn cni_configs() {
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
        let bad = [
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
        for (config, want) in bad {
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

    fn results(input: &str, settings: &Settings) -> Vec<String> {
        let items = parse_stream(input).unwrap();
        validate(&items, &identify(&items).unwrap(), settings)
            .iter()
            .map(|r| {
                format!(
                    "{} {}: {}: {}",
                    match r.severity {
                        Severity::Error => "error",
                        Severity::Warning => "warning",
                        Severity::Info => "info",
                    },
                    r.resource
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    r.field.as_deref().unwrap_or_default(),
                    r.message
                )
            })
            .collect()
    }

    const NAD: &str = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: NAME\n  namespace: demo\n";

    #[test]
    fn nads() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "net",
                "spec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}'\n",
                None,
            ),
            (
                "Net_1",
                "spec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}'\n",
                Some(
                    "error NetworkAttachmentDefinition demo/Net_1: metadata.name: NetworkAttachmentDefinition name \"Net_1\" is not a DNS-1123 label",
                ),
            ),
            (
                "net",
                "spec:\n  config: '{\"cniVersion\": \"0.3.1\"}'\n",
                Some(
                    "error NetworkAttachmentDefinition demo/net: spec.config: CNI configuration has no \"type\"",
                ),
            ),
            (
                "net",
                "spec:\n  config:\n    cniVersion: 0.3.1\n",
                Some(
                    "error NetworkAttachmentDefinition demo/net: spec.config: spec.config is a mapping, not a string",
                ),
            ),
            (
                "net",
                "spec: []\n",
                Some(
                    "error NetworkAttachmentDefinition demo/net: spec: spec is a sequence, not a mapping",
                ),
            ),
            (
                "net",
                "spec: {}\n",
                Some(
                    "info NetworkAttachmentDefinition demo/net: spec.config: no spec.config: Multus reads the CNI configuration named \"net\"",
                ),
            ),
            (
                "net",
                "spec:\n  config: ''\n",
                Some("info NetworkAttachmentDefinition demo/net: spec.config: no spec.config"),
            ),
        ];
        for (name, spec, want) in cases {
            let input = format!("{}{spec}", NAD.replace("NAME", name));
            let got = results(&input, &Settings::default());
            assert!(
                got[0].starts_with("info : : linkerd-multus validate: 1 NetworkAttachmentDefinition and 0 workloads checked;"),
                "{got:?}"
            );
            match want {
                None => assert_eq!(got.len(), 1, "{input}: {got:?}"),
                Some(want) => {
                    assert_eq!(got.len(), 2, "{input}: {got:?}");
                    assert!(
                        got[1].starts_with(want),
                        "{input}:\n  got  {}\n  want {want}",
                        got[1]
                    );
                }
            }
        }
    }

    fn deployment(namespace: &str, annotations: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n{namespace}spec:\n  template:\n    metadata:\n      annotations:\n{annotations}    spec:\n      containers: []\n"
        )
    }

    #[test]
    fn networks_annotations() {
        let field = "spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks";
        let default_field = "spec.template.metadata.annotations.v1.multus-cni.io/default-network";
        let cases: &[(&str, Option<String>)] = &[
            (
                "        k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
                None,
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\", \"namespace\": \"x\"}]'\n",
                None,
            ),
            ("        k8s.v1.cni.cncf.io/networks: ''\n", None),
            (
                "        v1.multus-cni.io/default-network: kube-system/ovn\n",
                None,
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: a,,b\n",
                Some(format!(
                    "error Deployment demo/web: {field}: annotation k8s.v1.cni.cncf.io/networks: Multus rejects it: item 2 \"\": empty item"
                )),
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\"}'\n",
                Some(format!(
                    "error Deployment demo/web: {field}: annotation k8s.v1.cni.cncf.io/networks: Multus rejects it: invalid JSON"
                )),
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: {name: a}\n",
                Some(format!(
                    "error Deployment demo/web: {field}: annotation k8s.v1.cni.cncf.io/networks is a mapping, not a string"
                )),
            ),
            (
                "        v1.multus-cni.io/default-network: a, b\n",
                Some(format!(
                    "error Deployment demo/web: {default_field}: annotation v1.multus-cni.io/default-network: selects 2 networks; Multus takes exactly one"
                )),
            ),
            (
                "        v1.multus-cni.io/default-network: ''\n",
                Some(format!(
                    "error Deployment demo/web: {default_field}: annotation v1.multus-cni.io/default-network: selects 0 networks"
                )),
            ),
        ];
        for (annotations, want) in cases {
            let input = deployment("  namespace: demo\n", annotations);
            let got = results(&input, &Settings::default());
            match want {
                None => assert_eq!(got.len(), 1, "{input}: {got:?}"),
                Some(want) => {
                    assert_eq!(got.len(), 2, "{input}: {got:?}");
                    assert!(
                        got[1].starts_with(want.as_str()),
                        "{input}:\n  got  {}\n  want {want}",
                        got[1]
                    );
                }
            }
        }
    }

    #[test]
    fn namespace_isolation() {
        let isolated = Settings {
            namespace_isolation: true,
            ..Settings::default()
        };
        let comma = "        k8s.v1.cni.cncf.io/networks: a, demo/b, default/c, openshift-multus/d, other/e@net1, other/e@net2\n";
        let json = "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"f\", \"namespace\": \"third\"}, {\"name\": \"g\", \"namespace\": \"demo\"}]'\n";
        let got = results(&deployment("  namespace: demo\n", comma), &isolated);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[1].ends_with("selects other/e, but with namespace isolation a pod in namespace demo may select only NADs in demo or in a global namespace (default, openshift-multus, openshift-sriov-network-operator)"),
            "{}",
            got[1]
        );
        let got = results(&deployment("  namespace: demo\n", json), &isolated);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].contains("selects third/f, but"), "{}", got[1]);
        // Off: nothing.
        assert_eq!(
            results(
                &deployment("  namespace: demo\n", comma),
                &Settings::default()
            )
            .len(),
            1
        );
        // Global namespaces replace the default list.
        let custom = Settings {
            global_namespaces: vec!["other".into()],
            ..isolated.clone()
        };
        let got = results(&deployment("  namespace: demo\n", comma), &custom);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[1].contains("selects default/c"), "{}", got[1]);
        assert!(got[2].contains("selects openshift-multus/d"), "{}", got[2]);
        // No namespace: a warning, unless defaultNamespace says where it goes.
        let got = results(&deployment("", comma), &isolated);
        assert!(
            got[1].starts_with("warning Deployment web:")
                && got[1].contains("no metadata.namespace"),
            "{got:?}"
        );
        let in_other = Settings {
            default_namespace: Some("other".into()),
            ..isolated
        };
        let got = results(&deployment("", comma), &in_other);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[1]
                .contains("selects demo/b, but with namespace isolation a pod in namespace other"),
            "{}",
            got[1]
        );
    }

    #[test]
    fn pods_custom_kinds_and_local_config() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: demo\n  annotations:\n    k8s.v1.cni.cncf.io/networks: 'a@'\nspec: {}\n";
        let got = results(pod, &Settings::default());
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[1]
                .starts_with("error Pod demo/p: metadata.annotations.k8s.v1.cni.cncf.io/networks:"),
            "{}",
            got[1]
        );
        let local = pod.replace(
            "  annotations:\n",
            "  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
        );
        assert_eq!(results(&local, &Settings::default()).len(), 1);
        let rollout = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata:\n  name: r\n  namespace: demo\nspec:\n  template:\n    metadata:\n      annotations:\n        k8s.v1.cni.cncf.io/networks: 'A'\n";
        assert_eq!(results(rollout, &Settings::default()).len(), 1);
        let mut settings = Settings::default();
        settings
            .override_with([(
                "workloadKinds",
                "[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]",
            )])
            .unwrap();
        let got = results(rollout, &settings);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[1].contains("network name \"A\" is not a DNS-1123 label"),
            "{}",
            got[1]
        );
    }

    #[test]
    fn settings_forms_and_errors() {
        let typed = Settings::from_config(
            &parse_document(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata: {name: v}\nspec:\n  namespaceIsolation: true\n  globalNamespaces: [default, shared]\n  defaultNamespace: demo\n",
            )
            .unwrap(),
        )
        .unwrap();
        let cm = Settings::from_config(
            &parse_document(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: v}\ndata:\n  namespaceIsolation: \"true\"\n  globalNamespaces: default, shared\n  defaultNamespace: demo\n",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(typed, cm);
        assert!(typed.namespace_isolation);
        assert_eq!(typed.global_namespaces, ["default", "shared"]);
        let mut flags = Settings::default();
        flags
            .override_with([
                ("namespaceIsolation", "true"),
                ("globalNamespaces", "default,shared"),
                ("defaultNamespace", "demo"),
            ])
            .unwrap();
        assert_eq!(flags, typed);

        let spec = |body: &str| {
            Settings::from_config(
                &parse_document(&format!(
                    "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nspec:\n  {body}\n"
                ))
                .unwrap(),
            )
            .unwrap_err()
            .to_string()
        };
        for (body, want) in [
            (
                "namespaceIsolaton: true",
                "unknown setting \"namespaceIsolaton\"; valid settings are namespaceIsolation, globalNamespaces, workloadKinds, defaultNamespace",
            ),
            (
                "namespaceIsolation: yes",
                "setting namespaceIsolation: must be true or false",
            ),
            (
                "globalNamespaces: [Default]",
                "setting globalNamespaces: \"Default\" is not a namespace name",
            ),
            (
                "globalNamespaces: [{a: b}]",
                "setting globalNamespaces: must be a list of namespace names",
            ),
            (
                "defaultNamespace: [a]",
                "setting defaultNamespace: must be a string, not a sequence",
            ),
        ] {
            assert_eq!(spec(body), want, "{body}");
        }
        let err = Settings::from_config(&parse_document("apiVersion: v1\nkind: Secret\n").unwrap())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "functionConfig must be a Validation (multus.linkerd.io/v1alpha1) or a ConfigMap, not Secret (v1)"
        );
    }
}
