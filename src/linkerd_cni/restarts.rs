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
//! patched again. Restarts are paced by a [`Pacer`]: at most so many rolling at once, the next
//! started when one completes or its deadline passes; a rollout that does not progress stops
//! further restarts in its namespace.
//!
//! Opt-in, per pod template or namespace, with [`OPT_IN_ANNOTATION`]: a `multus.linkerd.io`
//! key because it is this project's controller that acts on it, where Linkerd's
//! `config.linkerd.io` keys configure the proxy and linkerd-config's
//! `config.linkerd.io/reconcile` label restarted every opted-in pod after a fixed sleep. Jobs,
//! CronJobs and naked pods are never restarted (reported); a naked pod may be evicted under a
//! second opt-in ([`EVICT_ANNOTATION`]). A workload managed from Git (Argo CD, Flux, kpt) is
//! reported, not patched: the fix is to render and sync. Pure code: the controller feeds it
//! what its watches hold and carries out what it returns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};

use crate::k8s::namespace::{Lookup, switch};
pub use crate::linkerd_cni::rollout::HASH_ANNOTATION;
use stale::stale_owners;

mod stale;

/// Opts a workload (on its pod template) or a namespace in: `enabled` or `disabled`, the pod
/// template's first.
pub const OPT_IN_ANNOTATION: &str = "multus.linkerd.io/restart-on-config-change";
/// Opts a naked pod (or its namespace) in to eviction through the Eviction API:
/// `enabled` or `disabled`, the pod's first.
pub const EVICT_ANNOTATION: &str = "multus.linkerd.io/evict-on-config-change";

/// The reason of the Event on a workload the controller restarted.
pub const RESTARTED_REASON: &str = "Restarted";
/// The reason of the Event on a workload whose rollout did not complete by its deadline.
pub const STALLED_REASON: &str = "RolloutStalled";
/// The reason of the Event on a workload or pod that runs an older config and that the
/// controller does not restart.
pub const REPORTED_REASON: &str = "StaleConfig";

/// The marks of a workload managed from Git, each with the tool that leaves it: an annotation
/// or label key, or a key prefix ending in `/`.
pub const GIT_MARKS: &[(&str, &str)] = &[
    ("argocd.argoproj.io/tracking-id", "Argo CD"),
    ("argocd.argoproj.io/instance", "Argo CD"),
    (
        "app.kubernetes.io/instance",
        "Argo CD's label tracking (or Helm)",
    ),
    ("kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("helm.toolkit.fluxcd.io/name", "Flux"),
    ("config.k8s.io/owning-inventory", "kpt"),
    ("config.kubernetes.io/", "kpt"),
];

/// The tool that manages a workload from Git, by its annotations and labels; `None` when none
/// does.
pub fn git_manager(
    annotations: &dyn Lookup,
    labels: &dyn Lookup,
    keys: &[&str],
) -> Option<&'static str> {
    GIT_MARKS.iter().find_map(|(mark, tool)| {
        let found = match mark.strip_suffix('/') {
            Some(_) => keys.iter().any(|k| k.starts_with(mark)),
            None => annotations.lookup(mark).is_some() || labels.lookup(mark).is_some(),
        };
        found.then_some(*tool)
    })
}

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
    /// Its pod template's [`OPT_IN_ANNOTATION`]: `Some(true)` for `enabled`.
    pub opted_in: Option<bool>,
    /// Its pod template's [`HASH_ANNOTATION`].
    pub template_hash: Option<String>,
    /// The tool that manages it from Git ([`git_manager`]).
    pub git: Option<&'static str>,
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
    let none = BTreeMap::new();
    let annotations = meta.annotations.as_ref().unwrap_or(&none);
    let labels = meta.labels.as_ref().unwrap_or(&none);
    let keys: Vec<&str> = annotations.keys().map(String::as_str).collect();
    Workload {
        key: Key {
            kind: parts.kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        },
        opted_in: parts
            .template
            .and_then(|a| switch(a.get(OPT_IN_ANNOTATION)?)),
        template_hash: parts.template.and_then(|a| a.get(HASH_ANNOTATION)).cloned(),
        git: git_manager(annotations, labels, &keys),
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

/// What owns a pod, resolved through its ReplicaSet to the Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A workload the controller restarts.
    Workload(Key),
    /// A Job (a CronJob's too): never restarted.
    Job(String),
    /// No controller: a naked pod.
    Naked,
    /// Another controller (a ReplicaSet without Deployment, an operator's kind).
    Other(String),
}

