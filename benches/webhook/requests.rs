//! The webhook benchmark's namespaces and requests: how each namespace is
//! annotated, the review bodies rotated over them, and what a right answer is.

use std::fs;

use anyhow::{Context, Result};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;

use crate::baseline::ATTACH_PATCH;
use crate::https::Connection;
use crate::target::Target;
use crate::{FIXTURE, NAMESPACES, PATH, SERVERS};

/// What a namespace is annotated with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Class {
    /// `linkerd.io/multus` and `linkerd.io/inject` enabled.
    Enabled,
    /// Enabled, with OpenShift's UID range: the patch sets the proxy UID too.
    EnabledUidRange,
    /// Only OpenShift's UID range: no patch.
    UidRange,
    /// Nothing: no patch.
    Plain,
}

pub(crate) const UID_RANGE: (&str, &str) = ("openshift.io/sa.scc.uid-range", "1000680000/10000");

impl Class {
    /// A third enabled (half of those with a UID range), a fifth of the rest
    /// with only a UID range, the others plain.
    pub(crate) fn of(i: usize) -> Class {
        match (i % 3, i % 6, i % 5) {
            (_, 0, _) => Class::EnabledUidRange,
            (0, _, _) => Class::Enabled,
            (_, _, 0) => Class::UidRange,
            _ => Class::Plain,
        }
    }

    pub(crate) fn annotations(self) -> &'static [(&'static str, &'static str)] {
        const ON: (&str, &str) = ("linkerd.io/multus", "enabled");
        const INJECT: (&str, &str) = ("linkerd.io/inject", "enabled");
        match self {
            Class::Enabled => &[ON, INJECT],
            Class::EnabledUidRange => &[ON, INJECT, UID_RANGE],
            Class::UidRange => &[UID_RANGE],
            Class::Plain => &[],
        }
    }

    pub(crate) fn patched(self) -> bool {
        matches!(self, Class::Enabled | Class::EnabledUidRange)
    }
}

pub(crate) fn namespace_name(i: usize) -> String {
    format!("team-{i:05}")
}

/// The captured review once per namespace, serialized before measuring.
pub(crate) struct Bodies {
    pub(crate) bodies: Vec<Bytes>,
    pub(crate) patched: Vec<bool>,
    pub(crate) bytes: usize,
}

impl Bodies {
    pub(crate) fn new(classes: &[Class]) -> Result<Bodies> {
        let text = fs::read_to_string(FIXTURE).with_context(|| format!("reading {FIXTURE}"))?;
        let mut review: Value = serde_json::from_str(&text)?;
        let mut bodies = Vec::with_capacity(classes.len());
        for i in 0..classes.len() {
            let namespace = namespace_name(i);
            review["request"]["uid"] = json!(uid(i));
            review["request"]["namespace"] = json!(namespace);
            review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
            bodies.push(Bytes::from(serde_json::to_vec(&review)?));
        }
        let bytes = bodies.iter().map(Bytes::len).sum::<usize>() / bodies.len();
        Ok(Bodies {
            bodies,
            patched: classes.iter().map(|c| c.patched()).collect(),
            bytes,
        })
    }
}

pub(crate) fn uid(i: usize) -> String {
    format!("{i:08x}-b1df-410b-9f67-c7462560ec49")
}

/// Whether `needle` is in `haystack`. The load generator checks every answer with it and
/// shares the CPUs with the servers, so the search is memchr's: one by windows cost more
/// for the webhook's answers (whose uid comes first, and which are searched for a patch
/// too) than for the reader's, and that cost counted against the webhook's throughput.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// Whether an answer is right for request `i`: 200, allowed, and (for the
/// webhook) a patch exactly when the namespace is enabled.
pub(crate) fn judge(
    target: &Target,
    bodies: &Bodies,
    i: usize,
    status: u16,
    body: &[u8],
) -> Result<(), String> {
    let show = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 200 {
        return Err(format!("status {status}: {}", show()));
    }
    if !contains(body, br#""allowed":true"#) {
        return Err(format!("not allowed: {}", show()));
    }
    if target.check_patch && contains(body, br#""patch":"#) != bodies.patched[i] {
        return Err(format!(
            "{} a patch for {}: {}",
            if bodies.patched[i] {
                "no"
            } else {
                "unexpected"
            },
            namespace_name(i % NAMESPACES),
            show()
        ));
    }
    Ok(())
}

/// Before measuring: the webhook patches exactly the enabled namespaces
/// (with the proxy UID under a UID range) and echoes the uid; the baseline
/// and the reader answer 200.
pub(crate) async fn verify(
    targets: &[Target; SERVERS],
    tls: &TlsConnector,
    bodies: &Bodies,
    classes: &[Class],
) -> Result<usize> {
    let mut failures = 0;
    let mut conn = Connection::open(&targets[0].addr, tls).await?;
    let mut fail = |what: String| {
        eprintln!("  FAIL webhook: {what}");
        failures += 1;
    };
    for class in [
        Class::Enabled,
        Class::EnabledUidRange,
        Class::UidRange,
        Class::Plain,
    ] {
        let i = classes
            .iter()
            .position(|&c| c == class)
            .expect("each class");
        let (status, body) = conn.post(PATH, bodies.bodies[i].clone()).await?;
        if let Err(e) = judge(&targets[0], bodies, i, status, &body) {
            fail(format!("{class:?} namespace: {e}"));
            continue;
        }
        let review: Value = serde_json::from_slice(&body)?;
        let response = &review["response"];
        if response["uid"] != json!(uid(i)) {
            fail(format!("uid {} echoed as {}", uid(i), response["uid"]));
        }
        let patch: Value = match response["patch"].as_str() {
            None => Value::Null,
            Some(text) => serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .context("the patch is not base64")?,
            )?,
        };
        let want = match class {
            Class::Enabled => serde_json::from_str(ATTACH_PATCH)?,
            // 1000680000 + 2102, and the ownership record says so.
            Class::EnabledUidRange => json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
                {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000682102"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created,proxy-uid=1000682102"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": "1f175a8d44f1fc03"},
            ]),
            Class::UidRange | Class::Plain => Value::Null,
        };
        let sorted = |v: &Value| {
            let mut ops: Vec<String> = v
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            ops.sort();
            ops
        };
        if sorted(&patch) != sorted(&want) {
            fail(format!("{class:?} namespace: patch {patch}, want {want}"));
        }
    }
    for target in &targets[1..] {
        let mut conn = Connection::open(&target.addr, tls).await?;
        let (status, body) = conn.post(PATH, bodies.bodies[0].clone()).await?;
        if let Err(e) = judge(target, bodies, 0, status, &body) {
            eprintln!("  FAIL {}: {e}", target.name);
            failures += 1;
        }
    }
    if failures == 0 {
        eprintln!(
            "checked: the webhook patches exactly the enabled namespaces; the baseline and the reader answer"
        );
    }
    Ok(failures)
}
