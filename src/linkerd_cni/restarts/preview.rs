//! What the restarts would do to a cluster, without doing it: the [`Pacer`] run over the
//! cluster as it is, passes on end, each restart assumed to complete before the next pass (the
//! quickest pacing: a slot frees when a rollout completes, or at the latest when its deadline
//! passes). `linkerd multus preview` runs it over the cluster as a new ConfigMap would leave
//! it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::decide::Decision;
use super::{Action, Cluster, Key, Pacer, Pod, Subject, Workload};

/// What the controller would do, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// The restarts, wave by wave: the first at once, each later one as slots free (a
    /// rollout of the one before completes, or its deadline passes).
    pub waves: Vec<Vec<Key>>,
    /// The naked pods evicted, `namespace/name`, at once.
    pub evictions: Vec<String>,
    /// The workloads and pods left to the user, each with why and the fix.
    pub left: Vec<(Subject, String)>,
    /// The workloads with stale pods that did not opt in (nor their namespace): neither
    /// restarted nor reported.
    pub unopted: Vec<Key>,
}

/// Plans over `cluster` with the controller's `limit` and `deadline` until nothing more is
/// restarted.
pub fn preview(cluster: &Cluster<'_>, limit: usize, deadline: Duration) -> Preview {
    // The workloads of stale pods, copied: each restart rolls its copy.
    let mut workloads: BTreeMap<Key, Workload> = BTreeMap::new();
    (cluster.pods)(&mut |pod: &Pod| {
        let stale = |hash: &String| pod.hash.as_ref().is_some_and(|h| h != hash);
        if let super::Owner::Workload(key) = &pod.owner
            && cluster.nad_hashes.get(&pod.namespace).is_some_and(stale)
            && !workloads.contains_key(key)
            && let Some(w) = (cluster.workload)(key)
        {
            workloads.insert(key.clone(), w.clone());
        }
    });
    let mut rolled: BTreeSet<Key> = BTreeSet::new();
    let mut pacer = Pacer::new(limit, deadline);
    let start = Instant::now();
    let mut preview = Preview::default();
    // Each pass but the first rolls at least one workload, or ends the preview.
    for pass in 0..=workloads.len() as u32 + 1 {
        let actions = {
            let workload = |key: &Key| workloads.get(key);
            let pods = |visit: &mut dyn FnMut(&Pod)| {
                (cluster.pods)(&mut |pod: &Pod| match &pod.owner {
                    super::Owner::Workload(key) if rolled.contains(key) => {}
                    _ => visit(pod),
                })
            };
            let now = Cluster {
                workload: &workload,
                pods: &pods,
                nad_hashes: cluster.nad_hashes,
                namespace_annotation: cluster.namespace_annotation,
                reserved: cluster.reserved,
            };
            pacer.plan(&now, start + Duration::from_secs(pass.into()))
        };
        let mut wave = Vec::new();
        for action in actions {
            match action {
                Action::Restart { key, hash } => {
                    if let Some(w) = workloads.get_mut(&key) {
                        w.template_hash = Some(hash);
                        w.progress.generation += 1;
                    }
                    wave.push(key);
                }
                Action::Evict { namespace, name } if pass == 0 => {
                    preview.evictions.push(format!("{namespace}/{name}"));
                }
                Action::Reported { subject, why } if pass == 0 => preview.left.push((subject, why)),
                _ => {}
            }
        }
        // Each rollout completes before the next pass (those of an earlier leader too): its
        // pods run the new config.
        let rolling: Vec<Key> = pacer.rolling().cloned().collect();
        if rolling.is_empty() {
            break;
        }
        for key in rolling {
            if let Some(w) = workloads.get_mut(&key) {
                let p = &mut w.progress;
                (p.observed_generation, p.updated, p.available) =
                    (p.generation, p.desired, p.desired);
            }
            rolled.insert(key);
        }
        if !wave.is_empty() {
            preview.waves.push(wave);
        }
    }
    // Not opted in: the planner skips them before any other reason.
    preview.unopted = (workloads.keys())
        .filter(|key| super::decide::workload(cluster, key) == Decision::Skip)
        .cloned()
        .collect();
    preview
}

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
