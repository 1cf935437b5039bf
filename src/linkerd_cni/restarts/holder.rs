//! Who holds a workload's pod template besides the NAD controller, as the cluster records it:
//! a GitOps tool's marks, and the writers of `metadata.managedFields`.
//!
//! A restart is an update of the template's [`HASH_ANNOTATION`] under the controller's field
//! manager, which the API server records as that manager's. A server-side apply that sets the
//! same field to another value then fails with a conflict naming the controller, and one that
//! forces it takes the old hash back. So a workload whose template a field manager applies
//! (`kubectl apply --server-side`, Argo CD and Flux with server-side apply) is Git's: it is
//! reported with the fix, to render it with `configRollout` and apply it. So is one a GitOps
//! tool marks, whatever its apply. Helm is no GitOps tool: its releases carry
//! `app.kubernetes.io/instance` and `app.kubernetes.io/managed-by: Helm`, its upgrade applies
//! only what the chart renders, and a Helm release is restarted unless the chart itself sets
//! the hash (a post-renderer's `configRollout`).

use serde_json::Value;

use super::HASH_ANNOTATION;
use crate::multus::nad::CONTROLLER_MANAGED_BY;

/// The marks of a workload managed from Git, each with the tool that leaves it: an annotation
/// or label key, or a key prefix ending in `/`. Argo CD's label tracking
/// (`app.kubernetes.io/instance` by default) is not one: Helm charts set that label too; Argo
/// CD's field manager says it instead ([`GITOPS_MANAGERS`]).
pub const GITOPS_MARKS: &[(&str, &str)] = &[
    ("argocd.argoproj.io/tracking-id", "Argo CD"),
    ("argocd.argoproj.io/instance", "Argo CD"),
    ("kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("helm.toolkit.fluxcd.io/name", "Flux"),
    ("config.k8s.io/owning-inventory", "kpt"),
    ("config.kubernetes.io/", "kpt"),
];

/// The field managers of GitOps tools, whatever their operation (Argo CD's client-side sync
/// writes as `argocd-controller` too).
pub const GITOPS_MANAGERS: &[(&str, &str)] = &[
    ("argocd-controller", "Argo CD"),
    ("kustomize-controller", "Flux"),
    ("helm-controller", "Flux"),
];

/// The annotation Helm writes on every object of a release.
pub const HELM_RELEASE_ANNOTATION: &str = "meta.helm.sh/release-name";

/// Who holds a workload's pod template, so that a restart would fight them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A GitOps tool: its name, and the mark or field manager that says so.
    GitOps {
        /// The tool.
        tool: &'static str,
        /// `annotation KEY`, `label KEY` or `field manager NAME`.
        by: String,
    },
    /// A field manager that applies the template's [`HASH_ANNOTATION`] (server-side apply),
    /// Helm's included.
    AppliesHash {
        /// The field manager.
        manager: String,
    },
    /// A field manager that applies the pod template (server-side apply), other than Helm's.
    AppliesTemplate {
        /// The field manager.
        manager: String,
    },
}

impl Holder {
    /// Why the workload is reported, not patched, and the fix.
    pub fn why(&self) -> String {
        let old = "runs an older Linkerd-CNI config";
        let render = "render it with configRollout (which writes the new multus.linkerd.io/config-hash into its pod template)";
        match self {
            Holder::GitOps { tool, by } => format!(
                "{old}, and is managed from Git by {tool} ({by}): it is not patched here, for Git and the cluster never to fight; {render} and sync it, and its pods roll with the new config"
            ),
            Holder::AppliesHash { manager } => format!(
                "{old}, and field manager {manager} applies its pod template's {HASH_ANNOTATION} (server-side apply): a patch here would make its next apply conflict; {render} and apply it as before (field manager {manager}, or helm upgrade), and its pods roll with the new config"
            ),
            Holder::AppliesTemplate { manager } => format!(
                "{old}, and field manager {manager} applies its pod template (server-side apply, as from Git): it is not patched here, for its next apply to hold what Git holds; {render} and apply it as before (kubectl apply --server-side --field-manager={manager}), and its pods roll with the new config"
            ),
        }
    }
}

