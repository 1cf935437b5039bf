//! The watch-fed caches: for every Namespace, and for every
//! NetworkAttachmentDefinition when the missing-NAD check or the
//! network-resources rules read them, the annotations the rules read (and of
//! a NAD the hash of its config), fed by a list and watch so a review costs no
//! API call. Namespaces are listed and watched as metadata; NADs whole, since
//! their config is in their spec, and only its hash is kept.
//!
//! The list-and-watch loop is written here over kube-rs's `list_metadata` and
//! `watch_metadata` rather than taken from kube-runtime's watcher, because the
//! caches must say exactly when they are current: the watcher resumes a broken
//! watch from its resourceVersion (as this loop does) but does not tell when
//! the resumed watch is established, so a cache fed by it could not report its
//! watch up again until the next change.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};

use compact_str::CompactString;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::{ObjectMeta, PartialObjectMeta};
use serde::de::DeserializeOwned;

use crate::k8s::namespace::{INJECT_ANNOTATION, MULTUS_ANNOTATION};
use crate::linkerd_cni::skip_subnets;
use crate::network_resources::nad_annotation_keys;
use crate::webhook::entries::ByKey;
pub use crate::webhook::entries::{Annotations, Entry, Keys, Picked, Stored, keys, nad_key};

/// An object a cache is fed: its metadata, and the NAD config it holds.
pub trait Cached: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    /// The `spec.config` of a NAD read whole; `None` for metadata.
    fn config(&self) -> Option<&str> {
        None
    }
}

impl<K> Cached for PartialObjectMeta<K> where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static
{
}

impl Cached for DynamicObject {
    fn config(&self) -> Option<&str> {
        nad_config(self)
    }
}

/// A NAD's `spec.config`, when it is a string.
pub fn nad_config(nad: &DynamicObject) -> Option<&str> {
    nad.data.get("spec")?.get("config")?.as_str()
}

/// Why the watch is broken, since when.
#[derive(Debug, Clone, Default)]
struct Health {
    /// The last error of the broken watch; `None` while it is up.
    error: Option<String>,
}

