//! The Namespaces' opt-in annotations written wrong ([`opt_ins::problems`]: a
//! `linkerd.io/multus` or restart opt-in value neither enabled nor disabled, a misspelt key),
//! in the words of the render, the webhook and the NAD controller's Events. A warning: the
//! rules go past them, treating the namespace as not opted in.

use super::report::Check;
use super::snapshot::Meta;
use super::wait::{Pass, Retry};
use super::{NADS, capped};
use crate::linkerd_cni::opt_ins::{self, Whose};

/// The check's description.
const DESCRIPTION: &str = "namespaces' linkerd-multus annotations are written as meant";

/// What is wrong with the namespaces' opt-in annotations: `Namespace NAME: what`, sorted.
pub fn problems(namespaces: &[Meta]) -> Vec<String> {
    let mut found: Vec<String> = namespaces
        .iter()
        .flat_map(|n| {
            let pairs = n.annotations.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            opt_ins::problems(pairs, Whose::Namespace, "metadata.annotations.")
                .into_iter()
                .map(move |p| format!("Namespace {}: {}", n.name, p.message))
        })
        .collect();
    found.sort();
    found
}

/// The check.
pub fn check(namespaces: &[Meta], pass: &mut Pass) {
    let found = problems(namespaces);
    let check = match found.is_empty() {
        true => Check::success(DESCRIPTION),
        false => Check::warning(
            DESCRIPTION,
            format!(
                "these annotations are ignored or read otherwise than meant: {}",
                capped(&found)
            ),
            "fix them: kubectl annotate namespace NAME --overwrite KEY=enabled (or remove a misspelt key: kubectl annotate namespace NAME KEY-); in Git, render the Namespace again",
        ),
    };
    pass.add(NADS, check, Retry::No);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_namespace_s_annotations_written_wrong_are_named() {
        let ns = |name: &str, pairs: &[(&str, &str)]| Meta {
            name: name.into(),
            annotations: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Meta::default()
        };
        let namespaces = [
            ns("fine", &[("linkerd.io/multus", "enabled")]),
            ns("typo", &[("linkerd.io/mutlus", "enabled")]),
            ns("value", &[("linkerd.io/multus", "enable")]),
        ];
        assert_eq!(
            problems(&namespaces),
            [
                "Namespace typo: metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?",
                "Namespace value: metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?",
            ]
        );
    }
}
