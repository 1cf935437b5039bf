//! `--proxy`, the NAD controller's config restarts (`--restart-stale-workloads`,
//! docs/config-rollouts.md), from what it said in its Events: the rollouts it started that did
//! not complete by their deadline ([`STALLED_REASON`]) and are still incomplete, which hold
//! every other restart of their namespace; and the workloads and pods it does not restart
//! ([`REPORTED_REASON`]: managed from Git, OnDelete, Jobs', naked) whose pods still run an
//! older config, each with the controller's reason and fix.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Deserialize;

use super::report::Check;
use super::snapshot::{self, get_opt};
use super::wait::{Pass, Retry};
use super::{DATA_PLANE, capped, extension};
use crate::linkerd_cni::restarts::{
    Key, Kind, Progress, REPORTED_REASON, STALLED_REASON, Subject, Workload,
};
use crate::multus::nad::CONTROLLER_MANAGED_BY;

/// The most stalled workloads whose rollout is read back.
const MAX_STALLED: usize = 50;

/// One Event of the controller, as read through `core/v1`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Said {
    /// What it is about.
    pub involved_object: Involved,
    /// Its note.
    pub message: String,
    /// The controller that wrote it.
    pub reporting_component: String,
    /// When it was first seen.
    pub event_time: Option<String>,
}

/// An Event's object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Involved {
    /// Its kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Involved {
    /// The workload or pod, in the planner's words; `None` for another kind.
    fn subject(&self) -> Option<Subject> {
        let kind = match self.kind.as_str() {
            "Pod" => {
                return Some(Subject::Pod {
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                });
            }
            "Deployment" => Kind::Deployment,
            "StatefulSet" => Kind::StatefulSet,
            "DaemonSet" => Kind::DaemonSet,
            _ => return None,
        };
        Some(Subject::Workload(Key {
            kind,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }))
    }
}

/// The subjects of the controller's Events, each with one of its notes.
fn by_subject(events: &[Said]) -> BTreeMap<Subject, &Said> {
    events
        .iter()
        // The NAD controller's name: its NADs' managed-by label, and its Events' reporter.
        .filter(|e| e.reporting_component == CONTROLLER_MANAGED_BY)
        .filter_map(|e| Some((e.involved_object.subject()?, e)))
        .collect()
}

/// The stalled rollouts still incomplete, given each workload's rollout now (`None`: gone).
pub fn stalled(events: &[Said], progress: &BTreeMap<Subject, Option<Progress>>) -> Vec<String> {
    by_subject(events)
        .into_iter()
        .filter(|(subject, _)| {
            progress
                .get(subject)
                .is_some_and(|p| p.is_some_and(|p| !p.complete()))
        })
        .map(|(subject, said)| {
            let since = said.event_time.as_deref().unwrap_or("an unknown time");
            format!("{subject} (since {since}: {})", said.message)
        })
        .collect()
}

/// The workloads and pods the controller does not restart whose pods still run an older
/// config (`stale`: those pods, and their workloads), with its reason.
pub fn left(events: &[Said], stale: &BTreeSet<Subject>) -> Vec<String> {
    by_subject(events)
        .into_iter()
        .filter(|(subject, _)| stale.contains(subject))
        .map(|(subject, said)| format!("{subject} ({})", said.message))
        .collect()
}

/// The controller's Events of `reason`, in `namespace` or all.
async fn events(
    client: &Client,
    namespace: Option<&str>,
    reason: &str,
) -> Result<Vec<Said>, snapshot::ReadError> {
    let path = match namespace {
        Some(ns) => format!("/api/v1/namespaces/{ns}/events"),
        None => "/api/v1/events".to_string(),
    };
    let params = ListParams::default().fields(&format!("reason={reason}"));
    let mut said = Vec::new();
    snapshot::list_pages(client, &path, params, false, |e: Said| said.push(e)).await?;
    Ok(said)
}

/// A workload's rollout now; `None` when it is gone.
async fn progress(client: &Client, key: &Key) -> Result<Option<Progress>, snapshot::ReadError> {
    let ns = &key.namespace;
    let workload = match key.kind {
        Kind::Deployment => {
            get_opt(Api::<Deployment>::namespaced(client.clone(), ns).get(&key.name))
                .await?
                .and_then(|d| Workload::of_deployment(&d))
        }
        Kind::StatefulSet => {
            get_opt(Api::<StatefulSet>::namespaced(client.clone(), ns).get(&key.name))
                .await?
                .and_then(|s| Workload::of_stateful_set(&s))
        }
        Kind::DaemonSet => get_opt(Api::<DaemonSet>::namespaced(client.clone(), ns).get(&key.name))
            .await?
            .and_then(|d| Workload::of_daemon_set(&d)),
    };
    Ok(workload.map(|w| w.progress))
}

