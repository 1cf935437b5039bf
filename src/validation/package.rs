//! The checks of a whole package: every NAD's name and CNI configuration,
//! every workload's networks annotations and, with namespace isolation, the
//! namespaces they select. No item is changed.

use std::collections::BTreeSet;

use crate::k8s::names::is_dns1123_label;
use crate::k8s::namespace::{MULTUS_ANNOTATION, MULTUS_VALUES, multus_hint};
use crate::k8s::resource::{self, ResourceRef, files};
use crate::k8s::workload::{WorkloadKind, WorkloadKinds};
use crate::krm::results::{self, FnResult, Position, Severity, plural};
use crate::multus::cni_config::{CniConfigError, check_cni_config};
use crate::multus::nad;
use crate::multus::networks::{
    DEFAULT_NETWORK_ANNOTATION, ItemProblem, NETWORKS_ANNOTATION, Networks, NetworksError,
};
use crate::yaml::{JsonError, Map, Node};

use super::settings::Settings;

/// Counts for the summary.
#[derive(Default)]
struct Checked {
    nads: usize,
    workloads: usize,
}

/// What validation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What was checked and how many problems there are.
    pub summary: FnResult,
    /// The problems, in input order.
    pub problems: Vec<FnResult>,
    /// What was checked, as the summary says it.
    checked: String,
}

impl Report {
    /// The report with `problems` found before these rules ran (by the
    /// front) ahead of its own, and counted in the summary.
    pub fn after(mut self, problems: Vec<FnResult>) -> Self {
        if problems.is_empty() {
            return self;
        }
        self.problems.splice(0..0, problems);
        self.summary = summary(&self.checked, &self.problems);
        self
    }

    /// The results as the KRM function reports them: the summary first.
    pub fn into_results(self) -> Vec<FnResult> {
        let mut results = Vec::with_capacity(self.problems.len() + 1);
        results.push(self.summary);
        results.extend(self.problems);
        results
    }
}

/// Checks every NAD and workload of the input. Nothing is changed.
pub fn validate(items: &[Node], refs: &[ResourceRef], settings: &Settings) -> Report {
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
        } else if r.kind == "Namespace" && r.group().is_empty() {
            let annotations = resource::annotations(item);
            check_multus(
                annotations,
                "metadata.annotations",
                Holder::Namespace,
                &mut problems,
            );
        }
        results.extend(problems.into_iter().map(|p| {
            let mut result = FnResult::new(p.severity, p.message).on(r, files[i].as_ref());
            result.field = Some(p.field);
            result.position = p.position;
            result
        }));
    }
    let checked = format!(
        "{} and {}",
        plural(checked.nads, "NetworkAttachmentDefinition"),
        plural(checked.workloads, "workload"),
    );
    Report {
        summary: summary(&checked, &results),
        problems: results,
        checked,
    }
}

/// The summary result: what was checked and the count of problems.
fn summary(checked: &str, problems: &[FnResult]) -> FnResult {
    let message = format!(
        "linkerd-multus validate: {checked} checked; {}",
        results::problems(problems)
    );
    FnResult::new(Severity::Info, message)
}

/// One finding on a resource.
struct Problem {
    severity: Severity,
    field: String,
    message: String,
    /// Where in the field's value, for a value that is not JSON.
    position: Option<Position>,
}

impl Problem {
    fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
            position: None,
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
            position: None,
        });
        return;
    };
    for error in check_cni_config(config) {
        problems.push(match error {
            CniConfigError::Json(JsonError { message, at }) => Problem {
                position: at.map(Position::InValue),
                ..Problem::error(
                    "spec.config",
                    format!("CNI configuration is not valid JSON: {message}"),
                )
            },
            error => Problem::error("spec.config", format!("CNI configuration {error}")),
        });
    }
}

