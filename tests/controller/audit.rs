//! The API server's audit log, read back: who sent what, and when by the API
//! server's clock (the same machine's as every other log of a test).

use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One request, as the audit log's ResponseComplete line has it.
#[derive(Debug, Clone)]
pub struct Request {
    /// When the API server received it.
    pub received: Timestamp,
    /// When it answered.
    pub done: Timestamp,
    pub verb: String,
    pub resource: String,
    /// The subresource (`status`, `eviction`), empty for the object itself.
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The response's status code (the Metadata level records it).
    pub code: u16,
}

impl Request {
    /// A write to a NetworkAttachmentDefinition, whatever the answer.
    pub fn is_nad_write(&self) -> bool {
        self.resource == "network-attachment-definitions" && is_write(&self.verb)
    }

    /// A write of an Event, whatever the answer.
    pub fn is_event_write(&self) -> bool {
        self.resource == "events" && is_write(&self.verb)
    }

    /// A write of the Lease that succeeded.
    pub fn is_lease_written(&self) -> bool {
        self.resource == "leases" && is_write(&self.verb) && self.code < 300
    }
}

fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete")
}

/// The username of ServiceAccount `namespace/name`.
pub fn service_account(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Every request in the log by `user`, in the order answered.
pub fn requests(log: &Path, user: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let time = |v: &Value| -> Timestamp {
        v.as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("an audit timestamp: {v}"))
    };
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("an audit line"))
        .filter(|e| e["user"]["username"] == user)
        .map(|e| Request {
            received: time(&e["requestReceivedTimestamp"]),
            done: time(&e["stageTimestamp"]),
            verb: e["verb"].as_str().unwrap_or_default().to_string(),
            resource: text_at(&e, "resource"),
            subresource: text_at(&e, "subresource"),
            namespace: text_at(&e, "namespace"),
            name: text_at(&e, "name"),
            code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
        })
        .collect()
}

fn text_at(event: &Value, field: &str) -> String {
    event["objectRef"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Seconds from `from` to `to` (negative when `to` is earlier).
pub fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    (to.as_nanosecond() - from.as_nanosecond()) as f64 / 1e9
}
