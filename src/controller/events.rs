//! The controller's Events (`events.k8s.io/v1`), aggregated as client-go's
//! event broadcaster does: the first occurrence of an (object, type, reason)
//! creates an Event; repeats within [`WINDOW`] of the last are folded into
//! that Event's `series` (a count and the last time seen), written at most
//! once every [`SERIES_UPDATE`] rather than once per repeat. A series seen
//! no more for [`WINDOW`] ends: its last count is written and it is
//! forgotten, so a later repeat starts a new Event.
//!
//! The cache is bounded ([`MAX_SERIES`], client-go's size of its event
//! cache): past it, the series seen least recently is forgotten first. At
//! 10,000 namespaces failing at once it holds 4,096 series of a few hundred
//! bytes each; a namespace forgotten early only gets a new Event next time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::time::Instant;

use crate::controller::FIELD_MANAGER;
use crate::controller::api::{CallError, call};

/// How long after its last occurrence a series ends: client-go's finishTime.
pub const WINDOW: Duration = Duration::from_secs(6 * 60);
/// The least time between two writes of one series.
pub const SERIES_UPDATE: Duration = Duration::from_secs(60);
/// The most series kept at once.
pub const MAX_SERIES: usize = 4096;
/// The longest note the API server accepts.
const MAX_NOTE_BYTES: usize = 1024;

/// Whether an Event reports a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Something done.
    Normal,
    /// Something that needs a look.
    Warning,
}

/// What makes repeats one series: the object, the type and the reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The object's kind.
    pub object_kind: String,
    /// Its namespace, for a namespaced object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: Option<String>,
    /// Normal or Warning.
    pub kind: Kind,
    /// The reason, CamelCase.
    pub reason: &'static str,
}

impl Key {
    /// The key of an Event about `regarding`.
    pub fn new(regarding: &ObjectReference, kind: Kind, reason: &'static str) -> Self {
        Key {
            object_kind: regarding.kind.clone().unwrap_or_default(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone(),
            kind,
            reason,
        }
    }
}

/// One series: the Event it is written into and what is counted.
#[derive(Debug, Clone)]
struct Series {
    event: String,
    count: i32,
    last_seen: Instant,
    last_seen_wall: Timestamp,
    written_count: i32,
    written_at: Instant,
}

/// A write the aggregator asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create the Event of a new series, named so.
    Create {
        /// The Event's name.
        event: String,
    },
    /// Write a series' count into its Event.
    Series {
        /// The Event's name.
        event: String,
        /// Where the Event is.
        namespace: String,
        /// How many times it happened.
        count: i32,
        /// When it last happened.
        last_seen: Timestamp,
    },
}

/// The series the controller is counting: pure bookkeeping, no I/O.
#[derive(Debug)]
pub struct Aggregator {
    series: HashMap<Key, Series>,
    capacity: usize,
}

