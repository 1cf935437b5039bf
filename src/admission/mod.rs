//! `admission.k8s.io/v1` AdmissionReview: reading a request, answering it with
//! the core's pod rules and a minimal JSONPatch. Pure code; the webhook server
//! does the I/O.

mod patch;
mod response;
mod review;

use std::fmt;
use std::sync::LazyLock;

use serde_json::Value;

use crate::k8s::json_patch::{self, Writer};
use crate::k8s::namespace::Lookup;
use crate::k8s::networks::NETWORKS_ANNOTATION;
use crate::k8s::workload::WorkloadKind;
use crate::linkerd_cni::attach::{self, Change, Edit, WorkloadOutcome};
use crate::linkerd_cni::settings::Settings;
use crate::network_resources::{self, Nads};
use crate::yaml::Node;

use patch::annotation_patch;
use response::respond;
pub use review::{
    API_VERSION, BadReview, GroupVersion, KIND, Member, Metadata, Object, Request, Strings, parse,
};

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

/// What to do with a pod the rules attach in a namespace that has no
/// Linkerd-CNI NAD (Multus could not start it until the NAD exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MissingNad {
    /// Deny it, naming the namespace, the NAD and the ways out.
    Deny,
    /// Attach it with a warning; kubelet retries its sandbox until the NAD exists.
    Attach,
    /// Do not look: attach it without a warning (and the webhook needs no NAD watch).
    Ignore,
}

