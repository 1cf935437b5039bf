//! `admission.k8s.io/v1` AdmissionReview: reading a request, answering it with
//! the core's pod rules and a minimal JSONPatch. Pure code; the webhook server
//! does the I/O.

mod opt_ins;
mod patch;
mod response;
mod review;
mod skip_subnets;
mod stamp;

use std::fmt;
use std::sync::LazyLock;

use compact_str::CompactString;
use serde_json::Value;
use smallvec::SmallVec;

use crate::k8s::json_patch::{self, Writer};
use crate::k8s::namespace::Lookup;
use crate::k8s::workload::{WorkloadKind, remove_annotation, set_annotation, template_annotations};
use crate::linkerd_cni::attach::{self, Change, Changes, Edit, WorkloadOutcome};
use crate::linkerd_cni::cni_config::PLUGIN_TYPE;
use crate::linkerd_cni::rollout;
use crate::linkerd_cni::settings::Settings;
use crate::multus::networks::{DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, Networks};
use crate::network_resources::{self, Nads};
use crate::yaml::Node;

use patch::annotation_patch;
use response::respond;
pub use review::{
    API_VERSION, BadReview, GroupVersion, KIND, Member, Metadata, Object, Request, Strings, parse,
};
pub use stamp::NadConfigs;

/// What to answer for a pod the webhook cannot act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Admit it unchanged, with a warning.
    #[default]
    Allow,
    /// Deny it, saying why.
    Deny,
}

/// The network-resources rules, when the webhook runs them (`--network-resources`).
pub struct NetworkResources<'a> {
    /// Their settings.
    pub settings: &'a network_resources::settings::Settings,
    /// The NADs they look up.
    pub nads: &'a dyn Nads,
}

/// What to do with a pod the rules attach in a namespace that has no
/// Linkerd-CNI NAD (Multus could not start it until the NAD exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingNad {
    /// Deny it, naming the namespace, the NAD and the ways out.
    Deny,
    /// Attach it with a warning; kubelet retries its sandbox until the NAD exists.
    Attach,
    /// Do not look: attach it without a warning (and the webhook needs no NAD watch).
    Ignore,
}

/// The missing-NAD check of the Linkerd-CNI rules, and the config-hash stamp
/// of the pods they attach (on CREATE; not under [`MissingNad::Ignore`]).
pub struct NadCheck<'a> {
    /// The cluster's NADs, with the hashes of their configs.
    pub nads: &'a dyn NadConfigs,
    /// What to do when the pod's namespace lacks the NAD.
    pub policy: MissingNad,
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
    pub changes: Changes,
    /// How the patch changes the config-hash stamp, if it does.
    pub stamp: Option<rollout::Change>,
    /// How the patch changes the secondary networks' skip-subnets, if it does.
    pub skip_subnets: Option<crate::linkerd_cni::skip_subnets::Change>,
    /// What the network-resources rules change, one line each.
    pub network_resources: Vec<String>,
    /// The warnings (and, when denied, the reason) returned to the client.
    pub warnings: Vec<String>,
    /// Whether it is the `--on-error` answer: the webhook could not act on the pod.
    pub on_error: bool,
}

/// The Pod kind, made once rather than on every review.
static POD: LazyLock<WorkloadKind> = LazyLock::new(WorkloadKind::pod);

