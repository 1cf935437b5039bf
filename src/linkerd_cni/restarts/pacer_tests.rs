use std::time::{Duration, Instant};

use super::super::test_world::*;
use super::super::{
    Action, EVICT_ANNOTATION, Holder, Kind, OPT_IN_ANNOTATION, Owner, Pod, Subject, Workload,
};
use super::*;

#[test]
fn exactly_the_opted_in_stale_workloads_are_restarted() {
    let (web, api, cron_pod) = (deployment("a", "web"), deployment("a", "api"), "job-1");
    let db = key(Kind::StatefulSet, "b", "db");
    let current = deployment("a", "current");
    let out = deployment("b", "out");
    let world = World::new(
        vec![
            workload(&web, Some(true), None),
            workload(&api, None, None),
            workload(&db, None, Some(OLD)),
            workload(&current, Some(true), Some(NEW)),
            workload(&out, Some(false), None),
        ],
        vec![
            pod("a", "web-1", Owner::Workload(web.clone()), OLD),
            pod("a", "api-1", Owner::Workload(api.clone()), OLD),
            pod("b", "db-0", Owner::Workload(db.clone()), OLD),
            pod("a", "current-1", Owner::Workload(current.clone()), NEW),
            pod("b", "out-1", Owner::Workload(out.clone()), OLD),
            pod("a", cron_pod, Owner::Job("nightly-1".into()), OLD),
        ],
    )
    .annotate("b", OPT_IN_ANNOTATION, "enabled");
    let mut pacer = Pacer::new(10, MINUTE);
    let actions = world.plan(&mut pacer, Instant::now());
    assert_eq!(
        restarts(&actions),
        [
            format!("Deployment a/web -> {NEW}"),
            format!("StatefulSet b/db -> {NEW}"),
        ],
        "api is not opted in, current runs the config, out opted out in an opted-in namespace"
    );
    assert!(actions.contains(&Action::Reported {
        subject: Subject::Pod {
            namespace: "a".into(),
            name: "job-1".into(),
        },
        why: "runs an older Linkerd-CNI config; its owner Job nightly-1 is never restarted by linkerd-multus: its next run (a Job) or its own controller starts pods with the new config".into(),
    }));
}

#[test]
fn paced_one_at_a_time_the_next_when_the_previous_completes() {
    let keys: Vec<Key> = (0..3).map(|i| deployment("a", &format!("w{i}"))).collect();
    let mut world = World::new(
        keys.iter().map(|k| workload(k, Some(true), None)).collect(),
        keys.iter()
            .map(|k| {
                pod(
                    "a",
                    &format!("{}-1", k.name),
                    Owner::Workload(k.clone()),
                    OLD,
                )
            })
            .collect(),
    );
    let mut pacer = Pacer::new(1, MINUTE);
    let start = Instant::now();
    let mut patched = Vec::new();
    for step in 0..12 {
        let now = start + Duration::from_secs(step);
        for action in world.plan(&mut pacer, now) {
            if let Action::Restart { key, hash } = action {
                assert!(
                    pacer.rolling().count() <= 1,
                    "more than one rolling at step {step}"
                );
                patched.push(key.clone());
                world.patched(&key, &hash);
            }
        }
        // Each rollout takes three steps to complete.
        if step % 3 == 2
            && let Some(key) = patched.last().cloned()
        {
            world.rolled(&key, NEW);
        }
    }
    assert_eq!(patched, keys, "each once, in order");
    // At rest: nothing more, ever.
    assert_eq!(
        restarts(&world.plan(&mut pacer, start + MINUTE)),
        Vec::<String>::new()
    );
}

#[test]
fn a_watch_that_lags_the_patch_does_not_patch_twice() {
    let web = deployment("a", "web");
    let world = World::new(
        vec![workload(&web, Some(true), None)],
        vec![pod("a", "web-1", Owner::Workload(web.clone()), OLD)],
    );
    let mut pacer = Pacer::new(1, MINUTE);
    let now = Instant::now();
    assert_eq!(restarts(&world.plan(&mut pacer, now)).len(), 1);
    // The watch still shows the old template: the restart is in flight, not repeated.
    for s in 1..30 {
        let actions = world.plan(&mut pacer, now + Duration::from_secs(s));
        assert_eq!(restarts(&actions), Vec::<String>::new(), "second {s}");
    }
}

