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
    /// Pods and their owners, for those never restarted.
    pub others: Vec<(Subject, String)>,
}

/// The pod as what a report is about.
pub fn subject(pod: &Pod) -> Subject {
    Subject::Pod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    }
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
            Owner::Job(name) => stale.others.push((subject(pod), format!("Job {name}"))),
            Owner::Other(owner) => stale.others.push((subject(pod), owner.clone())),
        }
    });
    stale
}