/// The two checks, given the pods on an older config and their workloads (`stale`).
pub async fn check(
    client: &Client,
    namespace: Option<&str>,
    stale: &BTreeSet<Subject>,
    pass: &mut Pass,
) {
    let read = "the NAD controller's Events about config restarts can be read";
    let (stalled_events, reported) = match futures_util::future::try_join(
        events(client, namespace, STALLED_REASON),
        events(client, namespace, REPORTED_REASON),
    )
    .await
    {
        Ok(read) => read,
        Err(e) => {
            // A warning: the pods were judged; only what the controller said is unknown.
            let check = Check::warning(
                read,
                format!("cannot read Events: {e}"),
                "grant list on events (core/v1) to see the NAD controller's stalled rollouts and what it leaves to you: kubectl auth can-i list events --all-namespaces",
            );
            return pass.add(DATA_PLANE, check, Retry::No);
        }
    };
    let mut rollouts = BTreeMap::new();
    for subject in by_subject(&stalled_events).into_keys().take(MAX_STALLED) {
        let Subject::Workload(key) = &subject else {
            continue;
        };
        match progress(client, key).await {
            Ok(now) => {
                rollouts.insert(subject, now);
            }
            Err(e) => {
                let check = extension::read_error(read, &format!("{subject}"), &e);
                return pass.add(DATA_PLANE, check, Retry::No);
            }
        }
    }
    report(
        &stalled(&stalled_events, &rollouts),
        &left(&reported, stale),
        pass,
    );
}

fn report(stalled: &[String], left: &[String], pass: &mut Pass) {
    let checks = [
        (
            "no config rollout the NAD controller started is stalled",
            stalled,
            "these did not complete by the --restart-deadline, and hold every other restart of their namespace until they do:",
            "see why with kubectl -n NAMESPACE rollout status KIND/NAME (a pod that cannot start, a PodDisruptionBudget); the restarts of the namespace resume once it completes, or once it is deleted",
        ),
        (
            "the NAD controller leaves no workload on an older config to you",
            left,
            "these run an older Linkerd-CNI config and the NAD controller does not restart them:",
            "each names its fix (docs/config-rollouts.md)",
        ),
    ];
    for (description, names, what, hint) in checks {
        let check = match names.is_empty() {
            true => Check::success(description),
            false => Check::warning(description, format!("{what} {}", capped(names)), hint),
        };
        pass.add(DATA_PLANE, check, Retry::No);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(kind: &str, name: &str, by: &str, message: &str) -> Said {
        Said {
            involved_object: Involved {
                kind: kind.into(),
                namespace: "demo".into(),
                name: name.into(),
            },
            message: message.into(),
            reporting_component: by.into(),
            event_time: Some("2026-11-28T10:00:00Z".into()),
        }
    }

    fn workload(kind: Kind, name: &str) -> Subject {
        Subject::Workload(Key {
            kind,
            namespace: "demo".into(),
            name: name.into(),
        })
    }

    #[test]
    fn a_stalled_rollout_is_named_while_it_is_incomplete() {
        let events = [
            said(
                "Deployment",
                "web",
                CONTROLLER_MANAGED_BY,
                "did not complete in 10m",
            ),
            said(
                "Deployment",
                "done",
                CONTROLLER_MANAGED_BY,
                "did not complete in 10m",
            ),
            said(
                "Deployment",
                "gone",
                CONTROLLER_MANAGED_BY,
                "did not complete in 10m",
            ),
            said("Deployment", "other", "someone-else", "did not complete"),
            said("Service", "svc", CONTROLLER_MANAGED_BY, "?"),
        ];
        let rolling = Progress {
            generation: 2,
            observed_generation: 2,
            desired: 3,
            updated: 1,
            available: 3,
        };
        let complete = Progress {
            updated: 3,
            ..rolling
        };
        let progress = BTreeMap::from([
            (workload(Kind::Deployment, "web"), Some(rolling)),
            (workload(Kind::Deployment, "done"), Some(complete)),
            (workload(Kind::Deployment, "gone"), None),
            (workload(Kind::Deployment, "other"), Some(rolling)),
        ]);
        assert_eq!(
            stalled(&events, &progress),
            ["Deployment demo/web (since 2026-11-28T10:00:00Z: did not complete in 10m)"]
        );
    }

    #[test]
    fn what_is_left_to_the_user_is_named_while_its_pods_run_an_older_config() {
        let events = [
            said(
                "Deployment",
                "argo",
                CONTROLLER_MANAGED_BY,
                "managed from Git by Argo CD",
            ),
            said("StatefulSet", "db", CONTROLLER_MANAGED_BY, "OnDelete"),
            said("Pod", "naked", CONTROLLER_MANAGED_BY, "no controller"),
            said("Pod", "recreated", CONTROLLER_MANAGED_BY, "no controller"),
        ];
        let stale = BTreeSet::from([
            workload(Kind::Deployment, "argo"),
            Subject::Pod {
                namespace: "demo".into(),
                name: "naked".into(),
            },
            workload(Kind::Deployment, "restarted"),
        ]);
        assert_eq!(
            left(&events, &stale),
            [
                "Deployment demo/argo (managed from Git by Argo CD)",
                "Pod demo/naked (no controller)",
            ]
        );
    }
}