/// A controller restart, a leader change or a re-list: a fresh pacer over the same cluster
/// restarts nothing current, and counts in a slot what the controller's field manager
/// restarted (an earlier leader's restart), not what someone else rolls.
#[test]
fn a_fresh_pacer_restarts_nothing_current_and_counts_what_the_controller_restarted() {
    let (rolling, rendered, next) = (
        deployment("a", "rolling"),
        deployment("a", "rendered"),
        deployment("a", "next"),
    );
    let mut world = World::stale(&[&rolling, &rendered, &next]);
    world.patched(&rolling, NEW);
    world.workloads.get_mut(&rolling).unwrap().ours = true;
    // Rendered with the new hash and applied: rolling, but not the controller's restart.
    world.patched(&rendered, NEW);
    let mut fresh = Pacer::new(1, MINUTE);
    let now = Instant::now();
    assert_eq!(restarts(&world.plan(&mut fresh, now)), Vec::<String>::new());
    assert_eq!(fresh.rolling().collect::<Vec<_>>(), [&rolling]);
    world.rolled(&rolling, NEW);
    assert_eq!(
        restarts(&world.plan(&mut fresh, now + Duration::from_secs(1))),
        [format!("Deployment a/next -> {NEW}")]
    );
    assert_eq!(
        fresh.rolling().collect::<Vec<_>>(),
        [&next],
        "rendered holds no slot"
    );
    // Everything current: a fresh pacer does nothing.
    world.patched(&next, NEW);
    world.rolled(&next, NEW);
    world.rolled(&rendered, NEW);
    let actions = World::plan(&world, &mut Pacer::new(1, MINUTE), now);
    assert!(actions.is_empty(), "{actions:?}");
}

#[test]
fn a_rollout_that_does_not_progress_halts_its_namespace_only() {
    let (slow, waiting, other_ns) = (
        deployment("a", "slow"),
        deployment("a", "waiting"),
        deployment("b", "other"),
    );
    let mut world = World::new(
        vec![
            workload(&slow, Some(true), None),
            workload(&waiting, Some(true), None),
            workload(&other_ns, Some(true), None),
        ],
        vec![
            pod("a", "slow-1", Owner::Workload(slow.clone()), OLD),
            pod("a", "waiting-1", Owner::Workload(waiting.clone()), OLD),
            pod("b", "other-1", Owner::Workload(other_ns.clone()), OLD),
        ],
    );
    let mut pacer = Pacer::new(1, MINUTE);
    let start = Instant::now();
    let first = world.plan(&mut pacer, start);
    assert_eq!(restarts(&first), [format!("Deployment a/slow -> {NEW}")]);
    world.patched(&slow, NEW);
    // Its rollout never completes: past the deadline, namespace a is halted, b goes on.
    let later = start + MINUTE + Duration::from_secs(1);
    let actions = world.plan(&mut pacer, later);
    assert!(
        actions.contains(&Action::Halted {
            key: slow.clone(),
            after: MINUTE + Duration::from_secs(1),
        }),
        "{actions:?}"
    );
    assert_eq!(restarts(&actions), [format!("Deployment b/other -> {NEW}")]);
    assert_eq!(pacer.halted().get("a"), Some(&vec![&slow]));
    world.patched(&other_ns, NEW);
    world.rolled(&other_ns, NEW);
    let actions = world.plan(&mut pacer, later + Duration::from_secs(1));
    assert_eq!(restarts(&actions), Vec::<String>::new(), "a stays halted");
    // The slow rollout completes after all: namespace a resumes.
    world.rolled(&slow, NEW);
    let actions = world.plan(&mut pacer, later + Duration::from_secs(2));
    assert_eq!(
        restarts(&actions),
        [format!("Deployment a/waiting -> {NEW}")]
    );
    assert!(pacer.halted().is_empty());
}

