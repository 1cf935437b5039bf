//! `admission.k8s.io/v1` AdmissionReview: reading a request, answering it with
//! the core's pod rules and a minimal JSONPatch. Pure code; the webhook server
//! does the I/O.

use std::fmt;
use std::sync::LazyLock;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attach::{self, Change, WorkloadOutcome};
use crate::json_patch;
use crate::namespace::Lookup;
use crate::settings::Settings;
use crate::workload::WorkloadKind;
use crate::yaml::Node;

/// The API version of the reviews this webhook reads and writes.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of review objects.
pub const KIND: &str = "AdmissionReview";

/// A body that is not an AdmissionReview the webhook can read: answered with 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadReview(String);

/// A group, version and kind or resource, as the API server names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersion {
    /// The API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The resource (`pods`) of a `resource`.
    #[serde(default)]
    pub resource: String,
}

/// The part of an AdmissionRequest the webhook reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Echoed in the response.
    pub uid: String,
    /// The resource acted on.
    #[serde(default)]
    pub resource: GroupVersion,
    /// A subresource (`status`), if any.
    #[serde(default)]
    pub sub_resource: String,
    /// The object's name; empty for `generateName` creations.
    #[serde(default)]
    pub name: String,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(default)]
    pub operation: String,
    /// What the pod rules read of the object as it will be stored: its
    /// `metadata` name, labels and annotations. The rest (spec, status,
    /// managed fields: most of the bytes) is skipped unparsed.
    #[serde(default, deserialize_with = "rules_view")]
    pub object: Option<Value>,
    /// Whether the request only simulates the change.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Deserialize)]
struct ObjectIn {
    #[serde(default)]
    metadata: Option<MetadataIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetadataIn {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    generate_name: Option<Value>,
    #[serde(default)]
    labels: Option<Value>,
    #[serde(default)]
    annotations: Option<Value>,
}

/// Reads an object keeping only the metadata the rules read (labels,
/// annotations) and its name, so that a patch removing its last annotation
/// leaves `metadata` in place as it would on the whole pod.
fn rules_view<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    let Some(object) = Option::<ObjectIn>::deserialize(d)? else {
        return Ok(None);
    };
    let mut metadata = serde_json::Map::new();
    if let Some(m) = object.metadata {
        let kept = [
            ("name", m.name),
            ("generateName", m.generate_name),
            ("labels", m.labels),
            ("annotations", m.annotations),
        ];
        for (key, value) in kept {
            if let Some(value) = value {
                metadata.insert(key.into(), value);
            }
        }
    }
    let mut object = serde_json::Map::new();
    object.insert("metadata".into(), Value::Object(metadata));
    Ok(Some(Value::Object(object)))
}

/// A review read in one pass: the common case.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    #[serde(default, borrow)]
    api_version: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    kind: std::borrow::Cow<'a, str>,
    request: Option<Request>,
}

/// A review read with its request left unparsed, to say what is wrong with
/// one that does not read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReview<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<&'a serde_json::value::RawValue>,
}

/// Reads an AdmissionReview body.
pub fn parse(body: &[u8]) -> Result<Request, BadReview> {
    // One pass over the body; the request's bytes are mostly the pod, which
    // costs as much to skip as to scan, so a second pass would double the cost.
    let request = match serde_json::from_slice::<Review>(body) {
        Ok(review) => {
            check_type(&review.api_version, &review.kind)?;
            review.request.ok_or_else(no_request)?
        }
        Err(_) => explain(body)?,
    };
    if request.uid.is_empty() {
        return Err(BadReview(format!("the {KIND}'s request has no uid")));
    }
    Ok(request)
}

/// Reads a body that did not read in one pass again, in two, to name the part
/// that is wrong: the body, its type or its request.
fn explain(body: &[u8]) -> Result<Request, BadReview> {
    let review: RawReview = serde_json::from_slice(body).map_err(|e| {
        BadReview(format!(
            "the body is not an {API_VERSION} {KIND}: not a JSON object: {e}"
        ))
    })?;
    check_type(&review.api_version, &review.kind)?;
    let request = review.request.ok_or_else(no_request)?;
    serde_json::from_str(request.get())
        .map_err(|e| BadReview(format!("the {KIND}'s request does not parse: {e}")))
}

