//! The watch-fed caches: for every Namespace, and for every
//! NetworkAttachmentDefinition when the network-resources rules are on, the
//! annotations the rules read, fed by a kube-rs watch of their metadata so a
//! review costs no API call.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use compact_str::CompactString;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use crate::k8s::namespace::{INJECT_ANNOTATION, Lookup, MULTUS_ANNOTATION};
use crate::network_resources::{Nads, nad_annotation_keys};

/// The annotations of one object that the rules read; the others are not
/// kept. Short keys and values are held inline, so a lookup reads no other
/// memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations(Vec<(CompactString, CompactString)>);

impl Lookup for Annotations {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Since when the watch is broken, if it is.
#[derive(Debug, Clone, Copy)]
struct Health {
    broken_since: Option<Instant>,
}

type Entries = HashMap<CompactString, Annotations>;

/// What a cache holds: how objects are keyed, and what logs call them.
#[derive(Debug, Clone, Copy)]
struct Kind {
    /// `namespace`, `NAD`: the subject of the log lines.
    what: &'static str,
    /// `namespaces`, `NADs`.
    plural: &'static str,
    /// The key of an object: its name, or `namespace/name`.
    key: fn(&ObjectMeta) -> Option<CompactString>,
}

/// A cache, shared by its watch task and the request handlers.
pub struct WatchCache {
    kind: Kind,
    keys: Vec<String>,
    entries: RwLock<Entries>,
    /// Whether a full list has completed once: read on every review.
    synced: AtomicBool,
    health: RwLock<Health>,
}

/// The Namespace cache, keyed by name.
pub type NamespaceCache = WatchCache;
/// The NetworkAttachmentDefinition cache, keyed by `namespace/name`.
pub type NadCache = WatchCache;

/// A view of a cache's state for metrics and readiness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheStatus {
    /// Whether a full list has completed once.
    pub synced: bool,
    /// Whether the watch is running.
    pub watch_up: bool,
    /// Seconds since the cache was last known to be current: 0 while the watch is up.
    pub age_seconds: f64,
    /// How many objects it holds.
    pub entries: usize,
}

/// The NetworkAttachmentDefinition resource, for a metadata-only watch.
pub fn nad_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
        "network-attachment-definitions",
    )
}

fn nad_key(namespace: &str, name: &str) -> CompactString {
    compact_str::format_compact!("{namespace}/{name}")
}

impl WatchCache {
    /// An empty, unsynced Namespace cache keeping the rule annotations and
    /// `uid_range_annotation`.
    pub fn namespaces(uid_range_annotation: &str) -> Self {
        Self::new(
            Kind {
                what: "namespace",
                plural: "namespaces",
                key: |meta| meta.name.as_deref().map(CompactString::from),
            },
            vec![
                MULTUS_ANNOTATION.to_string(),
                INJECT_ANNOTATION.to_string(),
                uid_range_annotation.to_string(),
            ],
        )
    }

    /// An empty, unsynced NAD cache keeping the resource-name annotations
    /// `resource_name_keys` and the node selector: all the network-resources
    /// rules read of a NAD.
    pub fn nads(resource_name_keys: &[String]) -> Self {
        Self::new(
            Kind {
                what: "NAD",
                plural: "NADs",
                key: |meta| Some(nad_key(meta.namespace.as_deref()?, meta.name.as_deref()?)),
            },
            nad_annotation_keys(resource_name_keys),
        )
    }

    fn new(kind: Kind, keys: Vec<String>) -> Self {
        WatchCache {
            kind,
            keys,
            entries: RwLock::new(HashMap::new()),
            synced: AtomicBool::new(false),
            health: RwLock::new(Health { broken_since: None }),
        }
    }

