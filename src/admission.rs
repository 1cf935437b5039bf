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
use crate::network_resources::{self, Nads};
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
#[derive(Debug, Clone)]
pub struct Request {
    /// Echoed in the response.
    pub uid: String,
    /// The resource acted on.
    pub resource: GroupVersion,
    /// A subresource (`status`), if any.
    pub sub_resource: String,
    /// The object's name; empty for `generateName` creations.
    pub name: String,
    /// The object's namespace.
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// What the rules read of the object as it will be stored: its
    /// `metadata` name, labels and annotations, and, read with
    /// [`parse_with_spec`], its `spec`. The rest (status, managed fields:
    /// most of the bytes) is skipped unparsed.
    pub object: Option<Value>,
    /// Whether the request only simulates the change.
    pub dry_run: bool,
}

/// Reads the request as [`parse`] does: the object's metadata only.
impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RequestIn::<MetadataView>::deserialize(d).map(Request::from)
    }
}

/// How much of the object a request is read with.
trait View {
    fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error>;
}

/// The metadata the pod rules read.
struct MetadataView;

/// That and the pod's `spec`, for the network-resources rules.
struct SpecView;

impl View for MetadataView {
    fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        let object = Option::<ObjectIn>::deserialize(d)?;
        Ok(object.map(|o| object_view(o.metadata, None)))
    }
}

impl View for SpecView {
    fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        let object = Option::<ObjectWithSpecIn>::deserialize(d)?;
        Ok(object.map(|o| object_view(o.metadata, o.spec)))
    }
}

/// The object as the rules see it: the metadata they read, with the object's
/// name (so that a patch removing its last annotation leaves `metadata` in
/// place as it would on the whole pod), and the `spec` when it was read.
fn object_view(metadata: Option<MetadataIn>, spec: Option<Value>) -> Value {
    let mut view = serde_json::Map::new();
    view.insert("metadata".into(), metadata_view(metadata));
    if let Some(spec) = spec {
        view.insert("spec".into(), spec);
    }
    Value::Object(view)
}

/// A request as read, with the object read as `V` says.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "")]
struct RequestIn<V: View> {
    uid: String,
    #[serde(default)]
    resource: GroupVersion,
    #[serde(default)]
    sub_resource: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    operation: String,
    #[serde(default, deserialize_with = "V::read")]
    object: Option<Value>,
    #[serde(default)]
    dry_run: bool,
    #[serde(skip)]
    view: std::marker::PhantomData<V>,
}

impl<V: View> From<RequestIn<V>> for Request {
    fn from(r: RequestIn<V>) -> Self {
        Request {
            uid: r.uid,
            resource: r.resource,
            sub_resource: r.sub_resource,
            name: r.name,
            namespace: r.namespace,
            operation: r.operation,
            object: r.object,
            dry_run: r.dry_run,
        }
    }
}

#[derive(Deserialize)]
struct ObjectIn {
    #[serde(default)]
    metadata: Option<MetadataIn>,
}

#[derive(Deserialize)]
struct ObjectWithSpecIn {
    #[serde(default)]
    metadata: Option<MetadataIn>,
    #[serde(default)]
    spec: Option<Value>,
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

/// The metadata the rules read: name, generateName, labels and annotations.
fn metadata_view(metadata: Option<MetadataIn>) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(m) = metadata {
        let kept = [
            ("name", m.name),
            ("generateName", m.generate_name),
            ("labels", m.labels),
            ("annotations", m.annotations),
        ];
        for (key, value) in kept {
            if let Some(value) = value {
                out.insert(key.into(), value);
            }
        }
    }
    Value::Object(out)
}

/// A review read in one pass: the common case.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "")]
struct Review<'a, V: View> {
    #[serde(default, borrow)]
    api_version: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    kind: std::borrow::Cow<'a, str>,
    request: Option<RequestIn<V>>,
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

/// Reads an AdmissionReview body, the object's metadata only: all the
/// Linkerd-CNI rules read.
pub fn parse(body: &[u8]) -> Result<Request, BadReview> {
    parse_as::<MetadataView>(body)
}

