//! Live reads of what the caches cannot vouch for: a namespace or NAD missing
//! from a cache whose watch is down, or anything while a cache's watch has
//! been down too long (a cache whose watch is up answers for what it lacks
//! itself). One GET each (of a namespace's metadata, of a NAD whole, for the
//! hash of its config), with a short deadline (`--live-read-timeout`), shared
//! by the reviews that need the same object at the same time, its result
//! remembered for [`REMEMBER`], and bounded in number and rate, so that no
//! caller can turn reviews into a flood of API calls.
//!
//! The budget is shared fairly: a review in a namespace the namespace cache
//! knows draws on its namespace's own share (at most
//! [`PER_NAMESPACE_IN_FLIGHT`] reads in flight, [`PER_NAMESPACE_RATE`] a
//! second); reviews in namespaces it does not know (new ones, or names made
//! up) share at most half of the whole. So a flood of reviews naming random
//! namespaces cannot spend what another tenant's reviews need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compact_str::CompactString;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::webhook::cache::{Annotations, Keys, nad_config};
use crate::webhook::metrics::{LiveObject, LiveResult, Metrics};

/// Live reads in flight at once; more wait for none and are refused.
pub const MAX_IN_FLIGHT: usize = 16;
/// Live reads started per second, on average ...
const RATE_PER_SECOND: f64 = 100.0;
/// ... with bursts of up to this many.
const BURST: f64 = 200.0;
/// Live reads in flight at once for one namespace the cache knows ...
pub const PER_NAMESPACE_IN_FLIGHT: usize = 2;
/// ... started per second on average, in bursts of up to twice as many.
pub const PER_NAMESPACE_RATE: f64 = 5.0;
/// How long what a live read found (or that the object is absent) answers
/// the reviews that need the same object: a burst of pods in one namespace
/// during a watch outage costs one read, and so does a flood naming one
/// namespace that does not exist.
pub const REMEMBER: Duration = Duration::from_secs(2);
/// The most namespaces with a share of their own, and results remembered:
/// past it, the oldest are forgotten.
const MAX_TRACKED: usize = 4096;

/// What a live read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Live {
    /// The object exists; the annotations the rules read (and a NAD's config hash).
    Found(Annotations),
    /// The API server says it does not exist.
    Absent,
    /// It could not be read: why, for the review's answer.
    Failed(String),
}

/// An object to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    Namespace(CompactString),
    Nad {
        namespace: CompactString,
        name: CompactString,
    },
}

impl Target {
    fn object(&self) -> LiveObject {
        match self {
            Target::Namespace(_) => LiveObject::Namespace,
            Target::Nad { .. } => LiveObject::Nad,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Namespace(name) => write!(f, "namespace {name}"),
            Target::Nad { namespace, name } => {
                write!(f, "NetworkAttachmentDefinition {namespace}/{name}")
            }
        }
    }
}

type Flight = Shared<BoxFuture<'static, Live>>;

/// Whose budget a read draws on: the namespace of the review that needs it.
#[derive(Debug, Clone, Copy)]
pub struct Tenant<'a> {
    /// The review's namespace.
    pub namespace: &'a str,
    /// Whether the namespace cache holds it (its watch up or not).
    pub known: bool,
}

/// One known namespace's share of the budget.
struct Share {
    permits: Arc<Semaphore>,
    bucket: TokenBucket,
    used: Instant,
}

/// The budget of live reads: the whole, the half strangers share, and each
/// known namespace's share.
struct Budget {
    permits: Arc<Semaphore>,
    bucket: Mutex<TokenBucket>,
    strangers: Arc<Semaphore>,
    strangers_bucket: Mutex<TokenBucket>,
    shares: Mutex<HashMap<CompactString, Share>>,
}

/// The permits a read holds until it ends.
struct Permits {
    _all: OwnedSemaphorePermit,
    _share: OwnedSemaphorePermit,
}