/// A pod, read as metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What owns it.
    pub owner: Owner,
    /// Its [`HASH_ANNOTATION`].
    pub hash: Option<String>,
    /// Its [`EVICT_ANNOTATION`]: `Some(true)` for `enabled`.
    pub evict: Option<bool>,
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

/// The pacing of restarts, kept from one pass to the next.
#[derive(Debug, Clone)]
pub struct Pacer {
    limit: usize,
    deadline: Duration,
    /// Rolling now: the hash each was restarted to, and since when.
    rolling: BTreeMap<Key, (String, Instant)>,
    /// Namespaces where a rollout did not progress: the workload.
    halted: BTreeMap<String, Key>,
    /// Restarts that were not carried out ([`Pacer::failed`]), and when.
    failed: BTreeMap<Key, Instant>,
}

impl Pacer {
    /// At most `limit` (at least 1) workloads rolling at once, each for at most `deadline`.
    pub fn new(limit: usize, deadline: Duration) -> Self {
        Pacer {
            limit: limit.max(1),
            deadline,
            rolling: BTreeMap::new(),
            halted: BTreeMap::new(),
            failed: BTreeMap::new(),
        }
    }

    /// A restart [`Pacer::plan`] returned was not carried out (its patch failed, or the
    /// leadership ended before it was sent): the workload is not rolling, so it holds no slot
    /// and no deadline runs for it, and a later pass restarts it again, after the workloads
    /// whose restart did not fail (a refusal that lasts does not hold up the others).
    pub fn failed(&mut self, key: &Key, now: Instant) {
        self.rolling.remove(key);
        self.failed.insert(key.clone(), now);
    }

    /// The workloads rolling now.
    pub fn rolling(&self) -> impl Iterator<Item = &Key> {
        self.rolling.keys()
    }

    /// The namespaces halted, each with the workload whose rollout did not progress.
    pub fn halted(&self) -> &BTreeMap<String, Key> {
        &self.halted
    }

