//! Answers admission reviews: the core's pod rules ([`crate::admission`])
//! over the namespace and NAD caches, so a review costs no API call. An
//! object a cache lacks while its watch is up does not exist, once the watch
//! has had a moment (`--live-read-timeout`) to bring one made just before:
//! no API call either, whoever names made-up objects. What a cache cannot vouch for
//! (an object it lacks while its watch is down, or anything while its watch
//! has been down longer than `--max-watch-outage`) is read live once
//! ([`LiveReader`]) before the pod is decided; when that read fails too, the
//! pod gets the `--on-error` answer. A pod is never decided on a guess.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compact_str::CompactString;
use hyper::StatusCode;

use crate::admission::{
    self, Answer, MissingNad, NadCheck, NadConfigs, NetworkResources, OnError, Outcome, Request,
};
use crate::k8s::namespace::Lookup;
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::PluginSettings;
use crate::multus::ipam::{Ipam, IpamError};
use crate::network_resources::{self, Nads};
use crate::webhook::cache::{Annotations, Entry, NadCache, NamespaceCache, Picked, nad_key};
use crate::webhook::live::{Live, LiveReader, Tenant};
use crate::webhook::metrics::Metrics;
use crate::webhook::server::{Call, Handler, Reply};
use crate::work::Distinct;

/// NADs one review may read live; a pod selecting more that the cache lacks
/// gets the `--on-error` answer.
const MAX_LIVE_NADS: usize = 8;

/// The most passes of one review: waiting for the namespace, reading it live, waiting for
/// the NADs, reading them live, picking NADs the rules read beyond those foreseen, and
/// the last, which answers.
const PASSES: usize = 6;

/// Answers admission reviews with the core's pod rules.
pub struct Admission {
    /// The Linkerd-CNI rules' settings.
    pub settings: Settings,
    /// The network-resources rules' settings, when they run.
    pub network_resources: Option<network_resources::settings::Settings>,
    /// The NAD cache, when the missing-NAD check or the network-resources rules read it.
    pub nads: Option<Arc<NadCache>>,
    /// What to do with a pod attached in a namespace without the NAD.
    pub missing_nad: MissingNad,
    /// The answer for a pod the webhook cannot decide on.
    pub on_error: OnError,
    /// The namespace cache.
    pub cache: Arc<NamespaceCache>,
    /// Reads what the caches cannot vouch for.
    pub live: LiveReader,
    /// How long a cache may go without its watch and still vouch for what it holds.
    pub max_watch_outage: Duration,
    /// How long a review waits for a cache whose watch is up to bring an
    /// object it lacks (`--live-read-timeout`): the API server sends watch
    /// events within milliseconds of a write, so an object made just before
    /// the pod (a namespace and its pod in one `kubectl apply`, a NAD the
    /// controller has just made) is found, and one still missing after it
    /// does not exist.
    pub watch_lag: Duration,
    /// The metrics.
    pub metrics: Arc<Metrics>,
}

/// What one pass over the caches came to.
enum Pass {
    /// The answer, and whether the namespace exists (the answer vouches for its caller).
    Answered(Answer, bool),
    /// The namespace cache lacks the namespace, its watch up: wait for it.
    AwaitNamespace,
    /// The namespace cache lacks it still, its watch up: it does not exist.
    NoNamespace,
    /// The namespace must be read live first: one the namespace cache knows
    /// (its watch down too long), or not.
    Namespace { known: bool },
    /// The NAD cache lacks these (keys), its watch up: wait for them.
    AwaitNads(Vec<CompactString>),
    /// These NADs (namespace, name) must be read live first, for a review
    /// whose namespace the namespace cache knows or not.
    Nads {
        missed: Vec<(CompactString, CompactString)>,
        known: bool,
    },
    /// The rules read NADs (these keys) that were not picked from the cache
    /// before they ran: pick them too, and run the rules again.
    Unpicked(Vec<CompactString>),
}

/// What one review has learnt beyond the caches.
#[derive(Default)]
struct Learnt {
    /// The namespace, read live.
    namespace: Option<Annotations>,
    /// The NADs read live.
    fetched: Fetched,
    /// Waited for the namespace cache's watch.
    waited_namespace: bool,
    /// Waited for the NAD cache's watch.
    waited_nads: bool,
    /// NADs to pick besides those [`admission::nads_read`] names.
    unpicked: Vec<CompactString>,
}

/// The NADs read live for one review: their annotations, or `None` for one
/// the API server says does not exist. Keyed as the NAD cache is.
type Fetched = HashMap<CompactString, Option<Annotations>>;

