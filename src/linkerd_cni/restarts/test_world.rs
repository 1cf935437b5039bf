//! The cluster of the planner's tests: workloads and pods as the watches would hold them, and
//! what a patch and a completed rollout do to them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Action, Cluster, Key, Kind, Owner, Pacer, Pod, Preview, Progress, Workload};

pub const OLD: &str = "0123456789abcdef";
pub const NEW: &str = "fedcba9876543210";
pub const MINUTE: Duration = Duration::from_secs(60);

pub fn key(kind: Kind, namespace: &str, name: &str) -> Key {
    Key {
        kind,
        namespace: namespace.into(),
        name: name.into(),
    }
}

pub fn deployment(namespace: &str, name: &str) -> Key {
    key(Kind::Deployment, namespace, name)
}

/// A workload at rest: its rollout of `template_hash` complete.
pub fn workload(key: &Key, opted_in: Option<bool>, template_hash: Option<&str>) -> Workload {
    Workload {
        key: key.clone(),
        uid: format!("uid-{}", key.name),
        opted_in,
        template_hash: template_hash.map(str::to_string),
        holder: None,
        ours: false,
        on_delete: false,
        progress: Progress {
            generation: 1,
            observed_generation: 1,
            desired: 2,
            updated: 2,
            available: 2,
        },
    }
}

pub fn pod(namespace: &str, name: &str, owner: Owner, hash: &str) -> Pod {
    Pod {
        namespace: namespace.into(),
        name: name.into(),
        owner,
        hash: Some(hash.into()),
        evict: None,
    }
}

/// An opted-in workload at rest on the old config, with one pod of it.
pub fn stale(key: &Key) -> (Workload, Pod) {
    let pod = pod(
        &key.namespace,
        &format!("{}-1", key.name),
        Owner::Workload(key.clone()),
        OLD,
    );
    (workload(key, Some(true), None), pod)
}

/// The cluster of a case: its workloads and pods, every namespace's NAD at [`NEW`], and the
/// namespaces' annotations.
pub struct World {
    pub workloads: BTreeMap<Key, Workload>,
    pub pods: Vec<Pod>,
    pub nad_hashes: BTreeMap<String, String>,
    pub namespaces: BTreeMap<(String, String), String>,
}

impl World {
    pub fn new(workloads: Vec<Workload>, pods: Vec<Pod>) -> Self {
        let mut nad_hashes = BTreeMap::new();
        for w in &workloads {
            nad_hashes.insert(w.key.namespace.clone(), NEW.to_string());
        }
        for p in &pods {
            nad_hashes.insert(p.namespace.clone(), NEW.to_string());
        }
        World {
            workloads: workloads.into_iter().map(|w| (w.key.clone(), w)).collect(),
            pods,
            nad_hashes,
            namespaces: BTreeMap::new(),
        }
    }

    /// Opted-in workloads at rest on the old config, one pod each.
    pub fn stale(keys: &[&Key]) -> Self {
        let (workloads, pods) = keys.iter().map(|k| stale(k)).unzip();
        World::new(workloads, pods)
    }

    pub fn annotate(mut self, namespace: &str, key: &str, value: &str) -> Self {
        self.namespaces
            .insert((namespace.into(), key.into()), value.into());
        self
    }

    /// Runs `f` over the cluster as the controller's watches would show it.
    fn with_cluster<T>(&self, f: impl FnOnce(&Cluster<'_>) -> T) -> T {
        let lookup = |ns: &str, key: &str| self.namespaces.get(&(ns.into(), key.into())).cloned();
        let pods = |visit: &mut dyn FnMut(&Pod)| self.pods.iter().for_each(visit);
        let cluster = Cluster {
            workload: &|key| self.workloads.get(key),
            pods: &pods,
            nad_hashes: &self.nad_hashes,
            namespace_annotation: &lookup,
            reserved: &|ns| crate::k8s::reserved::reserved(ns, "linkerd", "linkerd-cni"),
        };
        f(&cluster)
    }

    pub fn plan(&self, pacer: &mut Pacer, now: Instant) -> Vec<Action> {
        self.with_cluster(|cluster| pacer.plan(cluster, now))
    }

    pub fn preview(&self, limit: usize) -> Preview {
        self.with_cluster(|cluster| super::preview(cluster, limit, MINUTE))
    }

    /// What a patch of `key`'s template does, as the API server and the workload's
    /// controller see it: the template carries `hash`, a new generation not yet observed.
    pub fn patched(&mut self, key: &Key, hash: &str) {
        let w = self.workloads.get_mut(key).unwrap();
        w.template_hash = Some(hash.into());
        w.progress.generation += 1;
        w.progress.updated = 0;
    }

    /// The rollout of `key` completes: its pods are replaced by pods of `hash`.
    pub fn rolled(&mut self, key: &Key, hash: &str) {
        let w = self.workloads.get_mut(key).unwrap();
        w.progress.observed_generation = w.progress.generation;
        w.progress.updated = w.progress.desired;
        for pod in &mut self.pods {
            if pod.owner == Owner::Workload(key.clone()) {
                pod.hash = Some(hash.into());
            }
        }
    }

    /// Carries out the restarts of `actions` (their patches, not their rollouts); returns them.
    pub fn restart(&mut self, actions: &[Action]) -> Vec<Key> {
        let keys: Vec<Key> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Restart { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect();
        for key in &keys {
            self.patched(key, NEW);
        }
        keys
    }
}

pub fn restarts(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Restart { key, hash } => Some(format!("{key} -> {hash}")),
            _ => None,
        })
        .collect()
}

pub fn reported(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reported { subject, .. } => Some(subject.to_string()),
            _ => None,
        })
        .collect()
}
