//! Which owners run an older config: the stale pods of a plan, by owner.

use std::collections::BTreeSet;

use super::{Cluster, Key, Owner, Pod, Subject};

/// The owners of the pods that run an older config than their namespace's NAD.
#[derive(Default)]
pub struct Stale {
    /// The workloads of stale pods.
    pub workloads: BTreeSet<Key>,
    /// Stale pods of no controller.
    pub naked: Vec<Pod>,
    /// Stale pods whose owner is never restarted, each with why.
    pub others: Vec<(Subject, String)>,
}

/// The pod as what a report is about.
pub fn subject(pod: &Pod) -> Subject {
    Subject::Pod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    }
}

/// Why a stale pod of an owner that is never restarted is left.
fn never_restarted(owner: &str) -> String {
    format!(
        "runs an older Linkerd-CNI config; its owner {owner} is never restarted by linkerd-multus: its next run (a Job) or its own controller starts pods with the new config"
    )
}

/// Keeps only the owners of stale pods (a set of workloads, the few naked and others'
/// pods), so that a plan over 50,000 pods holds no copy of them.
pub fn stale_owners(cluster: &Cluster<'_>) -> Stale {
    let mut stale = Stale::default();
    (cluster.pods)(&mut |pod: &Pod| {
        let (Some(hash), Some(current)) = (&pod.hash, cluster.nad_hashes.get(&pod.namespace))
        else {
            return;
        };
        if hash == current {
            return;
        }
        match &pod.owner {
            Owner::Workload(key) => {
                if !stale.workloads.contains(key) {
                    stale.workloads.insert(key.clone());
                }
            }
            Owner::Naked => stale.naked.push(pod.clone()),
            Owner::Job(name) => (stale.others).push((subject(pod), never_restarted(&format!("Job {name}")))),
            Owner::Other(owner) => stale.others.push((subject(pod), never_restarted(owner))),
            Owner::Unverified(owner) => stale.others.push((
                subject(pod),
                format!(
                    "runs an older Linkerd-CNI config; its ownerReference names {owner} under another uid than the live {owner}'s: linkerd-multus restarts an owner as the cluster shows it, never as a pod says; delete the pod and create it again if it is yours"
                ),
            )),
        }
    });
    stale
}