impl Handler for Admission {
    /// Nearly every review is answered from the caches at once: that is done here, before
    /// the future is made, which then holds the reply only. The rest (a wait for a watch, a
    /// live read) go on in a future of their own, which reads the body again rather than
    /// carrying the review, so that the future of every request stays small.
    fn handle(&self, body: Bytes, call: &Call<'_>) -> impl Future<Output = Reply> + Send {
        let start = Instant::now();
        let now = match admission::parse(&body) {
            Err(e) => Ok(self.unreadable(e, start)),
            Ok(request) => match self.pass(&request, &Learnt::default()) {
                Pass::Answered(answer, vouches) => Ok(self.reply(&request, answer, vouches, start)),
                first => Err(first),
            },
        };
        async move {
            match now {
                Ok(reply) => reply,
                Err(first) => Box::pin(self.settled(body, call, first, start)).await,
            }
        }
    }
}

impl Admission {
    /// The reply to a review the first pass could not answer: read again, then settled. While
    /// it waits for a watch, the request holds no connection's place ([`Call::waiting`]).
    async fn settled(&self, body: Bytes, call: &Call<'_>, first: Pass, start: Instant) -> Reply {
        let request = match admission::parse(&body) {
            Ok(request) => request,
            Err(e) => return self.unreadable(e, start),
        };
        let (answer, vouches) = self.settle(&request, call, first).await;
        self.reply(&request, answer, vouches, start)
    }

    /// The 400 for a body that is not an AdmissionReview.
    fn unreadable(&self, e: admission::BadReview, start: Instant) -> Reply {
        self.metrics
            .answered(Outcome::Invalid, &[], false, start.elapsed());
        tracing::warn!(error = %e, "refused a body that is not an AdmissionReview");
        Reply::text(StatusCode::BAD_REQUEST, e.to_string())
    }

    /// The reply carrying `answer`, counted and logged.
    fn reply(&self, request: &Request<'_>, answer: Answer, vouches: bool, start: Instant) -> Reply {
        self.metrics.answered(
            answer.outcome,
            &answer.changes,
            answer.outcome == Outcome::Patched && !answer.network_resources.is_empty(),
            start.elapsed(),
        );
        if answer.on_error {
            self.metrics.on_error(answer.outcome == Outcome::Denied);
        }
        log(request, &answer);
        Reply::json(answer.body).vouching(vouches)
    }

    /// Goes on from a first pass that could not answer, made with nothing learnt yet: waits
    /// for or reads what it lacked, then passes again, [`PASSES`] in all.
    async fn settle(
        &self,
        request: &Request<'_>,
        call: &Call<'_>,
        mut pass: Pass,
    ) -> (Answer, bool) {
        let mut learnt = Learnt::default();
        for _ in 1..PASSES {
            match pass {
                Pass::Answered(answer, vouches) => return (answer, vouches),
                Pass::AwaitNamespace => {
                    let deadline = tokio::time::Instant::now() + self.watch_lag;
                    let _waiting = call.waiting();
                    self.cache.holds_by(&request.namespace, deadline).await;
                    learnt.waited_namespace = true;
                }
                Pass::NoNamespace => {
                    return self.unvouched(
                        request,
                        format!(
                            "namespace {} does not exist: the webhook's cache, whose watch is up, does not hold it",
                            request.namespace
                        ),
                    );
                }
                Pass::Namespace { known } => {
                    match self.live.namespace(&request.namespace, known).await {
                        Live::Found(annotations) => learnt.namespace = Some(annotations),
                        Live::Absent => {
                            return self.unvouched(
                            request,
                            format!(
                                "namespace {} is in neither the webhook's cache nor the API server",
                                request.namespace
                            ),
                        );
                        }
                        Live::Failed(why) => return self.unvouched(request, why),
                    }
                }
                Pass::AwaitNads(keys) => {
                    if let Some(nads) = &self.nads {
                        let deadline = tokio::time::Instant::now() + self.watch_lag;
                        let _waiting = call.waiting();
                        for key in keys {
                            nads.holds_by(&key, deadline).await;
                        }
                    }
                    learnt.waited_nads = true;
                }
                Pass::Nads { missed, .. } if missed.len() > MAX_LIVE_NADS => {
                    return self.unvouched(
                        request,
                        format!(
                            "the pod selects {} NetworkAttachmentDefinitions the webhook's cache does not hold; it reads at most {MAX_LIVE_NADS} live",
                            missed.len()
                        ),
                    );
                }
                Pass::Unpicked(keys) => learnt.unpicked.extend(keys),
                Pass::Nads { missed, known } => {
                    let tenant = Tenant {
                        namespace: &request.namespace,
                        known,
                    };
                    for (ns, name) in missed {
                        let found = match self.live.nad(&ns, &name, tenant).await {
                            Live::Found(annotations) => Some(annotations),
                            Live::Absent => None,
                            Live::Failed(why) => return self.unvouched(request, why),
                        };
                        learnt.fetched.insert(nad_key(&ns, &name), found);
                    }
                }
            }
            pass = self.pass(request, &learnt);
        }
        match pass {
            Pass::Answered(answer, vouches) => (answer, vouches),
            // Each pass waits for or reads what the previous one lacked, so the last answers.
            _ => self.unvouched(request, "the caches and live reads did not settle".into()),
        }
    }