/// Reads an AdmissionReview body with the object's `spec` too, which the
/// network-resources rules change.
pub fn parse_with_spec(body: &[u8]) -> Result<Request, BadReview> {
    parse_as::<SpecView>(body)
}

fn parse_as<V: View>(body: &[u8]) -> Result<Request, BadReview> {
    // One pass over the body; the request's bytes are mostly the pod, which
    // costs as much to skip as to scan, so a second pass would double the cost.
    let request = match serde_json::from_slice::<Review<V>>(body) {
        Ok(review) => {
            check_type(&review.api_version, &review.kind)?;
            review.request.ok_or_else(no_request)?
        }
        Err(_) => explain::<V>(body)?,
    };
    if request.uid.is_empty() {
        return Err(BadReview(format!("the {KIND}'s request has no uid")));
    }
    Ok(request.into())
}

/// Reads a body that did not read in one pass again, in two, to name the part
/// that is wrong: the body, its type or its request.
fn explain<V: View>(body: &[u8]) -> Result<RequestIn<V>, BadReview> {
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

/// The network-resources rules, when the webhook runs them (`--network-resources`).
pub struct NetworkResources<'a> {
    /// Their settings.
    pub settings: &'a network_resources::settings::Settings,
    /// The NADs they look up.
    pub nads: NadState<'a>,
}

/// What the webhook knows of the cluster's NetworkAttachmentDefinitions.
pub enum NadState<'a> {
    /// The NADs, from the cache.
    Known(&'a dyn Nads),
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
    /// Denied: the pod selects a NAD that does not exist or NADs whose node
    /// selectors conflict, or the webhook could not act on it and
    /// `--on-error deny` is set.
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
    /// What the network-resources rules change, one line each.
    pub network_resources: Vec<String>,
    /// The warnings (and, when denied, the reason) returned to the client.
    pub warnings: Vec<String>,
}

/// The Pod kind, made once rather than on every review.
static POD: LazyLock<WorkloadKind> = LazyLock::new(WorkloadKind::pod);

/// What the rules say about one pod.
struct Verdict {
    patch: Vec<json_patch::Operation>,
    changes: Vec<Change>,
    network_resources: Vec<String>,
    warnings: Vec<String>,
}

/// Why the rules do not act on a pod.
enum Refusal {
    /// The pod cannot be acted on: answered as `--on-error` says.
    Problem(String),
    /// The pod must not be created as it is: denied whatever `--on-error` says.
    Deny(String),
}

/// Answers a review with the core's pod rules: the Linkerd-CNI rules, then,
/// on CREATE, the network-resources rules when given (resources and node
/// selectors of a pod cannot change after it is created).
pub fn answer(
    request: &Request,
    namespace: NamespaceState<'_>,
    settings: &Settings,
    network_resources: Option<&NetworkResources<'_>>,
    on_error: OnError,
) -> Answer {
    let refuse = |outcome, message| {
        respond(
            request,
            outcome,
            None,
            Verdict {
                patch: Vec::new(),
                changes: Vec::new(),
                network_resources: Vec::new(),
                warnings: vec![message],
            },
        )
    };
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
    let network_resources = match network_resources {
        Some(nr) if request.operation == "CREATE" => match nr.nads {
            NadState::Known(nads) => Some((nr.settings, nads)),
            NadState::NotSynced => {
                return problem(
                    "the NAD cache has not synced yet: the NetworkAttachmentDefinitions the pod selects are unknown"
                        .into(),
                );
            }
        },
        _ => None,
    };
    match verdict(request, object, namespace, settings, network_resources) {
        Ok(v) if v.patch.is_empty() => respond(request, Outcome::Unchanged, None, v),
        Ok(mut v) => {
            let patch = std::mem::take(&mut v.patch);
            respond(request, Outcome::Patched, Some(&patch), v)
        }
        Err(Refusal::Problem(message)) => problem(message),
        Err(Refusal::Deny(message)) => refuse(Outcome::Denied, message),
    }
}