    /// The cache at this moment, for one review; writes from the watch wait
    /// while the view lives.
    pub fn view(&self) -> View<'_> {
        View(self.read())
    }

    /// Whether a full list has completed once.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The state for metrics and readiness.
    pub fn status(&self) -> CacheStatus {
        let health = self.health();
        let synced = self.synced();
        CacheStatus {
            synced,
            watch_up: synced && health.broken_since.is_none(),
            age_seconds: health
                .broken_since
                .map_or(0.0, |since| since.elapsed().as_secs_f64()),
            entries: self.read().len(),
        }
    }

    fn health(&self) -> Health {
        *self.health.read().unwrap_or_else(|e| e.into_inner())
    }

    fn set_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.health.write().unwrap_or_else(|e| e.into_inner()));
    }

    fn keep(&self, meta: &ObjectMeta) -> Option<(CompactString, Annotations)> {
        let key = (self.kind.key)(meta)?;
        let annotations = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| self.keys.contains(k))
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        Some((key, Annotations(annotations)))
    }

    fn read(&self) -> RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists and watches the objects for ever. A watch that fails is started
    /// again with a fresh list after a back-off; meanwhile the cache keeps
    /// serving the last state it had, and says so in its status and the log.
    pub async fn run<K>(self: Arc<Self>, api: Api<PartialObjectMeta<K>>)
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync,
    {
        let Kind { what, plural, .. } = self.kind;
        let mut backoff = Backoff::new();
        loop {
            let mut pending: Option<Entries> = None;
            let stream = watcher::watcher(api.clone(), watcher::Config::default());
            futures_util::pin_mut!(stream);
            let error = loop {
                match stream.next().await {
                    Some(Ok(event)) => self.apply(event, &mut pending, &mut backoff),
                    Some(Err(e)) => break e,
                    None => unreachable!("a watcher stream never ends"),
                }
            };
            // 410 Gone is the API server asking for a new list: routine.
            let gone = matches!(&error, watcher::Error::WatchError(s) if s.code == 410);
            if gone {
                tracing::debug!("{what} watch expired; listing again");
                continue;
            }
            let delay = backoff.next();
            let first = self.health().broken_since.is_none();
            self.set_health(|h| {
                h.broken_since.get_or_insert_with(Instant::now);
            });
            if first {
                tracing::warn!(
                    error = %error,
                    retry_in = ?delay,
                    "{what} watch broken; serving from the last known {plural}"
                );
            } else {
                tracing::debug!(error = %error, retry_in = ?delay, "{what} watch still broken");
            }
            tokio::time::sleep(delay).await;
        }
    }

    fn apply<K: kube::Resource>(
        &self,
        event: Event<PartialObjectMeta<K>>,
        pending: &mut Option<Entries>,
        backoff: &mut Backoff,
    ) {
        let what = self.kind.what;
        match event {
            Event::Init => *pending = Some(HashMap::new()),
            Event::InitApply(object) => {
                if let (Some(map), Some((key, a))) = (pending.as_mut(), self.keep(&object.metadata))
                {
                    map.insert(key, a);
                }
            }
            Event::InitDone => {
                let listed = pending.take().unwrap_or_default();
                let count = listed.len();
                *self.write() = listed;
                let before = self.health();
                let was_synced = self.synced.swap(true, Ordering::AcqRel);
                self.set_health(|h| h.broken_since = None);
                backoff.reset();
                if !was_synced {
                    tracing::info!(entries = count, "{what} cache synced");
                } else if let Some(since) = before.broken_since {
                    tracing::info!(
                        entries = count,
                        broken_for = ?since.elapsed(),
                        "{what} watch recovered"
                    );
                }
            }
            Event::Apply(object) => {
                if let Some((key, a)) = self.keep(&object.metadata) {
                    self.write().insert(key, a);
                }
            }
            Event::Delete(object) => {
                if let Some(key) = (self.kind.key)(&object.metadata) {
                    self.write().remove(&key);
                }
            }
        }
    }
}

/// A cache at one moment, for the rules of one review.
pub struct View<'a>(RwLockReadGuard<'a, Entries>);

impl View<'_> {
    /// The annotations of an object, by key (a namespace's name), if the cache holds it.
    pub fn get(&self, key: &str) -> Option<&Annotations> {
        self.0.get(key)
    }
}

/// The NADs of a [`NadCache`].
impl Nads for View<'_> {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.0
            .get(&nad_key(namespace, name))
            .map(|a| a as &dyn Lookup)
    }
}

/// Runs a Namespace cache over the metadata of every Namespace.
pub async fn run_namespaces(cache: Arc<NamespaceCache>, client: kube::Client) {
    let api = Api::<PartialObjectMeta<Namespace>>::all(client);
    cache.run(api).await
}

/// Runs a NAD cache over the metadata of every NetworkAttachmentDefinition.
pub async fn run_nads(cache: Arc<NadCache>, client: kube::Client) {
    let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client, &nad_resource());
    cache.run(api).await
}