    /// The `--on-error` answer, which vouches for no caller.
    fn unvouched(&self, request: &Request<'_>, why: String) -> (Answer, bool) {
        (admission::unavailable(request, self.on_error, why), false)
    }

    /// One pass: the namespace read live or from the cache, the NADs read
    /// live or from the cache. The entries of the caches the rules read are
    /// picked first, each cache's read lock held only while it is picked; the
    /// rules run on those, with no lock held, so the watches' writes (and the
    /// reviews after them) never wait for a review's rules.
    fn pass(&self, request: &Request<'_>, learnt: &Learnt) -> Pass {
        let cached = self.cache.get(&request.namespace);
        let known = cached.is_some();
        let namespace: &dyn Lookup = match &learnt.namespace {
            Some(live) => live,
            // The rules do not read the namespace of what they do not act on.
            None if !admission::acts_on(request) => &NO_ANNOTATIONS,
            None => match &cached {
                Some(cached) if self.cache.vouches(self.max_watch_outage) => cached.annotations(),
                None if self.cache.watching() && learnt.waited_namespace => {
                    return Pass::NoNamespace;
                }
                None if self.cache.watching() => return Pass::AwaitNamespace,
                _ => return Pass::Namespace { known },
            },
        };
        let picked = self
            .nads
            .as_ref()
            .filter(|nads| nads.vouches(self.max_watch_outage))
            .map(|nads| {
                let read = admission::nads_read(
                    request,
                    namespace,
                    &self.settings,
                    self.network_resources.is_some(),
                );
                nads.pick(
                    read.iter()
                        .map(|(ns, name)| nad_key(ns, name))
                        .chain(learnt.unpicked.iter().cloned()),
                )
            });
        let watching = self.nads.as_ref().is_some_and(|nads| nads.watching());
        let nads = Recorded {
            picked: picked.as_ref(),
            fetched: &learnt.fetched,
            lacking: match (watching, learnt.waited_nads) {
                (true, true) => Lacking::Absent,
                (true, false) => Lacking::Await,
                (false, _) => Lacking::Read,
            },
            missed: RefCell::default(),
            unpicked: RefCell::default(),
        };
        let network_resources = self
            .network_resources
            .as_ref()
            .map(|settings| NetworkResources {
                settings,
                nads: &nads,
            });
        let nad_check = (self.missing_nad != MissingNad::Ignore).then_some(NadCheck {
            nads: &nads,
            policy: self.missing_nad,
        });
        let answer = admission::answer(
            request,
            namespace,
            &self.settings,
            network_resources.as_ref(),
            nad_check.as_ref(),
            self.on_error,
        );
        let unpicked = nads.unpicked.into_inner();
        if !unpicked.is_empty() {
            return Pass::Unpicked(unpicked.into_vec());
        }
        let missed = nads.missed.into_inner().into_vec();
        let vouches = known || learnt.namespace.is_some();
        match (missed.is_empty(), nads.lacking) {
            (true, _) => Pass::Answered(answer, vouches),
            (false, Lacking::Await) => {
                Pass::AwaitNads(missed.iter().map(|(ns, name)| nad_key(ns, name)).collect())
            }
            (false, _) => Pass::Nads { missed, known },
        }
    }
}

static NO_ANNOTATIONS: Annotations = Annotations::EMPTY;

/// What a pass makes of a NAD its cache lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lacking {
    /// The watch is up and has had its moment: it does not exist.
    Absent,
    /// The watch is up: wait for it to bring the NAD.
    Await,
    /// The watch is down: read it live.
    Read,
}

/// The NADs of one pass: those read live, then those picked from the cache
/// (when it vouches); a NAD in neither is recorded as missed (to wait for or
/// read live), unless the cache's watch says it does not exist; one the
/// cache was not asked for is recorded as unpicked (to pick, then run the
/// rules again).
struct Recorded<'a> {
    picked: Option<&'a Picked>,
    fetched: &'a Fetched,
    lacking: Lacking,
    missed: RefCell<Distinct<(CompactString, CompactString)>>,
    unpicked: RefCell<Distinct<CompactString>>,
}

impl Nads for Recorded<'_> {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        if let Some(live) = self.fetched(namespace, name) {
            return live.as_ref().map(|a| a as &dyn Lookup);
        }
        if let Some(picked) = self.picked {
            match picked.nad(namespace, name) {
                Entry::Held(cached) => return Some(cached),
                Entry::Lacked => {}
                Entry::NotPicked => {
                    self.unpicked.borrow_mut().insert(nad_key(namespace, name));
                    return None;
                }
            }
        }
        if self.lacking == Lacking::Absent {
            return None;
        }
        self.missed
            .borrow_mut()
            .insert((namespace.into(), name.into()));
        None
    }
}