impl Budget {
    fn new() -> Self {
        Budget {
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            bucket: Mutex::new(TokenBucket::new(RATE_PER_SECOND, BURST)),
            strangers: Arc::new(Semaphore::new(MAX_IN_FLIGHT / 2)),
            strangers_bucket: Mutex::new(TokenBucket::new(RATE_PER_SECOND / 2.0, BURST / 2.0)),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// Permits for a read for `tenant`, at `now`: its share's, then the
    /// whole's; `None` (nothing taken) when either is spent.
    fn admit(&self, tenant: Tenant<'_>, now: Instant) -> Option<Permits> {
        let share = if tenant.known {
            let mut shares = lock(&self.shares);
            if !shares.contains_key(tenant.namespace) && shares.len() >= MAX_TRACKED {
                forget_oldest(&mut shares, |share| share.used);
            }
            let share = shares
                .entry(tenant.namespace.into())
                .or_insert_with(|| Share {
                    permits: Arc::new(Semaphore::new(PER_NAMESPACE_IN_FLIGHT)),
                    bucket: TokenBucket::new(PER_NAMESPACE_RATE, 2.0 * PER_NAMESPACE_RATE),
                    used: now,
                });
            share.used = now;
            let permit = share.permits.clone().try_acquire_owned().ok()?;
            share.bucket.has(now).then_some(permit)?
        } else {
            let permit = self.strangers.clone().try_acquire_owned().ok()?;
            lock(&self.strangers_bucket).has(now).then_some(permit)?
        };
        let all = self.permits.clone().try_acquire_owned().ok()?;
        if !lock(&self.bucket).take(now) {
            return None;
        }
        // The share's token is taken only once the whole's could be.
        if tenant.known {
            if let Some(share) = lock(&self.shares).get_mut(tenant.namespace) {
                share.bucket.take(now);
            }
        } else {
            lock(&self.strangers_bucket).take(now);
        }
        Some(Permits {
            _all: all,
            _share: share,
        })
    }
}

/// Why a read was refused, for the review's answer.
fn refused(target: &Target, tenant: Tenant<'_>) -> String {
    let whose = if tenant.known {
        format!(
            "namespace {}'s share ({PER_NAMESPACE_IN_FLIGHT} in flight, {PER_NAMESPACE_RATE}/s) or the whole budget ({MAX_IN_FLIGHT} in flight, {RATE_PER_SECOND}/s) is spent",
            tenant.namespace
        )
    } else {
        format!(
            "the share of namespaces the webhook does not know ({} in flight, {}/s) is spent",
            MAX_IN_FLIGHT / 2,
            RATE_PER_SECOND / 2.0
        )
    };
    format!("{target} is not in the webhook's cache, and reading it live was refused: {whose}")
}

/// Locks `mutex`, whatever a panicking holder left.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops the entry of `map` used the longest ago.
fn forget_oldest<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    used: impl Fn(&V) -> Instant,
) {
    if let Some(oldest) = map
        .iter()
        .min_by_key(|(_, v)| used(v))
        .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
}

/// What recent reads found, and when: at most [`MAX_TRACKED`] objects.
#[derive(Default)]
struct Memory(Mutex<HashMap<Target, (Live, Instant)>>);

impl Memory {
    /// What a read of `target` found within [`REMEMBER`] before `now`, if one did.
    fn recall(&self, target: &Target, now: Instant) -> Option<Live> {
        let remembered = lock(&self.0);
        let (live, at) = remembered.get(target)?;
        (now.saturating_duration_since(*at) < REMEMBER).then(|| live.clone())
    }

    /// Remembers what a read of `target` found at `now` (not a failure).
    fn remember(&self, target: &Target, live: &Live, now: Instant) {
        if matches!(live, Live::Failed(_)) {
            return;
        }
        let mut remembered = lock(&self.0);
        if remembered.len() >= MAX_TRACKED && !remembered.contains_key(target) {
            remembered.retain(|_, (_, at)| now.saturating_duration_since(*at) < REMEMBER);
            if remembered.len() >= MAX_TRACKED {
                forget_oldest(&mut remembered, |(_, at)| *at);
            }
        }
        remembered.insert(target.clone(), (live.clone(), now));
    }
}

/// Reads namespaces and NADs from the API server, for the reviews whose
/// caches cannot answer.
pub struct LiveReader {
    client: kube::Client,
    timeout: Duration,
    namespace_keys: Keys,
    nad_keys: Keys,
    flights: Mutex<HashMap<Target, Flight>>,
    budget: Budget,
    /// What recent reads found.
    remembered: Memory,
    metrics: Arc<Metrics>,
}

impl LiveReader {
    /// A reader keeping `namespace_keys` of a namespace and `nad_keys` of a
    /// NAD (what the caches keep), each read with a deadline of `timeout`.
    pub fn new(
        client: kube::Client,
        timeout: Duration,
        namespace_keys: &Keys,
        nad_keys: &Keys,
        metrics: Arc<Metrics>,
    ) -> Self {
        LiveReader {
            client,
            timeout,
            namespace_keys: namespace_keys.clone(),
            nad_keys: nad_keys.clone(),
            flights: Mutex::new(HashMap::new()),
            budget: Budget::new(),
            remembered: Memory::default(),
            metrics,
        }
    }

