//! Leader election over a `coordination.k8s.io` Lease, with the semantics of
//! client-go's `tools/leaderelection`: the replica holding the Lease writes
//! NADs; the others wait and take over when it is released or expires.
//!
//! * **Timing** ([`Timing`]): the Lease holds for `--lease-duration` (15 s);
//!   its holder renews every retry period (2/15 of it, 2 s) and must have
//!   renewed within the renew deadline (2/3 of it, 10 s), or it stops writing.
//! * **Renewal** by update with the resourceVersion last seen (optimistic
//!   concurrency): a write over a record someone else changed meanwhile fails
//!   with 409 instead of overwriting it.
//! * **Expiry by the candidate's own clock**: a candidate counts the duration
//!   from when it last *observed* the record change ([`observe`]), never from
//!   the times written in it, so no two nodes' clocks are compared.
//! * **Fencing**: a term lasts until the renew deadline after the last
//!   successful renewal was *sent* ([`Leadership::fence`]): writes start only
//!   before that, are cut off at it, and it comes a third of the duration
//!   before any candidate, counting from when it saw that renewal, may take
//!   the Lease.
//! * **Release** on shutdown: a replica the Lease names, read afresh (a
//!   renewal cut short by the stop may have landed), clears `holderIdentity`,
//!   so the other replica takes over at its next try rather than after the
//!   duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::controller::api::{CallError, call_until};
use crate::controller::backoff::random_fraction;
use crate::controller::health::Contact;
use crate::controller::{FIELD_MANAGER, Options};

/// The election's periods, derived from the Lease duration as client-go's
/// defaults are (15 s, 10 s, 2 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a record holds without a change, by each candidate's clock.
    pub lease: Duration,
    /// How long the leader may go without a successful renewal before it
    /// stops writing: two thirds of the lease.
    pub renew_deadline: Duration,
    /// How often the leader renews and a candidate tries: 2/15 of the lease.
    pub retry: Duration,
}

impl Timing {
    /// The periods of a Lease of `lease`.
    pub fn for_lease(lease: Duration) -> Self {
        Timing {
            lease,
            renew_deadline: lease * 2 / 3,
            retry: lease * 2 / 15,
        }
    }
}

/// The election record a Lease holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Who holds it; empty when released.
    pub holder: String,
    /// How long it holds without a renewal, whole seconds.
    pub duration_seconds: i32,
    /// When the holder took it (informative).
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it (informative).
    pub renew_time: Option<Timestamp>,
    /// How many times it changed hands.
    pub transitions: i32,
}

impl Record {
    /// The record of a Lease as read.
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes the record into a Lease's spec, leaving the rest of it.
    fn write_into(&self, lease: &mut Lease) {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.duration_seconds);
        spec.acquire_time = self.acquire_time.map(MicroTime);
        spec.renew_time = self.renew_time.map(MicroTime);
        spec.lease_transitions = Some(self.transitions);
    }

    /// The record that gives the Lease up: no holder, one second left.
    pub fn released(&self, now: Timestamp) -> Self {
        Record {
            holder: String::new(),
            duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

/// The Lease as this replica last read or wrote it, and when by its clock.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The whole object, with the resourceVersion an update must carry.
    pub lease: Lease,
    /// Its record.
    pub record: Record,
    /// When this replica first saw the record as it is.
    pub at: Instant,
}

impl Observed {
    /// When the record expires for this replica: its duration after `at`.
    pub fn expires(&self) -> Instant {
        self.at + Duration::from_secs(self.record.duration_seconds.max(0) as u64)
    }
}

/// Notes a read of the Lease at `now`: the time of observation moves only
/// when the record changed since the last read (a renewal changes its
/// renewTime), as client-go compares the raw record.
pub fn observe(previous: Option<Observed>, lease: Lease, now: Instant) -> Observed {
    let record = Record::of(&lease);
    let at = match previous {
        Some(previous) if previous.record == record => previous.at,
        _ => now,
    };
    Observed { lease, record, at }
}

/// What a candidate or leader does with the record it observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write this record (take the Lease over, or renew it).
    Take(Record),
    /// Another replica holds it, and it has not expired by this clock.
    Wait {
        /// The holder.
        holder: String,
        /// How long until it expires, unless it changes first.
        left: Duration,
    },
}

