//! The annotations that opt a namespace, a pod template or a pod in or out of the rules
//! (`linkerd.io/multus`, the NAD controller's restarts and evictions, the skip-subnets of
//! secondary networks), and what is wrong with them as written: a value that is neither
//! `enabled` nor `disabled`, and a key close to one of them that is not it
//! (`linkerd.io/mutlus`), which every rule ignores without a word. One wording for every
//! side: the render's warnings, the webhook's admission warnings, the NAD controller's
//! Warning Events and `check`'s lines.

use crate::k8s::namespace::{MULTUS_ANNOTATION, multus_hint, switch};
use crate::linkerd_cni::skip_subnets;

/// The NAD controller's restarts opt-in (`restarts::OPT_IN_ANNOTATION`, a module the KRM
/// function is built without).
pub const RESTART_ANNOTATION: &str = "multus.linkerd.io/restart-on-config-change";
/// The NAD controller's evictions opt-in (`restarts::EVICT_ANNOTATION`).
pub const EVICT_ANNOTATION: &str = "multus.linkerd.io/evict-on-config-change";

/// The opt-in keys: a key close to one of them is a near miss ([`near_miss`]).
pub const KEYS: &[&str] = &[
    MULTUS_ANNOTATION,
    RESTART_ANNOTATION,
    EVICT_ANNOTATION,
    skip_subnets::OPT_IN_ANNOTATION,
];

/// The opt-in keys whose values [`problems`] judges (the skip-subnets opt-in is judged by its
/// own rule, which refuses the pod).
pub const JUDGED: &[&str] = &[MULTUS_ANNOTATION, RESTART_ANNOTATION, EVICT_ANNOTATION];

/// Keys of this project and of Linkerd that are close to an opt-in key but are not a
/// misspelling of one.
const OTHER_KEYS: &[&str] = &[
    "linkerd.io/inject",
    "linkerd.io/extension",
    "multus.linkerd.io/skip-subnets",
    "multus.linkerd.io/owned",
    "multus.linkerd.io/config-hash",
    "multus.linkerd.io/webhook",
    "config.linkerd.io/skip-subnets",
];

/// The most edits (insertions, deletions, substitutions, swaps of two neighbours) between a
/// key and the opt-in key it misspells.
const MAX_EDITS: usize = 2;

/// What carries an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// A Namespace.
    Namespace,
    /// A workload's pod template.
    PodTemplate,
    /// A pod.
    Pod,
}

/// One annotation written wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key as written.
    pub key: String,
    /// The field: the annotations' path and the key as written.
    pub field: String,
    /// What is wrong, what it does, and what to write: it starts with the field.
    pub message: String,
}

/// What a value of `key` on `whose` that is neither `enabled` nor `disabled` does, after
/// `field is "value", neither enabled nor disabled:`.
fn consequence(key: &str, whose: Whose) -> &'static str {
    use Whose::*;
    match (key, whose) {
        (MULTUS_ANNOTATION, Namespace) => {
            "the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI"
        }
        (MULTUS_ANNOTATION, PodTemplate) => {
            "the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says"
        }
        (MULTUS_ANNOTATION, Pod) => {
            "the pod is treated as not enabled, so it is not attached to Linkerd-CNI, whatever the namespace says"
        }
        (RESTART_ANNOTATION, Namespace) => {
            "the namespace is treated as not opted in, so the NAD controller restarts none of its workloads when its NAD's config changes, but those whose pod templates say enabled"
        }
        (RESTART_ANNOTATION, _) => {
            "the value is ignored, and the namespace's decides whether the NAD controller restarts the workload when its NAD's config changes"
        }
        (EVICT_ANNOTATION, Namespace) => {
            "the namespace is treated as not opted in, so the NAD controller evicts none of its pods without a controller when its NAD's config changes, but those that say enabled"
        }
        _ => {
            "the value is ignored, and the namespace's decides whether the NAD controller evicts the pod when its NAD's config changes"
        }
    }
}

/// What is wrong with `value` of the opt-in `key` at `field` on `whose`, when it is neither
/// `enabled` nor `disabled` (an empty value counts as unset): the render's words for
/// `linkerd.io/multus`, and the same for the NAD controller's opt-ins.
pub fn value_problem(key: &str, value: &str, whose: Whose, field: &str) -> Option<String> {
    if value.is_empty() || switch(value).is_some() {
        return None;
    }
    Some(value_message(key, value, whose, field))
}

/// What [`value_problem`] says of `value`, whatever it is.
pub fn value_message(key: &str, value: &str, whose: Whose, field: &str) -> String {
    format!(
        "{field} is {value:?}, neither enabled nor disabled: {}; {}",
        consequence(key, whose),
        multus_hint(value)
    )
}