/// What the cluster says of a workload's pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Who holds it, if anyone the controller must not fight.
    pub holder: Option<Holder>,
    /// Whether the controller's field manager wrote its hash.
    pub ours: bool,
}

/// The fields a managedFields entry holds under `path` (`f:` keys), if any.
fn under<'a>(fields: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(fields, |at, key| at.get(format!("f:{key}")))
}

const TEMPLATE: &[&str] = &["spec", "template"];
const TEMPLATE_HASH: &[&str] = &[
    "spec",
    "template",
    "metadata",
    "annotations",
    HASH_ANNOTATION,
];

/// Who holds a workload's pod template, from its marks and `managedFields`: a GitOps mark or
/// manager first, then a field manager (not the controller's) that applies the template's
/// hash, then one (not Helm's: the one that applies [`HELM_RELEASE_ANNOTATION`]) that applies
/// any field of the template. Status writers are not read.
pub fn read(meta: &kube::core::ObjectMeta) -> Held {
    let entries: Vec<(&str, bool, &Value)> = (meta.managed_fields.iter().flatten())
        .filter(|e| e.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|e| {
            let apply = e.operation.as_deref() == Some("Apply");
            Some((e.manager.as_deref()?, apply, &e.fields_v1.as_ref()?.0))
        })
        .collect();
    let ours = entries
        .iter()
        .any(|(m, _, f)| *m == CONTROLLER_MANAGED_BY && under(f, TEMPLATE_HASH).is_some());
    let holder = gitops(meta, &entries).or_else(|| applied(&entries));
    Held { holder, ours }
}

fn gitops(meta: &kube::core::ObjectMeta, entries: &[(&str, bool, &Value)]) -> Option<Holder> {
    let marked = |map: &Option<std::collections::BTreeMap<String, String>>, what: &str| {
        let keys = map.iter().flatten().map(|(k, _)| k.as_str());
        let keys: Vec<&str> = keys.collect();
        GITOPS_MARKS.iter().find_map(|(mark, tool)| {
            let key = match mark.ends_with('/') {
                true => keys.iter().find(|k| k.starts_with(mark)),
                false => keys.iter().find(|k| *k == mark),
            }?;
            Some(Holder::GitOps {
                tool,
                by: format!("{what} {key}"),
            })
        })
    };
    let managed = || {
        entries.iter().find_map(|(manager, _, _)| {
            let (_, tool) = GITOPS_MANAGERS.iter().find(|(m, _)| m == manager)?;
            Some(Holder::GitOps {
                tool,
                by: format!("field manager {manager}"),
            })
        })
    };
    marked(&meta.annotations, "annotation")
        .or_else(|| marked(&meta.labels, "label"))
        .or_else(managed)
}

fn applied(entries: &[(&str, bool, &Value)]) -> Option<Holder> {
    let helm_annotation = ["metadata", "annotations", HELM_RELEASE_ANNOTATION];
    let appliers = || {
        (entries.iter())
            .filter(|(m, apply, _)| *apply && *m != CONTROLLER_MANAGED_BY)
            .map(|(m, _, fields)| (m.to_string(), *fields))
    };
    if let Some((manager, _)) = appliers().find(|(_, f)| under(f, TEMPLATE_HASH).is_some()) {
        return Some(Holder::AppliesHash { manager });
    }
    appliers()
        .filter(|(_, f)| under(f, &helm_annotation).is_none())
        .find(|(_, f)| under(f, TEMPLATE).is_some())
        .map(|(manager, _)| Holder::AppliesTemplate { manager })
}

#[cfg(test)]
#[path = "holder_tests.rs"]
mod tests;
