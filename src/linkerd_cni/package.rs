//! The transformation of a whole package: which namespaces get a NAD, which
//! workloads get attached. Pure code: resources in, resources and results out.
//! The workloads are in `package/workloads.rs`, the NADs in `package/nads.rs`.

mod nads;
mod skip_subnets;
mod workloads;

use std::collections::BTreeMap;

use crate::k8s::namespace::{
    INJECT_ANNOTATION, Lookup, MULTUS_ANNOTATION, MULTUS_VALUES, Namespace, Source, multus_hint,
};
use crate::k8s::resource::{self, FileRef, ResourceRef, files};
use crate::krm::results::{self, FnResult, Severity, plural};
use crate::linkerd_cni::opt_ins::{self, Whose};
use crate::linkerd_cni::settings::Settings;
use crate::yaml::Node;

use nads::NadConfig;
use workloads::ConfigRules;

/// Why a namespace needs the NAD.
#[derive(Default)]
struct Need {
    /// By a rule of the function: the namespace is enabled, is the control
    /// plane's, or holds a workload the function attached.
    managed: bool,
    /// Workloads (item indices) whose own references need it.
    user_refs: Vec<usize>,
}

/// A workload the rules were applied to, for the rules that read its namespace's NAD config.
struct Decided {
    /// Its item index.
    index: usize,
    /// Whether the rules attach it.
    attached: bool,
    /// The info result reporting its changes, if any.
    result: Option<usize>,
}

/// Counts for the summary result.
#[derive(Default)]
struct Summary {
    attached: usize,
    detached: usize,
    uids: usize,
    released: usize,
    stamped: usize,
    unstamped: usize,
    skipped: usize,
    unskipped: usize,
    generated: usize,
    updated: usize,
    removed: usize,
}

/// Renders the package (its items and their identities) in place and
/// returns the results, the summary first.
pub fn render(items: &mut Vec<Node>, refs: &[ResourceRef], settings: &Settings) -> Vec<FnResult> {
    let files = files(items);
    let mut r = Renderer {
        settings,
        refs,
        files: &files,
        results: Vec::new(),
        summary: Summary::default(),
    };
    let namespaces = r.namespaces(items);
    let existing = r.existing_nads(items);
    let mut config = NadConfig::Unread;
    // Without a config, a workload is attached only where a NAD already exists:
    // the output never references a NAD that will not exist.
    let generated = config.peek(&mut r, items);
    let config_ready = generated.is_some();
    let can_attach = |ns: &Option<String>| config_ready || existing.current.contains_key(ns);
    let foreseen = r.foresee_configs(items, &existing, generated);
    let mut rules = ConfigRules::new(&r, items, &foreseen);
    let (needs, mut decided) = r.workloads(items, &namespaces, &can_attach, &mut rules);
    let plan = r.nads(items, &namespaces, &needs, existing, config);
    r.after_nads(items, &mut decided, &namespaces, &needs, &mut rules);
    plan.place(items);
    let mut results = Vec::with_capacity(r.results.len() + 1);
    results.push(FnResult::new(Severity::Info, r.summary_line()));
    results.append(&mut r.results);
    results
}

/// The namespace a resource is in: its own, else the default namespace the
/// host puts it in, if the settings name one.
fn namespace_of<'a>(r: &'a ResourceRef, settings: &'a Settings) -> Option<&'a str> {
    r.namespace
        .as_deref()
        .or(settings.default_namespace.as_deref())
}

/// The state of one render: the package's identities and files, and the
/// results and counts so far.
struct Renderer<'a> {
    settings: &'a Settings,
    refs: &'a [ResourceRef],
    files: &'a [Option<FileRef>],
    results: Vec<FnResult>,
    summary: Summary,
}

