//! Live reads of what the caches cannot vouch for: a namespace missing from
//! the namespace cache (or every namespace while that cache's watch has been
//! down too long), a NAD missing from the NAD cache. One GET each (of a
//! namespace's metadata, of a NAD whole, for the hash of its config), with a
//! short deadline (`--live-read-timeout`), shared by the
//! reviews that need the same object at the same time, and bounded in number
//! and rate, so that no caller can turn reviews into a flood of API calls.

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

use crate::webhook::cache::{Annotations, nad_config};
use crate::webhook::metrics::{LiveObject, LiveResult, Metrics};

/// Live reads in flight at once; more wait for none and are refused.
pub const MAX_IN_FLIGHT: usize = 16;
/// Live reads started per second, on average ...
const RATE_PER_SECOND: f64 = 100.0;
/// ... with bursts of up to this many.
const BURST: f64 = 200.0;

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

/// Reads namespaces and NADs from the API server, for the reviews whose
/// caches cannot answer.
pub struct LiveReader {
    client: kube::Client,
    timeout: Duration,
    namespace_keys: Arc<[String]>,
    nad_keys: Arc<[String]>,
    flights: Mutex<HashMap<Target, Flight>>,
    permits: Arc<Semaphore>,
    bucket: Mutex<TokenBucket>,
    metrics: Arc<Metrics>,
}

impl LiveReader {
    /// A reader keeping `namespace_keys` of a namespace and `nad_keys` of a
    /// NAD (what the caches keep), each read with a deadline of `timeout`.
    pub fn new(
        client: kube::Client,
        timeout: Duration,
        namespace_keys: &[String],
        nad_keys: &[String],
        metrics: Arc<Metrics>,
    ) -> Self {
        LiveReader {
            client,
            timeout,
            namespace_keys: namespace_keys.into(),
            nad_keys: nad_keys.into(),
            flights: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            bucket: Mutex::new(TokenBucket::new(RATE_PER_SECOND, BURST)),
            metrics,
        }
    }

    /// Reads namespace `name`.
    pub async fn namespace(&self, name: &str) -> Live {
        self.read(Target::Namespace(name.into())).await
    }

    /// Reads NAD `namespace/name`.
    pub async fn nad(&self, namespace: &str, name: &str) -> Live {
        self.read(Target::Nad {
            namespace: namespace.into(),
            name: name.into(),
        })
        .await
    }

    /// Joins the read of `target` in flight, or starts one if the bounds
    /// allow; counts the result.
    async fn read(&self, target: Target) -> Live {
        let object = target.object();
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            match flights.get(&target) {
                Some(flight) => flight.clone(),
                None => {
                    let Some(permit) = self.admit() else {
                        self.metrics.live_read(object, LiveResult::Refused);
                        return Live::Failed(format!(
                            "{target} is not in the webhook's cache, and reading it live was refused: {MAX_IN_FLIGHT} live reads in flight, or over {RATE_PER_SECOND}/s"
                        ));
                    };
                    let flight = self.fetch(target.clone(), permit).boxed().shared();
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

    /// A permit to start a read: within the rate and the reads in flight.
    fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        bucket.take(Instant::now()).then_some(permit)
    }

    /// The GET of `target`, holding `permit` until it ends.
    fn fetch(&self, target: Target, permit: OwnedSemaphorePermit) -> BoxFuture<'static, Live> {
        let (client, timeout) = (self.client.clone(), self.timeout);
        let keys = match target {
            Target::Namespace(_) => self.namespace_keys.clone(),
            Target::Nad { .. } => self.nad_keys.clone(),
        };
        async move {
            let _permit = permit;
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
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
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

    /// Takes a token at `now`, if one is left.
    fn take(&mut self, now: Instant) -> bool {
        if let Some(at) = self.at {
            let refill = now.saturating_duration_since(at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.at = Some(now);
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