#[test]
fn a_restart_that_failed_is_tried_again_by_a_later_pass_after_the_others() {
    let (first, second) = (deployment("a", "first"), deployment("a", "second"));
    let mut world = World::new(
        vec![
            workload(&first, Some(true), None),
            workload(&second, Some(true), None),
        ],
        vec![
            pod("a", "first-1", Owner::Workload(first.clone()), OLD),
            pod("a", "second-1", Owner::Workload(second.clone()), OLD),
        ],
    );
    let mut pacer = Pacer::new(1, MINUTE);
    let start = Instant::now();
    let actions = world.plan(&mut pacer, start);
    assert_eq!(restarts(&actions), [format!("Deployment a/first -> {NEW}")]);
    // Its patch is refused: it holds no slot, and the next pass restarts the other first.
    pacer.failed(&first, start);
    assert_eq!(pacer.rolling().count(), 0);
    let next = start + Duration::from_secs(2);
    let actions = world.plan(&mut pacer, next);
    assert_eq!(
        restarts(&actions),
        [format!("Deployment a/second -> {NEW}")]
    );
    world.patched(&second, NEW);
    world.rolled(&second, NEW);
    // Then it is tried again, long before its deadline, and neither halts nor stalls.
    let actions = world.plan(&mut pacer, next + Duration::from_secs(2));
    assert!(
        actions.contains(&Action::Completed(second.clone())),
        "{actions:?}"
    );
    assert_eq!(restarts(&actions), [format!("Deployment a/first -> {NEW}")]);
    world.patched(&first, NEW);
    let late = next + MINUTE / 2;
    let actions = world.plan(&mut pacer, late);
    assert!(actions.is_empty(), "rolling: {actions:?}");
    world.rolled(&first, NEW);
    let actions = world.plan(&mut pacer, late + Duration::from_secs(2));
    assert_eq!(actions, [Action::Completed(first.clone())]);
    assert!(pacer.halted().is_empty());
}

#[test]
fn a_restart_that_failed_alone_is_tried_again_at_the_next_pass() {
    let only = deployment("a", "only");
    let world = World::new(
        vec![workload(&only, Some(true), None)],
        vec![pod("a", "only-1", Owner::Workload(only.clone()), OLD)],
    );
    let mut pacer = Pacer::new(1, MINUTE);
    let start = Instant::now();
    for pass in 0..3 {
        let now = start + Duration::from_secs(2 * pass);
        let actions = world.plan(&mut pacer, now);
        assert_eq!(
            actions,
            [Action::Restart {
                key: only.clone(),
                hash: NEW.into()
            }],
            "pass {pass}"
        );
        pacer.failed(&only, now);
    }
    // Past its deadline nothing halts: it never rolled.
    let actions = world.plan(&mut pacer, start + MINUTE * 2);
    assert_eq!(restarts(&actions), [format!("Deployment a/only -> {NEW}")]);
    assert!(pacer.halted().is_empty());
}

#[test]
fn held_workloads_and_naked_pods_are_reported_not_patched() {
    let argo = deployment("a", "argo");
    let mut managed = workload(&argo, Some(true), None);
    managed.holder = Some(Holder::GitOps {
        tool: "Argo CD",
        by: "annotation argocd.argoproj.io/tracking-id".into(),
    });
    let on_delete = key(Kind::StatefulSet, "a", "on-delete");
    let world = World::new(
        vec![
            managed,
            Workload {
                on_delete: true,
                ..workload(&on_delete, Some(true), None)
            },
        ],
        vec![
            pod("a", "argo-1", Owner::Workload(argo.clone()), OLD),
            pod("a", "on-delete-0", Owner::Workload(on_delete.clone()), OLD),
            pod("a", "bare", Owner::Naked, OLD),
            // Its own opt-in is not enough: whoever may patch it could write it.
            Pod {
                evict: Some(true),
                ..pod("a", "self-opted", Owner::Naked, OLD)
            },
            pod("c", "in-evicting-ns", Owner::Naked, OLD),
            Pod {
                evict: Some(false),
                ..pod("c", "opted-out", Owner::Naked, OLD)
            },
        ],
    )
    .annotate("c", EVICT_ANNOTATION, "enabled");
    let actions = world.plan(&mut Pacer::new(5, MINUTE), Instant::now());
    assert_eq!(restarts(&actions), Vec::<String>::new());
    let evicted: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Evict { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, ["in-evicting-ns"]);
    assert_eq!(
        reported(&actions),
        [
            "Deployment a/argo",
            "StatefulSet a/on-delete",
            "Pod a/bare",
            "Pod a/self-opted",
            "Pod c/opted-out"
        ]
    );
    let why = |name: &str| {
        actions.iter().find_map(|a| match a {
            Action::Reported { subject, why } if subject.to_string().ends_with(name) => {
                Some(why.clone())
            }
            _ => None,
        })
    };
    assert!(
        why("argo")
            .unwrap()
            .contains("render it with configRollout")
    );
    assert!(why("on-delete").unwrap().contains("OnDelete"));
    assert_eq!(
        why("self-opted").unwrap(),
        "runs an older Linkerd-CNI config and has no controller to restart it: its own multus.linkerd.io/evict-on-config-change=enabled is not enough (whoever may patch a pod could write it); annotate its namespace multus.linkerd.io/evict-on-config-change=enabled for the controller to evict it, or delete it and create it again"
    );
}