/// The opt-in key that `key` misspells: the same but for at most `MAX_EDITS` edits or the
/// letter case, or the same name under another of Linkerd's prefixes
/// (`multus.linkerd.io/multus`); `None` for an opt-in key itself and the other keys of this
/// project and Linkerd.
pub fn near_miss(key: &str) -> Option<&'static str> {
    if KEYS.contains(&key) || OTHER_KEYS.contains(&key) {
        return None;
    }
    // The distance is at least the difference of the lengths, and half the difference of the
    // letters each holds: most keys (a review's annotations are the tenant's) cost neither an
    // allocation nor a comparison.
    let close: Vec<&'static str> = KEYS
        .iter()
        .copied()
        .filter(|want| want.len().abs_diff(key.len()) <= MAX_EDITS && few_letters_apart(key, want))
        .collect();
    // With none close, only a name under another of Linkerd's prefixes is a near miss.
    if close.is_empty() && !contains_ignoring_case(key, "linkerd.io/") {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    close
        .into_iter()
        .map(|want| (strsim::osa_distance(&lower, want), want))
        .filter(|(edits, _)| *edits <= MAX_EDITS)
        .min()
        .map(|(_, want)| want)
        .or_else(|| {
            let name = name(&lower)?;
            let prefixed = lower.contains("linkerd.io/");
            KEYS.iter()
                .copied()
                .find(|want| prefixed && self::name(want) == Some(name))
        })
}

/// Whether `text` holds the lowercase ASCII `part` in any letter case. Only the places
/// where `part`'s last byte ends are compared: a pod's keys may pass here on every review,
/// and that byte (`/` of `linkerd.io/`) is in few places of a key.
fn contains_ignoring_case(text: &str, part: &str) -> bool {
    let (text, part) = (text.as_bytes(), part.as_bytes());
    let Some(last) = part.last() else {
        return true;
    };
    (part.len() - 1..text.len()).any(|end| {
        text[end].eq_ignore_ascii_case(last)
            && text[end + 1 - part.len()..=end].eq_ignore_ascii_case(part)
    })
}

/// Whether `key`, in any letter case, and the lowercase `want` may be [`MAX_EDITS`] edits
/// apart: an insertion or deletion changes the count of one letter, a substitution of two,
/// a swap of none. A key with other than ASCII letters is always close enough to compare.
fn few_letters_apart(key: &str, want: &str) -> bool {
    if !key.is_ascii() {
        return true;
    }
    let mut counts = [0i32; 128];
    for b in key.bytes() {
        counts[usize::from(b.to_ascii_lowercase())] += 1;
    }
    for b in want.bytes() {
        counts[usize::from(b & 0x7f)] -= 1;
    }
    let apart: u32 = counts.iter().map(|c| c.unsigned_abs()).sum();
    apart as usize <= 2 * MAX_EDITS
}

/// Whether the cores read the annotation `key` at all: an opt-in key whose value
/// [`problems`] judges, or one it finds misspelt. The others' values need not be read.
pub fn concerns(key: &str) -> bool {
    JUDGED.contains(&key) || near_miss(key).is_some()
}

/// The name of a key: what follows its prefix.
fn name(key: &str) -> Option<&str> {
    key.rsplit_once('/').map(|(_, name)| name)
}