fn check_type(api_version: &str, kind: &str) -> Result<(), BadReview> {
    if api_version != API_VERSION || kind != KIND {
        return Err(BadReview(format!(
            "the body is a {api_version:?} {kind:?}, not an {API_VERSION} {KIND} (the MutatingWebhookConfiguration must list admissionReviewVersions: [v1])"
        )));
    }
    Ok(())
}

fn no_request() -> BadReview {
    BadReview(format!("the {KIND} has no request"))
}

/// What to answer for a pod the webhook cannot act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnError {
    /// Admit it unchanged, with a warning.
    #[default]
    Allow,
    /// Deny it, saying why.
    Deny,
}

/// What the webhook knows of the request's namespace.
pub enum NamespaceState<'a> {
    /// Its annotations, from the cache.
    Known(&'a dyn Lookup),
    /// The cache has synced but does not hold it.
    Unknown,
    /// The cache has not synced yet.
    NotSynced,
}

/// How a review was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Admitted with a patch.
    Patched,
    /// Admitted unchanged.
    Unchanged,
    /// Admitted unchanged with a warning: the webhook could not act on it.
    Warned,
    /// Denied: the webhook could not act on it and `--on-error deny` is set.
    Denied,
    /// Not an AdmissionReview: answered with 400.
    Invalid,
}

impl Outcome {
    /// Every outcome, in metric order.
    pub const ALL: [Outcome; 5] = [
        Outcome::Patched,
        Outcome::Unchanged,
        Outcome::Warned,
        Outcome::Denied,
        Outcome::Invalid,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Patched => "patched",
            Outcome::Unchanged => "unchanged",
            Outcome::Warned => "warned",
            Outcome::Denied => "denied",
            Outcome::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to one review.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// How it was answered.
    pub outcome: Outcome,
    /// The JSON body of the response AdmissionReview.
    pub body: Vec<u8>,
    /// What the patch changes.
    pub changes: Vec<Change>,
    /// The warnings (and, when denied, the reason) returned to the client.
    pub warnings: Vec<String>,
}

/// The Pod kind, made once rather than on every review.
static POD: LazyLock<WorkloadKind> = LazyLock::new(WorkloadKind::pod);

/// What the rules say about one pod.
struct Verdict {
    patch: Vec<json_patch::Operation>,
    changes: Vec<Change>,
    warnings: Vec<String>,
}

/// Answers a review with the core's pod rules.
pub fn answer(
    request: &Request,
    namespace: NamespaceState<'_>,
    settings: &Settings,
    on_error: OnError,
) -> Answer {
    let refuse = |outcome, message| respond(request, outcome, None, Vec::new(), vec![message]);
    let problem = |message: String| match on_error {
        OnError::Allow => refuse(Outcome::Warned, message),
        OnError::Deny => refuse(Outcome::Denied, message),
    };
    let resource = &request.resource;
    if !resource.group.is_empty() || resource.resource != "pods" || !request.sub_resource.is_empty()
    {
        let what = match request.sub_resource.as_str() {
            "" => format!("{}/{}", resource.group, resource.resource),
            sub => format!("{}/{}/{sub}", resource.group, resource.resource),
        };
        return refuse(
            Outcome::Warned,
            format!(
                "{what} is not pods: this webhook acts on pods only; fix the rules of its MutatingWebhookConfiguration"
            ),
        );
    }
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE") {
        return refuse(
            Outcome::Warned,
            format!(
                "operation {:?} is not CREATE or UPDATE: this webhook acts on those only; fix the rules of its MutatingWebhookConfiguration",
                request.operation
            ),
        );
    }
    let Some(object) = &request.object else {
        return problem(format!("the {} request has no object", request.operation));
    };
    let namespace = match namespace {
        NamespaceState::NotSynced => {
            return problem(
                "the namespace cache has not synced yet: the pod's namespace annotations are unknown"
                    .into(),
            );
        }
        other => other,
    };
    match verdict(object, &request.namespace, namespace, settings) {
        Ok(v) if v.patch.is_empty() => {
            respond(request, Outcome::Unchanged, None, v.changes, v.warnings)
        }
        Ok(v) => respond(
            request,
            Outcome::Patched,
            Some(&v.patch),
            v.changes,
            v.warnings,
        ),
        Err(message) => problem(message),
    }
}

