//! A Deployment's readiness and, when it is not ready, why: read from what
//! its controllers and the kubelet wrote. The Deployment's generation and
//! conditions, its ReplicaSets' conditions (a pod refused: an SCC, Pod
//! Security, a quota, their message), its pods' status (an image not
//! pulled, a container crashing, a pod not scheduled) and the recent
//! Warning Events of them all; or that no controller has acted on it. The
//! most telling reason is given, in one line, with what to do.
//!
//! What it reads is bounded: the ReplicaSets and pods of the Deployment's
//! label selector, one page of at most [`REPLICA_SETS_READ`] and
//! [`PODS_READ`]; the Warning Events of the Deployment and [`WITH_EVENTS`]
//! of its ReplicaSets and of its pods not ready, [`EVENTS_READ`] each, read
//! only when the statuses tell nothing better. Every call has the deadline of
//! [`super::snapshot::call`].

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::core::Selector;
use kube::{Api, Client};

use super::snapshot::call;

/// The ReplicaSets read of a Deployment at most.
pub const REPLICA_SETS_READ: u32 = 50;
/// The pods read of a Deployment at most.
pub const PODS_READ: u32 = 100;
/// The Warning Events read of one object at most.
pub const EVENTS_READ: u32 = 50;
/// How many of its ReplicaSets (the current first), and of its pods not
/// ready, have their Events read at most.
pub const WITH_EVENTS: usize = 3;

/// The label the Deployment controller adds to the pod template of each
/// ReplicaSet it makes.
const TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Whether the Deployment is ready: every replica it asks for ready, in its
/// current generation.
pub fn ready(deployment: &Deployment) -> Result<(), String> {
    let want = deployment.spec.replicas.unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let ready = status.ready_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    if want == 0 {
        return Err("scaled to 0 replicas: no replica answers the API server".into());
    }
    if status.observed_generation < deployment.metadata.generation {
        return Err("its latest change is not rolled out yet".into());
    }
    if ready < want || updated < want {
        return Err(format!(
            "{ready} of {want} replicas ready ({updated} up to date)"
        ));
    }
    Ok(())
}

/// Why a Deployment is not ready, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    /// The reason, in one line, naming the object it was read from.
    pub reason: String,
    /// What to do: the command that shows more, or the fix.
    pub hint: String,
}

/// What is read of a Deployment's objects.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Its ReplicaSets (those it controls).
    pub replica_sets: Vec<ReplicaSet>,
    /// Their pods.
    pub pods: Vec<Pod>,
    /// The Warning Events of the Deployment, its ReplicaSets and pods.
    pub events: Vec<Event>,
}

/// How telling a reason is: the first is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// No controller has acted on the Deployment or its ReplicaSet.
    NoController,
    /// A ReplicaSet's pods are refused.
    CannotCreate,
    /// A container cannot start: its image, a crash, its configuration.
    Container,
    /// A pod is not scheduled, the scheduler says why.
    Unschedulable,
    /// A Warning Event.
    Event,
    /// The Deployment's own conditions.
    Condition,
    /// A container runs, not ready.
    NotReady,
    /// A pod no scheduler has acted on.
    Unscheduled,
}

