//! The network-resources rules over a whole package: the NADs of the input,
//! every workload that selects networks. Pure code: resources in, results out.

use super::settings::Settings;
use super::{Error, NadTable, nad_annotation_keys, workload};
use crate::k8s::resource::{self, ResourceRef};
use crate::k8s::workload::{WorkloadKind, WorkloadKinds};
use crate::krm::results::{self, FnResult, Severity, plural};
use crate::multus::nad;
use crate::multus::networks::DEFAULT_NETWORK_ANNOTATION;
use crate::yaml::Node;

/// Applies the rules to every workload of the package (its items and their
/// identities), in place, and returns
/// the results, the summary first.
pub fn render(items: &mut [Node], refs: &[ResourceRef], settings: &Settings) -> Vec<FnResult> {
    let mut results = Vec::new();
    let nads = input_nads(items, refs, settings, &mut results);
    let kinds = WorkloadKinds::new(&settings.workload_kinds);
    let mut changed = 0;
    for (i, item) in items.iter_mut().enumerate() {
        let r = &refs[i];
        let Some(kind) = kinds.find(r.group(), &r.kind) else {
            continue;
        };
        let namespace = namespace_of(r, settings);
        let applied = workload(
            item,
            kind,
            settings,
            namespace.as_deref().unwrap_or(""),
            &nads,
        );
        let report = |severity, message: String| {
            FnResult::new(severity, message).on(r, resource::file_ref(item).as_ref())
        };
        match applied {
            Ok(None) => {}
            Ok(Some(applied)) => {
                if !applied.changes.is_empty() {
                    changed += 1;
                    results.push(report(Severity::Info, applied.changes.join("; ")));
                }
                for warning in applied.warnings {
                    results.push(report(Severity::Warning, warning));
                }
            }
            Err(e) => {
                let message = error_message(&e, namespace.is_some());
                let mut result = report(Severity::Error, message);
                result.field = field_of(&e, kind);
                results.push(result);
            }
        }
    }
    let done = match changed {
        0 => "no changes".to_string(),
        n => format!("{} changed", plural(n, "workload")),
    };
    let summary = format!(
        "linkerd-multus network resources: {done}; {}",
        results::problems(&results)
    );
    results.insert(0, FnResult::new(Severity::Info, summary));
    results
}

/// The namespace a resource is in: its own, else the default namespace the
/// host puts it in, if the settings name one.
fn namespace_of(r: &ResourceRef, settings: &Settings) -> Option<String> {
    r.namespace
        .as_deref()
        .or(settings.default_namespace.as_deref())
        .map(str::to_string)
}

/// The NADs of the input, with the annotations the rules read; a NAD in the
/// input twice is an error result.
fn input_nads(
    items: &[Node],
    refs: &[ResourceRef],
    settings: &Settings,
    results: &mut Vec<FnResult>,
) -> NadTable {
    // Files are read only for the items that get a result, while they are at hand.
    let mut nads = NadTable::default();
    let keys = nad_annotation_keys(&settings.resource_name_keys);
    for (i, item) in items.iter().enumerate() {
        let r = &refs[i];
        if !nad::is_nad(r) {
            continue;
        }
        let annotations = resource::annotations(item)
            .map(|a| {
                keys.iter()
                    .filter_map(|k| Some((k.clone(), a.get_text(k)?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        if !nads.insert(
            namespace_of(r, settings).unwrap_or_default(),
            r.name.to_string(),
            annotations,
        ) {
            results.push(
                FnResult::new(
                    Severity::Error,
                    "the NetworkAttachmentDefinition is in the input twice",
                )
                .on(r, resource::file_ref(item).as_ref()),
            );
        }
    }
    nads
}

/// The message of a workload's error; a missing NAD says where it was looked
/// for, given whether the workload has a namespace.
fn error_message(e: &Error, has_namespace: bool) -> String {
    match (e, has_namespace) {
        (Error::MissingNads(_), true) => {
            format!("{e} in the input; add it, or pass the cluster's NADs as context")
        }
        (Error::MissingNads(_), false) => {
            format!("{e}: the workload has no metadata.namespace and no defaultNamespace is set")
        }
        _ => e.to_string(),
    }
}

/// The field an error is about, as a dotted path from the resource.
fn field_of(error: &Error, kind: &WorkloadKind) -> Option<String> {
    match error {
        Error::Networks { annotation, .. } => {
            Some(kind.field(&format!("metadata.annotations.{annotation}")))
        }
        Error::DefaultNetworkCount(_) => Some(kind.field(&format!(
            "metadata.annotations.{}",
            DEFAULT_NETWORK_ANNOTATION
        ))),
        Error::NodeSelectorConflict { .. } => Some(kind.field("spec.nodeSelector")),
        Error::Annotation { annotation, .. } | Error::UnknownContainer { annotation, .. } => {
            Some(kind.field(&format!("metadata.annotations.{annotation}")))
        }
        _ => None,
    }
}