/// What the rules say about one pod.
struct Verdict {
    patch: Writer,
    changes: Changes,
    stamp: Option<rollout::Change>,
    skip_subnets: Option<crate::linkerd_cni::skip_subnets::Change>,
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

/// Whether [`answer`] acts on the request, and so reads its namespace: a pod
/// CREATE or UPDATE with an object. Others are answered without it.
pub fn acts_on(request: &Request) -> bool {
    let resource = &request.resource;
    resource.group.is_empty()
        && resource.resource == "pods"
        && request.sub_resource.is_empty()
        && matches!(&*request.operation, "CREATE" | "UPDATE")
        && request.object.is_some()
}

/// The NADs (namespace, name) the rules may read to answer `request` in a namespace with
/// the annotations `namespace`, each once: the Linkerd-CNI NAD of the pod's namespace, then
/// each network the pod selects (its networks and default-network annotations; a selection
/// without a namespace is in the pod's). None for a pod the Linkerd-CNI rules do not attach,
/// unless the network-resources rules run (they read the NADs any pod selects). What a front
/// takes from its caches before it runs the rules on them; an annotation that does not read
/// (past the selections cap among others) gives none, as the rules refuse it.
pub fn nads_read(
    request: &Request,
    namespace: &dyn Lookup,
    settings: &Settings,
    network_resources: bool,
) -> SmallVec<[(CompactString, CompactString); 2]> {
    let pod_namespace = &*request.namespace;
    if !acts_on(request) {
        return SmallVec::new();
    }
    let metadata = request.object.as_ref().and_then(|o| o.metadata.as_ref());
    let annotations = metadata.and_then(|m| m.annotations.as_ref());
    if !network_resources {
        let labels = metadata.and_then(|m| m.labels.as_ref());
        let decision = attach::decide(settings, pod_namespace, &annotations, &labels, namespace);
        if !decision.attach {
            return SmallVec::new();
        }
    }
    let mut nads = crate::work::Distinct::default();
    nads.insert((pod_namespace.into(), settings.nad_name.as_str().into()));
    for key in [NETWORKS_ANNOTATION, DEFAULT_NETWORK_ANNOTATION] {
        let text = annotations.and_then(|a| a.get(key)).and_then(|m| m.text());
        let Some(Ok(networks)) = text.map(Networks::parse) else {
            continue;
        };
        for selection in networks.selections() {
            let namespace = selection.namespace_or(pod_namespace);
            nads.insert((namespace.into(), selection.name.as_str().into()));
        }
    }
    nads.into_list()
}

/// The answer for a pod the webhook cannot decide on (its namespace or a NAD
/// it selects could not be read): admitted unchanged with `message` as a
/// warning, or denied with it, as `on_error` says.
pub fn unavailable(request: &Request, on_error: OnError, message: String) -> Answer {
    let outcome = match on_error {
        OnError::Allow => Outcome::Warned,
        OnError::Deny => Outcome::Denied,
    };
    Answer {
        on_error: true,
        ..refusal(request, outcome, message)
    }
}

/// An answer without a patch, with `message` as its warning (or, denied, its reason).
fn refusal(request: &Request, outcome: Outcome, message: String) -> Answer {
    respond(
        request,
        outcome,
        None,
        Verdict {
            patch: Writer::default(),
            changes: Changes::new(),
            stamp: None,
            skip_subnets: None,
            network_resources: Vec::new(),
            warnings: vec![message],
        },
    )
}

/// Answers a review with the core's pod rules: the Linkerd-CNI rules, then,
/// on CREATE, the network-resources rules when given (resources and node
/// selectors of a pod cannot change after it is created). The Linkerd-CNI
/// rules alone read the pod's metadata as the review holds it and patch its
/// annotations; with the network-resources rules, the pod's metadata and spec
/// are read into a tree, as the KRM function reads a workload. `namespace`
/// holds the annotations of the pod's namespace. With `nad_check`, a pod the
/// rules attach on CREATE gets the hash of its NAD's config (`stamp.rs`).
pub fn answer(
    request: &Request,
    namespace: &dyn Lookup,
    settings: &Settings,
    network_resources: Option<&NetworkResources<'_>>,
    nad_check: Option<&NadCheck<'_>>,
    on_error: OnError,
) -> Answer {
    let refuse = |outcome, message| refusal(request, outcome, message);
    let problem = |message: String| unavailable(request, on_error, message);
    if opt_ins::is_namespace(request) {
        return opt_ins::namespace(request);
    }
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
    let network_resources = network_resources
        .filter(|_| request.operation == "CREATE")
        .map(|nr| (nr.settings, nr.nads));
    let verdict = match network_resources {
        None => pod_verdict(request, object, namespace, settings, nad_check),
        Some(network_resources) => match object.to_value() {
            Ok(object) => tree_verdict(
                request,
                &object,
                (namespace, settings, nad_check),
                network_resources,
            ),
            Err(e) => Err(Refusal::Problem(format!(
                "the pod's spec does not read: {e}"
            ))),
        },
    };
    let verdict = verdict
        .and_then(|v| missing_nad(request, settings, nad_check, v))
        .map(|v| opt_ins::pod(request, v));
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
    if check.nads.annotations(namespace, nad).is_some() {
        return match check.nads.other_network(namespace, nad) {
            None => Ok(verdict),
            Some(runs) => Err(Refusal::Problem(format!(
                "NetworkAttachmentDefinition {namespace}/{nad} runs {runs}, not {PLUGIN_TYPE}: it is another network with the name the rules need for Linkerd-CNI, and the pod would join it instead, so it is not attached. Rename that network, or run the webhook and the render with another NAD name (--nad-name, nadName); if it is meant to be Linkerd-CNI's, label it app.kubernetes.io/managed-by: linkerd-multus and render it from Git"
            ))),
        };
    }
    match check.policy {
        MissingNad::Attach => verdict.warnings.push(format!(
            "namespace {namespace} has no NetworkAttachmentDefinition {nad} yet: the NAD controller makes it where it runs (linkerd-multus controller); until it exists the pod's sandbox fails and kubelet retries it (--missing-nad attach)"
        )),
        _ => {
            return Err(Refusal::Deny(format!(
                "namespace {namespace} has no NetworkAttachmentDefinition {nad}, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the NAD controller so that it makes it (linkerd multus install --manage-nads)"
            )));
        }
    }
    Ok(verdict)
}

/// The Linkerd-CNI rules alone ([`attach::pod`]), on the metadata as read:
/// the patch is written from the annotation edits, with no tree of the pod.
fn pod_verdict(
    request: &Request,
    object: &Object,
    namespace: &dyn Lookup,
    settings: &Settings,
    nad_check: Option<&NadCheck<'_>>,
) -> Result<Verdict, Refusal> {
    let mut warnings = Vec::new();
    let lookup = Some(namespace);
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
    let mut edits = change.edits;
    let attached = change.decision.attach;
    let networks_after = match edits.iter().find(|(key, _)| *key == NETWORKS_ANNOTATION) {
        Some((_, value)) => value.as_deref(),
        None => networks.ok().flatten(),
    };
    let skipped = skip_subnets::plan(
        request,
        &annotations,
        networks_after,
        attached,
        (namespace, settings, nad_check),
    )?;
    edits.extend(skipped.edits);
    let stamp = stamp::wanted(request, settings, nad_check, attached)
        .and_then(|wanted| stamp::edit(annotations, wanted))
        .map(|(edit, stamp)| {
            edits.push(edit);
            stamp
        });
    let patch = annotation_patch(metadata, &edits).map_err(Refusal::Problem)?;
    warnings.extend(change.decision.range_problem);
    warnings.extend(change.applied.warnings);
    warnings.extend(skipped.warnings);
    Ok(Verdict {
        patch,
        changes: change.applied.changes,
        stamp,
        skip_subnets: skipped.change,
        network_resources: Vec::new(),
        warnings,
    })
}

/// The Linkerd-CNI rules (and the config-hash stamp) then the
/// network-resources rules, on a tree of the pod's metadata and spec,
/// answered with the diff of the two trees.
fn tree_verdict(
    request: &Request,
    object: &Value,
    (namespace, settings, nad_check): (&dyn Lookup, &Settings, Option<&NadCheck<'_>>),
    (nr_settings, nads): (&network_resources::settings::Settings, &dyn Nads),
) -> Result<Verdict, Refusal> {
    let pod_namespace = &*request.namespace;
    let mut warnings = Vec::new();
    let lookup = Some(namespace);
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
    let map = pod
        .as_map_mut()
        .expect("a pod the rules decided on is a mapping");
    let annotations = template_annotations(map);
    let skipped = skip_subnets::plan(
        request,
        &annotations,
        annotations.and_then(|a| a.get_text(NETWORKS_ANNOTATION)),
        decision.attach,
        (namespace, settings, nad_check),
    )?;
    for (key, value) in skipped.edits {
        match value {
            Some(value) => set_annotation(map, key, value).map_err(|e| problem(&e))?,
            None => remove_annotation(map, key),
        }
    }
    warnings.extend(skipped.warnings);
    let stamp = match stamp::wanted(request, settings, nad_check, decision.attach) {
        Some(wanted) => rollout::stamp(map, wanted).map_err(|e| problem(&e))?,
        None => None,
    };
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
        stamp,
        skip_subnets: skipped.change,
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
mod tests;