    /// One pass over `cluster` at `now`: what to do, in order (completions and halts, then
    /// restarts and evictions, then reports). The caller carries out the restarts and
    /// evictions; one that fails is retried by a later pass, the hash comparison deciding
    /// again (a restart that failed is told with [`Pacer::failed`]).
    pub fn plan(&mut self, cluster: &Cluster<'_>, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        let stale = stale_owners(cluster);
        self.settle(cluster, now, &mut actions);
        let mut reports = Vec::new();
        let mut candidates = Vec::new();
        for key in &stale.workloads {
            let Some(workload) = (cluster.workload)(key) else {
                continue;
            };
            let Some(hash) = cluster.nad_hashes.get(&key.namespace) else {
                continue;
            };
            let opted = workload
                .opted_in
                .or_else(|| namespace_switch(cluster, &key.namespace, OPT_IN_ANNOTATION));
            if opted != Some(true) {
                continue;
            }
            if let Some(whose) = (cluster.reserved)(&key.namespace) {
                reports.push(Action::Reported {
                    subject: Subject::Workload(key.clone()),
                    why: reserved_why(
                        &key.namespace,
                        whose,
                        "restart it (kubectl rollout restart)",
                    ),
                });
                continue;
            }
            if let Some(tool) = workload.git {
                reports.push(Action::Reported {
                    subject: Subject::Workload(key.clone()),
                    why: format!(
                        "runs an older Linkerd-CNI config, and is managed from Git by {tool}: it is not patched here; render and sync it, and its pods roll with the new config"
                    ),
                });
                continue;
            }
            if workload.on_delete {
                reports.push(Action::Reported {
                    subject: Subject::Workload(key.clone()),
                    why: "runs an older Linkerd-CNI config, and its update strategy is OnDelete: a new template would not roll it; delete its pods one at a time".to_string(),
                });
                continue;
            }
            if workload.template_hash.as_deref() == Some(hash.as_str()) {
                // Rolling to this config already (restarted, or rendered): counted, never
                // patched again; one that stalled holds its namespace, not a slot.
                let stalled = self.halted.get(&key.namespace) == Some(key);
                if !workload.progress.complete() && !stalled {
                    self.rolling
                        .entry(key.clone())
                        .or_insert_with(|| (hash.clone(), now));
                }
                continue;
            }
            if self.rolling.get(key).is_some_and(|(h, _)| h == hash) {
                continue;
            }
            candidates.push((key.clone(), hash.clone()));
        }
        if !self.failed.is_empty() {
            let keys: BTreeSet<&Key> = candidates.iter().map(|(key, _)| key).collect();
            self.failed.retain(|key, _| keys.contains(key));
            // Those whose restart failed go last, the one that failed first before the others.
            candidates.sort_by_key(|(key, _)| self.failed.get(key).copied());
        }
        for (key, hash) in candidates {
            if self.rolling.len() >= self.limit {
                break;
            }
            if self.halted.contains_key(&key.namespace) {
                continue;
            }
            self.rolling.insert(key.clone(), (hash.clone(), now));
            actions.push(Action::Restart { key, hash });
        }
        for pod in &stale.naked {
            let evict = pod
                .evict
                .or_else(|| namespace_switch(cluster, &pod.namespace, EVICT_ANNOTATION));
            let reserved = (cluster.reserved)(&pod.namespace);
            if let (Some(true), Some(whose)) = (evict, reserved) {
                reports.push(Action::Reported {
                    subject: Subject::Pod {
                        namespace: pod.namespace.clone(),
                        name: pod.name.clone(),
                    },
                    why: reserved_why(&pod.namespace, whose, "delete it and create it again"),
                });
            } else if evict == Some(true) && !self.halted.contains_key(&pod.namespace) {
                actions.push(Action::Evict {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                });
            } else {
                reports.push(Action::Reported {
                    subject: Subject::Pod {
                        namespace: pod.namespace.clone(),
                        name: pod.name.clone(),
                    },
                    why: format!(
                        "runs an older Linkerd-CNI config and has no controller to restart it: delete it and create it again, or annotate it (or its namespace) {EVICT_ANNOTATION}=enabled for the controller to evict it"
                    ),
                });
            }
        }
        for (subject, owner) in &stale.others {
            reports.push(Action::Reported {
                subject: subject.clone(),
                why: format!(
                    "runs an older Linkerd-CNI config; its owner {owner} is never restarted by linkerd-multus: its next run (a Job) or its own controller starts pods with the new config"
                ),
            });
        }
        actions.extend(reports);
        actions
    }

    /// Ends the rollouts that completed, passed their deadline, or were superseded (their
    /// namespace's NAD holds yet another config, or the workload is gone). A workload whose
    /// template does not show the hash yet (the watch lags the patch) is still rolling.
    fn settle(&mut self, cluster: &Cluster<'_>, now: Instant, actions: &mut Vec<Action>) {
        let mut ended = Vec::new();
        for (key, (hash, since)) in &self.rolling {
            let elapsed = now.saturating_duration_since(*since);
            let current = cluster.nad_hashes.get(&key.namespace);
            let end = match (cluster.workload)(key) {
                None => Some(None),
                Some(_) if current != Some(hash) => Some(None),
                Some(w)
                    if w.template_hash.as_deref() == Some(hash.as_str())
                        && w.progress.complete() =>
                {
                    Some(Some(Action::Completed(key.clone())))
                }
                Some(_) if elapsed > self.deadline => Some(Some(Action::Halted {
                    key: key.clone(),
                    after: elapsed,
                })),
                Some(_) => None,
            };
            if let Some(action) = end {
                ended.push((key.clone(), action));
            }
        }
        for (key, action) in ended {
            self.rolling.remove(&key);
            if let Some(Action::Halted { .. }) = &action {
                self.halted.insert(key.namespace.clone(), key.clone());
            }
            actions.extend(action);
        }
        // A halted namespace resumes once its workload completes, or is gone.
        self.halted
            .retain(|_, key| (cluster.workload)(key).is_some_and(|w| !w.progress.complete()));
    }
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

#[cfg(test)]
#[path = "restarts_tests.rs"]
mod tests;