impl Aggregator {
    /// An aggregator of at most `capacity` series.
    pub fn new(capacity: usize) -> Self {
        Aggregator {
            series: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// How many series it keeps.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether it keeps none.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Counts one occurrence at `now` (`wall` on the wall clock); what to write now, if anything.
    pub fn record(&mut self, key: Key, now: Instant, wall: Timestamp) -> Option<Write> {
        if let Some(series) = self.series.get_mut(&key)
            && now.saturating_duration_since(series.last_seen) < WINDOW
        {
            series.count = series.count.saturating_add(1);
            series.last_seen = now;
            series.last_seen_wall = wall;
            if now.saturating_duration_since(series.written_at) < SERIES_UPDATE {
                return None;
            }
            series.written_at = now;
            series.written_count = series.count;
            return Some(write_series(&key, series));
        }
        if !self.series.contains_key(&key) && self.series.len() >= self.capacity {
            let oldest = self
                .series
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.series.remove(&oldest);
            }
        }
        let event = format!("{}.{:x}", key.name, wall.as_nanosecond());
        self.series.insert(
            key,
            Series {
                event: event.clone(),
                count: 1,
                last_seen: now,
                last_seen_wall: wall,
                written_count: 1,
                written_at: now,
            },
        );
        Some(Write::Create { event })
    }

    /// The counts due at `now`: series with repeats not written for
    /// [`SERIES_UPDATE`], and the last counts of series that ended, which
    /// are forgotten.
    pub fn due(&mut self, now: Instant) -> Vec<Write> {
        let mut writes = Vec::new();
        self.series.retain(|key, series| {
            let ended = now.saturating_duration_since(series.last_seen) >= WINDOW;
            let unwritten = series.count > series.written_count;
            if unwritten
                && (ended || now.saturating_duration_since(series.written_at) >= SERIES_UPDATE)
            {
                series.written_at = now;
                series.written_count = series.count;
                writes.push(write_series(key, series));
            }
            !ended
        });
        writes
    }

    /// Forgets a series (its Event is gone): the next occurrence creates one.
    pub fn forget(&mut self, event: &str) {
        self.series.retain(|_, series| series.event != event);
    }
}

fn write_series(key: &Key, series: &Series) -> Write {
    Write::Series {
        event: series.event.clone(),
        namespace: event_namespace(key.namespace.as_deref()).to_string(),
        count: series.count,
        last_seen: series.last_seen_wall,
    }
}

/// Where the Event about an object goes: its namespace, or `default` for a
/// cluster-scoped object.
fn event_namespace(namespace: Option<&str>) -> &str {
    namespace.filter(|n| !n.is_empty()).unwrap_or("default")
}

/// Where the controller's Events go, through the aggregator.
pub struct Events {
    client: Client,
    instance: String,
    timeout: Duration,
    aggregator: Mutex<Aggregator>,
}

impl Events {
    /// Events reported by this replica (`identity`), each call within `timeout`.
    pub fn new(client: Client, identity: &str, timeout: Duration) -> Self {
        Events {
            client,
            instance: identity.to_string(),
            timeout,
            aggregator: Mutex::new(Aggregator::new(MAX_SERIES)),
        }
    }

    /// Reports `note` about `regarding`, or counts it into the series of
    /// its (object, type, reason). A failed write is logged.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        kind: Kind,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) {
        let key = Key::new(regarding, kind, reason);
        let write = self.aggregator.lock().expect("events lock").record(
            key,
            Instant::now(),
            Timestamp::now(),
        );
        let result = match write {
            None => return,
            Some(Write::Create { event }) => {
                let body = self.event(&event, regarding, kind, reason, action, note);
                let api: Api<Event> = Api::namespaced(
                    self.client.clone(),
                    event_namespace(regarding.namespace.as_deref()),
                );
                call(self.timeout, api.create(&PostParams::default(), &body))
                    .await
                    .map(drop)
            }
            Some(write) => self.write(write).await,
        };
        if let Err(e) = result {
            tracing::warn!(
                error = %e,
                object = ?regarding.name,
                kind = ?regarding.kind,
                reason,
                "publishing an Event; its next occurrence tries again"
            );
        }
    }

    /// Writes the series counts that are due, and forgets ended series.
    pub async fn flush(&self) {
        let writes = self
            .aggregator
            .lock()
            .expect("events lock")
            .due(Instant::now());
        for write in writes {
            if let Err(e) = self.write(write).await {
                tracing::warn!(error = %e, "updating an Event's series");
            }
        }
    }

    /// Writes a series' count into its Event; an Event gone (expired)
    /// forgets the series.
    async fn write(&self, write: Write) -> Result<(), CallError> {
        let Write::Series {
            event,
            namespace,
            count,
            last_seen,
        } = write
        else {
            return Ok(());
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let patch = serde_json::json!({
            "series": EventSeries { count, last_observed_time: MicroTime(last_seen) }
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        match call(
            self.timeout,
            api.patch(&event, &params, &Patch::Merge(&patch)),
        )
        .await
        {
            Err(e) if e.code() == Some(404) => {
                self.aggregator.lock().expect("events lock").forget(&event);
                Ok(())
            }
            result => result.map(drop),
        }
    }

    fn event(
        &self,
        name: &str,
        regarding: &ObjectReference,
        kind: Kind,
        reason: &str,
        action: &str,
        note: String,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(event_namespace(regarding.namespace.as_deref()).to_string()),
                ..ObjectMeta::default()
            },
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(truncate(note, MAX_NOTE_BYTES)),
            event_time: Some(MicroTime(Timestamp::now())),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(FIELD_MANAGER.to_string()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(
                match kind {
                    Kind::Normal => "Normal",
                    Kind::Warning => "Warning",
                }
                .to_string(),
            ),
            ..Event::default()
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, marked with `…`.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
