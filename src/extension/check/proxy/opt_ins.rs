//! `--proxy`'s opt-in annotations written wrong on meshed pods ([`opt_ins::problems`], read as
//! each pod is listed): named once per workload (a Deployment's pods carry its template's
//! annotations) or per pod without one, in the words of the render and the webhook.
//!
//! [`opt_ins::problems`]: crate::linkerd_cni::opt_ins::problems

use super::Findings;
use crate::extension::check::snapshot::Pod;
use crate::linkerd_cni::restarts::Subject;

/// The check's description.
pub(super) const DESCRIPTION: &str = "meshed pods' linkerd-multus annotations are written as meant";
/// What the check's warning says before the workloads.
pub(super) const WHAT: &str = "these annotations are ignored or read otherwise than meant:";
/// What to do.
pub(super) const HINT: &str = "fix them in the pod templates (and render them from Git), then restart the pods; a render and the webhook warn of them as they are written";

/// Records what is wrong with the pod's opt-in annotations, under its workload.
pub(super) fn judge(found: &mut Findings, pod: &Pod) {
    if pod.opt_in_problems.is_empty() {
        return;
    }
    let owner = pod.meta.workload().unwrap_or_else(|| Subject::Pod {
        namespace: pod.meta.namespace.clone().unwrap_or_default(),
        name: pod.meta.name.clone(),
    });
    for problem in &pod.opt_in_problems {
        found.opt_ins.push(format!("{owner}: {problem}"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::{owned, pod, seen};
    use super::super::{Meta, judge};
    use crate::extension::check::snapshot::{Ipams, Nad};
    use crate::linkerd_cni::settings::Settings;

    /// Each workload's problems are said once, whatever the number of its pods.
    #[test]
    fn problems_are_named_once_per_workload() {
        let problem = "metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?";
        let with = |mut p: crate::extension::check::snapshot::Pod| {
            p.opt_in_problems = vec![problem.to_string()];
            p
        };
        let pods = [
            owned(with(pod("web-app-5d8f-a", "demo", &[]))),
            owned(with(pod("web-app-5d8f-b", "demo", &[]))),
            with(pod("naked", "demo", &[])),
            pod("fine", "demo", &[]),
        ];
        let namespaces: BTreeMap<&str, &Meta> = BTreeMap::new();
        let nads: BTreeMap<String, Nad> = BTreeMap::new();
        let settings = Settings::default();
        let found = judge(&pods, &seen(&namespaces, &nads, &Ipams::new(), &settings));
        assert_eq!(
            found.opt_ins,
            [
                format!("Deployment demo/web-app: {problem}"),
                format!("Pod demo/naked: {problem}"),
            ]
        );
    }
}
