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
mod tests {
    use super::*;
    use crate::k8s::resource::identify;
    use crate::krm::function_config::SettingsKind;
    use crate::yaml::parse_stream;

    fn results(input: &str, settings: &Settings) -> Vec<String> {
        let items = parse_stream(input).unwrap();
        validate(&items, &identify(&items).unwrap(), settings)
            .into_results()
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
                    "error Deployment demo/web: {field}: Multus rejects the networks annotation: item 2 \"\": empty item"
                )),
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\"}'\n",
                Some(format!(
                    "error Deployment demo/web: {field}: Multus rejects the networks annotation: invalid JSON"
                )),
            ),
            (
                "        k8s.v1.cni.cncf.io/networks: {name: a}\n",
                Some(format!(
                    "error Deployment demo/web: {field}: the networks annotation is a mapping, not a string"
                )),
            ),
            (
                "        v1.multus-cni.io/default-network: a, b\n",
                Some(format!(
                    "error Deployment demo/web: {default_field}: the default-network annotation selects 2 networks; Multus takes exactly one"
                )),
            ),
            (
                "        v1.multus-cni.io/default-network: ''\n",
                Some(format!(
                    "error Deployment demo/web: {default_field}: the default-network annotation selects 0 networks"
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
    fn multus_values_other_than_enabled_and_disabled() {
        let namespace = |annotations: &str| {
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n  annotations: {{{annotations}}}\n"
            )
        };
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: demo\n  annotations:\n    linkerd.io/multus: \"yes\"\nspec: {}\n";
        let cases: &[(String, Option<&str>)] = &[
            (namespace("linkerd.io/multus: enabled"), None),
            (namespace("linkerd.io/multus: disabled"), None),
            (namespace("linkerd.io/inject: enabled"), None),
            (
                namespace("linkerd.io/multus: enable"),
                Some(
                    "error Namespace demo: metadata.annotations.linkerd.io/multus: \"enable\" is neither enabled nor disabled: linkerd-multus and its webhook treat the namespace as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?",
                ),
            ),
            (
                namespace("linkerd.io/multus: ''"),
                Some(
                    "error Namespace demo: metadata.annotations.linkerd.io/multus: \"\" is neither enabled nor disabled: linkerd-multus and its webhook treat the namespace as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; set it to enabled or disabled",
                ),
            ),
            (
                deployment(
                    "  namespace: demo\n",
                    "        linkerd.io/multus: enabled\n",
                ),
                None,
            ),
            // Empty on a pod template: unset, the namespace decides.
            (
                deployment("  namespace: demo\n", "        linkerd.io/multus: ''\n"),
                None,
            ),
            (
                deployment(
                    "  namespace: demo\n",
                    "        linkerd.io/multus: \"true\"\n",
                ),
                Some(
                    "error Deployment demo/web: spec.template.metadata.annotations.linkerd.io/multus: \"true\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod template as not enabled, so its pods are not attached to Linkerd-CNI, whatever their namespace says; did you mean enabled?",
                ),
            ),
            (
                pod.to_string(),
                Some(
                    "error Pod demo/p: metadata.annotations.linkerd.io/multus: \"yes\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod as not enabled, so it is not attached to Linkerd-CNI, whatever its namespace says; did you mean enabled?",
                ),
            ),
        ];
        for (input, want) in cases {
            let got = results(input, &Settings::default());
            let want: Vec<&str> = want.iter().copied().collect();
            assert_eq!(got[1..], want, "{input}");
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
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: demo\n  annotations:\n    k8s.v1.cni.cncf.io/networks: 'a@b@c'\nspec: {}\n";
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
}