fn verdict(
    request: &Request,
    object: &Value,
    namespace: NamespaceState<'_>,
    settings: &Settings,
    network_resources: Option<(&network_resources::settings::Settings, &dyn Nads)>,
) -> Result<Verdict, Refusal> {
    let pod_namespace = request.namespace.as_str();
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
    let problem = |e: &dyn fmt::Display| Refusal::Problem(e.to_string());
    let mut pod = Node::from_json(object);
    let outcome = attach::workload(&mut pod, &POD, settings, pod_namespace, &lookup, || true)
        .map_err(|e| problem(&e))?;
    let (decision, applied) = match outcome {
        WorkloadOutcome::Decided { decision, applied } => (decision, applied),
        WorkloadOutcome::NoTemplate | WorkloadOutcome::Held(_) => {
            unreachable!("a Pod is its own template and may always be attached")
        }
    };
    let applied = applied.map_err(|e| problem(&e))?;
    warnings.extend(decision.range_problem);
    warnings.extend(applied.warnings);
    let mut network_resources_changes = Vec::new();
    if let Some((nr_settings, nads)) = network_resources {
        use network_resources::Error;
        match network_resources::workload(&mut pod, &POD, nr_settings, pod_namespace, nads) {
            Ok(applied) => {
                let applied = applied.unwrap_or_default();
                network_resources_changes = applied.changes;
                warnings.extend(applied.warnings);
            }
            Err(
                e @ (Error::MissingNads(_)
                | Error::NodeSelector { .. }
                | Error::NodeSelectorConflict { .. }),
            ) => {
                return Err(Refusal::Deny(format!("{}: {e}", pod_name(request, object))));
            }
            Err(e) => return Err(problem(&e)),
        }
    }
    Ok(Verdict {
        patch: json_patch::diff(object, &pod.to_json()),
        changes: applied.changes,
        network_resources: network_resources_changes,
        warnings,
    })
}

