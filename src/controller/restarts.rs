//! `--restart-stale-workloads`: the NAD controller's leader restarts the opted-in workloads
//! whose pods run an older Linkerd-CNI config than their namespace's NAD holds, paced
//! ([`crate::linkerd_cni::restarts`] decides; this module watches and writes).
//!
//! It watches what the decision reads, each reduced on arrival to what it keeps ([`mirror`]).
//! Every two seconds, and when a rollout in a slot reaches its deadline, once each watch has
//! listed, it plans and carries out the restarts (a merge patch of the pod template's hash
//! under its field manager, under the leadership's fence: an update, which no apply of the
//! team's conflicts with unless it sets that field, and the planner leaves the workloads whose
//! template an apply holds) and evictions (the Eviction API, so PodDisruptionBudgets hold),
//! and reports the rest as Events and metrics.

pub mod mirror;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod};
use kube::api::{Api, ApiResource, DynamicObject, EvictParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::controller::FIELD_MANAGER;
use crate::controller::api::call_until;
use crate::controller::events::{Events, Kind as EventKind};
use crate::controller::lease::Fence;
use crate::controller::metrics::Metrics;
use crate::controller::reconcile::CONFIG_DIGEST;
use crate::k8s::reserved;
use crate::linkerd_cni::restarts::{
    Action, Cluster, HASH_ANNOTATION, Key, Kind, Pacer, Pod as StalePod, REPORTED_REASON,
    RESTARTED_REASON, STALLED_REASON, Subject, Workload,
};
use crate::linkerd_cni::rollout::HASH_LEN;
use mirror::{Interned, Mirror, Watched, read_pod, read_replica_set};

/// How often the restarts are planned.
const EVERY: Duration = Duration::from_secs(2);
/// Every how many passes the strings no pod holds any more are forgotten.
const PRUNE_EVERY: u64 = 30;

/// The settings of `--restart-stale-workloads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// At most this many workloads rolling at once (`--restart-concurrency`).
    pub concurrency: usize,
    /// How long one may roll before its namespace is halted (`--restart-deadline`).
    pub deadline: Duration,
}

/// Feeds one watch of `api` into the mirror `pick` chooses, reduced by `read`.
async fn feed<K, V>(
    api: Api<K>,
    watched: Arc<Mutex<Watched>>,
    pick: fn(&mut Watched) -> &mut Mirror<V>,
    read: fn(&K, &mut Interned) -> Option<V>,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => pick(&mut watched.lock().expect("watched lock")).apply(event, read),
            Err(e) => tracing::warn!(error = %e, "config restarts: a watch failed; it retries"),
        }
    }
}

/// Everything the restart loop needs from the controller.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The client of the evictions, without kube's retries: a 429 there is a
    /// PodDisruptionBudget's no, which the next pass asks again, once.
    pub evictions: Client,
    /// The NADs of the controller's name, with the digest of their config.
    pub nads: Store<DynamicObject>,
    /// The namespaces, with their opt-in annotations.
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// The NAD's name.
    pub nad_name: String,
    /// The Linkerd control plane's namespace, never restarted in.
    pub linkerd_namespace: String,
    /// Linkerd-CNI's namespace, never restarted in.
    pub cni_namespace: String,
    /// The leadership's fence: no write after its end.
    pub fence: Fence,
    /// Where Events go.
    pub events: Arc<Events>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The deadline of each call.
    pub api_timeout: Duration,
    /// The pacing.
    pub options: Options,
}