    /// Reads namespace `name`, for a review in it; `known` when the
    /// namespace cache holds it (its watch down too long).
    pub async fn namespace(&self, name: &str, known: bool) -> Live {
        let tenant = Tenant {
            namespace: name,
            known,
        };
        self.read(Target::Namespace(name.into()), tenant).await
    }

    /// Reads NAD `namespace/name`, for a review of `tenant`.
    pub async fn nad(&self, namespace: &str, name: &str, tenant: Tenant<'_>) -> Live {
        let target = Target::Nad {
            namespace: namespace.into(),
            name: name.into(),
        };
        self.read(target, tenant).await
    }

    /// What a recent read found, or joins the read of `target` in flight, or
    /// starts one if `tenant`'s budget allows; counts the result.
    async fn read(&self, target: Target, tenant: Tenant<'_>) -> Live {
        let object = target.object();
        let now = Instant::now();
        if let Some(live) = self.remembered.recall(&target, now) {
            self.metrics.live_read(object, LiveResult::Remembered);
            return live;
        }
        let flight = {
            let mut flights = lock(&self.flights);
            match flights.get(&target) {
                Some(flight) => flight.clone(),
                None => {
                    let Some(permits) = self.budget.admit(tenant, now) else {
                        self.metrics.live_read(object, LiveResult::Refused);
                        return Live::Failed(refused(&target, tenant));
                    };
                    let flight = self.fetch(target.clone(), permits).boxed().shared();
                    flights.insert(target.clone(), flight.clone());
                    flight
                }
            }
        };
        // Removes the flight once this reader is done with it, even if the
        // review is dropped meanwhile; a later reader starts a new one.
        let _landed = Landed {
            flights: &self.flights,
            target: &target,
            flight: &flight,
        };
        let live = flight.clone().await;
        self.remembered.remember(&target, &live, Instant::now());
        self.metrics.live_read(
            object,
            match &live {
                Live::Found(_) => LiveResult::Found,
                Live::Absent => LiveResult::Absent,
                Live::Failed(_) => LiveResult::Failed,
            },
        );
        live
    }

    /// The GET of `target`, holding `permits` until it ends.
    fn fetch(&self, target: Target, permits: Permits) -> BoxFuture<'static, Live> {
        let (client, timeout) = (self.client.clone(), self.timeout);
        let keys = match target {
            Target::Namespace(_) => self.namespace_keys.clone(),
            Target::Nad { .. } => self.nad_keys.clone(),
        };
        async move {
            let _permits = permits;
            let get = async {
                match &target {
                    Target::Namespace(name) => {
                        Api::<PartialObjectMeta<Namespace>>::all(client)
                            .get_metadata_opt(name)
                            .await
                            .map(|o| o.map(|o| Annotations::of(&o.metadata, &keys, None)))
                    }
                    Target::Nad { namespace, name } => Api::<DynamicObject>::namespaced_with(
                        client,
                        namespace,
                        &crate::multus::nad::api_resource(),
                    )
                    .get_opt(name)
                    .await
                    .map(|o| o.map(|o| Annotations::of(&o.metadata, &keys, nad_config(&o)))),
                }
            };
            match tokio::time::timeout(timeout, get).await {
                Ok(Ok(Some(annotations))) => Live::Found(annotations),
                Ok(Ok(None)) => Live::Absent,
                Ok(Err(e)) => Live::Failed(format!(
                    "{target} is not in the webhook's cache, and reading it live failed: {e}"
                )),
                Err(_) => Live::Failed(format!(
                    "{target} is not in the webhook's cache, and reading it live took longer than {} (--live-read-timeout)",
                    humantime::format_duration(timeout)
                )),
            }
        }
        .boxed()
    }
}

/// Takes a finished (or abandoned) flight out of the map, unless a newer one
/// for the same target replaced it.
struct Landed<'a> {
    flights: &'a Mutex<HashMap<Target, Flight>>,
    target: &'a Target,
    flight: &'a Flight,
}

impl Drop for Landed<'_> {
    fn drop(&mut self) {
        let mut flights = lock(self.flights);
        if flights
            .get(self.target)
            .is_some_and(|f| f.ptr_eq(self.flight))
        {
            flights.remove(self.target);
        }
    }
}

