//! A workload as the decision reads it: its identity, its pod template's two annotations, who
//! else holds the template, its update strategy and how far its rollout got.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};

use super::holder::{self, Holder};
use super::{HASH_ANNOTATION, Key, Kind, OPT_IN_ANNOTATION};
use crate::k8s::namespace::switch;

/// How far a workload's rollout got: its spec's generation against its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// The replicas wanted (`spec.replicas`; a DaemonSet's `desiredNumberScheduled`).
    pub desired: i64,
    /// Those of the current template (`updatedReplicas`; `updatedNumberScheduled`).
    pub updated: i64,
    /// Those available (`availableReplicas`; `numberAvailable`).
    pub available: i64,
}

impl Progress {
    /// Whether the rollout of the current spec is complete, as `kubectl rollout status` says.
    pub fn complete(&self) -> bool {
        self.observed_generation >= self.generation
            && self.updated >= self.desired
            && self.available >= self.desired
    }
}

/// A workload as the controller's watches hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Which one.
    pub key: Key,
    /// Its `metadata.uid`: a pod's ownerReference counts only when it names this one.
    pub uid: String,
    /// Its pod template's [`OPT_IN_ANNOTATION`]: `Some(true)` for `enabled`.
    pub opted_in: Option<bool>,
    /// Its pod template's [`HASH_ANNOTATION`].
    pub template_hash: Option<String>,
    /// Who else holds its pod template, so that a patch would fight them ([`holder::read`]).
    pub holder: Option<Holder>,
    /// Whether the NAD controller's field manager wrote its template's hash (a restart of a
    /// leader, this one or an earlier).
    pub ours: bool,
    /// Whether its update strategy is `OnDelete`: a new template waits for its pods to be
    /// deleted, so a restart would not roll it.
    pub on_delete: bool,
    /// Its rollout.
    pub progress: Progress,
}

/// The parts of a workload the decision reads: its kind, template annotations, strategy,
/// replicas and status.
struct Parts<'a> {
    kind: Kind,
    meta: &'a kube::core::ObjectMeta,
    template: Option<&'a BTreeMap<String, String>>,
    on_delete: bool,
    progress: Progress,
}

fn workload(parts: Parts<'_>) -> Workload {
    let meta = parts.meta;
    let held = holder::read(meta);
    Workload {
        key: Key {
            kind: parts.kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        },
        uid: meta.uid.clone().unwrap_or_default(),
        opted_in: parts
            .template
            .and_then(|a| switch(a.get(OPT_IN_ANNOTATION)?)),
        template_hash: parts.template.and_then(|a| a.get(HASH_ANNOTATION)).cloned(),
        holder: held.holder,
        ours: held.ours,
        on_delete: parts.on_delete,
        progress: parts.progress,
    }
}

impl Workload {
    /// A Deployment as the decision reads it; `None` without pod template metadata.
    pub fn of_deployment(d: &Deployment) -> Option<Workload> {
        let spec = &d.spec;
        let status = d.status.clone().unwrap_or_default();
        Some(workload(Parts {
            kind: Kind::Deployment,
            meta: &d.metadata,
            template: spec.template.metadata.as_ref()?.annotations.as_ref(),
            on_delete: false,
            progress: Progress {
                generation: d.metadata.generation.unwrap_or_default(),
                observed_generation: status.observed_generation.unwrap_or_default(),
                desired: spec.replicas.unwrap_or(1).into(),
                updated: status.updated_replicas.unwrap_or_default().into(),
                available: status.available_replicas.unwrap_or_default().into(),
            },
        }))
    }

    /// A StatefulSet as the decision reads it.
    pub fn of_stateful_set(s: &StatefulSet) -> Option<Workload> {
        let spec = &s.spec;
        let status = s.status.clone().unwrap_or_default();
        let strategy = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref());
        Some(workload(Parts {
            kind: Kind::StatefulSet,
            meta: &s.metadata,
            template: spec.template.metadata.as_ref()?.annotations.as_ref(),
            on_delete: strategy == Some("OnDelete"),
            progress: Progress {
                generation: s.metadata.generation.unwrap_or_default(),
                observed_generation: status.observed_generation.unwrap_or_default(),
                desired: spec.replicas.unwrap_or(1).into(),
                updated: status.updated_replicas.unwrap_or_default().into(),
                available: status.available_replicas.unwrap_or_default().into(),
            },
        }))
    }

    /// A DaemonSet as the decision reads it.
    pub fn of_daemon_set(d: &DaemonSet) -> Option<Workload> {
        let spec = &d.spec;
        let status = d.status.clone().unwrap_or_default();
        let strategy = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref());
        Some(workload(Parts {
            kind: Kind::DaemonSet,
            meta: &d.metadata,
            template: spec.template.metadata.as_ref()?.annotations.as_ref(),
            on_delete: strategy == Some("OnDelete"),
            progress: Progress {
                generation: d.metadata.generation.unwrap_or_default(),
                observed_generation: status.observed_generation.unwrap_or_default(),
                desired: status.desired_number_scheduled.into(),
                updated: status.updated_number_scheduled.unwrap_or_default().into(),
                available: status.number_available.unwrap_or_default().into(),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_complete_as_rollout_status_says() {
        let done = Progress {
            generation: 3,
            observed_generation: 3,
            desired: 2,
            updated: 2,
            available: 2,
        };
        for (what, progress, complete) in [
            ("done", done, true),
            (
                "not observed",
                Progress {
                    observed_generation: 2,
                    ..done
                },
                false,
            ),
            ("not updated", Progress { updated: 1, ..done }, false),
            (
                "not available",
                Progress {
                    available: 1,
                    ..done
                },
                false,
            ),
            (
                "scaled to zero",
                Progress {
                    desired: 0,
                    updated: 0,
                    available: 0,
                    ..done
                },
                true,
            ),
        ] {
            assert_eq!(progress.complete(), complete, "{what}");
        }
    }
}
