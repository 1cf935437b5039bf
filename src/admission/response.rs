//! The AdmissionReview response: allowed or denied, the JSONPatch in base64,
//! and the warnings users see in `kubectl`.

use serde::Serialize;

use super::{API_VERSION, Answer, KIND, Outcome, Request, Verdict};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Base64<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// Bytes written as base64 text.
struct Base64<'a>(&'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let engine = &base64::engine::general_purpose::STANDARD;
        s.collect_str(&base64::display::Base64Display::new(self.0, engine))
    }
}

#[derive(Serialize)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
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
    let response = Response {
        uid: &request.uid,
        allowed: !denied,
        patch_type: patch.map(|_| "JSONPatch"),
        patch: patch.map(Base64),
        status: denied.then(|| Status {
            code: 403,
            reason: "Forbidden",
            message: warnings.join("; "),
        }),
        warnings: if denied { &[] } else { &warnings },
    };
    let size = patch.map_or(0, |p| p.len() * 4 / 3)
        + warnings.iter().map(String::len).sum::<usize>()
        + request.uid.len()
        + 160;
    let mut body = Vec::with_capacity(size);
    let review = ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    serde_json::to_writer(&mut body, &review).expect("a review serializes");
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
