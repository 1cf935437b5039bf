//! The opt-in annotations of a Namespace written wrong ([`opt_ins::problems`]: a
//! `linkerd.io/multus` or restart opt-in value neither enabled nor disabled, a misspelt key),
//! said in a Warning Event `InvalidOptIn` on the Namespace, in the words of the render and the
//! webhook. Said once for what the annotations hold, again only when that changes.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::linkerd_cni::opt_ins::{self, Whose};

/// The Events' reason.
pub const REASON: &str = "InvalidOptIn";

/// Whether the controller's Namespace cache keeps the annotation `key`: one that
/// [`opt_ins::problems`] judges or finds misspelt.
pub fn kept(key: &str) -> bool {
    opt_ins::concerns(key)
}

/// What was said of each namespace, so that a reconcile says it again only when it changed.
#[derive(Debug, Default)]
pub struct Said(Mutex<BTreeMap<String, String>>);

impl Said {
    /// The note of a Warning Event about Namespace `namespace` with `annotations`: `None` when
    /// they hold nothing written wrong, or nothing new since it was said.
    pub fn note(&self, namespace: &str, annotations: &BTreeMap<String, String>) -> Option<String> {
        let pairs = annotations.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let problems = opt_ins::problems(pairs, Whose::Namespace, "metadata.annotations.");
        let note: Vec<String> = problems.into_iter().map(|p| p.message).collect();
        let note = note.join("; ");
        let mut said = self.0.lock().expect("not poisoned");
        if note.is_empty() {
            said.remove(namespace);
            return None;
        }
        match said.insert(namespace.to_string(), note.clone()) {
            Some(before) if before == note => None,
            _ => Some(note),
        }
    }

    /// Forgets the namespaces `keep` refuses (those gone).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0
            .lock()
            .expect("not poisoned")
            .retain(|namespace, _| keep(namespace));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_s_problems_are_said_once_and_again_when_they_change() {
        let said = Said::default();
        let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let enable = annotations(&[("linkerd.io/multus", "enable")]);
        let note = said.note("demo", &enable).unwrap();
        assert!(
            note.starts_with("metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the namespace is treated as not enabled"),
            "{note}"
        );
        assert_eq!(said.note("demo", &enable), None, "said already");
        let misspelt = annotations(&[("linkerd.io/mutlus", "enabled")]);
        assert_eq!(
            said.note("demo", &misspelt).as_deref(),
            Some(
                "metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?"
            )
        );
        assert_eq!(
            said.note("demo", &annotations(&[("linkerd.io/multus", "enabled")])),
            None
        );
        assert!(
            said.note("demo", &enable).is_some(),
            "wrong again, said again"
        );
        said.retain(|n| n != "demo");
        assert!(said.note("demo", &enable).is_some(), "forgotten once gone");
        for key in [
            "linkerd.io/multus",
            "multus.linkerd.io/restart-on-config-change",
            "linkerd.io/mutlus",
        ] {
            assert!(kept(key), "{key}");
        }
        assert!(!kept("linkerd.io/inject"));
    }
}