/// The missing-NAD check of the Linkerd-CNI rules.
pub struct NadCheck<'a> {
    /// The cluster's NADs, from the webhook's cache.
    pub nads: NadState<'a>,
    /// What to do when the pod's namespace lacks the NAD.
    pub policy: MissingNad,
    /// Whether the webhook's NAD controller (`--manage-nads`) makes missing NADs.
    pub managed: bool,
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
    patch: Writer,
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
/// selectors of a pod cannot change after it is created). The Linkerd-CNI
/// rules alone read the pod's metadata as the review holds it and patch its
/// annotations; with the network-resources rules, the pod's metadata and spec
/// are read into a tree, as the KRM function reads a workload.
pub fn answer(
    request: &Request,
    namespace: NamespaceState<'_>,
    settings: &Settings,
    network_resources: Option<&NetworkResources<'_>>,
    nad_check: Option<&NadCheck<'_>>,
    on_error: OnError,
) -> Answer {
    let refuse = |outcome, message| {
        respond(
            request,
            outcome,
            None,
            Verdict {
                patch: Writer::default(),
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
        let what = match &*request.sub_resource {
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
    if !matches!(&*request.operation, "CREATE" | "UPDATE") {
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
    let verdict = match network_resources {
        None => pod_verdict(request, object, namespace, settings),
        Some(network_resources) => match object.to_value() {
            Ok(object) => tree_verdict(request, &object, namespace, settings, network_resources),
            Err(e) => Err(Refusal::Problem(format!(
                "the pod's spec does not read: {e}"
            ))),
        },
    };
    let verdict = verdict.and_then(|v| missing_nad(request, settings, nad_check, v));
    match verdict {
        Ok(v) if v.patch.is_empty() => respond(request, Outcome::Unchanged, None, v),
        Ok(mut v) => {
            let patch = std::mem::take(&mut v.patch).finish();
            respond(request, Outcome::Patched, Some(&patch), v)
        }
        Err(Refusal::Problem(message)) => problem(message),
        Err(Refusal::Deny(message)) => refuse(Outcome::Denied, message),
    }
}

/// Checks that a pod the rules attach has the NAD in its namespace: denies
/// it, or attaches it with a warning, as the policy says.
fn missing_nad(
    request: &Request,
    settings: &Settings,
    check: Option<&NadCheck<'_>>,
    mut verdict: Verdict,
) -> Result<Verdict, Refusal> {
    let Some(check) = check else {
        return Ok(verdict);
    };
    if check.policy == MissingNad::Ignore || !verdict.changes.contains(&Change::Attached) {
        return Ok(verdict);
    }
    let (namespace, nad) = (&*request.namespace, &*settings.nad_name);
    let nads = match check.nads {
        NadState::Known(nads) => nads,
        NadState::NotSynced => {
            return Err(Refusal::Problem(format!(
                "the NAD cache has not synced yet: whether namespace {namespace} has the NetworkAttachmentDefinition {nad} is unknown"
            )));
        }
    };
    if nads.annotations(namespace, nad).is_some() {
        return Ok(verdict);
    }
    match (check.policy, check.managed) {
        (MissingNad::Attach, true) => verdict.warnings.push(format!(
            "namespace {namespace} has no NetworkAttachmentDefinition {nad} yet: the NAD controller (--manage-nads) is making it; until it exists the pod's sandbox fails and kubelet retries it"
        )),
        (MissingNad::Attach, false) => verdict.warnings.push(format!(
            "namespace {namespace} has no NetworkAttachmentDefinition {nad}: the pod cannot start until it exists (--missing-nad attach)"
        )),
        _ => {
            return Err(Refusal::Deny(format!(
                "namespace {namespace} has no NetworkAttachmentDefinition {nad}, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the webhook with --manage-nads so that it makes it"
            )));
        }
    }
    Ok(verdict)
}

/// The namespace's annotations, when the cache knows it; else a warning.
fn namespace_lookup<'a>(
    namespace: NamespaceState<'a>,
    pod_namespace: &str,
    warnings: &mut Vec<String>,
) -> Option<&'a dyn Lookup> {
    match namespace {
        NamespaceState::Known(lookup) => Some(lookup),
        _ => {
            warnings.push(format!(
                "namespace {pod_namespace:?} is not in the webhook's namespace cache; the pod is decided on its own annotations"
            ));
            None
        }
    }
}

/// The Linkerd-CNI rules alone ([`attach::pod`]), on the metadata as read:
/// the patch is written from the annotation edits, with no tree of the pod.
fn pod_verdict(
    request: &Request,
    object: &Object,
    namespace: NamespaceState<'_>,
    settings: &Settings,
) -> Result<Verdict, Refusal> {
    let mut warnings = Vec::new();
    let lookup = namespace_lookup(namespace, &request.namespace, &mut warnings);
    let metadata = object.metadata.as_ref();
    let annotations = metadata.and_then(|m| m.annotations.as_ref());
    let labels = metadata.and_then(|m| m.labels.as_ref());
    let networks = match annotations.and_then(|a| a.get(NETWORKS_ANNOTATION)) {
        None => Ok(None),
        Some(n) if n.is_null() => Ok(None),
        Some(n) => n.text().map(Some).ok_or(n.kind_name()),
    };
    let change = attach::pod(
        &annotations,
        networks,
        &labels,
        settings,
        &request.namespace,
        &lookup,
    )
    .map_err(|e| Refusal::Problem(e.to_string()))?;
    let patch = annotation_patch(metadata, &change.edits).map_err(Refusal::Problem)?;
    warnings.extend(change.decision.range_problem);
    warnings.extend(change.applied.warnings);
    Ok(Verdict {
        patch,
        changes: change.applied.changes,
        network_resources: Vec::new(),
        warnings,
    })
}

/// The Linkerd-CNI rules then the network-resources rules, on a tree of the
/// pod's metadata and spec, answered with the diff of the two trees.
fn tree_verdict(
    request: &Request,
    object: &Value,
    namespace: NamespaceState<'_>,
    settings: &Settings,
    (nr_settings, nads): (&network_resources::settings::Settings, &dyn Nads),
) -> Result<Verdict, Refusal> {
    let pod_namespace = &*request.namespace;
    let mut warnings = Vec::new();
    let lookup = namespace_lookup(namespace, pod_namespace, &mut warnings);
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
    use network_resources::Error;
    let network_resources_changes =
        match network_resources::workload(&mut pod, &POD, nr_settings, pod_namespace, nads) {
            Ok(applied) => {
                let applied = applied.unwrap_or_default();
                warnings.extend(applied.warnings);
                applied.changes
            }
            Err(
                e @ (Error::MissingNads(_)
                | Error::NodeSelector { .. }
                | Error::NodeSelectorConflict { .. }),
            ) => {
                return Err(Refusal::Deny(format!("{}: {e}", pod_name(request, object))));
            }
            Err(e) => return Err(problem(&e)),
        };
    Ok(Verdict {
        patch: Writer::from(&json_patch::diff(object, &pod.to_json())[..]),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use base64::Engine;
    use proptest::prelude::*;
    use serde_json::json;

    use super::response::PREFIX;
    use super::*;

    const CREATE: &str = include_str!("../../../shared/fixtures/admission/pod-create.json");
    const DRY_RUN: &str = include_str!("../../../shared/fixtures/admission/pod-create-dryrun.json");

    fn enabled_namespace() -> BTreeMap<String, String> {
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

    /// The missing-NAD check: what each policy answers for a pod the rules
    /// attach, with and without the NAD in its namespace.
    #[test]
    fn a_missing_nad_is_denied_or_warned_of_as_the_policy_says() {
        let ns = enabled_namespace();
        let with_nad = crate::network_resources::nad_table(&[("demo", "linkerd-cni", &[])]);
        let without = crate::network_resources::nad_table(&[("demo", "other", &[])]);
        let deny = "namespace demo has no NetworkAttachmentDefinition linkerd-cni, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the webhook with --manage-nads so that it makes it";
        let making = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni yet: the NAD controller (--manage-nads) is making it; until it exists the pod's sandbox fails and kubelet retries it";
        let attach = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni: the pod cannot start until it exists (--missing-nad attach)";
        let not_synced = "linkerd-multus: the NAD cache has not synced yet: whether namespace demo has the NetworkAttachmentDefinition linkerd-cni is unknown";
        type Case<'a> = (
            &'a str,
            Option<&'a dyn Nads>,
            MissingNad,
            bool,
            OnError,
            Outcome,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (
                "present, deny",
                Some(&with_nad),
                MissingNad::Deny,
                false,
                OnError::Allow,
                Outcome::Patched,
                &[],
            ),
            (
                "present, attach",
                Some(&with_nad),
                MissingNad::Attach,
                true,
                OnError::Allow,
                Outcome::Patched,
                &[],
            ),
            (
                "missing, deny",
                Some(&without),
                MissingNad::Deny,
                false,
                OnError::Allow,
                Outcome::Denied,
                &[],
            ),
            (
                "missing, deny even with the controller",
                Some(&without),
                MissingNad::Deny,
                true,
                OnError::Allow,
                Outcome::Denied,
                &[],
            ),
            (
                "missing, the controller makes it",
                Some(&without),
                MissingNad::Attach,
                true,
                OnError::Allow,
                Outcome::Patched,
                &[making],
            ),
            (
                "missing, attach",
                Some(&without),
                MissingNad::Attach,
                false,
                OnError::Allow,
                Outcome::Patched,
                &[attach],
            ),
            (
                "missing, ignore",
                Some(&without),
                MissingNad::Ignore,
                false,
                OnError::Allow,
                Outcome::Patched,
                &[],
            ),
            (
                "not synced, allow",
                None,
                MissingNad::Deny,
                false,
                OnError::Allow,
                Outcome::Warned,
                &[not_synced],
            ),
            (
                "not synced, deny",
                None,
                MissingNad::Deny,
                false,
                OnError::Deny,
                Outcome::Denied,
                &[],
            ),
        ];
        for &(name, nads, policy, managed, on_error, outcome, warnings) in cases {
            let request = parse(CREATE.as_bytes()).unwrap();
            let check = NadCheck {
                nads: match nads {
                    Some(nads) => NadState::Known(nads),
                    None => NadState::NotSynced,
                },
                policy,
                managed,
            };
            let answer = answer(
                &request,
                NamespaceState::Known(&ns),
                &Settings::default(),
                None,
                Some(&check),
                on_error,
            );
            assert_eq!(answer.outcome, outcome, "{name}");
            let response = response(&answer);
            match outcome {
                Outcome::Denied => {
                    assert_eq!(response["allowed"], false, "{name}");
                    if nads.is_some() {
                        assert_eq!(
                            response["status"]["message"],
                            format!("linkerd-multus: {deny}"),
                            "{name}"
                        );
                    }
                }
                _ => {
                    let got: Vec<&str> = response["warnings"]
                        .as_array()
                        .map(|w| w.iter().map(|w| w.as_str().unwrap()).collect())
                        .unwrap_or_default();
                    assert_eq!(got, warnings, "{name}");
                }
            }
        }
        // A pod the rules do not attach is never checked.
        let body = review("CREATE", "pods", json!({"metadata": {"name": "p"}}));
        let request = parse(body.as_bytes()).unwrap();
        let empty = BTreeMap::new();
        let check = NadCheck {
            nads: NadState::Known(&without),
            policy: MissingNad::Deny,
            managed: false,
        };
        let answer = answer(
            &request,
            NamespaceState::Known(&empty),
            &Settings::default(),
            None,
            Some(&check),
            OnError::Allow,
        );
        assert_eq!(answer.outcome, Outcome::Unchanged);
    }

    #[test]
    fn the_captured_request_gets_the_minimal_patch() {
        let ns = enabled_namespace();
        for fixture in [CREATE, DRY_RUN] {
            let request = parse(fixture.as_bytes()).unwrap();
            let answer = answer(
                &request,
                NamespaceState::Known(&ns),
                &Settings::default(),
                None,
                None,
                OnError::Allow,
            );
            assert_eq!(answer.outcome, Outcome::Patched);
            let response = response(&answer);
            assert_eq!(response["uid"], *request.uid);
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
            None,
            OnError::Allow,
        );
        assert_eq!(answer.outcome, Outcome::Unchanged);
        let response = response(&answer);
        assert_eq!(response, json!({"uid": *request.uid, "allowed": true}));
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
        let mut bytes = CREATE.replacen("pod2", "pod\u{1}", 1).into_bytes();
        let at = bytes.iter().position(|b| *b == 1).unwrap();
        bytes[at] = 0xff;
        let err = parse(&bytes).unwrap_err().to_string();
        assert!(err.contains("not a JSON object: invalid unicode"), "{err}");
    }

    /// The body of a review of `object`.
    fn review(operation: &str, resource: &str, object: Value) -> String {
        review_in("demo", operation, resource, object)
    }

    /// The body of a review of `object` in namespace `namespace`.
    fn review_in(namespace: &str, operation: &str, resource: &str, object: Value) -> String {
        json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "request": {
                "uid": "u1",
                "resource": {"group": "", "version": "v1", "resource": resource},
                "namespace": namespace,
                "operation": operation,
                "object": object,
            }
        })
        .to_string()
    }

    #[test]
    fn what_the_webhook_cannot_act_on() {
        let ns = enabled_namespace();
        let bad_networks =
            json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a,,b"}}});
        let cases: Vec<(&str, String, NamespaceState<'_>, OnError, Outcome, &str)> = vec![
            (
                "not pods",
                review("CREATE", "services", json!({})),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Warned,
                "/services is not pods",
            ),
            (
                "delete",
                review("DELETE", "pods", json!({})),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Warned,
                "operation \"DELETE\"",
            ),
            (
                "bad annotation, allow",
                review("CREATE", "pods", bad_networks.clone()),
                NamespaceState::Known(&ns),
                OnError::Allow,
                Outcome::Warned,
                "annotation k8s.v1.cni.cncf.io/networks: item 2",
            ),
            (
                "bad annotation, deny",
                review("CREATE", "pods", bad_networks),
                NamespaceState::Known(&ns),
                OnError::Deny,
                Outcome::Denied,
                "annotation k8s.v1.cni.cncf.io/networks: item 2",
            ),
            (
                "not synced",
                review("CREATE", "pods", json!({})),
                NamespaceState::NotSynced,
                OnError::Deny,
                Outcome::Denied,
                "has not synced",
            ),
            (
                "annotations not a map",
                review("UPDATE", "pods", json!({"metadata": {"annotations": "x"}})),
                NamespaceState::Known(&ns),
                OnError::Allow,
                Outcome::Warned,
                "metadata.annotations is not a mapping",
            ),
            (
                "unknown namespace",
                review("CREATE", "pods", json!({"metadata": {"name": "p"}})),
                NamespaceState::Unknown,
                OnError::Deny,
                Outcome::Unchanged,
                "is not in the webhook's namespace cache",
            ),
        ];
        for (name, body, ns, on_error, outcome, message) in cases {
            let request = parse(body.as_bytes()).unwrap();
            let answer = answer(&request, ns, &Settings::default(), None, None, on_error);
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
        let ns = enabled_namespace();
        let answer = answer(
            &parse(review("UPDATE", "pods", pod).as_bytes()).unwrap(),
            NamespaceState::Known(&ns),
            &Settings::default(),
            None,
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

    fn selecting(networks: &str) -> Value {
        json!({
            "metadata": {"name": "web", "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
            "spec": {"containers": [{"name": "app", "image": "app"}]}
        })
    }

    #[test]
    fn network_resources_on_create_only_after_the_linkerd_rules() {
        let ns = enabled_namespace();
        let nads = sriov_nads();
        let settings = network_resources::settings::Settings::default();
        let nr = NetworkResources {
            settings: &settings,
            nads: NadState::Known(&nads),
        };
        let create = answer(
            &parse(review("CREATE", "pods", selecting("sriov, sriov")).as_bytes()).unwrap(),
            NamespaceState::Known(&ns),
            &Settings::default(),
            Some(&nr),
            None,
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
            &parse(review("UPDATE", "pods", selecting("sriov, sriov")).as_bytes()).unwrap(),
            NamespaceState::Known(&ns),
            &Settings::default(),
            Some(&nr),
            None,
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
                &parse(review("CREATE", "pods", pod).as_bytes()).unwrap(),
                NamespaceState::Known(&ns),
                &Settings::default(),
                Some(nr),
                None,
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
    fn the_object_is_read_as_far_as_the_rules_go() {
        let request = parse(CREATE.as_bytes()).unwrap();
        let full: Value = serde_json::from_str(CREATE).unwrap();
        let object = request.object.as_ref().unwrap();
        let metadata = object.metadata.as_ref().unwrap();
        let annotations = metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.to_value().unwrap(),
            full["request"]["object"]["metadata"]["annotations"]
        );
        let applied = "kubectl.kubernetes.io/last-applied-configuration";
        assert_eq!(
            annotations.lookup(applied),
            full["request"]["object"]["metadata"]["annotations"][applied].as_str()
        );
        assert_eq!(
            metadata.labels.as_ref().unwrap().lookup("app"),
            Some("pod2")
        );
        let view = object.to_value().unwrap();
        assert_eq!(view["spec"], full["request"]["object"]["spec"]);
        assert_eq!(view["metadata"]["name"], "pod2");
        assert!(view.get("status").is_none());
        assert!(view["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn strings_with_escapes_are_read_too() {
        let body = r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u\u0031", "object": {"metadata": {"annotations": {"a\"b": "c\nd", "n": 5, "m": {}, "z": null}}}}}"#;
        let request = parse(body.as_bytes()).unwrap();
        assert_eq!(request.uid, "u1");
        let metadata = request.object.as_ref().unwrap().metadata.as_ref().unwrap();
        let annotations = metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.lookup("a\"b"), Some("c\nd"));
        for (name, kind) in [("n", "a scalar"), ("m", "a mapping"), ("z", "null")] {
            assert_eq!(annotations.lookup(name), None, "{name}");
            assert_eq!(annotations.get(name).unwrap().kind_name(), kind, "{name}");
        }
    }

    #[test]
    fn labels_and_annotations_that_are_not_objects() {
        for (value, want) in [
            (json!("x"), Strings::Other(json!("x"))),
            (json!([1]), Strings::Other(json!([1]))),
            (json!(7), Strings::Other(json!(7))),
        ] {
            let body = review("UPDATE", "pods", json!({"metadata": {"labels": value}}));
            let request = parse(body.as_bytes()).unwrap();
            let metadata = request.object.unwrap().metadata.unwrap();
            assert_eq!(metadata.labels, Some(want));
        }
    }

    /// The patch the tree path gives: the pod as a tree, [`attach::workload`],
    /// and the diff of the two trees; `None` when the rules cannot act on it.
    fn tree_patch(object: &Value, pod_namespace: &str, namespace: &dyn Lookup) -> Option<Value> {
        let mut pod = Node::from_json(object);
        let settings = Settings::default();
        match attach::workload(&mut pod, &POD, &settings, pod_namespace, namespace, || true) {
            Ok(WorkloadOutcome::Decided { applied: Ok(_), .. }) => {}
            _ => return None,
        }
        Some(serde_json::to_value(json_patch::diff(object, &pod.to_json())).unwrap())
    }

    /// The webhook's patch of `metadata` (`[]` for none); `None` when it
    /// could not act on the pod.
    fn webhook_patch(
        metadata: &Value,
        pod_namespace: &str,
        namespace: &BTreeMap<String, String>,
    ) -> Option<Value> {
        let body = review_in(
            pod_namespace,
            "CREATE",
            "pods",
            json!({"metadata": metadata}),
        );
        let request = parse(body.as_bytes()).unwrap();
        let answer = answer(
            &request,
            NamespaceState::Known(namespace),
            &Settings::default(),
            None,
            None,
            OnError::Allow,
        );
        match answer.outcome {
            Outcome::Patched => Some(patch_of(&response(&answer))),
            Outcome::Unchanged => Some(json!([])),
            _ => None,
        }
    }

    fn pick(
        options: &'static [Option<&'static str>],
    ) -> impl Strategy<Value = Option<&'static str>> {
        proptest::sample::select(options)
    }

    proptest! {
        /// Over generated pods and namespaces, the patch written from the
        /// annotation edits is the diff of the trees, operation for operation.
        #[test]
        fn annotation_patches_are_the_tree_diffs_for_any_pod(
            pod_namespace in proptest::sample::select(&["demo", "linkerd"][..]),
            enabled in proptest::bool::ANY,
            range in pick(&[None, Some("1000680000/10000"), Some("x")]),
            name in proptest::bool::weighted(0.8),
            annotations in proptest::bool::weighted(0.8),
            networks in pick(&[None, Some("a"), Some("linkerd-cni"), Some("x, linkerd-cni"), Some("linkerd-cni@eth9"), Some(r#"[{"name": "linkerd-cni"}]"#), Some("demo/linkerd-cni"), Some("a,,b")]),
            owned in pick(&[None, Some("network=created"), Some("network=appended"), Some("network=created,proxy-uid=1000680002"), Some("proxy-uid=5"), Some("bogus")]),
            uid in pick(&[None, Some("5"), Some("1000680002")]),
            multus in pick(&[None, Some("enabled"), Some("disabled")]),
            other in pick(&[None, Some("b")]),
            control_plane in pick(&[None, Some("destination")]),
        ) {
            let mut namespace = if enabled { enabled_namespace() } else { BTreeMap::new() };
            if let Some(range) = range {
                namespace.insert("openshift.io/sa.scc.uid-range".into(), range.into());
            }
            let mut metadata = serde_json::Map::new();
            // A pod always has a name or a generateName, so its metadata
            // never empties (a template's may, and the tree path removes it).
            if name {
                metadata.insert("name".into(), json!("p"));
            } else {
                metadata.insert("generateName".into(), json!("p-"));
            }
            if annotations {
                let members: serde_json::Map<String, Value> = [
                    ("a/b~c", other),
                    ("k8s.v1.cni.cncf.io/networks", networks),
                    ("multus.linkerd.io/owned", owned),
                    ("config.linkerd.io/proxy-uid", uid),
                    ("linkerd.io/multus", multus),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), json!(v?))))
                .collect();
                metadata.insert("annotations".into(), Value::Object(members));
            }
            if let Some(component) = control_plane {
                metadata.insert("labels".into(), json!({"linkerd.io/control-plane-component": component}));
            }
            let metadata = Value::Object(metadata);
            let object = json!({"metadata": metadata});
            prop_assert_eq!(
                webhook_patch(&metadata, pod_namespace, &namespace),
                tree_patch(&object, pod_namespace, &namespace)
            );
        }
    }

    #[test]
    fn annotation_patches_are_the_tree_diffs() {
        let on = enabled_namespace();
        let mut range = enabled_namespace();
        range.insert(
            "openshift.io/sa.scc.uid-range".into(),
            "1000680000/10000".into(),
        );
        let off = BTreeMap::new();
        let owned = "multus.linkerd.io/owned";
        let networks = "k8s.v1.cni.cncf.io/networks";
        let uid = "config.linkerd.io/proxy-uid";
        let cases: Vec<(&str, Value, &BTreeMap<String, String>)> = vec![
            ("no annotations", json!({"name": "p"}), &on),
            ("no annotations, a UID range", json!({"name": "p"}), &range),
            (
                "empty annotations",
                json!({"name": "p", "annotations": {}}),
                &range,
            ),
            (
                "other annotations",
                json!({"name": "p", "annotations": {"a": "b"}}),
                &range,
            ),
            (
                "the user's networks",
                json!({"annotations": {networks: "x, y@eth1", "a/b~c": "d"}}),
                &on,
            ),
            (
                "a user's proxy UID",
                json!({"annotations": {uid: "7"}}),
                &range,
            ),
            (
                "detach the last annotations",
                json!({"name": "p", "annotations": {owned: "network=created", networks: "linkerd-cni"}}),
                &off,
            ),
            (
                "detach among others",
                json!({"annotations": {"a": "b", owned: "network=appended,proxy-uid=1000682102", networks: "x, linkerd-cni", uid: "1000682102"}}),
                &off,
            ),
            (
                "a new proxy UID over the owned one",
                json!({"annotations": {networks: "linkerd-cni", owned: "network=created,proxy-uid=5", uid: "5"}}),
                &range,
            ),
            (
                "nothing to do",
                json!({"annotations": {networks: "linkerd-cni"}}),
                &on,
            ),
        ];
        for (name, metadata, namespace) in cases {
            let object = json!({"metadata": metadata});
            let want = tree_patch(&object, "demo", namespace).expect(name);
            assert_eq!(
                webhook_patch(&metadata, "demo", namespace),
                Some(want),
                "{name}"
            );
        }
    }

    #[test]
    fn missing_or_null_maps_are_added_whole() {
        let ns = enabled_namespace();
        let added = json!({
            "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
            "multus.linkerd.io/owned": "network=created"
        });
        for (object, path, value) in [
            (
                json!({"spec": {}}),
                "/metadata",
                json!({"annotations": added}),
            ),
            (
                json!({"metadata": null}),
                "/metadata",
                json!({"annotations": added}),
            ),
            (
                json!({"metadata": {"name": "p", "annotations": null}}),
                "/metadata/annotations",
                added.clone(),
            ),
        ] {
            let body = review("CREATE", "pods", object.clone());
            let request = parse(body.as_bytes()).unwrap();
            let answer = answer(
                &request,
                NamespaceState::Known(&ns),
                &Settings::default(),
                None,
                None,
                OnError::Deny,
            );
            let patch = patch_of(&response(&answer));
            assert_eq!(patch, json!([{"op": "add", "path": path, "value": value}]));
            let mut pod = object;
            ::json_patch::patch(
                &mut pod,
                &serde_json::from_value::<::json_patch::Patch>(patch).unwrap(),
            )
            .unwrap();
            assert_eq!(pod["metadata"]["annotations"], added);
        }
    }
}
