//! What becomes of one stale workload or naked pod, before any pacing: restarted, reported
//! with its reason and fix, or left alone.

use super::{Cluster, EVICT_ANNOTATION, Key, OPT_IN_ANNOTATION, Pod, Subject};
use crate::k8s::namespace::switch;

/// What becomes of a workload with stale pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not opted in, not in the watches, or no NAD in its namespace: nothing.
    Skip,
    /// Runs the old config and is left to the user: why, and the fix.
    Report(String),
    /// Its template carries its NAD's hash already: it rolls to it (restarted, or rendered).
    Current {
        /// That hash.
        hash: String,
        /// Whether the controller's field manager wrote it.
        ours: bool,
        /// Whether its rollout is complete.
        complete: bool,
    },
    /// To restart to its NAD's hash.
    Restart(String),
}

/// Decides for the workload `key`, whose pods run an older config.
pub fn workload(cluster: &Cluster<'_>, key: &Key) -> Decision {
    let Some(workload) = (cluster.workload)(key) else {
        return Decision::Skip;
    };
    let Some(hash) = cluster.nad_hashes.get(&key.namespace) else {
        return Decision::Skip;
    };
    let opted = workload
        .opted_in
        .or_else(|| namespace_switch(cluster, &key.namespace, OPT_IN_ANNOTATION));
    if opted != Some(true) {
        return Decision::Skip;
    }
    if let Some(whose) = (cluster.reserved)(&key.namespace) {
        let fix = "restart it (kubectl rollout restart)";
        return Decision::Report(reserved_why(&key.namespace, whose, fix));
    }
    if workload.on_delete {
        return Decision::Report("runs an older Linkerd-CNI config, and its update strategy is OnDelete: a new template would not roll it; delete its pods one at a time".to_string());
    }
    if workload.template_hash.as_deref() == Some(hash.as_str()) {
        return Decision::Current {
            hash: hash.clone(),
            ours: workload.ours,
            complete: workload.progress.complete(),
        };
    }
    if let Some(holder) = &workload.holder {
        return Decision::Report(holder.why());
    }
    Decision::Restart(hash.clone())
}

/// What becomes of a naked stale pod: evicted when its namespace opts in (and the pod does
/// not opt out) and is not `halted`, else reported.
pub fn naked(cluster: &Cluster<'_>, pod: &Pod, halted: bool) -> Option<super::Action> {
    let subject = Subject::Pod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    };
    let namespace = namespace_switch(cluster, &pod.namespace, EVICT_ANNOTATION);
    let why = match (cluster.reserved)(&pod.namespace) {
        Some(whose) if namespace == Some(true) => {
            reserved_why(&pod.namespace, whose, "delete it and create it again")
        }
        None if namespace == Some(true) && pod.evict != Some(false) => {
            return (!halted).then(|| super::Action::Evict {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            });
        }
        _ if pod.evict == Some(true) => format!(
            "runs an older Linkerd-CNI config and has no controller to restart it: its own {EVICT_ANNOTATION}=enabled is not enough (whoever may patch a pod could write it); annotate its namespace {EVICT_ANNOTATION}=enabled for the controller to evict it, or delete it and create it again"
        ),
        _ => format!(
            "runs an older Linkerd-CNI config and has no controller to restart it: delete it and create it again, or annotate its namespace {EVICT_ANNOTATION}=enabled for the controller to evict it"
        ),
    };
    Some(super::Action::Reported { subject, why })
}

/// Why a stale workload or pod of a reserved namespace is reported, not restarted: `fix` is
/// what its owner may do.
fn reserved_why(namespace: &str, whose: &str, fix: &str) -> String {
    format!(
        "runs an older Linkerd-CNI config, in namespace {namespace}, {whose}: linkerd-multus never restarts or evicts anything there; {fix} when it suits"
    )
}

/// A namespace's `enabled`/`disabled` switch `key`.
fn namespace_switch(cluster: &Cluster<'_>, namespace: &str, key: &str) -> Option<bool> {
    switch(&(cluster.namespace_annotation)(namespace, key)?)
}
