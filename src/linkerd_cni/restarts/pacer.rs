//! The pacing of restarts, fair to every namespace.
//!
//! A slot is a restart this pacer started that is still rolling: a workload someone else rolls
//! (rendered with the new hash, or copied into its template) holds none, however long it takes.
//! A namespace holds at most its share of the slots (the limit over the namespaces that want
//! one, at least one), and free slots go to the namespaces in turn, starting after the last
//! one served. A rollout that does not complete by its deadline is stalled: its slot frees and
//! its namespace halts (no restart, no eviction) for as long as one of its stalled rollouts
//! stays incomplete, each stalled workload kept on its own. So a namespace whose rollouts never
//! complete delays another's restart by at most one deadline.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::decide::{self, Decision};
use super::stale::stale_owners;
use super::{Action, Cluster, Key, Subject};

/// The pacing of restarts, kept from one pass to the next.
#[derive(Debug, Clone)]
pub struct Pacer {
    limit: usize,
    deadline: Duration,
    /// The restarts this pacer started, rolling now: the hash each was restarted to, and since
    /// when.
    rolling: BTreeMap<Key, (String, Instant)>,
    /// The rollouts that did not complete by their deadline, each with its hash: their
    /// namespaces are halted while they stay incomplete.
    stalled: BTreeMap<Key, String>,
    /// Restarts that were not carried out ([`Pacer::failed`]), and when.
    failed: BTreeMap<Key, Instant>,
    /// The namespace last given a slot: the next one is served first.
    served: Option<String>,
    /// Whether a plan has run: the first adopts what the controller's field manager restarted.
    planned: bool,
}

impl Pacer {
    /// At most `limit` (at least 1) workloads rolling at once, each for at most `deadline`.
    pub fn new(limit: usize, deadline: Duration) -> Self {
        Pacer {
            limit: limit.max(1),
            deadline,
            rolling: BTreeMap::new(),
            stalled: BTreeMap::new(),
            failed: BTreeMap::new(),
            served: None,
            planned: false,
        }
    }

    /// A restart [`Pacer::plan`] returned was not carried out (its patch failed, or the
    /// leadership ended before it was sent): the workload is not rolling, so it holds no slot
    /// and no deadline runs for it, and a later pass restarts it again, after the workloads
    /// of its namespace whose restart did not fail (a refusal that lasts does not hold up the
    /// others).
    pub fn failed(&mut self, key: &Key, now: Instant) {
        self.rolling.remove(key);
        self.failed.insert(key.clone(), now);
    }

    /// The workloads rolling now, each in a slot.
    pub fn rolling(&self) -> impl Iterator<Item = &Key> {
        self.rolling.keys()
    }

    /// The halted namespaces, each with its stalled rollouts.
    pub fn halted(&self) -> BTreeMap<&str, Vec<&Key>> {
        let mut halted: BTreeMap<&str, Vec<&Key>> = BTreeMap::new();
        for key in self.stalled.keys() {
            halted.entry(&key.namespace).or_default().push(key);
        }
        halted
    }

    /// When the first rollout in a slot reaches its deadline: a plan then frees its slot.
    pub fn next_deadline(&self) -> Option<Instant> {
        let since = self.rolling.values().map(|(_, since)| *since).min()?;
        Some(since + self.deadline)
    }

    /// One pass over `cluster` at `now`: what to do, in order (completions and halts, then
    /// restarts and evictions, then reports). The caller carries out the restarts and
    /// evictions; one that fails is retried by a later pass, the hash comparison deciding
    /// again (a restart that failed is told with [`Pacer::failed`]).
    pub fn plan(&mut self, cluster: &Cluster<'_>, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        let stale = stale_owners(cluster);
        self.settle(cluster, now, &mut actions);
        let first = !std::mem::replace(&mut self.planned, true);
        let mut reports = Vec::new();
        let mut candidates = Vec::new();
        for key in &stale.workloads {
            match decide::workload(cluster, key) {
                Decision::Skip => {}
                Decision::Report(why) => reports.push(Action::Reported {
                    subject: Subject::Workload(key.clone()),
                    why,
                }),
                // Rolling to this config already: never patched again. A restart of an
                // earlier leader (the controller's field manager wrote the hash) is counted
                // at the first pass, as if this pacer had started it.
                Decision::Current {
                    hash,
                    ours,
                    complete,
                } => {
                    if first && ours && !complete && !self.stalled.contains_key(key) {
                        self.rolling.entry(key.clone()).or_insert((hash, now));
                    }
                }
                Decision::Restart(hash) => {
                    if self.rolling.get(key).is_none_or(|(h, _)| *h != hash) {
                        candidates.push((key.clone(), hash));
                    }
                }
            }
        }
        let keys: BTreeSet<&Key> = candidates.iter().map(|(key, _)| key).collect();
        self.failed.retain(|key, _| keys.contains(key));
        self.fill(candidates, now, &mut actions);
        let halted = self.halted();
        for pod in &stale.naked {
            let halted = halted.contains_key(pod.namespace.as_str());
            match decide::naked(cluster, pod, halted) {
                Some(report @ Action::Reported { .. }) => reports.push(report),
                Some(action) => actions.push(action),
                None => {}
            }
        }
        for (subject, why) in stale.others {
            reports.push(Action::Reported { subject, why });
        }
        actions.extend(reports);
        actions
    }

