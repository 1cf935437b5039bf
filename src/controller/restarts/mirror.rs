//! What the restarts' watches keep, each object reduced on arrival to what the decision
//! reads: pods as metadata (only those carrying a config hash, and of them the controller
//! reference with its uid, the hash and the eviction opt-out), ReplicaSets as metadata (their
//! uid and their Deployment's reference), and Deployments, StatefulSets and DaemonSets as the
//! planner's [`Workload`] (their uid, pod template annotations, who holds the template from
//! their managedFields, strategy and rollout status).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::k8s::namespace;
use crate::linkerd_cni::restarts::owner::owner;
use crate::linkerd_cni::restarts::{
    ControllerRef, EVICT_ANNOTATION, HASH_ANNOTATION, Key, Kind, Live, Owner, ReplicaSetOf,
    Workload,
};

/// Objects by namespace, then name: each namespace's name is kept once, and a lookup by
/// `(&str, &str)` allocates nothing.
type ByNamespace<V> = HashMap<Box<str>, HashMap<Box<str>, V>>;

/// A controller reference as kept: kind, name and uid, each [`Interned`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub kind: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
}

impl Reference {
    fn borrowed(&self) -> ControllerRef<'_> {
        ControllerRef {
            kind: &self.kind,
            name: &self.name,
            uid: &self.uid,
        }
    }
}

/// A pod that carries a config hash, as kept. The strings many pods share (the hash, the
/// owner's kind, name and uid) are [`Interned`]: at 50,000 pods a pod costs its name and a few
/// pointers.
#[derive(Debug, Clone)]
pub struct PodEntry {
    /// Its controller.
    pub owner: Option<Reference>,
    pub hash: Arc<str>,
    pub evict: Option<bool>,
}

/// A ReplicaSet as kept: its uid, and its controller.
#[derive(Debug, Clone)]
pub struct ReplicaSetEntry {
    pub uid: Arc<str>,
    pub controller: Option<Reference>,
}

/// Strings kept once however many objects hold them.
#[derive(Default)]
pub struct Interned(pub HashSet<Arc<str>>);

impl Interned {
    /// The one copy of `text`.
    pub fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(kept) = self.0.get(text) {
            return kept.clone();
        }
        let kept: Arc<str> = Arc::from(text);
        self.0.insert(kept.clone());
        kept
    }

    /// Forgets the strings no object holds any more (an old ReplicaSet's name, an old hash).
    pub fn prune(&mut self) {
        self.0.retain(|kept| Arc::strong_count(kept) > 1);
    }
}

/// The objects of one watch, reduced to what the decision reads; rebuilt whole on each list.
pub struct Mirror<V> {
    pub objects: ByNamespace<V>,
    next: Option<ByNamespace<V>>,
    pub listed: bool,
    pub interned: Interned,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Mirror {
            objects: HashMap::new(),
            next: None,
            listed: false,
            interned: Interned::default(),
        }
    }
}

impl<V> Mirror<V> {
    /// Applies a watch event, `read` reducing an object (`None`: not kept).
    pub fn apply<K: Resource>(
        &mut self,
        event: watcher::Event<K>,
        read: fn(&K, &mut Interned) -> Option<V>,
    ) {
        let name = |k: &K| (k.namespace().unwrap_or_default(), k.name_any());
        match event {
            watcher::Event::Init => self.next = Some(HashMap::new()),
            watcher::Event::InitApply(k) => {
                if let (Some(next), Some(v)) = (&mut self.next, read(&k, &mut self.interned)) {
                    let (namespace, name) = name(&k);
                    insert(next, namespace, name, v);
                }
            }
            watcher::Event::InitDone => {
                if let Some(next) = self.next.take() {
                    self.objects = next;
                }
                self.interned.prune();
                self.listed = true;
            }
            watcher::Event::Apply(k) => {
                let (namespace, name) = name(&k);
                match read(&k, &mut self.interned) {
                    Some(v) => insert(&mut self.objects, namespace, name, v),
                    None => self.remove(&namespace, &name),
                }
            }
            watcher::Event::Delete(k) => {
                let (namespace, name) = name(&k);
                self.remove(&namespace, &name);
            }
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<&V> {
        self.objects.get(namespace)?.get(name)
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(names) = self.objects.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.objects.remove(namespace);
            }
        }
    }