/// A token bucket: `rate` tokens a second, up to `burst` held.
#[derive(Debug)]
struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64, burst: f64) -> Self {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            at: None,
        }
    }

    /// Whether a token is left at `now`; none is taken.
    fn has(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 1.0
    }

    fn refill(&mut self, now: Instant) {
        if let Some(at) = self.at {
            let refill = now.saturating_duration_since(at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.at = Some(now);
    }

    /// Takes a token at `now`, if one is left.
    fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(namespace: &str) -> Tenant<'_> {
        Tenant {
            namespace,
            known: true,
        }
    }

    fn stranger(namespace: &str) -> Tenant<'_> {
        Tenant {
            namespace,
            known: false,
        }
    }

    #[test]
    fn strangers_share_half_and_each_known_namespace_its_own() {
        let budget = Budget::new();
        let now = Instant::now();
        // Reads in flight: strangers (each a made-up namespace) take at most half.
        let strangers: Vec<Permits> = (0..MAX_IN_FLIGHT)
            .map_while(|i| budget.admit(stranger(&format!("random-{i}")), now))
            .collect();
        assert_eq!(strangers.len(), MAX_IN_FLIGHT / 2);
        // A known namespace takes its own share, and no more.
        let tenant: Vec<Permits> = (0..MAX_IN_FLIGHT)
            .map_while(|_| budget.admit(known("tenant"), now))
            .collect();
        assert_eq!(tenant.len(), PER_NAMESPACE_IN_FLIGHT);
        assert!(
            budget.admit(known("other"), now).is_some(),
            "another's share"
        );
        drop((strangers, tenant));

        // The rate: a flood of strangers spends only the strangers' half ...
        let later = now + Duration::from_secs(60);
        let flood = (0..1_000)
            .filter(|i| {
                budget
                    .admit(stranger(&format!("random-{i}")), later)
                    .is_some()
            })
            .count();
        assert_eq!(flood, (BURST / 2.0) as usize);
        // ... a known namespace still reads, up to its own burst.
        let tenant = (0..100)
            .filter(|_| budget.admit(known("tenant"), later).is_some())
            .count();
        assert_eq!(tenant, (2.0 * PER_NAMESPACE_RATE) as usize);
        // A refusal takes nothing from the whole: the other known namespaces read on.
        let others = (0..200)
            .filter(|i| budget.admit(known(&format!("team-{i}")), later).is_some())
            .count();
        assert_eq!(others, BURST as usize - flood - tenant);
    }

    #[test]
    fn what_a_read_found_answers_for_a_moment_and_a_failure_never() {
        let memory = Memory::default();
        let now = Instant::now();
        let ghost = Target::Namespace("ghost".into());
        let nad = Target::Nad {
            namespace: "demo".into(),
            name: "linkerd-cni".into(),
        };
        memory.remember(&ghost, &Live::Absent, now);
        memory.remember(&nad, &Live::Failed("timed out".into()), now);
        assert_eq!(
            memory.recall(&ghost, now + REMEMBER / 2),
            Some(Live::Absent)
        );
        assert_eq!(memory.recall(&ghost, now + REMEMBER), None, "forgotten");
        assert_eq!(memory.recall(&nad, now), None, "a failure is read again");
        // Bounded: past MAX_TRACKED objects, the expired go, then the oldest.
        let random = |i: usize| Target::Namespace(format!("random-{i}").into());
        for i in 0..MAX_TRACKED + 10 {
            let at = now + Duration::from_micros(i as u64);
            memory.remember(&random(i), &Live::Absent, at);
        }
        assert_eq!(lock(&memory.0).len(), MAX_TRACKED);
        assert_eq!(
            memory.recall(&random(MAX_TRACKED + 9), now),
            Some(Live::Absent)
        );
        assert_eq!(memory.recall(&random(0), now), None, "the oldest went");
        let later = now + REMEMBER + Duration::from_secs(1);
        memory.remember(&ghost, &Live::Absent, later);
        assert_eq!(lock(&memory.0).len(), 1, "the expired went first");
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 3.0);
        let taken: Vec<bool> = (0..4).map(|_| bucket.take(start)).collect();
        assert_eq!(taken, [true, true, true, false], "a burst of 3");
        // 100 ms at 10/s gives one token back, and never more than the burst.
        assert!(bucket.take(start + Duration::from_millis(100)));
        assert!(!bucket.take(start + Duration::from_millis(100)));
        let later = start + Duration::from_secs(60);
        let taken = (0..4).filter(|_| bucket.take(later)).count();
        assert_eq!(taken, 3, "refilled up to the burst only");
    }
}
