//! `--proxy`'s config rollouts: the meshed pods created under an older config than their
//! namespace's NAD holds (the hash the webhook and renders record, [`HASH_ANNOTATION`]),
//! named by the workload to restart (the Deployment of their ReplicaSet, their StatefulSet or
//! DaemonSet), or alone when they have none; and a hint that fits how the NAD controller runs.

use std::collections::BTreeMap;

use super::Findings;
use crate::extension::check::extension::Installed;
use crate::extension::check::snapshot::{Nad, Pod};
use crate::linkerd_cni::restarts::{OPT_IN_ANNOTATION, Subject};
use crate::linkerd_cni::rollout::{HASH_ANNOTATION, config_hash};

/// What the check's error says before the workloads.
pub(super) const WHAT: &str = "created under an older config than their namespace's NAD holds (multus.linkerd.io/config-hash differs):";

/// Records `pod` (of namespace `ns`; `selects` says whether its networks select the NAD) when
/// its stamp is not the hash of its namespace's NAD's config.
pub(super) fn judge(
    found: &mut Findings,
    pod: &Pod,
    ns: &str,
    selects: bool,
    nads: &BTreeMap<String, Nad>,
) {
    let live = nads
        .get(ns)
        .and_then(|n| n.config.as_deref())
        .map(config_hash);
    let stamped = pod.meta.annotations.get(HASH_ANNOTATION);
    let (Some(stamped), Some(live)) = (stamped, live) else {
        return;
    };
    if !selects || *stamped == live {
        return;
    }
    let subject = Subject::Pod {
        namespace: ns.to_string(),
        name: pod.meta.name.clone(),
    };
    let workload = pod.meta.workload();
    let owner = workload.clone().unwrap_or_else(|| subject.clone());
    found
        .old_by_owner
        .entry(owner)
        .or_default()
        .push(format!("{ns}/{}", pod.meta.name));
    found.stale_subjects.insert(subject);
    found.stale_subjects.extend(workload);
}

/// One line per workload, with its pods (`Deployment demo/web (demo/web-5d8f-x, ...)`), and
/// one per pod without a workload (`Pod demo/naked`), sorted.
pub(super) fn lines(by_owner: &BTreeMap<Subject, Vec<String>>) -> Vec<String> {
    by_owner
        .iter()
        .map(|(owner, pods)| match owner {
            Subject::Pod { .. } => owner.to_string(),
            Subject::Workload(_) => {
                let mut pods = pods.clone();
                pods.sort();
                format!("{owner} ({})", pods.join(", "))
            }
        })
        .collect()
}

/// How the NAD controller runs, as its Deployment's arguments say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// Not installed.
    Absent,
    /// Without `--restart-stale-workloads`.
    NoRestarts,
    /// With `--restart-stale-workloads`.
    Restarts,
}

impl Controller {
    /// How the installed controller runs.
    pub fn of(installed: &Installed) -> Self {
        match (installed.manage_nads, installed.restarts.is_some()) {
            (_, true) => Controller::Restarts,
            (true, false) => Controller::NoRestarts,
            (false, false) => Controller::Absent,
        }
    }

    /// The hint of the old-config check.
    pub fn hint(self) -> String {
        let restart = "restart them (kubectl -n NAMESPACE rollout restart KIND NAME; a pod without a workload: delete it)";
        let opt_in =
            format!("annotate their namespaces or pod templates {OPT_IN_ANNOTATION}=enabled");
        let reads = "Linkerd-CNI reads its config when a pod starts";
        match self {
            Controller::Absent => format!(
                "{reads}: {restart}, or render and sync them from Git (the new config hash rolls them out); or let the NAD controller restart them, paced: install it with linkerd multus install --manage-nads --restart-stale-workloads (the chart's manageNADs and restartStaleWorkloads) and {opt_in} (docs/config-rollouts.md)"
            ),
            Controller::NoRestarts => format!(
                "{reads}: {restart}, or let the NAD controller do it, paced: it runs without --restart-stale-workloads; add it (linkerd multus install --manage-nads --restart-stale-workloads, the chart's restartStaleWorkloads) and {opt_in} (docs/config-rollouts.md)"
            ),
            Controller::Restarts => format!(
                "{reads}: the NAD controller runs with --restart-stale-workloads and restarts, paced, those whose namespace or pod template says {OPT_IN_ANNOTATION}=enabled; {opt_in} for the others, or {restart}; what it does not restart is named below (docs/config-rollouts.md)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{owned, pod, seen};
    use super::super::{Meta, judge};
    use super::*;
    use crate::extension::check::snapshot::{Ipams, OwnerReference};
    use crate::linkerd_cni::settings::Settings;
    use crate::multus::nad::Maker;
    use crate::multus::networks::NETWORKS_ANNOTATION;

    /// The pods on an older config are named by the workload to restart; a pod without one
    /// alone; a pod on the current config not at all.
    #[test]
    fn old_pods_are_named_by_their_workload() {
        let nads: BTreeMap<String, Nad> = [(
            "demo".into(),
            Nad::new(Maker::Controller, Some("{}".into())),
        )]
        .into();
        let current = config_hash("{}");
        let old = |name: &str| {
            pod(
                name,
                "demo",
                &[
                    (NETWORKS_ANNOTATION, "linkerd-cni"),
                    (HASH_ANNOTATION, "0123"),
                ],
            )
        };
        let mut db = old("db-0");
        db.meta.owner_references = vec![OwnerReference {
            kind: "StatefulSet".into(),
            name: "db".into(),
            controller: Some(true),
        }];
        let pods = [
            owned(old("web-app-5d8f-b")),
            owned(old("web-app-5d8f-a")),
            db,
            old("naked"),
            owned(pod(
                "current",
                "demo",
                &[
                    (NETWORKS_ANNOTATION, "linkerd-cni"),
                    (HASH_ANNOTATION, &current),
                ],
            )),
        ];
        let namespaces: BTreeMap<&str, &Meta> = BTreeMap::new();
        let settings = Settings::default();
        let found = judge(&pods, &seen(&namespaces, &nads, &Ipams::new(), &settings));
        assert_eq!(
            found.old_config,
            [
                "Deployment demo/web-app (demo/web-app-5d8f-a, demo/web-app-5d8f-b)",
                "StatefulSet demo/db (demo/db-0)",
                "Pod demo/naked",
            ]
        );
    }

    /// The hint says what to do given how the controller runs: never to start what runs.
    #[test]
    fn the_hint_fits_how_the_controller_runs() {
        let absent = Controller::Absent.hint();
        assert!(absent.contains(
            "install it with linkerd multus install --manage-nads --restart-stale-workloads"
        ));
        let without = Controller::NoRestarts.hint();
        assert!(without.contains("it runs without --restart-stale-workloads; add it"));
        let with = Controller::Restarts.hint();
        assert!(with.contains("the NAD controller runs with --restart-stale-workloads"));
        assert!(
            !with.contains("add it") && !with.contains("install it"),
            "{with}"
        );
    }
}