fn verdict(
    object: &Value,
    pod_namespace: &str,
    namespace: NamespaceState<'_>,
    settings: &Settings,
) -> Result<Verdict, String> {
    let mut warnings = Vec::new();
    let lookup = match namespace {
        NamespaceState::Known(lookup) => Some(lookup),
        _ => {
            warnings.push(format!(
                "namespace {pod_namespace:?} is not in the webhook's namespace cache; the pod is decided on its own annotations"
            ));
            None
        }
    };
    let mut pod = Node::from_json(object);
    let outcome = attach::workload(&mut pod, &POD, settings, pod_namespace, &lookup, || true)
        .map_err(|e| e.to_string())?;
    let (decision, applied) = match outcome {
        WorkloadOutcome::Decided { decision, applied } => (decision, applied),
        WorkloadOutcome::NoTemplate | WorkloadOutcome::Held(_) => {
            unreachable!("a Pod is its own template and may always be attached")
        }
    };
    let applied = applied.map_err(|e| e.to_string())?;
    warnings.extend(decision.range_problem);
    warnings.extend(applied.warnings);
    Ok(Verdict {
        patch: json_patch::diff(object, &pod.to_json()),
        changes: applied.changes,
        warnings,
    })
}

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
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
}

/// Prefixes what users see in `kubectl` with where it comes from.
const PREFIX: &str = "linkerd-multus: ";

