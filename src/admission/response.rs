//! The AdmissionReview response: allowed or denied, the JSONPatch in base64,
//! and the warnings users see in `kubectl`.

use serde::Serialize;

use crate::k8s::json_patch::write_str;

use super::{API_VERSION, Answer, KIND, Outcome, Request, Verdict};

#[derive(Serialize)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
}

/// Appends `value` as JSON.
fn json(body: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    serde_json::to_writer(body, value).expect("strings and a status serialize");
}

/// The pieces of the answer's JSON between its strings.
const OPEN: &[u8] = b"{\"apiVersion\":";
const KIND_OPEN: &[u8] = b",\"kind\":";
const UID_OPEN: &[u8] = b",\"response\":{\"uid\":";
const PATCH_OPEN: &[u8] = b",\"patchType\":\"JSONPatch\",\"patch\":\"";
const CLOSE: &[u8] = b"}}";

/// About what the warnings (or, denied, the status) take in the answer; none without them.
fn warned_len(warnings: &[String], denied: bool) -> usize {
    if warnings.is_empty() {
        return 0;
    }
    let field = if denied { 64 } else { 13 };
    field + warnings.iter().map(|w| w.len() + 3).sum::<usize>()
}

/// Prefixes what users see in `kubectl` with where it comes from.
pub(super) const PREFIX: &str = "linkerd-multus: ";

pub(super) fn respond(
    request: &Request,
    outcome: Outcome,
    patch: Option<&[u8]>,
    verdict: Verdict,
) -> Answer {
    let warnings: Vec<String> = verdict
        .warnings
        .into_iter()
        .map(|w| format!("{PREFIX}{w}"))
        .collect();
    let denied = outcome == Outcome::Denied;
    let allowed: &[u8] = match denied {
        true => b",\"allowed\":false",
        false => b",\"allowed\":true",
    };
    let patch_len = patch.map_or(0, |p| {
        PATCH_OPEN.len() + base64::encoded_len(p.len(), true).expect("a patch's size") + 1
    });
    // Exact for an answer without warnings whose uid JSON does not escape (the API server's
    // are UUIDs): the body then becomes the reply's bytes without another allocation.
    let size = OPEN.len()
        + API_VERSION.len()
        + KIND_OPEN.len()
        + KIND.len()
        + UID_OPEN.len()
        + request.uid.len()
        // The quotes of those three strings.
        + 3 * 2
        + allowed.len()
        + patch_len
        + CLOSE.len()
        + warned_len(&warnings, denied);
    let mut body = Vec::with_capacity(size);
    use base64::Engine as _;
    // Written by hand, as serde_json writes the same fields in the same order: the patch's
    // base64 goes in whole, as its alphabet needs no escaping, not a character at a time
    // through a formatter.
    body.extend_from_slice(OPEN);
    write_str(&mut body, API_VERSION);
    body.extend_from_slice(KIND_OPEN);
    write_str(&mut body, KIND);
    body.extend_from_slice(UID_OPEN);
    write_str(&mut body, &request.uid);
    body.extend_from_slice(allowed);
    if let Some(patch) = patch {
        body.extend_from_slice(PATCH_OPEN);
        let engine = &base64::engine::general_purpose::STANDARD;
        let start = body.len();
        body.resize(
            start + base64::encoded_len(patch.len(), true).expect("a patch's size"),
            0,
        );
        engine
            .encode_slice(patch, &mut body[start..])
            .expect("the space base64 needs");
        body.push(b'"');
    }
    if denied {
        body.extend_from_slice(b",\"status\":");
        let status = Status {
            code: 403,
            reason: "Forbidden",
            message: warnings.join("; "),
        };
        json(&mut body, &status);
    } else if !warnings.is_empty() {
        body.extend_from_slice(b",\"warnings\":");
        json(&mut body, &warnings);
    }
    body.extend_from_slice(CLOSE);
    Answer {
        outcome,
        body,
        changes: verdict.changes,
        stamp: verdict.stamp,
        skip_subnets: verdict.skip_subnets,
        network_resources: verdict.network_resources,
        warnings,
        on_error: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::json_patch::Writer;
    use crate::linkerd_cni::attach::Changes;
    use serde_json::json;

    /// What serde_json writes for the same review, its fields in the same order.
    fn serde_written(uid: &str, denied: bool, patch: Option<&[u8]>, warnings: &[String]) -> String {
        let engine = &base64::engine::general_purpose::STANDARD;
        let mut response = serde_json::Map::new();
        response.insert("uid".into(), json!(uid));
        response.insert("allowed".into(), json!(!denied));
        if let Some(patch) = patch {
            response.insert("patchType".into(), json!("JSONPatch"));
            response.insert("patch".into(), json!(base64::Engine::encode(engine, patch)));
        }
        if denied {
            let message = warnings.join("; ");
            response.insert(
                "status".into(),
                json!({"code": 403, "reason": "Forbidden", "message": message}),
            );
        } else if !warnings.is_empty() {
            response.insert("warnings".into(), json!(warnings));
        }
        format!(
            r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","response":{}}}"#,
            serde_json::to_string(&response).expect("serializes")
        )
    }

    #[test]
    fn the_answer_is_what_serde_json_writes() {
        // (uid, outcome, patch, warnings)
        type Case<'a> = (&'a str, Outcome, Option<&'a [u8]>, &'a [&'a str]);
        let cases: &[Case] = &[
            ("u-1", Outcome::Unchanged, None, &[]),
            ("u-2", Outcome::Patched, Some(br#"[{"op":"add"}]"#), &[]),
            (
                "u-3",
                Outcome::Patched,
                Some(b"ab"),
                &["one \"quoted\"", "two\n"],
            ),
            ("\"odd\\uid\u{e9}", Outcome::Warned, None, &["w"]),
            ("u-5", Outcome::Denied, None, &["no NAD", "and \"more\""]),
            ("u-6", Outcome::Patched, Some(b""), &[]),
        ];
        for &(uid, outcome, patch, warnings) in cases {
            let text = json!({
                "apiVersion": API_VERSION,
                "kind": KIND,
                "request": {
                    "uid": uid,
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "demo",
                    "operation": "CREATE",
                }
            })
            .to_string();
            let request = super::super::parse(text.as_bytes()).expect("a review");
            let verdict = Verdict {
                patch: Writer::default(),
                changes: Changes::new(),
                stamp: None,
                skip_subnets: None,
                network_resources: Vec::new(),
                warnings: warnings.iter().map(|w| w.to_string()).collect(),
            };
            let answer = respond(&request, outcome, patch, verdict);
            // Sized exactly when nothing is escaped or warned: the reply takes the body
            // as it is, without another allocation (bytes::Bytes::from(Vec)).
            if warnings.is_empty() && uid.starts_with('u') {
                assert_eq!(answer.body.len(), answer.body.capacity(), "{uid}");
            }
            let prefixed: Vec<String> = warnings.iter().map(|w| format!("{PREFIX}{w}")).collect();
            let want = serde_written(uid, outcome == Outcome::Denied, patch, &prefixed);
            assert_eq!(
                String::from_utf8(answer.body).expect("UTF-8"),
                want,
                "{uid}"
            );
        }
    }
}