/// Why `deployment` is not ready, from its objects read now; `None` when
/// nothing tells (it is ready, or scaled to 0, or nothing was found wrong).
pub async fn why(client: &Client, deployment: &Deployment) -> Option<Why> {
    if ready(deployment).is_ok() || deployment.spec.replicas == Some(0) {
        return None;
    }
    let namespace = deployment.metadata.namespace.as_deref().unwrap_or_default();
    let selector = Selector::try_from(deployment.spec.selector.clone()).ok();
    let cannot_tell = |what: &str, e: &dyn std::fmt::Display| Why {
        reason: format!("cannot tell why: cannot list {what}: {e}"),
        hint: format!(
            "check your rights: kubectl -n {namespace} auth can-i list {}",
            what.to_lowercase()
        ),
    };
    let mut seen = Seen::default();
    if let Some(selector) = &selector {
        let params = |limit| ListParams::default().labels_from(selector).limit(limit);
        let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
        match call(api.list(&params(REPLICA_SETS_READ))).await {
            Ok(list) => seen.replica_sets = controlled_by(list.items, &deployment.metadata),
            Err(e) => return Some(cannot_tell("ReplicaSets", &e)),
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        match call(api.list(&params(PODS_READ))).await {
            Ok(list) => {
                seen.pods = list
                    .items
                    .into_iter()
                    .filter(|p| {
                        seen.replica_sets
                            .iter()
                            .any(|rs| controls(&rs.metadata, &p.metadata))
                    })
                    .collect();
            }
            Err(e) => return Some(cannot_tell("Pods", &e)),
        }
    }
    let from_status = reasons(deployment, &seen);
    if let Some((rank, why)) = from_status.first()
        && *rank < Rank::Event
    {
        return Some(why.clone());
    }
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let read = |uid: String| {
        let api = api.clone();
        async move {
            let fields = format!("involvedObject.uid={uid},type=Warning");
            let params = ListParams::default().fields(&fields).limit(EVENTS_READ);
            call(api.list(&params)).await.map(|l| l.items)
        }
    };
    let uids = event_sources(deployment, &seen);
    let mut failed = None;
    for answer in futures_util::future::join_all(uids.into_iter().map(read)).await {
        match answer {
            Ok(events) => seen.events.extend(events),
            Err(e) => failed = Some(e),
        }
    }
    match (reasons(deployment, &seen).into_iter().next(), failed) {
        (Some((_, why)), _) => Some(why),
        (None, Some(e)) => Some(cannot_tell("Events", &e)),
        (None, None) => None,
    }
}

/// Why `deployment` is not ready, from what was read of it: the most
/// telling reason first; `None` when nothing tells.
pub fn explain(deployment: &Deployment, seen: &Seen) -> Option<Why> {
    reasons(deployment, seen)
        .into_iter()
        .next()
        .map(|(_, why)| why)
}

/// The objects whose Events are read: the Deployment, its ReplicaSets
/// (the current first) and its pods not ready, [`WITH_EVENTS`] of each.
fn event_sources(deployment: &Deployment, seen: &Seen) -> Vec<String> {
    let current = current(deployment, &seen.replica_sets);
    let replica_sets = ordered_replica_sets(&seen.replica_sets, current);
    let pods = ordered_pods(&seen.pods, current);
    let mut uids = BTreeSet::new();
    std::iter::once(&deployment.metadata)
        .chain(replica_sets.iter().map(|rs| &rs.metadata).take(WITH_EVENTS))
        .chain(
            pods.iter()
                .filter(|p| !pod_ready(p))
                .map(|p| &p.metadata)
                .take(WITH_EVENTS),
        )
        .filter_map(|m| m.uid.clone())
        .filter(|uid| uids.insert(uid.clone()))
        .collect()
}

/// Every reason found, the most telling first (the first object's among equals).
fn reasons(deployment: &Deployment, seen: &Seen) -> Vec<(Rank, Why)> {
    let namespace = deployment.metadata.namespace.as_deref().unwrap_or_default();
    let name = deployment.metadata.name.as_deref().unwrap_or_default();
    let current = current(deployment, &seen.replica_sets);
    let replica_sets = ordered_replica_sets(&seen.replica_sets, current);
    let pods = ordered_pods(&seen.pods, current);
    let mut found = Vec::new();
    let controller_hint = "check that kube-controller-manager runs and reaches the API server (kubeadm: kubectl -n kube-system get pods -l component=kube-controller-manager)";

    let generation = deployment.metadata.generation.unwrap_or(0);
    let status = deployment.status.clone().unwrap_or_default();
    if current.is_none() && status.observed_generation.unwrap_or(0) < generation {
        let reason = match status.observed_generation {
            None => "no controller has acted on it: it has no status and no ReplicaSet".to_string(),
            Some(observed) => format!(
                "no controller has acted on its latest change: its status is of generation {observed}, not {generation}, and no ReplicaSet has its pod template"
            ),
        };
        found.push((Rank::NoController, Why::new(reason, controller_hint)));
    }

    for rs in &replica_sets {
        let rs_name = rs.metadata.name.as_deref().unwrap_or_default();
        let conditions = rs.status.iter().flat_map(|s| s.conditions.iter().flatten());
        for c in conditions.filter(|c| {
            c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
        }) {
            let reason = format!(
                "ReplicaSet {namespace}/{rs_name} cannot create pods{}",
                because(c.reason.as_deref(), c.message.as_deref())
            );
            let hint = format!(
                "kubectl -n {namespace} describe replicaset {rs_name} (the message names what refuses the pods: a SecurityContextConstraints, Pod Security, a ResourceQuota, a webhook)"
            );
            found.push((Rank::CannotCreate, Why::new(reason, hint)));
        }
        let observed = rs.status.as_ref().and_then(|s| s.observed_generation);
        let has_pods = pods.iter().any(|p| controls(&rs.metadata, &p.metadata));
        if current.is_some_and(|c| std::ptr::eq(c, *rs))
            && !has_pods
            && observed.unwrap_or(0) < rs.metadata.generation.unwrap_or(0)
        {
            let reason = format!(
                "no controller has acted on ReplicaSet {namespace}/{rs_name}: it has no pods and its status is not of its generation"
            );
            found.push((Rank::NoController, Why::new(reason, controller_hint)));
        }
    }

    // A pod being deleted is on its way out: the others tell why none is ready.
    let waited_on = pods
        .iter()
        .filter(|p| !pod_ready(p) && p.metadata.deletion_timestamp.is_none());
    for pod in waited_on {
        found.extend(pod_reasons(namespace, pod));
    }

    if let Some(event) = latest(&seen.events) {
        let object = &event.involved_object;
        let kind = object.kind.as_deref().unwrap_or("object");
        let object_name = object.name.as_deref().unwrap_or_default();
        let reason = format!(
            "{kind} {namespace}/{object_name}: {}{}",
            event.reason.as_deref().unwrap_or("Warning"),
            event
                .message
                .as_deref()
                .map(|m| format!(": {}", one_line(m)))
                .unwrap_or_default()
        );
        let hint = format!(
            "kubectl -n {namespace} describe {} {object_name}",
            kind.to_lowercase()
        );
        found.push((Rank::Event, Why::new(reason, hint)));
    }

    let describe = format!("kubectl -n {namespace} describe deployment {name}");
    for c in status.conditions.iter().flatten() {
        let text = match (c.type_.as_deref(), c.status.as_deref()) {
            (Some("ReplicaFailure"), Some("True")) => "it cannot create pods",
            (Some("Progressing"), Some("False")) => "its rollout stopped progressing",
            _ => continue,
        };
        let reason = format!(
            "{text}{}",
            because(c.reason.as_deref(), c.message.as_deref())
        );
        found.push((Rank::Condition, Why::new(reason, describe.clone())));
    }

    found.sort_by_key(|(rank, _)| *rank);
    found
}

impl Why {
    fn new(reason: impl Into<String>, hint: impl Into<String>) -> Self {
        Why {
            reason: reason.into(),
            hint: hint.into(),
        }
    }
}

/// ` (Reason): message`, of what is given.
fn because(reason: Option<&str>, message: Option<&str>) -> String {
    let reason = reason.filter(|r| !r.is_empty());
    let message = message.map(one_line).filter(|m| !m.is_empty());
    match (reason, message) {
        (Some(r), Some(m)) => format!(" ({r}): {m}"),
        (Some(r), None) => format!(" ({r})"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

/// A message on one line: its lines joined, each trimmed.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a pod's status tells, each reason with its rank.
fn pod_reasons(namespace: &str, pod: &Pod) -> Vec<(Rank, Why)> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let at = format!("Pod {namespace}/{name}");
    let describe = format!("kubectl -n {namespace} describe pod {name}");
    let status = pod.status.clone().unwrap_or_default();
    let mut found = Vec::new();
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for c in containers {
        if let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.as_deref().unwrap_or_default();
            let message = waiting.message.as_deref();
            let container = &c.name;
            match reason {
                "" | "ContainerCreating" | "PodInitializing" => {}
                "ErrImagePull"
                | "ImagePullBackOff"
                | "InvalidImageName"
                | "ErrImageNeverPull"
                | "RegistryUnavailable"
                | "SignatureValidationFailed" => {
                    // The message names the image, when there is one.
                    let image = match message.is_some_and(|m| !m.trim().is_empty()) {
                        true => String::new(),
                        false => format!(" {}", c.image),
                    };
                    let text = format!(
                        "{at}: container {container} cannot pull its image{image}{}",
                        because(Some(reason), message)
                    );
                    found.push((Rank::Container, Why::new(text, describe.clone())));
                }
                "CrashLoopBackOff" => {
                    let text = format!("{at}: container {container} {}", crashing(c));
                    let hint =
                        format!("kubectl -n {namespace} logs {name} -c {container} --previous");
                    found.push((Rank::Container, Why::new(text, hint)));
                }
                _ => {
                    let text = format!(
                        "{at}: container {container} cannot start{}",
                        because(Some(reason), message)
                    );
                    found.push((Rank::Container, Why::new(text, describe.clone())));
                }
            }
        } else if !c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()) {
            let text = format!("{at}: container {} runs but is not ready", c.name);
            let hint = format!(
                "{describe}; kubectl -n {namespace} logs {name} -c {}",
                c.name
            );
            found.push((Rank::NotReady, Why::new(text, hint)));
        }
    }
    let conditions = status.conditions.iter().flatten();
    let scheduled = conditions.clone().find(|c| c.type_ == "PodScheduled");
    match scheduled {
        Some(c) if c.status == "False" => {
            let text = format!(
                "{at} cannot be scheduled{}",
                because(c.reason.as_deref(), c.message.as_deref())
            );
            found.push((Rank::Unschedulable, Why::new(text, describe.clone())));
        }
        None if pod.spec.as_ref().is_none_or(|s| s.node_name.is_none()) => {
            let text = format!("{at} has no node: no scheduler has acted on it");
            let hint = "check that kube-scheduler runs and reaches the API server (kubeadm: kubectl -n kube-system get pods -l component=kube-scheduler)";
            found.push((Rank::Unscheduled, Why::new(text, hint)));
        }
        _ => {}
    }
    found
}

/// A crash-looping container: its restarts and how it last ended.
fn crashing(c: &ContainerStatus) -> String {
    let restarts = match c.restart_count {
        1 => "1 restart".to_string(),
        n => format!("{n} restarts"),
    };
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let ended = last.map(|t| {
        let reason = t
            .reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        // The termination message: the file the container wrote, or with
        // FallbackToLogsOnError its last log lines, of which the last says most.
        let message = t
            .message
            .as_deref()
            .and_then(|m| m.lines().map(str::trim).rfind(|l| !l.is_empty()))
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        format!(
            ": it last exited with code {}{reason}{message}",
            t.exit_code
        )
    });
    format!(
        "keeps crashing (CrashLoopBackOff, {restarts}){}",
        ended.unwrap_or_default()
    )
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether `owner` is the controller of `object` (by UID).
fn controls(owner: &ObjectMeta, object: &ObjectMeta) -> bool {
    owner.uid.as_ref().is_some_and(|uid| {
        object
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && &r.uid == uid)
    })
}

fn controlled_by(replica_sets: Vec<ReplicaSet>, deployment: &ObjectMeta) -> Vec<ReplicaSet> {
    replica_sets
        .into_iter()
        .filter(|rs| controls(deployment, &rs.metadata))
        .collect()
}

/// The ReplicaSet of the Deployment's pod template, as its controller finds
/// it: the templates equal but for the `pod-template-hash` label.
fn current<'a>(deployment: &Deployment, replica_sets: &'a [ReplicaSet]) -> Option<&'a ReplicaSet> {
    let want = without_hash(deployment.spec.template.clone());
    replica_sets.iter().find(|rs| {
        rs.spec
            .template
            .clone()
            .is_some_and(|t| without_hash(t) == want)
    })
}

