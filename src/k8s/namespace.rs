//! What the function knows of a namespace: its annotations, from the input or from settings.

use std::collections::BTreeMap;

use crate::yaml::Map;

/// Opts a namespace (or a pod) into the Multus attachment.
pub const MULTUS_ANNOTATION: &str = "linkerd.io/multus";
/// Linkerd's injection switch.
pub const INJECT_ANNOTATION: &str = "linkerd.io/inject";
/// The values `linkerd.io/multus` takes.
pub const MULTUS_VALUES: &[&str] = &["enabled", "disabled"];

/// An `enabled`/`disabled` switch (an opt-in annotation or setting): `None` for any other value.
pub fn switch(value: &str) -> Option<bool> {
    match value {
        "enabled" => Some(true),
        "disabled" => Some(false),
        _ => None,
    }
}

/// Something with annotations or labels to look up.
pub trait Lookup {
    /// The value of `key`, if set.
    fn lookup(&self, key: &str) -> Option<&str>;
}

impl Lookup for Map {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get_text(key)
    }
}

impl Lookup for BTreeMap<String, String> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<T: Lookup + ?Sized> Lookup for Option<&T> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.and_then(|m| m.lookup(key))
    }
}

/// Where the function learnt about a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A Namespace object, at this index of the input.
    Input(usize),
    /// The `namespaces` setting.
    Settings,
}

/// A namespace the function knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Where they come from.
    pub source: Source,
}

/// The value `linkerd.io/multus` was probably meant to have when it has
/// `value`, which is neither `enabled` nor `disabled`: `enabled` for `enable`,
/// `true`, `on`, `Enabled`..., `disabled` for `disable`, `false`, `off`...;
/// `None` when nothing is close.
pub fn multus_meant(value: &str) -> Option<&'static str> {
    let v = value.trim().to_ascii_lowercase();
    let on = ["enabled", "enable", "true", "yes", "on", "y", "1"];
    let off = ["disabled", "disable", "false", "no", "off", "n", "0"];
    if on.contains(&v.as_str()) || v.starts_with("ena") {
        return Some("enabled");
    }
    if off.contains(&v.as_str()) || v.starts_with("dis") {
        return Some("disabled");
    }
    MULTUS_VALUES
        .iter()
        .copied()
        .map(|want| (strsim::levenshtein(&v, want), want))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, want)| want)
}

/// What to do about a `linkerd.io/multus` value that is neither `enabled`
/// nor `disabled`: `did you mean enabled?`, or the two values.
pub fn multus_hint(value: &str) -> String {
    match multus_meant(value) {
        Some(meant) => format!("did you mean {meant}?"),
        None => format!("set it to {}", MULTUS_VALUES.join(" or ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multus_values_name_the_one_meant() {
        for (value, meant) in [
            ("enable", Some("enabled")),
            ("true", Some("enabled")),
            ("Enabled", Some("enabled")),
            (" enabled ", Some("enabled")),
            ("ON", Some("enabled")),
            ("enbled", Some("enabled")),
            ("enabeld", Some("enabled")),
            ("disable", Some("disabled")),
            ("false", Some("disabled")),
            ("off", Some("disabled")),
            ("dsabled", Some("disabled")),
            ("", None),
            ("linkerd-cni", None),
            ("maybe", None),
        ] {
            assert_eq!(multus_meant(value), meant, "{value:?}");
        }
        assert_eq!(multus_hint("enable"), "did you mean enabled?");
        assert_eq!(multus_hint("maybe"), "set it to enabled or disabled");
    }
}
