//! The namespace cache: the annotations the pod rules read, for every
//! Namespace, fed by a kube-rs watch so a review costs no API call.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};

use crate::namespace::{INJECT_ANNOTATION, Lookup, MULTUS_ANNOTATION};

/// The annotations of one namespace that the rules read; the others are not kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations(Vec<(String, String)>);

impl Lookup for Annotations {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Whether the watch is current, and since when it is not.
#[derive(Debug, Clone, Copy)]
struct Health {
    synced: bool,
    broken_since: Option<Instant>,
}

/// The cache, shared by the watch task and the request handlers.
pub struct NamespaceCache {
    keys: Vec<String>,
    namespaces: RwLock<HashMap<String, Arc<Annotations>>>,
    health: RwLock<Health>,
}

/// A view of the cache's state for metrics and readiness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheStatus {
    /// Whether a full list has completed once.
    pub synced: bool,
    /// Whether the watch is running.
    pub watch_up: bool,
    /// Seconds since the cache was last known to be current: 0 while the watch is up.
    pub age_seconds: f64,
    /// How many namespaces it holds.
    pub namespaces: usize,
}

impl NamespaceCache {
    /// An empty, unsynced cache keeping the rule annotations and `uid_range_annotation`.
    pub fn new(uid_range_annotation: &str) -> Self {
        NamespaceCache {
            keys: vec![
                MULTUS_ANNOTATION.to_string(),
                INJECT_ANNOTATION.to_string(),
                uid_range_annotation.to_string(),
            ],
            namespaces: RwLock::new(HashMap::new()),
            health: RwLock::new(Health {
                synced: false,
                broken_since: None,
            }),
        }
    }

    /// The annotations of a namespace, if the cache holds it.
    pub fn get(&self, name: &str) -> Option<Arc<Annotations>> {
        self.namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Whether a full list has completed once.
    pub fn synced(&self) -> bool {
        self.health().synced
    }

    /// The state for metrics and readiness.
    pub fn status(&self) -> CacheStatus {
        let health = self.health();
        CacheStatus {
            synced: health.synced,
            watch_up: health.synced && health.broken_since.is_none(),
            age_seconds: health
                .broken_since
                .map_or(0.0, |since| since.elapsed().as_secs_f64()),
            namespaces: self
                .namespaces
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .len(),
        }
    }

    fn health(&self) -> Health {
        *self.health.read().unwrap_or_else(|e| e.into_inner())
    }

    fn set_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.health.write().unwrap_or_else(|e| e.into_inner()));
    }

    fn keep(&self, meta: &kube::core::ObjectMeta) -> Option<(String, Arc<Annotations>)> {
        let name = meta.name.clone()?;
        let annotations = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| self.keys.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some((name, Arc::new(Annotations(annotations))))
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Annotations>>> {
        self.namespaces.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists and watches Namespaces for ever. A watch that fails is started
    /// again with a fresh list after a back-off; meanwhile the cache keeps
    /// serving the last state it had, and says so in its status and the log.
    pub async fn run(self: Arc<Self>, api: Api<PartialObjectMeta<Namespace>>) {
        let mut backoff = Backoff::new();
        loop {
            let mut pending: Option<HashMap<String, Arc<Annotations>>> = None;
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
                tracing::debug!("namespace watch expired; listing again");
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
                    "namespace watch broken; serving from the last known namespaces"
                );
            } else {
                tracing::debug!(error = %error, retry_in = ?delay, "namespace watch still broken");
            }
            tokio::time::sleep(delay).await;
        }
    }

    fn apply(
        &self,
        event: Event<PartialObjectMeta<Namespace>>,
        pending: &mut Option<HashMap<String, Arc<Annotations>>>,
        backoff: &mut Backoff,
    ) {
        match event {
            Event::Init => *pending = Some(HashMap::new()),
            Event::InitApply(ns) => {
                if let (Some(map), Some((name, a))) = (pending.as_mut(), self.keep(&ns.metadata)) {
                    map.insert(name, a);
                }
            }
            Event::InitDone => {
                let listed = pending.take().unwrap_or_default();
                let count = listed.len();
                *self.write() = listed;
                let before = self.health();
                self.set_health(|h| {
                    h.synced = true;
                    h.broken_since = None;
                });
                backoff.reset();
                if !before.synced {
                    tracing::info!(namespaces = count, "namespace cache synced");
                } else if let Some(since) = before.broken_since {
                    tracing::info!(
                        namespaces = count,
                        broken_for = ?since.elapsed(),
                        "namespace watch recovered"
                    );
                }
            }
            Event::Apply(ns) => {
                if let Some((name, a)) = self.keep(&ns.metadata) {
                    self.write().insert(name, a);
                }
            }
            Event::Delete(ns) => {
                if let Some(name) = &ns.metadata.name {
                    self.write().remove(name);
                }
            }
        }
    }
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

    use super::*;

    fn ns(name: &str, annotations: &[(&str, &str)]) -> PartialObjectMeta<Namespace> {
        let mut meta = PartialObjectMeta::<Namespace>::default();
        meta.metadata.name = Some(name.to_string());
        meta.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        meta
    }

    #[test]
    fn events_build_the_cache() {
        let cache = NamespaceCache::new("openshift.io/sa.scc.uid-range");
        let mut pending = None;
        let mut backoff = Backoff::new();
        let mut feed = |e| cache.apply(e, &mut pending, &mut backoff);
        feed(Event::Init);
        feed(Event::InitApply(ns(
            "demo",
            &[("linkerd.io/multus", "enabled"), ("other", "x")],
        )));
        assert!(!cache.synced(), "not synced before InitDone");
        assert!(cache.get("demo").is_none(), "a list lands whole");
        feed(Event::InitDone);
        let demo = cache.get("demo").unwrap();
        assert_eq!(demo.lookup("linkerd.io/multus"), Some("enabled"));
        assert_eq!(
            demo.lookup("other"),
            None,
            "only the rule annotations are kept"
        );
        feed(Event::Apply(ns(
            "web",
            &[("openshift.io/sa.scc.uid-range", "1/2")],
        )));
        feed(Event::Delete(ns("demo", &[])));
        assert!(cache.get("demo").is_none());
        assert_eq!(
            cache.status(),
            CacheStatus {
                synced: true,
                watch_up: true,
                age_seconds: 0.0,
                namespaces: 1
            }
        );
        // A new list replaces the whole cache.
        feed(Event::Init);
        feed(Event::InitApply(ns("other", &[])));
        feed(Event::InitDone);
        assert!(cache.get("web").is_none());
        assert!(cache.get("other").is_some());
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