impl Renderer<'_> {
    /// Reports on item `index`; the result, to add a field to.
    fn report(
        &mut self,
        index: usize,
        severity: Severity,
        message: impl Into<String>,
    ) -> &mut FnResult {
        self.results.push(
            FnResult::new(severity, message).on(&self.refs[index], self.files[index].as_ref()),
        );
        self.results.last_mut().expect("just pushed")
    }

    /// The namespaces the function knows: Namespace objects and the `namespaces` setting.
    fn namespaces(&mut self, items: &[Node]) -> BTreeMap<String, Namespace> {
        let mut known = BTreeMap::new();
        let refs = self.refs;
        for (i, item) in items.iter().enumerate() {
            let r = &refs[i];
            if r.kind != "Namespace" || r.group() != "" {
                continue;
            }
            let annotations = resource::string_annotations(item);
            self.namespace_multus(i, r.name.as_str(), &annotations);
            if known.contains_key(r.name.as_str()) {
                self.report(i, Severity::Error, "the Namespace is in the input twice");
                continue;
            }
            known.insert(
                r.name.to_string(),
                Namespace {
                    annotations,
                    source: Source::Input(i),
                },
            );
        }
        for (name, annotations) in &self.settings.namespaces {
            if let Some(v) = annotations.lookup(MULTUS_ANNOTATION)
                && !MULTUS_VALUES.contains(&v)
            {
                let mut result = FnResult::new(
                    Severity::Warning,
                    format!(
                        "namespaces setting: namespace {name}: annotation {MULTUS_ANNOTATION} is {v:?}, neither enabled nor disabled: the namespace is treated as not enabled, so its pods are not attached to Linkerd-CNI; {}",
                        multus_hint(v)
                    ),
                );
                result.fails_diff = true;
                self.results.push(result);
            }
            if let Some(Namespace {
                source: Source::Input(i),
                ..
            }) = known.get(name)
            {
                let message = format!(
                    "namespace {name} is in the input and in the namespaces setting; describe it in one place"
                );
                self.report(*i, Severity::Error, message);
                continue;
            }
            known.insert(
                name.clone(),
                Namespace {
                    annotations: annotations.clone(),
                    source: Source::Settings,
                },
            );
        }
        known
    }
    /// Reports on Namespace `i` a `linkerd.io/multus` value that is neither
    /// `enabled` nor `disabled` (a warning that fails `diff`), and a meshed
    /// namespace without the annotation (an info: how to enable it).
    fn namespace_multus(&mut self, i: usize, name: &str, annotations: &BTreeMap<String, String>) {
        let pairs = annotations.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let problems = opt_ins::problems(pairs, Whose::Namespace, "metadata.annotations.");
        self.opt_in_problems(i, problems);
        let field = format!("metadata.annotations.{MULTUS_ANNOTATION}");
        match annotations.lookup(MULTUS_ANNOTATION) {
            Some(v) if !MULTUS_VALUES.contains(&v) => {
                let message =
                    opt_ins::value_message(MULTUS_ANNOTATION, v, Whose::Namespace, &field);
                let result = self.report(i, Severity::Warning, message);
                result.field = Some(field);
                result.fails_diff = true;
            }
            None if name != self.settings.linkerd_namespace => {
                if let Some(inject @ ("enabled" | "ingress")) =
                    annotations.lookup(INJECT_ANNOTATION)
                {
                    let message = format!(
                        "the namespace is meshed ({INJECT_ANNOTATION}: {inject}) but has no {MULTUS_ANNOTATION} annotation, so its pods are attached to Linkerd-CNI only where their own template says {MULTUS_ANNOTATION}: enabled; annotate the namespace {MULTUS_ANNOTATION}=enabled to attach Linkerd-CNI"
                    );
                    let result = self.report(i, Severity::Info, message);
                    result.field = Some("metadata.annotations".into());
                    result.to_act = true;
                }
            }
            _ => {}
        }
    }

    /// Reports on item `i` its opt-in annotations written wrong (warnings that fail `diff`),
    /// but a `linkerd.io/multus` value, which the rules report themselves.
    fn opt_in_problems(&mut self, i: usize, problems: Vec<opt_ins::Problem>) {
        for problem in problems.into_iter().filter(|p| p.key != MULTUS_ANNOTATION) {
            let result = self.report(i, Severity::Warning, problem.message);
            result.field = Some(problem.field);
            result.fails_diff = true;
        }
    }

    /// Warns that a workload's namespace is unknown, so only its own annotations count.
    fn unknown_namespace(&mut self, i: usize, unknown: bool, ns_name: Option<&str>) {
        if !unknown {
            return;
        }
        let message = match ns_name {
            Some(n) => format!(
                "namespace {n} is neither in the input nor in the namespaces setting; the workload is decided on its own annotations"
            ),
            None => "the workload has no metadata.namespace; it is decided on its own annotations"
                .to_string(),
        };
        self.report(i, Severity::Warning, message);
    }

    /// The summary result's message.
    fn summary_line(&self) -> String {
        let s = &self.summary;
        let mut parts = Vec::new();
        for (n, noun, verb) in [
            (s.attached, "workload", "attached"),
            (s.detached, "workload", "detached"),
            (s.uids, "proxy UID", "set or removed"),
            (s.released, "hand-edited proxy UID", "released"),
            (s.stamped, "config hash", "stamped"),
            (s.unstamped, "config hash", "removed"),
            (s.skipped, "skip-subnets annotation", "written"),
            (s.unskipped, "skip-subnets annotation", "taken back"),
            (s.generated, "NAD", "generated"),
            (s.updated, "NAD", "updated"),
            (s.removed, "NAD", "removed"),
        ] {
            if n > 0 {
                parts.push(format!("{} {verb}", plural(n, noun)));
            }
        }
        if parts.is_empty() {
            parts.push("no changes".into());
        }
        format!(
            "linkerd-multus: {}; {}",
            parts.join(", "),
            results::problems(&self.results)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::resource::identify;
    use crate::yaml::parse_stream;

    const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linkerd-cni-config\n  namespace: linkerd-cni\ndata:\n  cni_network_config: '{\"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}}'\n---\n";

    fn namespace(annotations: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n  annotations: {{{annotations}}}\n---\n"
        )
    }

    fn deployment(annotations: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: demo\nspec:\n  template:\n    metadata:\n      annotations: {{{annotations}}}\n    spec:\n      containers: []\n"
        )
    }

    /// The results about `linkerd.io/multus`, as `severity resource: field: message`,
    /// with `!` after the severity when they fail `diff`; and whether the
    /// Deployment was attached.
    fn multus_results(input: &str, settings: &Settings) -> (Vec<String>, bool) {
        let mut items = parse_stream(input).unwrap();
        let refs = identify(&items).unwrap();
        let results = render(&mut items, &refs, settings);
        let lines = results
            .iter()
            .skip(1)
            .filter(|r| r.message.contains(MULTUS_ANNOTATION))
            .map(|r| {
                format!(
                    "{:?}{} {}: {}: {}",
                    r.severity,
                    if r.fails_diff { "!" } else { "" },
                    r.resource
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    r.field.as_deref().unwrap_or_default(),
                    r.message
                )
            })
            .collect();
        let attached = items.iter().any(|i| {
            crate::yaml::emit_document(i).contains("k8s.v1.cni.cncf.io/networks: linkerd-cni")
        });
        (lines, attached)
    }

    #[test]
    fn multus_values_and_meshed_namespaces_are_reported() {
        let on = "linkerd.io/inject: enabled, linkerd.io/multus: enabled";
        let cases: &[(&str, &str, &[&str], bool)] = &[
            // Clean: attached, nothing said.
            (on, "", &[], true),
            (on, "linkerd.io/multus: enabled", &[], true),
            (on, "linkerd.io/multus: ''", &[], true),
            (
                "linkerd.io/inject: enabled, linkerd.io/multus: disabled",
                "",
                &[],
                false,
            ),
            (on, "linkerd.io/multus: disabled", &[], false),
            ("", "", &[], false),
            // A typo on the pod template turns the namespace's enabled off.
            (
                on,
                "linkerd.io/multus: enable",
                &[
                    "Warning! Deployment demo/web: spec.template.metadata.annotations.linkerd.io/multus: spec.template.metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says; did you mean enabled?",
                ],
                false,
            ),
            (
                on,
                "linkerd.io/multus: \"true\"",
                &[
                    "Warning! Deployment demo/web: spec.template.metadata.annotations.linkerd.io/multus: spec.template.metadata.annotations.linkerd.io/multus is \"true\", neither enabled nor disabled: the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says; did you mean enabled?",
                ],
                false,
            ),
            (
                on,
                "linkerd.io/multus: maybe",
                &[
                    "Warning! Deployment demo/web: spec.template.metadata.annotations.linkerd.io/multus: spec.template.metadata.annotations.linkerd.io/multus is \"maybe\", neither enabled nor disabled: the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says; set it to enabled or disabled",
                ],
                false,
            ),
            // A typo on the Namespace.
            (
                "linkerd.io/inject: enabled, linkerd.io/multus: Enabled",
                "",
                &[
                    "Warning! Namespace demo: metadata.annotations.linkerd.io/multus: metadata.annotations.linkerd.io/multus is \"Enabled\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?",
                ],
                false,
            ),
            // Meshed but not enabled: said once, on the Namespace.
            (
                "linkerd.io/inject: enabled",
                "",
                &[
                    "Info Namespace demo: metadata.annotations: the namespace is meshed (linkerd.io/inject: enabled) but has no linkerd.io/multus annotation, so its pods are attached to Linkerd-CNI only where their own template says linkerd.io/multus: enabled; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI",
                ],
                false,
            ),
            // A workload meshed on its own, in a namespace not enabled.
            (
                "",
                "linkerd.io/inject: ingress",
                &[
                    "Info Deployment demo/web: spec.template.metadata.annotations: the pod template is meshed (linkerd.io/inject: ingress) but neither it nor its namespace demo has linkerd.io/multus: enabled, so its pods are not attached to Linkerd-CNI; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI",
                ],
                false,
            ),
        ];
        for (ns, template, want, attached) in cases {
            let input = format!("{CONFIGMAP}{}{}", namespace(ns), deployment(template));
            let (got, got_attached) = multus_results(&input, &Settings::default());
            assert_eq!(got, *want, "namespace {{{ns}}}, template {{{template}}}");
            assert_eq!(
                got_attached, *attached,
                "namespace {{{ns}}}, template {{{template}}}"
            );
        }
    }

    #[test]
    fn namespaces_of_the_setting_are_reported_on_their_workloads() {
        let mut settings = Settings::default();
        settings.namespaces.insert(
            "demo".into(),
            [(INJECT_ANNOTATION.into(), "enabled".into())].into(),
        );
        let input = format!("{CONFIGMAP}{}", deployment(""));
        let (got, attached) = multus_results(&input, &settings);
        assert_eq!(
            got,
            [
                "Info Deployment demo/web: spec.template.metadata.annotations: its namespace demo is meshed (linkerd.io/inject: enabled) but neither it nor the pod template has linkerd.io/multus: enabled, so its pods are not attached to Linkerd-CNI; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI"
            ]
        );
        assert!(!attached);
        settings
            .namespaces
            .get_mut("demo")
            .unwrap()
            .insert(MULTUS_ANNOTATION.into(), "on".into());
        let (got, attached) = multus_results(&input, &settings);
        assert_eq!(
            got,
            [
                "Warning! : : namespaces setting: namespace demo: annotation linkerd.io/multus is \"on\", neither enabled nor disabled: the namespace is treated as not enabled, so its pods are not attached to Linkerd-CNI; did you mean enabled?"
            ]
        );
        assert!(!attached);
    }
}