fn check_workload(
    item: &Node,
    r: &ResourceRef,
    kind: &WorkloadKind,
    settings: &Settings,
    problems: &mut Vec<Problem>,
) {
    let Some(annotations) = template_annotations(item, kind, problems) else {
        return;
    };
    let holder = if kind.field("").is_empty() {
        Holder::Pod
    } else {
        Holder::Template
    };
    check_multus(
        Some(annotations),
        &kind.field("metadata.annotations"),
        holder,
        problems,
    );
    let namespace = r
        .namespace
        .as_deref()
        .or(settings.default_namespace.as_deref());
    // The field names the annotation in full; the messages name it shortly,
    // so a line showing both says the key once.
    for (annotation, name) in [
        (DEFAULT_NETWORK_ANNOTATION, "the default-network annotation"),
        (NETWORKS_ANNOTATION, "the networks annotation"),
    ] {
        let field = kind.field(&format!("metadata.annotations.{annotation}"));
        let text = match annotations.get(annotation) {
            None => continue,
            // An empty value: no networks, or a default network Multus cannot find.
            Some(v) if v.is_null() => "",
            Some(Node::Scalar(s)) => s.value.as_str(),
            Some(other) => {
                problems.push(Problem::error(
                    field,
                    format!("{name} is {}, not a string", other.kind_name()),
                ));
                continue;
            }
        };
        let networks = match Networks::parse(text) {
            Ok(networks) => networks,
            // A cap is this project's, not Multus's.
            Err(e @ NetworksError::TooManySelections { .. }) => {
                problems.push(Problem::error(field, format!("{name} {e}")));
                continue;
            }
            Err(
                e @ NetworksError::Element {
                    problem: ItemProblem::TooManyIps { .. },
                    ..
                },
            ) => {
                problems.push(Problem::error(field, format!("{name}: {e}")));
                continue;
            }
            Err(e) => {
                problems.push(Problem::error(field, format!("Multus rejects {name}: {e}")));
                continue;
            }
        };
        if annotation == DEFAULT_NETWORK_ANNOTATION {
            let n = networks.selections().len();
            if n != 1 {
                problems.push(Problem::error(
                    field,
                    format!(
                        "{name} selects {}; Multus takes exactly one",
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

/// What carries a `linkerd.io/multus` annotation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holder {
    Namespace,
    Pod,
    Template,
}

/// A `linkerd.io/multus` value that is neither `enabled` nor `disabled`: the
/// rules read it as not enabled, so a typo turns Linkerd-CNI off without a
/// word. An error here (the render goes on with a warning). An empty value on
/// a pod (template) is unset, as the rules read it: its namespace decides.
fn check_multus(annotations: Option<&Map>, at: &str, holder: Holder, problems: &mut Vec<Problem>) {
    let Some(value) = annotations.and_then(|a| a.get_text(MULTUS_ANNOTATION)) else {
        return;
    };
    if MULTUS_VALUES.contains(&value) || (value.is_empty() && holder != Holder::Namespace) {
        return;
    }
    let (whose, pods) = match holder {
        Holder::Namespace => (
            "the namespace",
            "it gets no NAD and its pods are not attached to Linkerd-CNI",
        ),
        Holder::Pod => (
            "the pod",
            "it is not attached to Linkerd-CNI, whatever its namespace says",
        ),
        Holder::Template => (
            "the pod template",
            "its pods are not attached to Linkerd-CNI, whatever their namespace says",
        ),
    };
    problems.push(Problem::error(
        format!("{at}.{MULTUS_ANNOTATION}"),
        format!(
            "{value:?} is neither enabled nor disabled: linkerd-multus and its webhook treat {whose} as not enabled, so {pods}; {}",
            multus_hint(value)
        ),
    ));
}

/// The annotations of the workload's pod template; `None` when it has none,
/// or when they cannot be read (a problem says why).
fn template_annotations<'a>(
    item: &'a Node,
    kind: &WorkloadKind,
    problems: &mut Vec<Problem>,
) -> Option<&'a Map> {
    let template = match kind.pod_template(item) {
        Ok(template) => template?,
        Err(problem) => {
            problems.push(Problem::error(kind.field(""), problem));
            return None;
        }
    };
    let annotations = template.get("metadata").and_then(|m| match m {
        Node::Map(m) => m.get("annotations"),
        _ => None,
    });
    match annotations? {
        Node::Map(a) => Some(a),
        a if a.is_null() => None,
        other => {
            problems.push(Problem::error(
                kind.field("metadata.annotations"),
                format!(
                    "metadata.annotations is {}, not a mapping",
                    other.kind_name()
                ),
            ));
            None
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
            position: None,
        });
    }
}

#[cfg(test)]
#[path = "package_tests.rs"]
mod tests;
