use super::super::test_world::*;
use super::super::{EVICT_ANNOTATION, Holder, OPT_IN_ANNOTATION, Owner, Subject};
use super::*;

fn waves(preview: &Preview) -> Vec<Vec<String>> {
    preview
        .waves
        .iter()
        .map(|wave| wave.iter().map(ToString::to_string).collect())
        .collect()
}

/// The preview lists the restarts in the pacer's order, wave by wave (the namespaces in turn,
/// each wave as large as the concurrency), the evictions, and what is left to the user.
#[test]
fn the_preview_is_the_pacers_order_and_what_it_leaves() {
    let (a0, a1, b0, held) = (
        deployment("a", "w0"),
        deployment("a", "w1"),
        deployment("b", "w0"),
        deployment("c", "git"),
    );
    let mut world = World::stale(&[&a0, &a1, &b0, &held]);
    world.workloads.get_mut(&held).unwrap().holder = Some(Holder::AppliesHash {
        manager: "team-payments".into(),
    });
    world.pods.push(pod("d", "batch", Owner::Naked, OLD));
    world.pods.push(pod("d", "current", Owner::Naked, NEW));
    world.nad_hashes.insert("d".into(), NEW.into());
    let world = world.annotate("d", EVICT_ANNOTATION, "enabled");

    let one = world.preview(1);
    assert_eq!(
        waves(&one),
        [
            vec!["Deployment a/w0"],
            vec!["Deployment b/w0"],
            vec!["Deployment a/w1"]
        ]
    );
    assert_eq!(one.evictions, ["d/batch"]);
    let left: Vec<(String, bool)> = one
        .left
        .iter()
        .map(|(subject, why)| (subject.to_string(), why.contains("team-payments")))
        .collect();
    assert_eq!(left, [("Deployment c/git".to_string(), true)]);

    let two = world.preview(2);
    assert_eq!(
        waves(&two),
        [
            vec!["Deployment a/w0", "Deployment b/w0"],
            vec!["Deployment a/w1"]
        ]
    );
    assert_eq!((two.evictions, two.left), (one.evictions, one.left));
}

/// Nothing stale, nothing to preview; a workload not opted in is neither restarted nor left.
#[test]
fn a_current_cluster_previews_nothing() {
    let (current, out) = (deployment("a", "current"), deployment("a", "out"));
    let mut world = World::stale(&[&current, &out]);
    world.rolled(&current, NEW);
    world.workloads.get_mut(&out).unwrap().opted_in = Some(false);
    assert_eq!(
        world.preview(1),
        Preview {
            unopted: vec![out.clone()],
            ..Preview::default()
        }
    );
    world.rolled(&out, NEW);
    assert_eq!(world.preview(1), Preview::default());
    let planted = pod(
        "a",
        "planted",
        Owner::Unverified("ReplicaSet current-1".into()),
        OLD,
    );
    world.pods.push(planted);
    let preview = world.preview(1);
    assert!(preview.waves.is_empty());
    assert_eq!(
        preview
            .left
            .iter()
            .map(|(s, _)| s.clone())
            .collect::<Vec<_>>(),
        [Subject::Pod {
            namespace: "a".into(),
            name: "planted".into()
        }]
    );
}

/// The stale workloads that did not opt in are listed apart, each once, whatever their
/// number of pods: one opted out on its template, one of a namespace that is not opted in;
/// one opted in through its namespace is restarted, and one rendered with the new hash and
/// still rolling is neither.
#[test]
fn the_workloads_not_opted_in_are_listed_apart() {
    let (out, plain, by_namespace, rendered) = (
        deployment("a", "out"),
        deployment("b", "plain"),
        deployment("c", "by-namespace"),
        deployment("a", "rendered"),
    );
    let mut world = World::stale(&[&out, &plain, &by_namespace, &rendered]);
    world.workloads.get_mut(&out).unwrap().opted_in = Some(false);
    for key in [&plain, &by_namespace] {
        world.workloads.get_mut(key).unwrap().opted_in = None;
    }
    world.patched(&rendered, NEW);
    world
        .pods
        .push(pod("a", "out-2", Owner::Workload(out.clone()), OLD));
    let world = world.annotate("c", OPT_IN_ANNOTATION, "enabled");

    let preview = world.preview(1);
    assert_eq!(preview.unopted, [out, plain]);
    assert_eq!(waves(&preview), [vec!["Deployment c/by-namespace"]]);
    assert!(preview.left.is_empty(), "{:?}", preview.left);
}
