//! The caches' unit tests.

use std::collections::BTreeMap;

use kube::Resource;
use kube::core::PartialObjectMetaExt;

use super::*;
use crate::admission::NadConfigs;
use crate::k8s::namespace::Lookup;
use crate::linkerd_cni::rollout;
use crate::network_resources::{NODE_SELECTOR_ANNOTATION, Nads};

/// NAD `namespace/name` picked from `cache`.
fn pick_nad(cache: &WatchCache, namespace: &str, name: &str) -> Picked {
    cache.pick([nad_key(namespace, name)])
}

fn object<K>(
    namespace: Option<&str>,
    name: &str,
    annotations: &[(&str, &str)],
) -> PartialObjectMeta<K> {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ObjectMeta::default()
    }
    .into_response_partial()
}

fn ns(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
    object::<Namespace>(None, name, annotations).metadata
}

/// A full list of `objects`, as the cache keeps it.
fn listed(cache: &WatchCache, objects: &[ObjectMeta]) -> Change {
    Change::Listed(objects.iter().filter_map(|o| cache.keep(o, None)).collect())
}

#[test]
fn events_build_the_cache() {
    let cache = WatchCache::namespaces("openshift.io/sa.scc.uid-range");
    assert!(!cache.synced(), "not synced before a list");
    cache.apply(listed(
        &cache,
        &[ns(
            "demo",
            &[("linkerd.io/multus", "enabled"), ("other", "x")],
        )],
    ));
    let demo = cache.get("demo").unwrap();
    assert_eq!(demo.key(), "demo");
    assert_eq!(
        demo.annotations().lookup("linkerd.io/multus"),
        Some("enabled")
    );
    assert_eq!(
        demo.annotations().lookup("other"),
        None,
        "only the rule annotations are kept"
    );
    cache.apply(Change::Applied(cache.keep(
        &ns("web", &[("openshift.io/sa.scc.uid-range", "1/2")]),
        None,
    )));
    cache.apply(Change::Deleted((cache.kind.key)(&ns("demo", &[]))));
    assert!(cache.get("demo").is_none());
    assert_eq!(
        cache.status(),
        CacheStatus {
            synced: true,
            watch_up: true,
            age_seconds: 0.0,
            entries: 1,
            lists: 1,
        }
    );
    // A new list replaces the whole cache.
    cache.apply(listed(&cache, &[ns("other", &[])]));
    assert_eq!(cache.status().lists, 2);
    assert!(cache.get("web").is_none());
    assert!(cache.get("other").is_some());
}

const RESOURCE: &str = "k8s.v1.cni.cncf.io/resourceName";

/// One step of a NAD cache's life.
enum Step {
    List(Vec<ObjectMeta>),
    Apply(ObjectMeta),
    Delete(ObjectMeta),
}

fn nad(namespace: Option<&str>, name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
    object::<DynamicObject>(namespace, name, annotations).metadata
}

/// Lookups in the cache, `(namespace, name)`, and the annotations found.
type Lookups = &'static [(
    (&'static str, &'static str),
    Option<&'static [(&'static str, &'static str)]>,
)];

/// A NAD's SR-IOV resource name.
const SRIOV: &[(&str, &str)] = &[(RESOURCE, "intel.com/sriov")];

/// A list, then watch events: `Applied` (true) or `Deleted` (false).
type Events = Vec<Step>;

/// The NAD cache cases: a name, the events, and the lookups after them.
fn nad_cache_cases() -> Vec<(&'static str, Events, Lookups)> {
    vec![
        (
            "only the resource name and the node selector are kept",
            vec![Step::List(vec![nad(
                Some("demo"),
                "sriov",
                &[
                    (RESOURCE, "intel.com/sriov"),
                    (NODE_SELECTOR_ANNOTATION, "sriov=true"),
                    ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
                ],
            )])],
            &[(
                ("demo", "sriov"),
                Some(&[
                    (RESOURCE, "intel.com/sriov"),
                    (NODE_SELECTOR_ANNOTATION, "sriov=true"),
                ]),
            )],
        ),
        (
            "the same name in two namespaces is two NADs",
            vec![Step::List(vec![
                nad(Some("demo"), "sriov", SRIOV),
                nad(Some("other"), "sriov", &[]),
            ])],
            &[
                (("demo", "sriov"), Some(SRIOV)),
                (("other", "sriov"), Some(&[])),
                (("third", "sriov"), None),
            ],
        ),
        (
            "a watch event adds, changes and deletes",
            vec![
                Step::List(vec![nad(Some("demo"), "a", &[])]),
                Step::Apply(nad(Some("demo"), "b", SRIOV)),
                Step::Apply(nad(Some("demo"), "a", &[(NODE_SELECTOR_ANNOTATION, "k")])),
                Step::Delete(nad(Some("demo"), "b", &[])),
            ],
            &[
                (("demo", "a"), Some(&[(NODE_SELECTOR_ANNOTATION, "k")])),
                (("demo", "b"), None),
            ],
        ),
        (
            "a new list replaces the whole cache",
            vec![
                Step::List(vec![nad(Some("demo"), "a", &[])]),
                Step::List(vec![nad(Some("demo"), "c", &[])]),
            ],
            &[(("demo", "a"), None), (("demo", "c"), Some(&[]))],
        ),
        (
            "an object without a namespace is not a NAD anyone selects",
            vec![Step::List(vec![nad(None, "a", SRIOV)])],
            &[(("", "a"), None)],
        ),
    ]
}