/// The objects of a cache, each behind an `Arc` that holds its key too, looked up by that
/// key: a review takes the ones it needs under the read lock and reads them after releasing
/// it.
type Entries = HashSet<ByKey>;

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
    keys: Keys,
    /// Read by every review: a reader locks the shard of its thread only, so the cores
    /// answering reviews share no lock's cache line; a watch write locks every shard.
    entries: ShardedLock<Entries>,
    /// Whether a full list has completed once: read on every review.
    synced: AtomicBool,
    /// How many full lists have completed.
    lists: AtomicU64,
    /// Since when the watch is broken, in milliseconds after `epoch` plus
    /// one; 0 while it is up. Read on every review.
    broken_since: AtomicU64,
    epoch: Instant,
    health: RwLock<Health>,
    /// The deadline of each list page and watch request.
    api_timeout: Duration,
    /// Notified when the watch adds or changes an object, or a list completes.
    changed: tokio::sync::Notify,
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
    /// How many full lists it has made: one at the start, and one each time
    /// its resourceVersion expired (410 Gone).
    pub lists: u64,
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
                skip_subnets::OPT_IN_ANNOTATION.to_string(),
                skip_subnets::ANNOTATION.to_string(),
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
            keys: crate::webhook::entries::keys(&keys),
            entries: ShardedLock::new(Entries::default()),
            synced: AtomicBool::new(false),
            lists: AtomicU64::new(0),
            broken_since: AtomicU64::new(0),
            epoch: Instant::now(),
            health: RwLock::new(Health::default()),
            api_timeout: DEFAULT_API_TIMEOUT,
            changed: tokio::sync::Notify::new(),
        }
    }

    /// The same cache with `timeout` as the deadline of each list page and
    /// watch request (`--api-timeout`).
    pub fn with_api_timeout(mut self, timeout: Duration) -> Self {
        self.api_timeout = timeout;
        self
    }

    /// The annotations it keeps of an object.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// How long the watch has been broken; `None` while it is up.
    pub fn broken_for(&self) -> Option<Duration> {
        match self.broken_since.load(Ordering::Acquire) {
            0 => None,
            since => {
                let since = self.epoch + Duration::from_millis(since - 1);
                Some(since.elapsed())
            }
        }
    }

    /// Whether the cache can answer for what it holds and what it lacks:
    /// synced, and its watch up or broken for no longer than `max_outage`.
    pub fn vouches(&self, max_outage: Duration) -> bool {
        self.synced() && self.broken_for().is_none_or(|d| d <= max_outage)
    }

    /// Whether the cache can answer that an object it lacks does not exist:
    /// synced and its watch up, so an object made a moment ago reaches it
    /// within the watch's lag ([`WatchCache::holds_by`]).
    pub fn watching(&self) -> bool {
        self.synced() && self.broken_for().is_none()
    }

    /// Whether the cache holds `key` by `deadline`: at once, or once its
    /// watch brings it.
    pub async fn holds_by(&self, key: &str, deadline: tokio::time::Instant) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.read().contains(key) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }

    /// Why the cache cannot answer (see [`WatchCache::vouches`]), if it cannot.
    pub fn not_current(&self, max_outage: Duration) -> Option<String> {
        let Kind { what, .. } = self.kind;
        if !self.synced() {
            return Some(format!("the {what} cache has not synced yet"));
        }
        let broken = self.broken_for().filter(|d| *d > max_outage)?;
        let error = self.health().error.unwrap_or_default();
        Some(format!(
            "the {what} watch has been down for {}s, longer than --max-watch-outage {}: {error}",
            broken.as_secs(),
            humantime::format_duration(max_outage),
        ))
    }

    /// The entry of `key` (a namespace's name, or [`nad_key`]), if the cache holds it. The
    /// read lock is held for the lookup only: the watch's writes never wait for a review.
    pub fn get(&self, key: &str) -> Option<Arc<Stored>> {
        self.read().get(key).map(|entry| entry.0.clone())
    }

    /// The entries of `keys` at one moment, for the rules of one review: taken under one
    /// read lock, released before this returns, so that no rule runs while holding a lock
    /// the watch's writes (and every reader after them) would queue on. The keys are sorted
    /// before the lock is taken.
    pub fn pick(&self, keys: impl IntoIterator<Item = CompactString>) -> Picked {
        let mut picked = Picked(keys.into_iter().map(|key| (key, None)).collect());
        picked.0.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        picked.0.dedup_by(|a, b| a.0 == b.0);
        if picked.0.is_empty() {
            // Most reviews: a pod the rules do not attach reads no NAD.
            return picked;
        }
        let entries = self.read();
        for (key, entry) in &mut picked.0 {
            crate::work::count(1);
            *entry = entries.get(key.as_str()).map(|stored| stored.0.clone());
        }
        picked
    }

    /// Whether a full list has completed once.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The state for metrics and readiness.
    pub fn status(&self) -> CacheStatus {
        let broken = self.broken_for();
        let synced = self.synced();
        CacheStatus {
            synced,
            watch_up: synced && broken.is_none(),
            age_seconds: broken.map_or(0.0, |d| d.as_secs_f64()),
            entries: self.read().len(),
            lists: self.lists.load(Ordering::Relaxed),
        }
    }

    fn health(&self) -> Health {
        self.health
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.health.write().unwrap_or_else(|e| e.into_inner()));
    }

    fn keep(&self, meta: &ObjectMeta, config: Option<&str>) -> Option<ByKey> {
        let key = (self.kind.key)(meta)?;
        let annotations = Annotations::of(meta, &self.keys, config);
        Some(ByKey(Stored::new(key, annotations)))
    }

    fn read(&self) -> ShardedLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> ShardedLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists and watches the objects for ever. A watch that ends or fails is
    /// resumed from the last resourceVersion seen, after a back-off when it
    /// failed; only when that version has expired (410 Gone) does the cache
    /// list again. Meanwhile it keeps serving the last state it had, and says
    /// so in its status and the log.
    pub async fn run<K: Cached>(self: Arc<Self>, api: Api<K>) {
        let mut backoff = Backoff::new();
        loop {
            match self.list(&api).await {
                Ok(version) => {
                    self.watch(&api, version, &mut backoff).await;
                    tracing::info!("{} watch expired (410 Gone); listing again", self.kind.what);
                }
                Err(error) if is_gone(&error) => {}
                Err(error) => self.broken(&error, backoff.next()).await,
            }
        }
    }

    /// Lists every object, page by page, and replaces the cache with them at
    /// once. Returns the list's resourceVersion.
    async fn list<K: Cached>(&self, api: &Api<K>) -> kube::Result<String> {
        let mut listed = Entries::default();
        let mut params = ListParams::default().limit(LIST_PAGE);
        loop {
            let page = within(self.api_timeout, api.list(&params)).await?;
            listed.extend(
                page.items
                    .iter()
                    .filter_map(|o| self.keep(o.meta(), o.config())),
            );
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => {
                    self.apply(Change::Listed(listed));
                    return Ok(page.metadata.resource_version.unwrap_or_default());
                }
            }
        }
    }

    /// Watches from `version`, resuming after every end or failure, until the
    /// version expires.
    async fn watch<K: Cached>(&self, api: &Api<K>, mut version: String, backoff: &mut Backoff) {
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        loop {
            let stream = match within(self.api_timeout, api.watch(&params, &version)).await {
                Ok(stream) => stream,
                Err(error) if is_gone(&error) => return,
                Err(error) => {
                    self.broken(&error, backoff.next()).await;
                    continue;
                }
            };
            self.up();
            backoff.reset();
            futures_util::pin_mut!(stream);
            let failure = loop {
                // The server ends the watch after WATCH_SECONDS; silence past that
                // is a connection that died without a word.
                let next = tokio::time::timeout(WATCH_DEAD_AFTER, stream.next()).await;
                match next {
                    Ok(Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                        version = o.meta().resource_version.clone().unwrap_or(version);
                        self.apply(Change::Applied(self.keep(o.meta(), o.config())));
                    }
                    Ok(Some(Ok(WatchEvent::Deleted(o)))) => {
                        version = o.meta().resource_version.clone().unwrap_or(version);
                        self.apply(Change::Deleted((self.kind.key)(o.meta())));
                    }
                    Ok(Some(Ok(WatchEvent::Bookmark(b)))) => {
                        version = b.metadata.resource_version;
                    }
                    Ok(Some(Ok(WatchEvent::Error(status)))) if status.code == 410 => return,
                    Ok(Some(Ok(WatchEvent::Error(status)))) => {
                        break Some(kube::Error::Api(status));
                    }
                    Ok(Some(Err(error))) => break Some(error),
                    // The server ended the watch: resume at once.
                    Ok(None) => break None,
                    Err(_) => {
                        break Some(kube::Error::Service(
                            format!("no word from the watch in {WATCH_DEAD_AFTER:?}").into(),
                        ));
                    }
                }
            };
            if let Some(error) = failure {
                self.broken(&error, backoff.next()).await;
            }
        }
    }

    /// Marks the watch broken (logging it the first time), then waits `delay`.
    async fn broken(&self, error: &kube::Error, delay: Duration) {
        let Kind { what, plural, .. } = self.kind;
        let since = self.epoch.elapsed().as_millis() as u64 + 1;
        let first = self
            .broken_since
            .compare_exchange(0, since, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        self.set_health(|h| h.error = Some(error.to_string()));
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

    /// Marks the cache current: a list completed or a watch is established.
    fn up(&self) {
        let broken_for = self.broken_for();
        self.broken_since.store(0, Ordering::Release);
        self.set_health(|h| h.error = None);
        if let Some(broken_for) = broken_for {
            tracing::info!(
                entries = self.read().len(),
                ?broken_for,
                "{} watch recovered",
                self.kind.what
            );
        }
    }

    fn apply(&self, change: Change) {
        match change {
            Change::Listed(listed) => {
                let count = listed.len();
                let replaced = std::mem::replace(&mut *self.write(), listed);
                // The old entries are freed after the lock is released.
                drop(replaced);
                self.lists.fetch_add(1, Ordering::Relaxed);
                let was_synced = self.synced.swap(true, Ordering::AcqRel);
                if !was_synced {
                    tracing::info!(entries = count, "{} cache synced", self.kind.what);
                }
                self.up();
                self.changed.notify_waiters();
            }
            Change::Applied(kept) => {
                if let Some(kept) = kept {
                    // `replace`, not `insert`: a set keeps the entry it holds for the key.
                    self.write().replace(kept);
                    self.changed.notify_waiters();
                }
            }
            Change::Deleted(key) => {
                if let Some(key) = key {
                    self.write().remove(key.as_str());
                }
            }
        }
    }
}

/// What a list or a watch event does to a cache.
enum Change {
    /// A full list: the cache becomes exactly this.
    Listed(Entries),
    /// An object added or changed, as kept (`None`: it has no key).
    Applied(Option<ByKey>),
    /// An object deleted, by its key (`None`: it has none).
    Deleted(Option<CompactString>),
}

/// Objects per page of a list.
const LIST_PAGE: u32 = 500;
/// How long the API server keeps one watch request open (kube-rs's default).
const WATCH_SECONDS: u32 = 290;
/// A watch silent for this long is a dead connection.
const WATCH_DEAD_AFTER: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 5);

/// The deadline of API calls when none is given (`--api-timeout`'s default).
const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(10);

/// `call` with a deadline: a call that does not answer in time fails as one
/// that errs, and the cache retries it after its back-off.
async fn within<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = kube::Result<T>>,
) -> kube::Result<T> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(kube::Error::Service(
                format!("no answer from the API server in {timeout:?} (--api-timeout)").into(),
            ))
        })
}

/// Whether the API server answered 410 Gone: the resourceVersion (or list
/// continuation) expired.
fn is_gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

/// Runs a Namespace cache over the metadata of every Namespace.
pub async fn run_namespaces(cache: Arc<NamespaceCache>, client: kube::Client) {
    let api = Api::<PartialObjectMeta<Namespace>>::all(client);
    cache.run(api).await
}

/// Runs a NAD cache over every NetworkAttachmentDefinition, read whole for
/// the hash of its config.
pub async fn run_nads(cache: Arc<NadCache>, client: kube::Client) {
    let api = Api::<DynamicObject>::all_with(client, &crate::multus::nad::api_resource());
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
#[path = "cache_tests.rs"]
mod tests;
