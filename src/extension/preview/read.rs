//! What the preview reads of the live cluster, read-only, each kind listed once in pages:
//! the Namespaces and the Linkerd-CNI NADs, the Deployments, StatefulSets and DaemonSets as
//! the controller's watches reduce them, and ReplicaSets and pods as metadata (their uid,
//! controller reference, and a pod's config hash and eviction opt-out).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::Client;
use kube::api::ListParams;
use kube::core::ObjectMeta;
use serde::Deserialize;

use crate::extension::check::cni;
use crate::extension::check::snapshot::{self, Meta, Nad, ReadError, list_pages};
use crate::k8s::namespace::switch;
use crate::linkerd_cni::restarts::{
    ControllerRef, EVICT_ANNOTATION, HASH_ANNOTATION, Key, Live, Pod, ReplicaSetOf, Workload, owner,
};

/// A controller reference: kind, name, uid.
type Reference = (String, String, String);

/// A pod that carries a config hash.
pub struct HashedPod {
    pub namespace: String,
    pub name: String,
    pub controller: Option<Reference>,
    pub hash: String,
    pub evict: Option<bool>,
}

/// The live cluster, as the preview reads it.
#[derive(Default)]
pub struct Snapshot {
    /// Every Namespace's metadata.
    pub namespaces: Vec<Meta>,
    /// The NADs of the Linkerd-CNI name, by namespace (none without the CRD).
    pub nads: BTreeMap<String, Nad>,
    /// The workloads the controller restarts.
    pub workloads: BTreeMap<Key, Workload>,
    /// The ReplicaSets, by namespace and name: uid and controller.
    pub replica_sets: BTreeMap<(String, String), (String, Option<Reference>)>,
    /// The pods that carry a config hash, not being deleted.
    pub pods: Vec<HashedPod>,
}

#[derive(Deserialize)]
struct WithMeta {
    #[serde(default)]
    metadata: ObjectMeta,
}

fn controller(meta: &ObjectMeta) -> Option<Reference> {
    let r = (meta.owner_references.iter().flatten()).find(|r| r.controller == Some(true))?;
    Some((r.kind.clone(), r.name.clone(), r.uid.clone()))
}

fn borrowed(r: &Reference) -> ControllerRef<'_> {
    ControllerRef {
        kind: &r.0,
        name: &r.1,
        uid: &r.2,
    }
}

impl Snapshot {
    /// Reads it, with `namespaces` read before; `nad_name` is the Linkerd-CNI NAD's name.
    pub async fn read(
        client: &Client,
        namespaces: Vec<Meta>,
        nad_name: &str,
    ) -> Result<Snapshot, (String, ReadError)> {
        let at = |what: &str| {
            let what = what.to_string();
            move |e| (what, e)
        };
        let mut s = Snapshot {
            namespaces,
            ..Snapshot::default()
        };
        let nads = "NetworkAttachmentDefinitions";
        if cni::crd_served(client).await.map_err(at(nads))? {
            s.nads = snapshot::nads(client, nad_name).await.map_err(at(nads))?;
        }
        let all = ListParams::default;
        let workloads = &mut s.workloads;
        let mut keep = |w: Option<Workload>| {
            if let Some(w) = w {
                workloads.insert(w.key.clone(), w);
            }
        };
        let path = "/apis/apps/v1/deployments";
        list_pages(client, path, all(), false, |d: Deployment| {
            keep(Workload::of_deployment(&d))
        })
        .await
        .map_err(at("Deployments"))?;
        let path = "/apis/apps/v1/statefulsets";
        list_pages(client, path, all(), false, |d: StatefulSet| {
            keep(Workload::of_stateful_set(&d))
        })
        .await
        .map_err(at("StatefulSets"))?;
        let path = "/apis/apps/v1/daemonsets";
        list_pages(client, path, all(), false, |d: DaemonSet| {
            keep(Workload::of_daemon_set(&d))
        })
        .await
        .map_err(at("DaemonSets"))?;
        let replica_sets = &mut s.replica_sets;
        let path = "/apis/apps/v1/replicasets";
        list_pages(client, path, all(), true, |rs: WithMeta| {
            let m = rs.metadata;
            let key = (m.namespace.clone().unwrap_or_default(), m.name.clone());
            let key = (key.0, key.1.unwrap_or_default());
            replica_sets.insert(key, (m.uid.clone().unwrap_or_default(), controller(&m)));
        })
        .await
        .map_err(at("ReplicaSets"))?;
        let pods = &mut s.pods;
        list_pages(client, "/api/v1/pods", all(), true, |p: WithMeta| {
            let m = p.metadata;
            let annotations = m.annotations.clone().unwrap_or_default();
            let Some(hash) = annotations.get(HASH_ANNOTATION) else {
                return;
            };
            if m.deletion_timestamp.is_some() {
                return;
            }
            pods.push(HashedPod {
                namespace: m.namespace.clone().unwrap_or_default(),
                name: m.name.clone().unwrap_or_default(),
                controller: controller(&m),
                hash: hash.clone(),
                evict: annotations.get(EVICT_ANNOTATION).and_then(|v| switch(v)),
            });
        })
        .await
        .map_err(at("Pods"))?;
        Ok(s)
    }

    /// A pod as the planner reads it: its owner checked against the live objects.
    pub fn pod(&self, pod: &HashedPod) -> Pod {
        let namespace = pod.namespace.as_str();
        let replica_set = |name: &str| {
            let (uid, controller) = self
                .replica_sets
                .get(&(namespace.to_string(), name.to_string()))?;
            Some(ReplicaSetOf {
                uid,
                controller: controller.as_ref().map(borrowed),
            })
        };
        let workload_uid = |key: &Key| self.workloads.get(key).map(|w| w.uid.as_str());
        let live = Live {
            replica_set: &replica_set,
            workload_uid: &workload_uid,
        };
        Pod {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            owner: owner::owner(namespace, pod.controller.as_ref().map(borrowed), &live),
            hash: Some(pod.hash.clone()),
            evict: pod.evict,
        }
    }
}