/// A pod whose ownerReference names a workload under another uid than the live one's (what
/// whoever may patch a pod could write) does not restart it: it is reported.
#[test]
fn a_pod_that_says_it_is_anothers_restarts_nothing() {
    let victim = deployment("a", "victim");
    let world = World::new(
        vec![workload(&victim, Some(true), Some(NEW))],
        vec![
            pod("a", "victim-1", Owner::Workload(victim.clone()), NEW),
            pod(
                "a",
                "planted",
                Owner::Unverified("ReplicaSet victim-1".into()),
                OLD,
            ),
        ],
    );
    let actions = world.plan(&mut Pacer::new(5, MINUTE), Instant::now());
    assert_eq!(restarts(&actions), Vec::<String>::new());
    assert_eq!(
        actions,
        [Action::Reported {
            subject: Subject::Pod {
                namespace: "a".into(),
                name: "planted".into()
            },
            why: "runs an older Linkerd-CNI config; its ownerReference names ReplicaSet victim-1 under another uid than the live ReplicaSet victim-1's: linkerd-multus restarts an owner as the cluster shows it, never as a pod says; delete the pod and create it again if it is yours".into()
        }]
    );
}

/// In Kubernetes', OpenShift's, Linkerd's and Linkerd-CNI's namespaces nothing is restarted
/// or evicted, opted in or not: each is reported, saying whose the namespace is.
#[test]
fn nothing_is_restarted_or_evicted_in_a_reserved_namespace() {
    let reserved = [
        "kube-system",
        "openshift-dns",
        "linkerd",
        "linkerd-cni",
        "default",
    ];
    let mut workloads = Vec::new();
    let mut pods = Vec::new();
    for namespace in reserved {
        let key = deployment(namespace, "agent");
        workloads.push(workload(&key, Some(true), None));
        pods.push(pod(namespace, "agent-1", Owner::Workload(key), OLD));
        pods.push(pod(namespace, "naked", Owner::Naked, OLD));
    }
    let mut world = World::new(workloads, pods);
    for namespace in reserved {
        world = world.annotate(namespace, EVICT_ANNOTATION, "enabled");
    }
    let actions = world.plan(&mut Pacer::new(10, MINUTE), Instant::now());
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Restart { .. } | Action::Evict { .. })),
        "{actions:?}"
    );
    let reported: Vec<(String, &str)> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Reported { subject, why } => Some((subject.to_string(), why.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(reported.len(), 10, "{reported:?}");
    assert!(reported.contains(&(
        "Deployment kube-system/agent".into(),
        "runs an older Linkerd-CNI config, in namespace kube-system, Kubernetes's own: linkerd-multus never restarts or evicts anything there; restart it (kubectl rollout restart) when it suits"
    )));
    assert!(reported.contains(&(
        "Pod linkerd-cni/naked".into(),
        "runs an older Linkerd-CNI config, in namespace linkerd-cni, Linkerd-CNI's: linkerd-multus never restarts or evicts anything there; delete it and create it again when it suits"
    )));
}

#[test]
fn before_the_nad_holds_the_new_config_nothing_is_restarted() {
    let web = deployment("a", "web");
    let mut world = World::new(
        vec![workload(&web, Some(true), None)],
        vec![pod("a", "web-1", Owner::Workload(web.clone()), OLD)],
    );
    // The ConfigMap changed, the NAD not yet: its hash is still the pods'.
    world.nad_hashes.insert("a".into(), OLD.into());
    assert!(
        world
            .plan(&mut Pacer::new(1, MINUTE), Instant::now())
            .is_empty()
    );
    // No NAD at all: nothing either.
    world.nad_hashes.remove("a");
    assert!(
        world
            .plan(&mut Pacer::new(1, MINUTE), Instant::now())
            .is_empty()
    );
}