/// What is wrong with the opt-in annotations of one object (`annotations`, on `whose`, under
/// the fields `prefix` + key): the values of [`JUDGED`] keys neither enabled nor disabled,
/// then the near misses of [`KEYS`], in the order written.
pub fn problems<'a>(
    annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
    whose: Whose,
    prefix: &str,
) -> Vec<Problem> {
    let mut found = Vec::new();
    for (key, value) in annotations {
        let field = || format!("{prefix}{key}");
        let message = match near_miss(key) {
            Some(meant) => Some(format!(
                "{}: linkerd-multus reads no annotation {key}, so it is ignored; did you mean {meant}?",
                field()
            )),
            None if JUDGED.contains(&key) => value_problem(key, value, whose, &field()),
            None => None,
        };
        if let Some(message) = message {
            found.push(Problem {
                key: key.to_string(),
                field: field(),
                message,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "webhook")]
    #[test]
    fn the_keys_are_the_restarts_own() {
        use crate::linkerd_cni::restarts;
        assert_eq!(RESTART_ANNOTATION, restarts::OPT_IN_ANNOTATION);
        assert_eq!(EVICT_ANNOTATION, restarts::EVICT_ANNOTATION);
    }

    #[test]
    fn a_part_is_found_in_any_letter_case_wherever_it_ends() {
        for (text, part, holds) in [
            ("linkerd.io/multus", "linkerd.io/", true),
            ("config.LINKERD.IO/x", "linkerd.io/", true),
            ("a/b/linkerd.io/", "linkerd.io/", true),
            ("linkerd.io", "linkerd.io/", false),
            ("inkerd.io/x", "linkerd.io/", false),
            ("linkerd.iox/", "linkerd.io/", false),
            ("", "linkerd.io/", false),
            ("éé/linkerd.io/", "linkerd.io/", true),
            ("aB", "b", true),
            ("ab", "", true),
        ] {
            assert_eq!(
                contains_ignoring_case(text, part),
                holds,
                "{part:?} in {text:?}"
            );
        }
    }

    #[test]
    fn near_misses_name_the_key_meant() {
        for (key, meant) in [
            ("linkerd.io/mutlus", Some(MULTUS_ANNOTATION)),
            ("linkerd.io/multu", Some(MULTUS_ANNOTATION)),
            ("Linkerd.io/Multus", Some(MULTUS_ANNOTATION)),
            ("linkerd.io/multus ", Some(MULTUS_ANNOTATION)),
            ("linkerx.io/multux", Some(MULTUS_ANNOTATION)),
            ("LINKERD.IO/MULTSU", Some(MULTUS_ANNOTATION)),
            ("linkerd.io/multüs", Some(MULTUS_ANNOTATION)),
            ("linkerd.io/xyzt_s", None),
            ("kubectl.kubernetes.io/last-applied-configuration", None),
            ("multus.linkerd.io/multus", Some(MULTUS_ANNOTATION)),
            ("config.linkerd.io/multus", Some(MULTUS_ANNOTATION)),
            (
                "multus.linkerd.io/restart-on-config-changes",
                Some(RESTART_ANNOTATION),
            ),
            (
                "linkerd.io/restart-on-config-change",
                Some(RESTART_ANNOTATION),
            ),
            (
                "multus.linkerd.io/evict-on-config-chnage",
                Some(EVICT_ANNOTATION),
            ),
            (
                "multus.linkerd.io/skip-secondary-subnet",
                Some(skip_subnets::OPT_IN_ANNOTATION),
            ),
            (MULTUS_ANNOTATION, None),
            ("linkerd.io/inject", None),
            ("multus.linkerd.io/skip-subnets", None),
            ("config.linkerd.io/skip-subnets", None),
            ("multus.linkerd.io/config-hash", None),
            ("example.com/multus", None),
            ("k8s.v1.cni.cncf.io/networks", None),
            ("app", None),
        ] {
            assert_eq!(near_miss(key), meant, "{key:?}");
        }
    }

    #[test]
    fn problems_say_what_each_value_does_and_what_to_write() {
        let field = "metadata.annotations.";
        type Case<'a> = (&'a [(&'a str, &'a str)], Whose, &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[
                    (MULTUS_ANNOTATION, "enabled"),
                    (RESTART_ANNOTATION, "disabled"),
                ],
                Whose::Namespace,
                &[],
            ),
            (
                &[(MULTUS_ANNOTATION, ""), (EVICT_ANNOTATION, "")],
                Whose::Pod,
                &[],
            ),
            (
                &[(MULTUS_ANNOTATION, "enable")],
                Whose::Namespace,
                &[
                    "metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the namespace is treated as not enabled, so it gets no NAD and its pods are not attached to Linkerd-CNI; did you mean enabled?",
                ],
            ),
            (
                &[(RESTART_ANNOTATION, "yes")],
                Whose::PodTemplate,
                &[
                    "metadata.annotations.multus.linkerd.io/restart-on-config-change is \"yes\", neither enabled nor disabled: the value is ignored, and the namespace's decides whether the NAD controller restarts the workload when its NAD's config changes; did you mean enabled?",
                ],
            ),
            (
                &[(RESTART_ANNOTATION, "always")],
                Whose::Namespace,
                &[
                    "metadata.annotations.multus.linkerd.io/restart-on-config-change is \"always\", neither enabled nor disabled: the namespace is treated as not opted in, so the NAD controller restarts none of its workloads when its NAD's config changes, but those whose pod templates say enabled; set it to enabled or disabled",
                ],
            ),
            (
                &[(EVICT_ANNOTATION, "true"), ("linkerd.io/mutlus", "enabled")],
                Whose::Pod,
                &[
                    "metadata.annotations.multus.linkerd.io/evict-on-config-change is \"true\", neither enabled nor disabled: the value is ignored, and the namespace's decides whether the NAD controller evicts the pod when its NAD's config changes; did you mean enabled?",
                    "metadata.annotations.linkerd.io/mutlus: linkerd-multus reads no annotation linkerd.io/mutlus, so it is ignored; did you mean linkerd.io/multus?",
                ],
            ),
            // The skip-subnets opt-in's values are its own rule's; its key is judged here.
            (&[(skip_subnets::OPT_IN_ANNOTATION, "yes")], Whose::Pod, &[]),
        ];
        for (annotations, whose, want) in cases {
            let got: Vec<String> = problems(annotations.iter().copied(), *whose, field)
                .into_iter()
                .map(|p| p.message)
                .collect();
            assert_eq!(got, *want, "{annotations:?}");
        }
    }
}