/// The pod as users know it: `pod namespace/name`, with its `generateName`
/// when the API server has not named it yet.
fn pod_name(request: &Request, object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = [&request.name, metadata["name"].as_str().unwrap_or_default()]
        .into_iter()
        .find(|n| !n.is_empty())
        .or_else(|| metadata["generateName"].as_str())
        .unwrap_or_default();
    format!("pod {}/{name}", request.namespace)
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
        changes: verdict.changes,
        network_resources: verdict.network_resources,
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
                None,
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
            None,
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
            let answer = answer(&request, ns, &Settings::default(), None, on_error);
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
            None,
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

    fn sriov_nads() -> network_resources::NadTable {
        network_resources::nad_table(&[
            (
                "demo",
                "sriov",
                &[
                    ("k8s.v1.cni.cncf.io/resourceName", "intel.com/sriov"),
                    ("k8s.v1.cni.cncf.io/nodeSelector", "sriov=true"),
                ],
            ),
            ("demo", "linkerd-cni", &[]),
            (
                "demo",
                "elsewhere",
                &[("k8s.v1.cni.cncf.io/nodeSelector", "sriov=false")],
            ),
        ])
    }

    /// A pod review read as the webhook reads it with the network-resources rules on.
    fn with_spec(operation: &str, object: Value) -> Request {
        let review = json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "request": {
                "uid": "u1",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "demo",
                "operation": operation,
                "object": object,
            }
        });
        parse_with_spec(review.to_string().as_bytes()).unwrap()
    }

    fn selecting(networks: &str) -> Value {
        json!({
            "metadata": {"name": "web", "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
            "spec": {"containers": [{"name": "app", "image": "app"}]}
        })
    }

    #[test]
    fn network_resources_on_create_only_after_the_linkerd_rules() {
        let ns = enabled();
        let nads = sriov_nads();
        let settings = network_resources::settings::Settings::default();
        let nr = NetworkResources {
            settings: &settings,
            nads: NadState::Known(&nads),
        };
        let create = answer(
            &with_spec("CREATE", selecting("sriov, sriov")),
            NamespaceState::Known(&ns),
            &Settings::default(),
            Some(&nr),
            OnError::Allow,
        );
        assert_eq!(create.outcome, Outcome::Patched, "{:?}", create.warnings);
        assert_eq!(create.changes, [Change::Attached]);
        assert_eq!(
            patch_of(&response(&create)),
            json!([
                {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov, sriov, linkerd-cni"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": r#"{"requests":{"intel.com/sriov":{"set":2}},"limits":{"intel.com/sriov":{"set":2}},"nodeSelector":{"sriov":"true"}}"#},
                {"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"intel.com/sriov": "2"}, "limits": {"intel.com/sriov": "2"}}},
                {"op": "add", "path": "/spec/nodeSelector", "value": {"sriov": "true"}}
            ])
        );
        let update = answer(
            &with_spec("UPDATE", selecting("sriov, sriov")),
            NamespaceState::Known(&ns),
            &Settings::default(),
            Some(&nr),
            OnError::Allow,
        );
        let ops = patch_of(&response(&update));
        assert_eq!(ops.as_array().unwrap().len(), 2, "{ops}");
        assert!(
            !ops.to_string().contains("/spec"),
            "UPDATE gets the Linkerd-CNI rules only: {ops}"
        );
    }

    #[test]
    fn what_the_network_resources_rules_deny_or_refuse() {
        let ns = BTreeMap::new();
        let nads = sriov_nads();
        let settings = network_resources::settings::Settings::default();
        let known = NetworkResources {
            settings: &settings,
            nads: NadState::Known(&nads),
        };
        let not_synced = NetworkResources {
            settings: &settings,
            nads: NadState::NotSynced,
        };
        let cases = [
            (
                "missing NADs deny whatever --on-error says",
                selecting("sriov, gone, other/gone@net2"),
                &known,
                Outcome::Denied,
                "pod demo/web: selects NetworkAttachmentDefinitions demo/gone and other/gone, which do not exist",
            ),
            (
                "node selectors in conflict deny",
                selecting("sriov, elsewhere"),
                &known,
                Outcome::Denied,
                "pod demo/web: spec.nodeSelector sriov: NetworkAttachmentDefinition demo/sriov asks for \"true\" but NetworkAttachmentDefinition demo/elsewhere for \"false\"",
            ),
            (
                "other rule errors follow --on-error",
                json!({"metadata": {"annotations": {"v1.multus-cni.io/default-network": "a, b"}}}),
                &known,
                Outcome::Warned,
                "annotation v1.multus-cni.io/default-network: selects 2 networks; it takes exactly one",
            ),
            (
                "a NAD cache not synced follows --on-error",
                selecting("sriov"),
                &not_synced,
                Outcome::Warned,
                "the NAD cache has not synced yet: the NetworkAttachmentDefinitions the pod selects are unknown",
            ),
        ];
        for (name, pod, nr, outcome, message) in cases {
            let answer = answer(
                &with_spec("CREATE", pod),
                NamespaceState::Known(&ns),
                &Settings::default(),
                Some(nr),
                OnError::Allow,
            );
            assert_eq!(answer.outcome, outcome, "{name}");
            let response = response(&answer);
            assert!(response.get("patch").is_none(), "{name}");
            let text = match outcome {
                Outcome::Denied => response["status"]["message"].clone(),
                _ => response["warnings"][0].clone(),
            };
            assert_eq!(text, format!("{PREFIX}{message}"), "{name}");
        }
    }

    #[test]
    fn the_spec_is_read_only_when_asked_for() {
        let with_spec = parse_with_spec(CREATE.as_bytes()).unwrap();
        let without = parse(CREATE.as_bytes()).unwrap();
        let full: Value = serde_json::from_str(CREATE).unwrap();
        let object = with_spec.object.unwrap();
        assert_eq!(object["spec"], full["request"]["object"]["spec"]);
        assert!(object.get("status").is_none());
        assert_eq!(
            object["metadata"],
            without.object.as_ref().unwrap()["metadata"]
        );
        assert!(without.object.unwrap().get("spec").is_none());
        assert_eq!(with_spec.uid, without.uid);
    }
}