/// Watches and restarts, for as long as it is polled (one term of leadership).
pub async fn run(context: Context) {
    let watched = Arc::new(Mutex::new(Watched::default()));
    let client = &context.client;
    let meta_pods = Api::<PartialObjectMeta<Pod>>::all(client.clone());
    let meta_replica_sets = Api::<PartialObjectMeta<ReplicaSet>>::all(client.clone());
    let workloads = futures_util::future::join3(
        feed(
            Api::<Deployment>::all(client.clone()),
            watched.clone(),
            |w| &mut w.deployments,
            |d, _| Workload::of_deployment(d),
        ),
        feed(
            Api::<StatefulSet>::all(client.clone()),
            watched.clone(),
            |w| &mut w.stateful_sets,
            |s, _| Workload::of_stateful_set(s),
        ),
        feed(
            Api::<DaemonSet>::all(client.clone()),
            watched.clone(),
            |w| &mut w.daemon_sets,
            |d, _| Workload::of_daemon_set(d),
        ),
    );
    let others = futures_util::future::join(
        feed(
            meta_replica_sets,
            watched.clone(),
            |w| &mut w.replica_sets,
            read_replica_set,
        ),
        feed(meta_pods, watched.clone(), |w| &mut w.pods, read_pod),
    );
    tokio::select! {
        _ = workloads => {}
        _ = others => {}
        _ = restart_loop(&context, &watched) => {}
    }
}

/// Plans every [`EVERY`] once the watches have listed, and carries out the plan.
async fn restart_loop(context: &Context, watched: &Mutex<Watched>) {
    let mut pacer = Pacer::new(context.options.concurrency, context.options.deadline);
    let mut reported: HashSet<Subject> = HashSet::new();
    for pass in 1u64.. {
        // The next pass, or sooner the deadline of a rollout in a slot: a stalled one frees
        // its slot when it is due, not up to a pass later.
        let next = Instant::now() + EVERY;
        let due = pacer.next_deadline().map(Instant::from_std);
        tokio::time::sleep_until(due.map_or(next, |due| due.min(next))).await;
        let actions = {
            let mut watched = watched.lock().expect("watched lock");
            if !watched.listed() {
                continue;
            }
            if pass % PRUNE_EVERY == 0 {
                watched.pods.interned.prune();
            }
            plan(context, &watched, &mut pacer)
        };
        let mut now_reported = HashSet::new();
        for action in actions {
            let key = match &action {
                Action::Restart { key, .. } => Some(key.clone()),
                _ => None,
            };
            let done = carry_out(context, action, &mut reported, &mut now_reported).await;
            if let (Some(key), false) = (key, done) {
                // Not rolling: the next pass restarts it again, after the others.
                pacer.failed(&key, std::time::Instant::now());
            }
        }
        context
            .metrics
            .stale_reported
            .set(now_reported.len() as i64);
        reported = now_reported;
        context.metrics.rolling.set(pacer.rolling().count() as i64);
        context.metrics.halted.set(pacer.halted().len() as i64);
        context.metrics.passes.inc();
    }
}

/// One plan over what the watches hold now.
fn plan(context: &Context, watched: &Watched, pacer: &mut Pacer) -> Vec<Action> {
    let workload = |key: &Key| watched.workload(key);
    let nad_hashes: BTreeMap<String, String> = context
        .nads
        .state()
        .iter()
        .filter(|nad| nad.name_any() == context.nad_name)
        .filter_map(|nad| {
            let digest = nad.data.get(CONFIG_DIGEST)?.as_str()?;
            Some((nad.namespace()?, digest.get(..HASH_LEN)?.to_string()))
        })
        .collect();
    // One pod at a time, and only those whose hash is not their namespace's NAD's: at 50,000
    // pods a plan holds no copy of them.
    let pods = |visit: &mut dyn FnMut(&StalePod)| {
        for (namespace, name, entry) in watched.pods.iter() {
            let current = nad_hashes.get(namespace);
            if current.is_none_or(|current| **current == *entry.hash) {
                continue;
            }
            visit(&StalePod {
                namespace: namespace.to_string(),
                name: name.to_string(),
                owner: watched.owner(namespace, entry),
                hash: Some(entry.hash.to_string()),
                evict: entry.evict,
            });
        }
    };
    let namespaces = &context.namespaces;
    let lookup = |namespace: &str, key: &str| {
        namespaces
            .get(&ObjectRef::new(namespace))
            .and_then(|ns| ns.metadata.annotations.as_ref()?.get(key).cloned())
    };
    let reserved = |namespace: &str| {
        reserved::reserved(
            namespace,
            &context.linkerd_namespace,
            &context.cni_namespace,
        )
    };
    let cluster = Cluster {
        workload: &workload,
        pods: &pods,
        nad_hashes: &nad_hashes,
        namespace_annotation: &lookup,
        reserved: &reserved,
    };
    pacer.plan(&cluster, std::time::Instant::now())
}