/// client-go's decision in `tryAcquireOrRenew`: a record held by another
/// replica is left alone until it expires by this replica's clock; a
/// released, expired or own record is written, keeping the acquire time and
/// the count of transitions when it is its own.
pub fn decide(
    identity: &str,
    observed: &Observed,
    timing: &Timing,
    now: Instant,
    wall: Timestamp,
) -> Step {
    let record = &observed.record;
    let mine = record.holder == identity;
    if !record.holder.is_empty() && !mine && now < observed.expires() {
        return Step::Wait {
            holder: record.holder.clone(),
            left: observed.expires() - now,
        };
    }
    Step::Take(Record {
        holder: identity.to_string(),
        duration_seconds: timing.lease.as_secs().try_into().unwrap_or(i32::MAX),
        acquire_time: if mine {
            record.acquire_time
        } else {
            Some(wall)
        },
        renew_time: Some(wall),
        transitions: if mine {
            record.transitions
        } else {
            record.transitions + 1
        },
    })
}

/// One replica's side of the election: the Lease and what it saw of it.
struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
    api_timeout: Duration,
    observed: Option<Observed>,
    /// The last failure, logged once until another comes.
    last_error: Option<String>,
    /// Whether it ever sent a write of the Lease: if not, it cannot hold it.
    wrote: bool,
    /// When it last reached the Lease: its readiness.
    contact: Contact,
}

impl Elector {
    fn describe(&self) -> String {
        format!(
            "Lease {}/{}",
            self.api.namespace().unwrap_or_default(),
            self.name
        )
    }

    /// What to do with `observed`, now.
    fn step(&self, observed: &Observed) -> Step {
        decide(
            &self.identity,
            observed,
            &self.timing,
            Instant::now(),
            Timestamp::now(),
        )
    }

    /// client-go's `tryAcquireOrRenew`: whether this replica holds the Lease
    /// after one try, every call made before `deadline`.
    async fn try_acquire_or_renew(&mut self, deadline: Instant) -> Result<bool, CallError> {
        // The fast path: the leader renews what it last wrote, unread.
        if let Some(observed) = self.observed.clone()
            && observed.record.holder == self.identity
            && Instant::now() < observed.expires()
            && let Step::Take(record) = self.step(&observed)
        {
            match self.update(observed.lease, record, deadline).await {
                Ok(()) => return Ok(true),
                Err(e) => {
                    tracing::debug!(error = %e, "{}: renewing unread failed; reading it", self.describe())
                }
            }
        }
        let Some(lease) = call_until(deadline, self.api.get_opt(&self.name)).await? else {
            return lost_race(self.create(deadline).await);
        };
        let observed = observe(self.observed.take(), lease, Instant::now());
        let step = self.step(&observed);
        let lease = observed.lease.clone();
        self.observed = Some(observed);
        match step {
            Step::Wait { .. } => Ok(false),
            Step::Take(record) => lost_race(self.update(lease, record, deadline).await),
        }
    }

    async fn create(&mut self, deadline: Instant) -> Result<(), CallError> {
        let empty = Observed {
            lease: Lease::default(),
            record: Record::of(&Lease::default()),
            at: Instant::now(),
        };
        let Step::Take(mut record) = self.step(&empty) else {
            unreachable!("an empty record is always taken")
        };
        record.transitions = 0;
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        record.write_into(&mut lease);
        self.wrote = true;
        let created = call_until(deadline, self.api.create(&params(), &lease)).await?;
        self.observed = Some(Observed {
            record: Record::of(&created),
            lease: created,
            at: Instant::now(),
        });
        Ok(())
    }