/// What a NAD cache answers after a list and some watch events: each
/// lookup `(namespace, name)` and the annotations it should find (`None`:
/// no such NAD).
#[test]
fn the_nad_cache_keeps_what_the_rules_read_by_namespace_and_name() {
    for (name, events, lookups) in nad_cache_cases() {
        let cache = WatchCache::nads(&[RESOURCE.to_string()]);
        for step in events {
            cache.apply(match step {
                Step::List(objects) => listed(&cache, &objects),
                Step::Apply(object) => Change::Applied(cache.keep(&object, None)),
                Step::Delete(object) => Change::Deleted((cache.kind.key)(&object)),
            });
        }
        assert!(cache.synced(), "{name}");
        for ((namespace, nad), want) in lookups {
            let picked = pick_nad(&cache, namespace, nad);
            let got = picked.annotations(namespace, nad).map(|a| {
                [
                    RESOURCE,
                    NODE_SELECTOR_ANNOTATION,
                    "kubectl.kubernetes.io/last-applied-configuration",
                ]
                .into_iter()
                .filter_map(|k| Some((k, a.lookup(k)?)))
                .collect::<Vec<_>>()
            });
            assert_eq!(got.as_deref(), *want, "{name}: {namespace}/{nad}");
        }
    }
}

#[test]
fn backoff_doubles_up_to_a_ceiling() {
    let mut b = Backoff::new();
    let delays: Vec<u64> = (0..7).map(|_| b.next().as_secs()).collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
    b.reset();
    assert_eq!(b.next().as_secs(), 1);
}

/// A cache vouches once synced, while its watch is up or down for no longer
/// than the outage allowed; otherwise it says why not.
#[test]
fn a_cache_vouches_while_synced_and_its_watch_is_down_no_longer_than_allowed() {
    let (minute, second) = (Duration::from_secs(60), Duration::from_secs(1));
    let mut cache = WatchCache::namespaces("openshift.io/sa.scc.uid-range");
    assert!(!cache.vouches(minute));
    assert_eq!(
        cache.not_current(minute).as_deref(),
        Some("the namespace cache has not synced yet")
    );
    cache.apply(listed(&cache, &[]));
    assert!(cache.vouches(second));
    assert_eq!(cache.not_current(second), None);
    // The watch broke 5 s ago.
    cache.epoch = Instant::now()
        .checked_sub(Duration::from_secs(10))
        .expect("an instant 10 s ago");
    cache.broken_since.store(5_000 + 1, Ordering::Release);
    cache.set_health(|h| h.error = Some("connection refused".into()));
    assert!(
        cache
            .broken_for()
            .is_some_and(|d| d >= Duration::from_secs(5))
    );
    assert!(cache.vouches(minute), "within the outage allowed");
    assert!(!cache.vouches(second));
    assert_eq!(
        cache.not_current(second).as_deref(),
        Some(
            "the namespace watch has been down for 5s, longer than --max-watch-outage 1s: connection refused"
        )
    );
    assert!(!cache.status().watch_up);
    // Up again.
    cache.up();
    assert!(cache.vouches(second));
    assert_eq!(cache.status().age_seconds, 0.0);
}

/// A NAD read whole, as the API server sends it in a list or a watch event.
fn whole_nad(namespace: &str, name: &str, config: Option<&str>) -> DynamicObject {
    let mut nad = serde_json::json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "7"},
    });
    if let Some(config) = config {
        nad["spec"] = serde_json::json!({ "config": config });
    }
    serde_json::from_value(nad).unwrap()
}