fn respond(
    request: &Request,
    outcome: Outcome,
    patch: Option<&[json_patch::Operation]>,
    changes: Vec<Change>,
    warnings: Vec<String>,
) -> Answer {
    let warnings: Vec<String> = warnings
        .into_iter()
        .map(|w| format!("{PREFIX}{w}"))
        .collect();
    let denied = outcome == Outcome::Denied;
    let response = Response {
        uid: &request.uid,
        allowed: !denied,
        patch_type: patch.map(|_| "JSONPatch"),
        patch: patch.map(|ops| {
            let json = serde_json::to_vec(ops).expect("a patch serializes");
            base64::engine::general_purpose::STANDARD.encode(json)
        }),
        status: denied.then(|| Status {
            code: 403,
            reason: "Forbidden",
            message: warnings.join("; "),
        }),
        warnings: if denied { Vec::new() } else { warnings.clone() },
    };
    let body = serde_json::to_vec(&ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    })
    .expect("a review serializes");
    Answer {
        outcome,
        body,
        changes,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    const CREATE: &str = include_str!("../../shared/fixtures/admission/pod-create.json");
    const DRY_RUN: &str = include_str!("../../shared/fixtures/admission/pod-create-dryrun.json");

    fn enabled() -> BTreeMap<String, String> {
        [
            ("linkerd.io/multus", "enabled"),
            ("linkerd.io/inject", "enabled"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn response(answer: &Answer) -> Value {
        let review: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(review["apiVersion"], API_VERSION);
        assert_eq!(review["kind"], KIND);
        review["response"].clone()
    }

    fn patch_of(response: &Value) -> Value {
        let b64 = response["patch"].as_str().expect("a patch");
        serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn the_captured_request_gets_the_minimal_patch() {
        let ns = enabled();
        for fixture in [CREATE, DRY_RUN] {
            let request = parse(fixture.as_bytes()).unwrap();
            let answer = answer(
                &request,
                NamespaceState::Known(&ns),
                &Settings::default(),
                OnError::Allow,
            );
            assert_eq!(answer.outcome, Outcome::Patched);
            let response = response(&answer);
            assert_eq!(response["uid"], request.uid);
            assert_eq!(response["allowed"], true);
            assert_eq!(response["patchType"], "JSONPatch");
            assert_eq!(
                patch_of(&response),
                json!([
                    {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
                    {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"}
                ])
            );
        }
    }

    #[test]
    fn a_pod_left_alone_gets_no_patch() {
        let request = parse(CREATE.as_bytes()).unwrap();
        let empty = BTreeMap::new();
        let answer = answer(
            &request,
            NamespaceState::Known(&empty),
            &Settings::default(),
            OnError::Allow,
        );
        assert_eq!(answer.outcome, Outcome::Unchanged);
        let response = response(&answer);
        assert_eq!(response, json!({"uid": request.uid, "allowed": true}));
    }

    #[test]
    fn bodies_that_are_not_reviews_are_refused() {
        for (body, want) in [
            ("nope", "not a JSON object"),
            ("[]", "not a JSON object"),
            (
                r#"{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}"#,
                "admissionReviewVersions: [v1]",
            ),
            (
                r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
                "has no request",
            ),
            (
                r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}"#,
                "request does not parse",
            ),
            (
                r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}"#,
                "does not parse",
            ),
            (
                r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": {"metadata": "x"}}}"#,
                "request does not parse: invalid type: string",
            ),
        ] {
            let err = parse(body.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(want), "{body}: {err}");
        }
    }

    fn request(operation: &str, resource: &str, object: Value) -> Request {
        serde_json::from_value(json!({
            "uid": "u1",
            "resource": {"group": "", "version": "v1", "resource": resource},
            "namespace": "demo",
            "operation": operation,
            "object": object,
        }))
        .unwrap()
    }

    #[test]
    fn what_the_webhook_cannot_act_on() {
        let ns = enabled();
        let bad_networks =
            json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a,,b"}}});
        let cases: Vec<(&str, Request, NamespaceState<'_>, OnError, Outcome, &str)> = vec![
            (
                "not pods",
                request("CREATE", "services", json!({})),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Warned,
                "/services is not pods",
            ),
            (
                "delete",
                request("DELETE", "pods", json!({})),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Warned,
                "operation \"DELETE\"",
            ),
            (
                "bad annotation, allow",
                request("CREATE", "pods", bad_networks.clone()),
                NamespaceState::Known(&ns),
                OnError::Allow,
                Outcome::Warned,
                "annotation k8s.v1.cni.cncf.io/networks: item 2",
            ),
            (
                "bad annotation, deny",
                request("CREATE", "pods", bad_networks),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Denied,
                "annotation k8s.v1.cni.cncf.io/networks: item 2",
            ),
            (
                "not synced",
                request("CREATE", "pods", json!({})),
                NamespaceState::NotSynced,
                OnError::Deny,
                Outcome::Denied,
                "has not synced",
            ),
            (
                "annotations not a map",
                request("UPDATE", "pods", json!({"metadata": {"annotations": "x"}})),
                NamespaceState::Known(&ns),
                OnError::Allow,
                Outcome::Warned,
                "metadata.annotations is not a mapping",
            ),
            (
                "unknown namespace",
                request("CREATE", "pods", json!({"metadata": {"name": "p"}})),
                NamespaceState::Unknown,
                OnError::Deny,
                Outcome::Unchanged,
                "is not in the webhook's namespace cache",
            ),
        ];
        for (name, request, ns, on_error, outcome, message) in cases {
            let answer = answer(&request, ns, &Settings::default(), on_error);
            assert_eq!(answer.outcome, outcome, "{name}");
            let response = response(&answer);
            assert_eq!(response["uid"], "u1", "{name}");
            let text = if outcome == Outcome::Denied {
                assert_eq!(response["allowed"], false, "{name}");
                assert_eq!(response["status"]["code"], 403, "{name}");
                response["status"]["message"].as_str().unwrap().to_string()
            } else {
                assert_eq!(response["allowed"], true, "{name}");
                response["warnings"][0].as_str().unwrap().to_string()
            };
            assert!(text.starts_with(PREFIX), "{name}: {text}");
            assert!(text.contains(message), "{name}: {text}");
        }
    }

    #[test]
    fn updates_detach_what_the_webhook_added() {
        let pod = json!({"metadata": {"annotations": {
            "multus.linkerd.io/owned": "network=created",
            "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
            "linkerd.io/multus": "disabled"
        }}});
        let ns = enabled();
        let answer = answer(
            &request("UPDATE", "pods", pod),
            NamespaceState::Known(&ns),
            &Settings::default(),
            OnError::Allow,
        );
        assert_eq!(answer.changes, [Change::Detached]);
        assert_eq!(
            patch_of(&response(&answer)),
            json!([
                {"op": "remove", "path": "/metadata/annotations/multus.linkerd.io~1owned"},
                {"op": "remove", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"}
            ])
        );
    }
}