    /// Writes `record` into `lease`, with its resourceVersion as precondition.
    async fn update(
        &mut self,
        mut lease: Lease,
        record: Record,
        deadline: Instant,
    ) -> Result<(), CallError> {
        record.write_into(&mut lease);
        self.wrote = true;
        let written = call_until(deadline, self.api.replace(&self.name, &params(), &lease)).await?;
        self.observed = Some(Observed {
            record: Record::of(&written),
            lease: written,
            at: Instant::now(),
        });
        Ok(())
    }

    /// Gives the Lease up on the way out if it names this replica. It is read
    /// afresh: a renewal the stop cut short may have landed after the last
    /// answer this replica saw, and a term that lapsed leaves the record
    /// naming it. The write carries the resourceVersion read, so a record
    /// another replica took meanwhile is left alone; every call before one
    /// deadline. The caller has stopped writing NADs by then.
    async fn release(self) {
        if !self.wrote {
            return;
        }
        let what = self.describe();
        let deadline = Instant::now() + self.api_timeout;
        let released = loop {
            let mut lease = match call_until(deadline, self.api.get_opt(&self.name)).await {
                Ok(Some(lease)) => lease,
                Ok(None) => return,
                Err(e) => break Err(e),
            };
            let record = Record::of(&lease);
            if record.holder != self.identity {
                return;
            }
            record.released(Timestamp::now()).write_into(&mut lease);
            match call_until(deadline, self.api.replace(&self.name, &params(), &lease)).await {
                Err(e) if e.code() == Some(409) => {
                    tracing::debug!(error = %e, "{what} changed since read; reading it again")
                }
                written => break written,
            }
        };
        match released {
            Ok(_) => tracing::info!("{what} released"),
            Err(e) => tracing::warn!(error = %e, "releasing {what}; it expires by itself"),
        }
    }

    /// A try reached the Lease, whatever it decided.
    fn reached(&mut self) {
        self.last_error = None;
        self.contact.reached(Instant::now());
    }

    /// Logs a failed try once, until it fails otherwise.
    fn failed(&mut self, error: &CallError, what: &str) {
        let text = error.to_string();
        self.contact.failed(&text);
        if self.last_error.as_deref() != Some(&text) {
            tracing::warn!(error = %text, "{}: {what}; trying again every {:?}", self.describe(), self.timing.retry);
            self.last_error = Some(text);
        }
    }
}

fn params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// This replica's part in the election.
pub struct Leadership {
    /// While it leads, until when its term lasts; `None` otherwise.
    term: watch::Receiver<Option<Instant>>,
    task: JoinHandle<Elector>,
}

/// Whether this replica's leadership is fresh: what a writer checks.
#[derive(Clone)]
pub struct Fence(watch::Receiver<Option<Instant>>);

impl Fence {
    /// The end of the current term, if this replica leads and it has not
    /// passed: no write may start without it, nor run past it.
    pub fn until(&self) -> Option<Instant> {
        let until = *self.0.borrow();
        until.filter(|until| Instant::now() < *until)
    }
}

impl Leadership {
    /// Joins the election until `stop` turns true, telling `contact` when
    /// each try reaches the Lease.
    pub fn start(
        client: &Client,
        options: &Options,
        stop: watch::Receiver<bool>,
        contact: Contact,
    ) -> Self {
        let elector = Elector {
            api: Api::namespaced(client.clone(), &options.lease_namespace),
            name: options.lease_name.clone(),
            identity: options.identity.clone(),
            timing: Timing::for_lease(Duration::from_secs(options.lease_seconds)),
            api_timeout: options.api_timeout,
            observed: None,
            last_error: None,
            wrote: false,
            contact,
        };
        let (term, term_rx) = watch::channel(None);
        Leadership {
            term: term_rx,
            task: tokio::spawn(elect(elector, term, stop)),
        }
    }

    /// Waits until this replica leads: false when the election has ended.
    pub async fn acquired(&mut self) -> bool {
        self.term.wait_for(Option::is_some).await.is_ok()
    }