/// The object reference of a workload, for its Events.
fn reference(key: &Key) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some(key.kind.to_string()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        ..ObjectReference::default()
    }
}

/// The API resource of a workload's kind.
fn resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Deployment => ApiResource::erase::<Deployment>(&()),
        Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
    }
}

/// Carries out one action: a write under the fence, an Event, a log line and a metric. A
/// report is published when it first appears (and again after it went away). Whether it was
/// carried out: false when its write failed, or was not sent past the fence.
async fn carry_out(
    context: &Context,
    action: Action,
    reported: &mut HashSet<Subject>,
    now_reported: &mut HashSet<Subject>,
) -> bool {
    let Some(until) = context.fence.until() else {
        return false;
    };
    let deadline = until.min(Instant::now() + context.api_timeout);
    match action {
        Action::Restart { key, hash } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(context.client.clone(), &key.namespace, &resource(key.kind));
            let patch = serde_json::json!({
                "spec": {"template": {"metadata": {"annotations": {HASH_ANNOTATION: hash}}}}
            });
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            match call_until(
                deadline,
                api.patch(&key.name, &params, &Patch::Merge(&patch)),
            )
            .await
            {
                Ok(_) => {
                    context.metrics.restarts.inc();
                    tracing::info!(workload = %key, hash, "restarted: its pods run an older Linkerd-CNI config");
                    let note = format!(
                        "its pods run an older Linkerd-CNI config than NetworkAttachmentDefinition {}/{} holds: {HASH_ANNOTATION} set to {hash} in its pod template, which rolls it",
                        key.namespace, context.nad_name
                    );
                    context
                        .events
                        .publish(
                            &reference(&key),
                            EventKind::Normal,
                            RESTARTED_REASON,
                            "Restart",
                            note,
                        )
                        .await;
                }
                Err(e) => {
                    tracing::warn!(workload = %key, error = %e, "restarting a workload; the next pass tries again");
                    return false;
                }
            }
        }
        Action::Evict { namespace, name } => {
            let api: Api<Pod> = Api::namespaced(context.evictions.clone(), &namespace);
            match call_until(deadline, api.evict(&name, &EvictParams::default())).await {
                Ok(_) => {
                    context.metrics.evictions.inc();
                    tracing::info!(pod = %format!("{namespace}/{name}"), "evicted: it ran an older Linkerd-CNI config");
                }
                // 429: a PodDisruptionBudget holds it; a later pass asks again.
                Err(e) => {
                    if e.code() == Some(429) {
                        context.metrics.evictions_blocked.inc();
                    }
                    tracing::info!(pod = %format!("{namespace}/{name}"), error = %e, "evicting a pod; a later pass asks again");
                    return false;
                }
            }
        }
        Action::Completed(key) => {
            tracing::info!(workload = %key, "rolled out with the new Linkerd-CNI config");
        }
        Action::Halted { key, after } => {
            let note = format!(
                "its rollout to the new Linkerd-CNI config did not complete in {}: its slot goes to other namespaces, and no other workload of namespace {} is restarted until it does; see kubectl rollout status",
                humantime::format_duration(Duration::from_secs(after.as_secs())),
                key.namespace
            );
            tracing::warn!(workload = %key, "{note}");
            context
                .events
                .publish(
                    &reference(&key),
                    EventKind::Warning,
                    STALLED_REASON,
                    "Restart",
                    note,
                )
                .await;
        }
        Action::Reported { subject, why } => {
            let first = !reported.contains(&subject);
            now_reported.insert(subject.clone());
            if first {
                tracing::warn!(object = %subject, "{why}");
                let regarding = match &subject {
                    Subject::Workload(key) => reference(key),
                    Subject::Pod { namespace, name } => ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        namespace: Some(namespace.clone()),
                        name: Some(name.clone()),
                        ..ObjectReference::default()
                    },
                };
                context
                    .events
                    .publish(
                        &regarding,
                        EventKind::Warning,
                        REPORTED_REASON,
                        "Report",
                        why,
                    )
                    .await;
            }
        }
    }
    true
}