/// Exponential back-off between watch restarts: 1 s doubling up to 30 s.
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(30);

    fn new() -> Self {
        Backoff(Self::FIRST)
    }

    fn next(&mut self) -> Duration {
        let delay = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        delay
    }

    fn reset(&mut self) {
        self.0 = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::PartialObjectMetaExt;

    use super::*;
    use crate::network_resources::NODE_SELECTOR_ANNOTATION;

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

    fn ns(name: &str, annotations: &[(&str, &str)]) -> PartialObjectMeta<Namespace> {
        object(None, name, annotations)
    }

    #[test]
    fn events_build_the_cache() {
        let cache = WatchCache::namespaces("openshift.io/sa.scc.uid-range");
        let mut pending = None;
        let mut backoff = Backoff::new();
        let mut feed = |e| cache.apply(e, &mut pending, &mut backoff);
        feed(Event::Init);
        feed(Event::InitApply(ns(
            "demo",
            &[("linkerd.io/multus", "enabled"), ("other", "x")],
        )));
        assert!(!cache.synced(), "not synced before InitDone");
        assert!(cache.view().get("demo").is_none(), "a list lands whole");
        feed(Event::InitDone);
        let view = cache.view();
        let demo = view.get("demo").unwrap();
        assert_eq!(demo.lookup("linkerd.io/multus"), Some("enabled"));
        assert_eq!(
            demo.lookup("other"),
            None,
            "only the rule annotations are kept"
        );
        drop(view);
        feed(Event::Apply(ns(
            "web",
            &[("openshift.io/sa.scc.uid-range", "1/2")],
        )));
        feed(Event::Delete(ns("demo", &[])));
        assert!(cache.view().get("demo").is_none());
        assert_eq!(
            cache.status(),
            CacheStatus {
                synced: true,
                watch_up: true,
                age_seconds: 0.0,
                entries: 1
            }
        );
        // A new list replaces the whole cache.
        feed(Event::Init);
        feed(Event::InitApply(ns("other", &[])));
        feed(Event::InitDone);
        assert!(cache.view().get("web").is_none());
        assert!(cache.view().get("other").is_some());
    }

    const RESOURCE: &str = "k8s.v1.cni.cncf.io/resourceName";

    /// What a NAD cache answers after a list and some watch events: each
    /// lookup `(namespace, name)` and the annotations it should find (`None`:
    /// no such NAD).
    #[test]
    fn the_nad_cache_keeps_what_the_rules_read_by_namespace_and_name() {
        type Lookups = &'static [(
            (&'static str, &'static str),
            Option<&'static [(&'static str, &'static str)]>,
        )];
        const SRIOV: &[(&str, &str)] = &[(RESOURCE, "intel.com/sriov")];
        type Events = Vec<Event<PartialObjectMeta<DynamicObject>>>;
        let cases: Vec<(&str, Events, Lookups)> = vec![
            (
                "only the resource name and the node selector are kept",
                vec![
                    Event::InitApply(object(
                        Some("demo"),
                        "sriov",
                        &[
                            (RESOURCE, "intel.com/sriov"),
                            (NODE_SELECTOR_ANNOTATION, "sriov=true"),
                            ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
                        ],
                    )),
                    Event::InitDone,
                ],
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
                vec![
                    Event::InitApply(object(Some("demo"), "sriov", SRIOV)),
                    Event::InitApply(object(Some("other"), "sriov", &[])),
                    Event::InitDone,
                ],
                &[
                    (("demo", "sriov"), Some(SRIOV)),
                    (("other", "sriov"), Some(&[])),
                    (("third", "sriov"), None),
                ],
            ),
            (
                "a watch event adds, changes and deletes",
                vec![
                    Event::InitApply(object(Some("demo"), "a", &[])),
                    Event::InitDone,
                    Event::Apply(object(Some("demo"), "b", SRIOV)),
                    Event::Apply(object(
                        Some("demo"),
                        "a",
                        &[(NODE_SELECTOR_ANNOTATION, "k")],
                    )),
                    Event::Delete(object(Some("demo"), "b", &[])),
                ],
                &[
                    (("demo", "a"), Some(&[(NODE_SELECTOR_ANNOTATION, "k")])),
                    (("demo", "b"), None),
                ],
            ),
            (
                "a new list replaces the whole cache",
                vec![
                    Event::InitApply(object(Some("demo"), "a", &[])),
                    Event::InitDone,
                    Event::Init,
                    Event::InitApply(object(Some("demo"), "c", &[])),
                    Event::InitDone,
                ],
                &[(("demo", "a"), None), (("demo", "c"), Some(&[]))],
            ),
            (
                "an object without a namespace is not a NAD anyone selects",
                vec![Event::InitApply(object(None, "a", SRIOV)), Event::InitDone],
                &[(("", "a"), None)],
            ),
        ];
        for (name, events, lookups) in cases {
            let cache = WatchCache::nads(&[RESOURCE.to_string()]);
            let mut pending = None;
            let mut backoff = Backoff::new();
            cache.apply::<DynamicObject>(Event::Init, &mut pending, &mut backoff);
            for event in events {
                cache.apply(event, &mut pending, &mut backoff);
            }
            assert!(cache.synced(), "{name}");
            let view = cache.view();
            for ((namespace, nad), want) in lookups {
                let got = view.annotations(namespace, nad).map(|a| {
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
}
