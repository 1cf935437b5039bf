//! The opt-in annotations written wrong ([`opt_ins::problems`]), said as admission warnings,
//! which kubectl prints: on a pod the webhook acts on, with its other warnings, and on a
//! Namespace created or updated, which the webhook only reads (its second webhook,
//! `namespaces.multus.linkerd.io`, whose failure policy is Ignore), admitted unchanged.

use super::{Answer, Changes, Outcome, Request, Verdict, respond};
use crate::k8s::json_patch::Writer;
use crate::linkerd_cni::opt_ins::{self, Whose};

/// The annotations' path in a pod or a Namespace.
const PREFIX: &str = "metadata.annotations.";

/// The problems of the object's own annotations, on `whose`.
fn problems(request: &Request, whose: Whose) -> Vec<String> {
    let annotations = request
        .object
        .as_ref()
        .and_then(|o| o.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.members());
    // Only the values of the keys the rules read are decoded (not kubectl's last-applied
    // configuration, the largest annotation most pods carry).
    let pairs = annotations
        .into_iter()
        .flatten()
        .filter(|m| opt_ins::concerns(&m.name))
        .filter_map(|m| Some((m.name.as_ref(), m.text()?)));
    opt_ins::problems(pairs, whose, PREFIX)
        .into_iter()
        .map(|p| p.message)
        .collect()
}

/// Whether the request is a Namespace's CREATE or UPDATE with an object.
pub fn is_namespace(request: &Request) -> bool {
    let resource = &request.resource;
    resource.group.is_empty()
        && resource.resource == "namespaces"
        && request.sub_resource.is_empty()
        && matches!(&*request.operation, "CREATE" | "UPDATE")
        && request.object.is_some()
}

/// A Namespace's review: admitted unchanged, with a warning for each opt-in annotation of it
/// written wrong.
pub fn namespace(request: &Request) -> Answer {
    let verdict = Verdict {
        patch: Writer::default(),
        changes: Changes::new(),
        stamp: None,
        skip_subnets: None,
        network_resources: Vec::new(),
        warnings: problems(request, Whose::Namespace),
    };
    respond(request, Outcome::Unchanged, None, verdict)
}

/// A pod's verdict with a warning for each opt-in annotation of the pod written wrong.
pub(super) fn pod(request: &Request, mut verdict: Verdict) -> Verdict {
    verdict.warnings.extend(problems(request, Whose::Pod));
    verdict
}