    /// Gives the free slots to `candidates` (in key order), the namespaces in turn after the
    /// last one served, each up to its share; none in a halted namespace. Within a namespace
    /// those whose restart failed go last, the one that failed first before the others.
    fn fill(&mut self, candidates: Vec<(Key, String)>, now: Instant, actions: &mut Vec<Action>) {
        let halted: BTreeSet<String> = self.stalled.keys().map(|k| k.namespace.clone()).collect();
        let mut queues: BTreeMap<String, Vec<(Key, String)>> = BTreeMap::new();
        for (key, hash) in candidates {
            if !halted.contains(&key.namespace) {
                queues
                    .entry(key.namespace.clone())
                    .or_default()
                    .push((key, hash));
            }
        }
        let mut queues: BTreeMap<String, VecDeque<(Key, String)>> = queues
            .into_iter()
            .map(|(namespace, mut queue)| {
                queue.sort_by_key(|(key, _)| self.failed.get(key).copied());
                (namespace, queue.into())
            })
            .collect();
        let mut holding: BTreeMap<String, usize> = BTreeMap::new();
        for key in self.rolling.keys() {
            *holding.entry(key.namespace.clone()).or_default() += 1;
        }
        let wanting: BTreeSet<&String> = queues.keys().chain(holding.keys()).collect();
        let share = self.limit.div_ceil(wanting.len().max(1)).max(1);
        // The namespaces after the last one served first, then from the start.
        let (after, before): (Vec<String>, Vec<String>) = (queues.keys().cloned())
            .partition(|ns| self.served.as_ref().is_some_and(|served| ns > served));
        let order: Vec<String> = after.into_iter().chain(before).collect();
        loop {
            let mut served = false;
            for namespace in &order {
                if self.rolling.len() >= self.limit {
                    return;
                }
                let held = holding.entry(namespace.clone()).or_default();
                if *held >= share {
                    continue;
                }
                let Some((key, hash)) = queues.get_mut(namespace).and_then(VecDeque::pop_front)
                else {
                    continue;
                };
                *held += 1;
                served = true;
                self.served = Some(namespace.clone());
                self.rolling.insert(key.clone(), (hash.clone(), now));
                actions.push(Action::Restart { key, hash });
            }
            if !served {
                return;
            }
        }
    }

    /// Ends the rollouts that completed, passed their deadline (stalled), or were superseded
    /// (their namespace's NAD holds yet another config, or the workload is gone). A workload
    /// whose template does not show the hash yet (the watch lags the patch) is still rolling.
    /// A stalled rollout is forgotten once it completes, is gone or superseded.
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
                Some(_) if elapsed >= self.deadline => Some(Some(Action::Halted {
                    key: key.clone(),
                    after: elapsed,
                })),
                Some(_) => None,
            };
            if let Some(action) = end {
                ended.push((key.clone(), hash.clone(), action));
            }
        }
        for (key, hash, action) in ended {
            self.rolling.remove(&key);
            if let Some(Action::Halted { .. }) = &action {
                self.stalled.insert(key, hash);
            }
            actions.extend(action);
        }
        self.stalled.retain(|key, hash| {
            cluster.nad_hashes.get(&key.namespace) == Some(hash)
                && (cluster.workload)(key).is_some_and(|w| !w.progress.complete())
        });
    }
}

#[cfg(test)]
#[path = "pacer_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fairness_tests.rs"]
mod fairness_tests;