fn without_hash(mut template: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(meta) = &mut template.metadata
        && let Some(labels) = &mut meta.labels
    {
        labels.remove(TEMPLATE_HASH_LABEL);
        if labels.is_empty() {
            meta.labels = None;
        }
    }
    template
}

/// The current ReplicaSet first, then the others by name.
fn ordered_replica_sets<'a>(
    replica_sets: &'a [ReplicaSet],
    current: Option<&ReplicaSet>,
) -> Vec<&'a ReplicaSet> {
    let mut ordered: Vec<&ReplicaSet> = replica_sets.iter().collect();
    ordered.sort_by_key(|rs| {
        let is_current = current.is_some_and(|c| std::ptr::eq(c, *rs));
        (!is_current, rs.metadata.name.clone())
    });
    ordered
}

/// The current ReplicaSet's pods first, then the others, each by name.
fn ordered_pods<'a>(pods: &'a [Pod], current: Option<&ReplicaSet>) -> Vec<&'a Pod> {
    let mut ordered: Vec<&Pod> = pods.iter().collect();
    ordered.sort_by_key(|p| {
        let of_current = current.is_some_and(|rs| controls(&rs.metadata, &p.metadata));
        (!of_current, p.metadata.name.clone())
    });
    ordered
}

/// The Event seen last: by its series, its last timestamp, its event time,
/// then its creation.
fn latest(events: &[Event]) -> Option<&Event> {
    events.iter().max_by_key(|e| {
        e.series
            .as_ref()
            .and_then(|s| s.last_observed_time.as_ref())
            .map(|t| t.0)
            .or(e.last_timestamp.as_ref().map(|t| t.0))
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.first_timestamp.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    })
}

#[cfg(test)]
#[path = "deployment_tests.rs"]
mod tests;
