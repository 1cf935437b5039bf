//! The transformation of a whole package: which namespaces get a NAD, which
//! workloads get attached. Pure code: resources in, resources and results out.
//! The workloads are in [`workloads`], the NADs in [`nads`].

mod nads;
mod workloads;

use std::collections::BTreeMap;

use crate::k8s::namespace::{Lookup, MULTUS_ANNOTATION, MULTUS_VALUES, Namespace, Source};
use crate::k8s::resource::{self, FileRef, ResourceRef, files};
use crate::krm::results::{self, FnResult, Severity, plural};
use crate::linkerd_cni::settings::Settings;
use crate::yaml::Node;

use nads::NadConfig;

/// Counts for the summary result.
#[derive(Default)]
struct Summary {
    attached: usize,
    detached: usize,
    uids: usize,
    released: usize,
    stamped: usize,
    unstamped: usize,
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
    let config_ready = config.peek(&mut r, items).is_some();
    let can_attach = |ns: &Option<String>| config_ready || existing.current.contains_key(ns);
    let (needs, decided) = r.workloads(items, &namespaces, &can_attach);
    let plan = r.nads(items, &namespaces, needs, existing, config);
    r.stamp(items, &decided, &plan.configs);
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
            if let Some(v) = annotations.lookup(MULTUS_ANNOTATION)
                && !MULTUS_VALUES.contains(&v)
            {
                let message = format!(
                    "annotation {MULTUS_ANNOTATION}: {v:?} is not one of {}; the namespace is treated as not enabled",
                    MULTUS_VALUES.join(", ")
                );
                self.report(i, Severity::Warning, message);
            }
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