/// A NAD cache keeps the hash of each NAD's `spec.config`, computed as the
/// render computes it, when the NAD is listed or changes; not its config.
#[test]
fn the_nad_cache_keeps_the_hash_of_each_config() {
    let (old, new) = (
        r#"{"type":"linkerd-cni"}"#,
        r#"{"type":"linkerd-cni","x":1}"#,
    );
    let cache = WatchCache::nads(&[]);
    let kept = |o: &DynamicObject| cache.keep(o.meta(), o.config());
    let listed: Entries = [
        whole_nad("demo", "linkerd-cni", Some(old)),
        whole_nad("bare", "linkerd-cni", None),
    ]
    .iter()
    .filter_map(kept)
    .collect();
    cache.apply(Change::Listed(listed));
    let hash = |ns: &str| {
        pick_nad(&cache, ns, "linkerd-cni")
            .config_hash(ns, "linkerd-cni")
            .map(str::to_string)
    };
    assert_eq!(hash("demo"), Some(rollout::config_hash(old)));
    assert_eq!(hash("bare"), None, "a NAD without spec.config has no hash");
    assert_eq!(hash("absent"), None);
    cache.apply(Change::Applied(kept(&whole_nad(
        "demo",
        "linkerd-cni",
        Some(new),
    ))));
    assert_eq!(
        hash("demo"),
        Some(rollout::config_hash(new)),
        "a change re-hashes"
    );
    assert!(
        pick_nad(&cache, "demo", "linkerd-cni")
            .annotations("demo", "linkerd-cni")
            .is_some()
    );
    let metadata = object::<DynamicObject>(Some("demo"), "m", &[]);
    assert_eq!(metadata.config(), None, "metadata holds no config");
}

/// A NAD cache keeps what each NAD of someone else runs when it is not
/// Linkerd-CNI; a NAD this project made is not judged, as the render does not.
#[test]
fn the_nad_cache_keeps_what_a_foreign_nad_runs() {
    let macvlan = r#"{"cniVersion":"0.3.1","type":"macvlan"}"#;
    let cache = WatchCache::nads(&[]);
    let kept = |o: &DynamicObject| cache.keep(o.meta(), o.config());
    let mut ours = whole_nad("rendered", "linkerd-cni", Some(macvlan));
    ours.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_string(),
            "linkerd-multus".to_string(),
        )]
        .into(),
    );
    let listed: Entries = [
        whole_nad("taken", "linkerd-cni", Some(macvlan)),
        whole_nad(
            "chained",
            "linkerd-cni",
            Some(r#"{"plugins":[{"type":"bridge"},{"type":"linkerd-cni"}]}"#),
        ),
        whole_nad("broken", "linkerd-cni", Some("{")),
        whole_nad("file", "linkerd-cni", None),
        ours,
    ]
    .iter()
    .filter_map(kept)
    .collect();
    cache.apply(Change::Listed(listed));
    for (ns, want) in [
        ("taken", Some("macvlan")),
        ("chained", None),
        ("broken", Some("no valid CNI configuration")),
        ("file", None),
        ("rendered", None),
        ("absent", None),
    ] {
        let picked = pick_nad(&cache, ns, "linkerd-cni");
        assert_eq!(picked.other_network(ns, "linkerd-cni"), want, "{ns}");
    }
}

/// What a review picks holds no lock: the watch writes while a review still reads what it
/// picked (a guard held here would deadlock this thread), and the review keeps the entries
/// as they were when picked, while the next pick sees the write.
#[test]
fn a_pick_holds_no_lock_and_keeps_what_it_took() {
    let cache = WatchCache::nads(&[RESOURCE.to_string()]);
    let nad =
        |value: &str| object::<Namespace>(Some("demo"), "data", &[(RESOURCE, value)]).metadata;
    cache.apply(listed(&cache, &[nad("intel/sriov")]));
    let picked = pick_nad(&cache, "demo", "data");
    let unpicked = pick_nad(&cache, "demo", "other");
    cache.apply(Change::Applied(cache.keep(&nad("mellanox/sriov"), None)));
    cache.apply(listed(&cache, &[]));
    let resource = |p: &Picked| {
        p.annotations("demo", "data")
            .and_then(|a| a.lookup(RESOURCE))
            .map(str::to_string)
    };
    assert_eq!(resource(&picked).as_deref(), Some("intel/sriov"));
    assert!(matches!(picked.nad("demo", "other"), Entry::NotPicked));
    assert!(matches!(unpicked.nad("demo", "other"), Entry::Lacked));
    assert_eq!(
        resource(&pick_nad(&cache, "demo", "data")),
        None,
        "the list removed it"
    );
}