    /// Every object, with its namespace and name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &V)> {
        (self.objects.iter())
            .flat_map(|(ns, names)| names.iter().map(move |(name, v)| (&**ns, &**name, v)))
    }
}

fn insert<V>(objects: &mut ByNamespace<V>, namespace: String, name: String, v: V) {
    (objects.entry(namespace.into_boxed_str()).or_default()).insert(name.into_boxed_str(), v);
}

/// What the watches hold, one mirror per watch.
#[derive(Default)]
pub struct Watched {
    pub deployments: Mirror<Workload>,
    pub stateful_sets: Mirror<Workload>,
    pub daemon_sets: Mirror<Workload>,
    pub replica_sets: Mirror<ReplicaSetEntry>,
    pub pods: Mirror<PodEntry>,
}

impl Watched {
    /// Whether every watch has listed once.
    pub fn listed(&self) -> bool {
        self.deployments.listed
            && self.stateful_sets.listed
            && self.daemon_sets.listed
            && self.replica_sets.listed
            && self.pods.listed
    }

    /// The workload of `key`, if its watch holds it.
    pub fn workload(&self, key: &Key) -> Option<&Workload> {
        let mirror = match key.kind {
            Kind::Deployment => &self.deployments,
            Kind::StatefulSet => &self.stateful_sets,
            Kind::DaemonSet => &self.daemon_sets,
        };
        mirror.get(&key.namespace, &key.name)
    }

    /// The owner of a pod of `namespace`, checked against the live objects: its ReplicaSet
    /// resolved to its Deployment, each under the uid the reference names.
    pub fn owner(&self, namespace: &str, pod: &PodEntry) -> Owner {
        let replica_set = |name: &str| {
            let rs = self.replica_sets.get(namespace, name)?;
            Some(ReplicaSetOf {
                uid: &rs.uid,
                controller: rs.controller.as_ref().map(Reference::borrowed),
            })
        };
        let workload_uid = |key: &Key| self.workload(key).map(|w| w.uid.as_str());
        let live = Live {
            replica_set: &replica_set,
            workload_uid: &workload_uid,
        };
        owner(
            namespace,
            pod.owner.as_ref().map(Reference::borrowed),
            &live,
        )
    }
}

/// The controller reference of an object, interned.
fn controller_of(meta: &kube::core::ObjectMeta, interned: &mut Interned) -> Option<Reference> {
    let r = (meta.owner_references.iter().flatten()).find(|r| r.controller == Some(true))?;
    Some(Reference {
        kind: interned.get(&r.kind),
        name: interned.get(&r.name),
        uid: interned.get(&r.uid),
    })
}

/// An `enabled`/`disabled` annotation.
fn switch(annotations: Option<&BTreeMap<String, String>>, key: &str) -> Option<bool> {
    namespace::switch(annotations?.get(key)?)
}

/// A pod that carries a config hash, unless it is being deleted: it goes anyway (an evicted
/// pod terminates for its grace period), and is neither evicted again nor reported.
pub fn read_pod(pod: &PartialObjectMeta<Pod>, interned: &mut Interned) -> Option<PodEntry> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let annotations = pod.metadata.annotations.as_ref();
    Some(PodEntry {
        hash: interned.get(annotations?.get(HASH_ANNOTATION)?),
        owner: controller_of(&pod.metadata, interned),
        evict: switch(annotations, EVICT_ANNOTATION),
    })
}

/// A ReplicaSet: its uid and controller.
pub fn read_replica_set(
    rs: &PartialObjectMeta<ReplicaSet>,
    interned: &mut Interned,
) -> Option<ReplicaSetEntry> {
    Some(ReplicaSetEntry {
        uid: interned.get(rs.metadata.uid.as_deref().unwrap_or_default()),
        controller: controller_of(&rs.metadata, interned),
    })
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
