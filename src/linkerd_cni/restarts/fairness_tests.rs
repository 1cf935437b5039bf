//! Fair pacing: what one namespace does to its rollouts never holds another's restarts back
//! for more than one deadline.

use std::time::{Duration, Instant};

use super::super::test_world::*;
use super::super::{Action, Key};
use super::*;

/// The controller's pass.
const PASS: Duration = Duration::from_secs(2);
/// Six hours of passes: how long the transliteration of the former pacer ran without
/// restarting the victim.
const SIX_HOURS: u32 = 6 * 3600 / 2;

/// Plans every [`PASS`] from `start` for `passes`, patching what is restarted (its rollout is
/// left to `roll`, called after each pass with the keys restarted so far); returns each
/// restart with the time since `start`.
fn run(
    world: &mut World,
    pacer: &mut Pacer,
    passes: u32,
    mut roll: impl FnMut(&mut World, &[Key]),
) -> Vec<(Key, Duration)> {
    let start = Instant::now();
    let mut restarted: Vec<(Key, Duration)> = Vec::new();
    for pass in 0..passes {
        let at = PASS * pass;
        let actions = world.plan(pacer, start + at);
        for key in world.restart(&actions) {
            assert!(
                !restarted.iter().any(|(k, _)| *k == key),
                "{key} restarted twice"
            );
            restarted.push((key, at));
        }
        let keys: Vec<Key> = restarted.iter().map(|(k, _)| k.clone()).collect();
        roll(world, &keys);
    }
    restarted
}

/// The case: two opted-in Deployments of one namespace whose rollouts never complete,
/// their templates carrying the current hash (copied there by their team), their stale pods
/// kept. They hold no slot: the other namespace is restarted at the first pass, and nothing
/// holds it back over six hours.
#[test]
fn rollouts_the_controller_did_not_start_hold_no_slot() {
    let (x, y, victim) = (
        deployment("a", "x"),
        deployment("a", "y"),
        deployment("b", "victim"),
    );
    let mut world = World::stale(&[&x, &y, &victim]);
    world.patched(&x, NEW);
    world.patched(&y, NEW);
    let mut pacer = Pacer::new(1, MINUTE);
    let restarted = run(&mut world, &mut pacer, SIX_HOURS, |world, keys| {
        for key in keys {
            world.rolled(key, NEW);
        }
    });
    assert_eq!(restarted, [(victim, Duration::ZERO)]);
    assert!(
        pacer.halted().is_empty(),
        "a's rollouts are not the controller's"
    );
}

/// The controller's own restarts in a namespace never complete: the first holds the one slot
/// for one deadline, then halts its namespace, and the other namespace is restarted in that
/// very pass; the stalled rollout never takes a slot again, nor does its namespace.
#[test]
fn a_stalled_namespace_delays_another_by_at_most_one_deadline() {
    let (x, y, victim) = (
        deployment("a", "x"),
        deployment("a", "y"),
        deployment("b", "victim"),
    );
    let mut world = World::stale(&[&x, &y, &victim]);
    let mut pacer = Pacer::new(1, MINUTE);
    let restarted = run(&mut world, &mut pacer, SIX_HOURS, |world, keys| {
        // Only b's rollouts complete.
        for key in keys.iter().filter(|k| k.namespace == "b") {
            world.rolled(key, NEW);
        }
    });
    assert_eq!(restarted, [(x.clone(), Duration::ZERO), (victim, MINUTE)]);
    assert_eq!(pacer.halted().get("a"), Some(&vec![&x]));
    assert_eq!(pacer.rolling().count(), 0);
}

/// A rollout an earlier leader started (the controller's field manager wrote its hash) is
/// counted at the first pass only, and for one deadline: a team that writes the hash under the
/// controller's name later holds no slot.
#[test]
fn an_earlier_leaders_restart_is_counted_once_for_one_deadline() {
    let (adopted, forged, victim) = (
        deployment("a", "adopted"),
        deployment("a", "forged"),
        deployment("b", "victim"),
    );
    let mut world = World::stale(&[&adopted, &forged, &victim]);
    world.patched(&adopted, NEW);
    world.workloads.get_mut(&adopted).unwrap().ours = true;
    let mut pacer = Pacer::new(1, MINUTE);
    let start = Instant::now();
    let first = world.plan(&mut pacer, start);
    assert_eq!(
        restarts(&first),
        Vec::<String>::new(),
        "the slot is adopted's"
    );
    // Its team copies the hash under the controller's field manager into another template.
    world.patched(&forged, NEW);
    world.workloads.get_mut(&forged).unwrap().ours = true;
    let actions = world.plan(&mut pacer, start + PASS);
    assert_eq!(restarts(&actions), Vec::<String>::new());
    assert_eq!(pacer.rolling().collect::<Vec<_>>(), [&adopted]);
    let actions = world.plan(&mut pacer, start + MINUTE);
    assert!(actions.contains(&Action::Halted {
        key: adopted.clone(),
        after: MINUTE
    }));
    assert_eq!(
        restarts(&actions),
        [format!("Deployment b/victim -> {NEW}")]
    );
}

/// Slots go to the namespaces in turn: with one slot, a namespace with three workloads to
/// restart does not take three turns before the others take one.
#[test]
fn namespaces_are_served_in_turn() {
    let keys: Vec<Key> = [
        ("a", "w0"),
        ("a", "w1"),
        ("a", "w2"),
        ("b", "w0"),
        ("c", "w0"),
    ]
    .iter()
    .map(|(ns, name)| deployment(ns, name))
    .collect();
    let mut world = World::stale(&keys.iter().collect::<Vec<_>>());
    let mut pacer = Pacer::new(1, MINUTE);
    let restarted = run(&mut world, &mut pacer, 20, |world, keys| {
        // Each rollout completes before the next pass.
        for key in keys {
            world.rolled(key, NEW);
        }
    });
    let order: Vec<String> = restarted.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(
        order,
        [
            "Deployment a/w0",
            "Deployment b/w0",
            "Deployment c/w0",
            "Deployment a/w1",
            "Deployment a/w2"
        ]
    );
}

/// A namespace holds at most its share of the slots while others want one: with four slots
/// and three namespaces, the one whose rollouts never complete holds two.
#[test]
fn a_namespace_holds_at_most_its_share() {
    let mut keys: Vec<Key> = (0..10).map(|i| deployment("a", &format!("w{i}"))).collect();
    keys.extend([
        deployment("b", "w0"),
        deployment("b", "w1"),
        deployment("c", "w0"),
    ]);
    let mut world = World::stale(&keys.iter().collect::<Vec<_>>());
    let mut pacer = Pacer::new(4, MINUTE);
    let restarted = run(&mut world, &mut pacer, 2, |world, keys| {
        for key in keys.iter().filter(|k| k.namespace != "a") {
            world.rolled(key, NEW);
        }
    });
    let names: Vec<(String, Duration)> = restarted
        .iter()
        .map(|(k, at)| (format!("{}/{}", k.namespace, k.name), *at))
        .collect();
    let at = |secs| Duration::from_secs(secs);
    assert_eq!(
        names,
        [
            ("a/w0".to_string(), at(0)),
            ("b/w0".to_string(), at(0)),
            ("c/w0".to_string(), at(0)),
            ("a/w1".to_string(), at(0)),
            ("b/w1".to_string(), at(2)),
        ]
    );
    // Once no other namespace wants a slot, a's share is every slot.
    let more = run(&mut world, &mut pacer, 3, |_, _| {});
    assert_eq!(more.len(), 2, "{more:?}");
    assert!(more.iter().all(|(k, _)| k.namespace == "a"));
}