impl Recorded<'_> {
    /// What a live read of this review found of a NAD, if one was made.
    fn fetched(&self, namespace: &str, name: &str) -> Option<&Option<Annotations>> {
        if self.fetched.is_empty() {
            return None;
        }
        self.fetched.get(&nad_key(namespace, name))
    }

    /// The entry of a NAD as [`Recorded::annotations`] finds it, live read
    /// first, without recording a miss.
    fn entry(&self, namespace: &str, name: &str) -> Option<&Annotations> {
        match self.fetched(namespace, name) {
            Some(live) => live.as_ref(),
            None => self.picked?.get(namespace, name),
        }
    }
}

/// The config hash of a NAD, and what it runs, as [`Recorded::annotations`]
/// finds it, which the rules ask first (and which records it as missed).
impl NadConfigs for Recorded<'_> {
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        self.entry(namespace, name)?.config_hash()
    }
    fn other_network(&self, namespace: &str, name: &str) -> Option<&str> {
        self.entry(namespace, name)?.other_network()
    }
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.entry(namespace, name)?.ipam()
    }
    fn plugin_settings(&self, namespace: &str, name: &str) -> Option<&PluginSettings> {
        self.entry(namespace, name)?.plugin_settings()
    }
}

/// Logs an answered review: problems at warn, the rest at debug. A patch is
/// the webhook's everyday work, counted in its metrics and recorded by the
/// API server's audit log; a line for each at info would cost a fifth of its
/// throughput (docs/benchmarks.md).
fn log(request: &Request<'_>, answer: &Answer) {
    let (uid, namespace, name, operation, dry_run) = (
        &*request.uid,
        &*request.namespace,
        &*request.name,
        &*request.operation,
        request.dry_run,
    );
    match answer.outcome {
        Outcome::Patched => tracing::debug!(
            uid, namespace, name, operation, dry_run, changes = %Changes(answer),
            "patched"
        ),
        Outcome::Unchanged if answer.warnings.is_empty() => {
            tracing::debug!(uid, namespace, name, operation, dry_run, "unchanged")
        }
        Outcome::Unchanged => tracing::warn!(
            uid, namespace, name, operation, dry_run,
            warnings = %answer.warnings.join("; "),
            "unchanged, with warnings"
        ),
        Outcome::Warned | Outcome::Denied | Outcome::Invalid => tracing::warn!(
            uid, namespace, name, operation, dry_run, outcome = %answer.outcome,
            warnings = %answer.warnings.join("; "),
            "could not act on the pod"
        ),
    }
}

/// What a patch changes, for the log: `; `-separated.
struct Changes<'a>(&'a Answer);

impl std::fmt::Display for Changes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stamp = self.0.stamp.iter().map(|c| c as &dyn std::fmt::Display);
        let skipped = self
            .0
            .skip_subnets
            .iter()
            .map(|c| c as &dyn std::fmt::Display);
        let rules = self.0.changes.iter().map(|c| c as &dyn std::fmt::Display);
        let network_resources = self
            .0
            .network_resources
            .iter()
            .map(|c| c as &dyn std::fmt::Display);
        for (i, change) in rules
            .chain(stamp)
            .chain(skipped)
            .chain(network_resources)
            .enumerate()
        {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{change}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hyper moves each request's future into its connection's state, and a request in flight
    /// holds it: the future holds the reply (or the first pass of a review that must wait,
    /// which goes on in a box), not the review and the rules' state.
    #[tokio::test]
    async fn the_future_of_a_review_holds_its_reply_not_the_review() {
        let metrics = Arc::new(Metrics::new());
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client, which connects on use");
        let settings = Settings::default();
        let cache = Arc::new(NamespaceCache::namespaces(&settings.uid_range_annotation));
        let keys = cache.keys().clone();
        let handler = Admission {
            settings,
            network_resources: None,
            nads: None,
            missing_nad: MissingNad::Ignore,
            on_error: OnError::Allow,
            cache,
            live: LiveReader::new(
                client,
                Duration::from_secs(1),
                &keys,
                &keys,
                metrics.clone(),
            ),
            max_watch_outage: Duration::from_secs(60),
            watch_lag: Duration::from_secs(1),
            metrics,
        };
        let future = handler.handle(Bytes::from_static(b"{}"), &Call::NONE);
        let size = std::mem::size_of_val(&future);
        let bound = size_of::<Request<'_>>() + size_of::<Pass>();
        assert!(
            size < bound,
            "a review's future takes {size} bytes, {bound} or more"
        );
        assert_eq!(future.await.status, StatusCode::BAD_REQUEST);
    }
}