    /// Resolves when the term ends: the renew deadline passes without a
    /// renewal, another replica is seen holding the Lease, or the election
    /// stops. It watches the deadline itself, so it never waits on a call.
    pub async fn lost(&mut self) {
        loop {
            let Some(until) = *self.term.borrow_and_update() else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return,
                changed = self.term.changed() => if changed.is_err() { return },
            }
        }
    }

    /// The writers' view of the term.
    pub fn fence(&self) -> Fence {
        Fence(self.term.clone())
    }

    /// Waits for the election to end, then releases the Lease if this
    /// replica holds it: the caller has stopped writing by then.
    pub async fn release(self) {
        match self.task.await {
            Ok(elector) => elector.release().await,
            Err(e) => tracing::warn!(error = %e, "the NAD controller's election failed"),
        }
    }
}

/// A write of the Lease that another candidate's won (409: it created the
/// Lease first, or changed it since it was read) is no error: this replica
/// does not hold it, and reads it again at its next try. Two replicas
/// starting together meet this every time.
fn lost_race(written: Result<(), CallError>) -> Result<bool, CallError> {
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.status().is_some_and(|s| s.code == 409) => {
            tracing::debug!(error = %e, "another candidate wrote the Lease first");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The election: tries as a candidate until it holds the Lease, renews it
/// while it leads, and ends when `stop` turns true.
async fn elect(
    mut elector: Elector,
    term: watch::Sender<Option<Instant>>,
    mut stop: watch::Receiver<bool>,
) -> Elector {
    while let Some(until) = candidate(&mut elector, &mut stop).await {
        term.send_replace(Some(until));
        tracing::info!(identity = %elector.identity, "{} acquired", elector.describe());
        let stopped = lead(&mut elector, &term, until, &mut stop).await;
        term.send_replace(None);
        if stopped {
            break;
        }
    }
    term.send_replace(None);
    elector
}

/// Tries every retry period (with client-go's jitter, up to 1.2 times it)
/// until this replica holds the Lease: the end of its first term, or `None`
/// when stopped first.
async fn candidate(elector: &mut Elector, stop: &mut watch::Receiver<bool>) -> Option<Instant> {
    loop {
        if *stop.borrow() {
            return None;
        }
        let sent = Instant::now();
        match elector
            .try_acquire_or_renew(sent + elector.api_timeout)
            .await
        {
            Ok(true) => {
                elector.reached();
                return Some(sent + elector.timing.renew_deadline);
            }
            Ok(false) => elector.reached(),
            Err(e) => elector.failed(&e, "cannot read or take it"),
        }
        let wait = elector.timing.retry.mul_f64(1.0 + 0.2 * random_fraction());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return None,
        }
    }
}

/// Renews every retry period while the term lasts, each renewal extending
/// it to the renew deadline after the renewal was sent. Returns true when
/// stopped, false when the term ended.
async fn lead(
    elector: &mut Elector,
    term: &watch::Sender<Option<Instant>>,
    mut until: Instant,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(elector.timing.retry) => {}
            _ = tokio::time::sleep_until(until) => break,
            _ = stop.wait_for(|s| *s) => return true,
        }
        let sent = Instant::now();
        let deadline = until.min(sent + elector.api_timeout);
        let renewed = tokio::select! {
            renewed = elector.try_acquire_or_renew(deadline) => renewed,
            _ = stop.wait_for(|s| *s) => return true,
        };
        match renewed {
            Ok(true) => {
                elector.reached();
                until = sent + elector.timing.renew_deadline;
                term.send_replace(Some(until));
            }
            Ok(false) => {
                elector.reached();
                let holder = elector.observed.as_ref().map(|o| o.record.holder.clone());
                tracing::warn!(holder = ?holder, "{}: another replica holds it; stopped writing NADs", elector.describe());
                return false;
            }
            Err(e) => elector.failed(&e, "renewing failed"),
        }
    }
    tracing::warn!(
        "{}: not renewed within the renew deadline ({:?}); stopped writing NADs before it can expire",
        elector.describe(),
        elector.timing.renew_deadline
    );
    false
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
