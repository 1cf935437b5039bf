//! What the function knows of a namespace: its annotations, from the input or from settings.

use std::collections::BTreeMap;

use crate::yaml::Map;

/// Opts a namespace (or a pod) into the Multus attachment.
pub const MULTUS_ANNOTATION: &str = "linkerd.io/multus";
/// Linkerd's injection switch.
pub const INJECT_ANNOTATION: &str = "linkerd.io/inject";
/// The values `linkerd.io/multus` takes.
pub const MULTUS_VALUES: &[&str] = &["enabled", "disabled"];

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
