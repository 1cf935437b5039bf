//! Config rollouts in the cluster: which workloads the NAD controller restarts once the
//! Linkerd-CNI NAD of their namespace holds a new config, and when. Linkerd-CNI applies its
//! config when a pod's sandbox is made and never again, so a pod started under the old one
//! keeps it until it is recreated.
//!
//! The decision is the hash comparison alone: a pod whose [`HASH_ANNOTATION`] differs from the
//! hash of its namespace's NAD runs the old config, and its owner is restarted by stamping
//! that hash into the pod template (the annotation a render writes, so Git and the cluster
//! speak one language). So a controller restart, a leader change or a re-list restarts nothing
//! that is current, and a workload whose template already carries the hash is rolling, never
//! patched again. Restarts are paced by a [`Pacer`], fairly between namespaces: at most so many
//! of its own restarts rolling at once, a namespace at most its share of them, the namespaces
//! served in turn; a rollout that does not complete by its deadline halts its namespace and
//! frees its slot.
//!
//! What a pod says is not proof: its owner counts only when its ownerReference's uid is the
//! live owner's ([`owner`]), and a naked pod is evicted only when its namespace opts in.
//! What the cluster says of the workload decides who holds its template ([`holder`]): a
//! workload managed from Git (Argo CD, Flux, kpt, or a server-side apply field manager) is
//! reported, not patched, so that Git's next apply never meets a field the controller took;
//! Helm releases are restarted.
//!
//! Opt-in, per pod template or namespace, with [`OPT_IN_ANNOTATION`]: a `multus.linkerd.io`
//! key because it is this project's controller that acts on it, where Linkerd's
//! `config.linkerd.io` keys configure the proxy and linkerd-config's
//! `config.linkerd.io/reconcile` label restarted every opted-in pod after a fixed sleep. Jobs,
//! CronJobs and naked pods are never restarted (reported); a naked pod may be evicted under a
//! second opt-in on its namespace ([`EVICT_ANNOTATION`]). [`preview`] runs the same planner
//! over a cluster as a new ConfigMap would leave it. Pure code: the controller feeds it what
//! its watches hold and carries out what it returns.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub use crate::linkerd_cni::rollout::HASH_ANNOTATION;
pub use holder::Holder;
pub use owner::{ControllerRef, Live, Owner, Pod, ReplicaSetOf};
pub use pacer::Pacer;
pub use preview::{Preview, preview};
pub use workload::{Progress, Workload};

mod decide;
pub mod holder;
pub mod owner;
mod pacer;
mod preview;
mod stale;
mod workload;

/// Opts a workload (on its pod template) or a namespace in: `enabled` or `disabled`, the pod
/// template's first.
pub const OPT_IN_ANNOTATION: &str = "multus.linkerd.io/restart-on-config-change";
/// Opts a namespace's naked pods in to eviction through the Eviction API: `enabled` on the
/// namespace. On a pod only `disabled` counts (it opts the pod out): whoever may patch a pod
/// could write `enabled` on it.
pub const EVICT_ANNOTATION: &str = "multus.linkerd.io/evict-on-config-change";

/// The reason of the Event on a workload the controller restarted.
pub const RESTARTED_REASON: &str = "Restarted";
/// The reason of the Event on a workload whose rollout did not complete by its deadline.
pub const STALLED_REASON: &str = "RolloutStalled";
/// The reason of the Event on a workload or pod that runs an older config and that the
/// controller does not restart.
pub const REPORTED_REASON: &str = "StaleConfig";

/// The kinds the controller restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `apps/v1` Deployment (the pods of its ReplicaSets).
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
        })
    }
}

impl Kind {
    /// The kind an ownerReference names, if the controller restarts it.
    pub fn of_owner(kind: &str) -> Option<Kind> {
        match kind {
            "Deployment" => Some(Kind::Deployment),
            "StatefulSet" => Some(Kind::StatefulSet),
            "DaemonSet" => Some(Kind::DaemonSet),
            _ => None,
        }
    }
}

/// A workload: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Visits pods one at a time: the caller need not hold them all at once.
pub type Pods<'a> = dyn Fn(&mut dyn FnMut(&Pod)) + 'a;

/// The cluster as the controller's watches hold it.
pub struct Cluster<'a> {
    /// The workload of a key, if the watches hold it.
    pub workload: &'a dyn Fn(&Key) -> Option<&'a Workload>,
    /// The pods started under a config hash, visited once per plan.
    pub pods: &'a Pods<'a>,
    /// The hash of the config of each namespace's Linkerd-CNI NAD.
    pub nad_hashes: &'a BTreeMap<String, String>,
    /// A namespace's annotation: `(namespace, key)` to its value.
    pub namespace_annotation: &'a dyn Fn(&str, &str) -> Option<String>,
    /// Whose a namespace is where nothing is ever restarted or evicted: Kubernetes',
    /// OpenShift's, Linkerd's, Linkerd-CNI's ([`crate::k8s::reserved`]).
    pub reserved: &'a dyn Fn(&str) -> Option<&'static str>,
}

impl fmt::Debug for Cluster<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("nad_hashes", &self.nad_hashes.len())
            .finish_non_exhaustive()
    }
}

/// What the controller does, or says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stamp `hash` into the workload's pod template: its controller rolls it.
    Restart {
        /// The workload.
        key: Key,
        /// The hash of its namespace's NAD config.
        hash: String,
    },
    /// Evict the naked pod through the Eviction API (PodDisruptionBudgets hold).
    Evict {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A rollout this pacer started (or found) is complete.
    Completed(Key),
    /// A rollout did not complete in time: no more restarts in its namespace until it does.
    Halted {
        /// The workload.
        key: Key,
        /// How long it has been rolling.
        after: Duration,
    },
    /// Runs the old config and is not restarted: why.
    Reported {
        /// The workload or pod.
        subject: Subject,
        /// Why, and the fix.
        why: String,
    },
}

/// What a report is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A workload.
    Workload(Key),
    /// A pod.
    Pod {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Workload(key) => key.fmt(f),
            Subject::Pod { namespace, name } => write!(f, "Pod {namespace}/{name}"),
        }
    }
}

#[cfg(test)]
mod test_world;
