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

/// Every request in the log by `user`, in the order answered; the API server
/// may be writing the last line as it is read, which is then left out.
pub fn requests(log: &Path, user: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let time = |v: &Value| -> Timestamp {
        v.as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("an audit timestamp: {v}"))
    };
    whole_lines(&text)
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

/// The whole lines of a log the API server is appending to: a last line
/// without its newline is still being written, and is left for the next read.
pub fn whole_lines(text: &str) -> std::str::Lines<'_> {
    text[..text.rfind('\n').map_or(0, |end| end + 1)].lines()
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

/// A line the API server is still writing is not read: the requests are those
/// of the whole lines, and the partial line's request is read once it is whole.
#[test]
fn a_line_still_being_written_is_left_for_the_next_read() {
    let line = |name: &str| {
        serde_json::json!({
            "user": {"username": "u"},
            "verb": "create",
            "objectRef": {"resource": "pods", "namespace": "ns", "name": name},
            "requestReceivedTimestamp": "2026-11-30T12:00:00.000000Z",
            "stageTimestamp": "2026-11-30T12:00:00.001000Z",
            "responseStatus": {"code": 201},
        })
        .to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (first, second) = (line("first"), line("second"));
    let names =
        |log: &Path| -> Vec<String> { requests(log, "u").into_iter().map(|r| r.name).collect() };
    std::fs::write(&log, format!("{first}\n{}", &second[..second.len() / 2])).unwrap();
    assert_eq!(names(&log), ["first"]);
    std::fs::write(&log, format!("{first}\n{second}\n")).unwrap();
    assert_eq!(names(&log), ["first", "second"]);
}
