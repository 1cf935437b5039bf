use super::super::test_world::*;
use super::super::{EVICT_ANNOTATION, Holder, Owner, Subject};
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
