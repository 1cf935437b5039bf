//! The entries of the watch caches: what a cache keeps of one object ([`Annotations`]: the
//! annotations the rules read and, of a NAD, the hash of its config and what that config
//! says for the rules, Linkerd-CNI's settings or another network's IPAM, worked out once when
//! the watch stores it, with the IPAM's caps of `multus::ipam`, so that no review parses a
//! NAD's config), stored with its key ([`Stored`]), and the entries one review picks
//! ([`Picked`]), which its rules read with no lock held.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use compact_str::CompactString;
use kube::core::ObjectMeta;
use smallvec::SmallVec;

use crate::admission::NadConfigs;
use crate::k8s::namespace::Lookup;
use crate::linkerd_cni::cni_config::other_network;
use crate::linkerd_cni::rollout;
use crate::linkerd_cni::skip_subnets::{PluginSettings, linkerd_cni_settings};
use crate::multus::ipam::{self, Ipam, IpamError};
use crate::multus::nad::{self, Maker};
use crate::network_resources::Nads;

/// The annotation keys a cache keeps, shared by its entries: an entry holds each key as a
/// clone of the cache's `Arc`, not a copy, so that comparing it reads memory every review
/// reads.
pub type Keys = Arc<[Arc<str>]>;

/// The [`Keys`] of `keys`.
pub fn keys(keys: &[String]) -> Keys {
    keys.iter().map(|key| Arc::from(key.as_str())).collect()
}

/// The pairs an entry holds inline, without a pointer: a namespace annotated for the rules
/// has at most three of them (`linkerd.io/multus`, `linkerd.io/inject` and the UID range).
const INLINE_PAIRS: usize = 3;

/// The annotations of one object that the rules read (the others are not
/// kept) and, for a NAD, the hash of its config and what it runs when that is
/// not Linkerd-CNI. Up to `INLINE_PAIRS` pairs are held in the entry itself, their keys
/// shared ([`Keys`]) and short values inline, so that a lookup reads the entry and no other
/// memory of its own: the cache's lookups are the costliest reads of a review, each a
/// cache miss at 10,000 namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    pairs: SmallVec<[(Arc<str>, CompactString); INLINE_PAIRS]>,
    config_hash: Option<CompactString>,
    other_network: Option<Box<str>>,
    network: Option<Box<Network>>,
}

/// What a NAD's config says for the secondary-network rule: Linkerd-CNI's own settings, or
/// the IPAM of another network.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Network {
    LinkerdCni(PluginSettings),
    Other(Result<Ipam, IpamError>),
}

impl Lookup for Annotations {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| **k == *key)
            .map(|(_, v)| v.as_str())
    }
}

impl Annotations {
    /// No annotations.
    pub const EMPTY: Annotations = Annotations {
        pairs: SmallVec::new_const(),
        config_hash: None,
        other_network: None,
        network: None,
    };

    /// The annotations of `meta` among `keys`, with the hash of the NAD
    /// config `config` when given, and what it runs when it is not
    /// Linkerd-CNI and the NAD is not this project's.
    pub fn of(meta: &ObjectMeta, keys: &[Arc<str>], config: Option<&str>) -> Self {
        let network = config.map(|config| {
            let parsed = serde_json::from_str::<serde_json::Value>(config);
            Box::new(match parsed.as_ref().ok().and_then(linkerd_cni_settings) {
                Some(plugin) => Network::LinkerdCni(plugin),
                None => Network::Other(
                    parsed.map_or(Err(IpamError::NotObject), |v| ipam::read_value(&v)),
                ),
            })
        });
        Annotations {
            network,
            pairs: meta
                .annotations
                .iter()
                .flatten()
                .filter_map(|(k, v)| {
                    let key = keys.iter().find(|key| ***key == **k)?;
                    Some((key.clone(), v.as_str().into()))
                })
                .collect(),
            config_hash: config.map(|c| rollout::config_hash(c).into()),
            other_network: config
                .filter(|_| made_by_someone_else(meta))
                .and_then(other_network)
                .map(String::into_boxed_str),
        }
    }

    /// The [`rollout::config_hash`] of the NAD's `spec.config`, computed once
    /// when the NAD was stored; `None` when it has none.
    pub fn config_hash(&self) -> Option<&str> {
        self.config_hash.as_deref()
    }

    /// The IPAM of the NAD's `spec.config` when it is not Linkerd-CNI's, read once when the
    /// NAD was stored.
    pub fn ipam(&self) -> Option<&Result<Ipam, IpamError>> {
        match self.network.as_deref()? {
            Network::Other(ipam) => Some(ipam),
            Network::LinkerdCni(_) => None,
        }
    }

    /// Linkerd-CNI's settings in the NAD's `spec.config` when it runs it, read once when the
    /// NAD was stored.
    pub fn plugin_settings(&self) -> Option<&PluginSettings> {
        match self.network.as_deref()? {
            Network::LinkerdCni(plugin) => Some(plugin),
            Network::Other(_) => None,
        }
    }

    /// What the NAD's `spec.config` runs when no plugin of it is Linkerd-CNI
    /// ([`other_network`]), computed once when the NAD was stored.
    pub fn other_network(&self) -> Option<&str> {
        self.other_network.as_deref()
    }
}

/// Whether a NAD is held by neither a render nor the NAD controller of this project
/// ([`nad::Record::holder`], the rule the controller and `check` read): only such a NAD is
/// judged by what it runs, as the render and `check` judge it.
fn made_by_someone_else(meta: &ObjectMeta) -> bool {
    let empty = std::collections::BTreeMap::new();
    let writes = meta.managed_fields.iter().flatten().map(|entry| {
        (
            entry.manager.as_deref().unwrap_or_default(),
            entry.operation.as_deref().unwrap_or_default(),
        )
    });
    let client_side = meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(nad::LAST_APPLIED_ANNOTATION));
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    nad::Record::read(labels, writes, client_side).holder() == Maker::Other
}

/// One object as a cache stores it: its key and its [`Annotations`], in one allocation. The
/// cache's table holds only a pointer to it (`ByKey`), so that its buckets are 8 bytes
/// (128 KiB for 10,000 namespaces, against 512 KiB with the key in the bucket), and a
/// lookup compares the key in the line where it then counts its reference and reads the
/// annotations: at 10,000 namespaces each of those reads is a cache miss of the review.
/// `repr(C)` keeps the key first, in the cache line of the `Arc`'s counts.
#[derive(Debug)]
#[repr(C)]
pub struct Stored {
    key: CompactString,
    annotations: Annotations,
}

impl Stored {
    /// The entry of the object keyed `key`.
    pub fn new(key: CompactString, annotations: Annotations) -> Arc<Stored> {
        Arc::new(Stored { key, annotations })
    }

    /// Its key: a namespace's name, or a NAD's [`nad_key`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What the cache keeps of the object.
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }
}

/// A [`Stored`] entry in a cache's table: hashed and compared as its key, so that the table
/// is looked up by a `&str` and holds the pointer alone.
#[derive(Debug, Clone)]
pub(crate) struct ByKey(pub(crate) Arc<Stored>);

impl Borrow<str> for ByKey {
    fn borrow(&self) -> &str {
        &self.0.key
    }
}

/// As its key's, which [`Borrow`] requires.
impl Hash for ByKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key.as_str().hash(state);
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for ByKey {}

/// The key of NAD `namespace/name` in a NAD cache.
pub fn nad_key(namespace: &str, name: &str) -> CompactString {
    // Written piece by piece: a review makes a few of these, and formatting costs more.
    let mut key = CompactString::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

/// Some entries of a cache at one moment ([`WatchCache::pick`]), owned: the rules of one
/// review read them with no lock held. Sorted by key, each key once; most reviews pick one
/// NAD or two (the Linkerd-CNI NAD, a NAD the pod selects), held with no allocation.
///
/// [`WatchCache::pick`]: crate::webhook::cache::WatchCache::pick
#[derive(Debug, Clone, Default)]
pub struct Picked(pub(crate) SmallVec<[(CompactString, Option<Arc<Stored>>); 2]>);

/// What a [`Picked`] says of a key.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    /// The cache held it.
    Held(&'a Annotations),
    /// The cache did not hold it.
    Lacked,
    /// It was not picked: the cache was not asked.
    NotPicked,
}

/// How the key `key` orders against [`nad_key`]`(namespace, name)`, without making that.
fn cmp_nad_key(key: &str, namespace: &str, name: &str) -> Ordering {
    let key = key.as_bytes();
    let (head, rest) = key.split_at(key.len().min(namespace.len()));
    match head.cmp(namespace.as_bytes()) {
        Ordering::Equal => match rest.split_first() {
            None => Ordering::Less,
            Some((&slash, tail)) => slash.cmp(&b'/').then_with(|| tail.cmp(name.as_bytes())),
        },
        unequal => unequal,
    }
}

impl Picked {
    /// What the cache held for NAD `namespace/name` when it was picked, found by its
    /// [`nad_key`] without making the key.
    pub fn nad(&self, namespace: &str, name: &str) -> Entry<'_> {
        match self
            .0
            .binary_search_by(|(k, _)| cmp_nad_key(k, namespace, name))
        {
            Ok(i) => match &self.0[i].1 {
                Some(stored) => Entry::Held(&stored.annotations),
                None => Entry::Lacked,
            },
            Err(_) => Entry::NotPicked,
        }
    }

    /// The annotations of NAD `namespace/name`, if it was picked and the cache held it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&Annotations> {
        match self.nad(namespace, name) {
            Entry::Held(annotations) => Some(annotations),
            Entry::Lacked | Entry::NotPicked => None,
        }
    }
}

/// The NADs picked from a [`NadCache`].
///
/// [`NadCache`]: crate::webhook::cache::NadCache
impl Nads for Picked {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.get(namespace, name).map(|a| a as &dyn Lookup)
    }
}

/// The NADs picked from a [`NadCache`], with the hashes of their configs.
///
/// [`NadCache`]: crate::webhook::cache::NadCache
impl NadConfigs for Picked {
    fn config_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        self.get(namespace, name)?.config_hash()
    }
    fn other_network(&self, namespace: &str, name: &str) -> Option<&str> {
        self.get(namespace, name)?.other_network()
    }
    fn ipam(&self, namespace: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.get(namespace, name)?.ipam()
    }
    fn plugin_settings(&self, namespace: &str, name: &str) -> Option<&PluginSettings> {
        self.get(namespace, name)?.plugin_settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID_RANGE: &str = "openshift.io/sa.scc.uid-range";

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_entry_keeps_the_kept_keys_only_and_holds_up_to_three_inline() {
        let kept = keys(&[
            "linkerd.io/multus".into(),
            "linkerd.io/inject".into(),
            UID_RANGE.into(),
            "config.linkerd.io/skip-subnets".into(),
        ]);
        let long = "x".repeat(100);
        // (annotations, what each kept key finds, whether the pairs are held inline)
        type Case<'a> = (&'a [(&'a str, &'a str)], [Option<&'a str>; 4], bool);
        let cases: &[Case] = &[
            (&[], [None; 4], true),
            (&[("other", "1"), ("app", "web")], [None; 4], true),
            (
                &[
                    ("linkerd.io/multus", "enabled"),
                    ("linkerd.io/inject", "enabled"),
                    (UID_RANGE, "1000680000/10000"),
                    ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
                ],
                [
                    Some("enabled"),
                    Some("enabled"),
                    Some("1000680000/10000"),
                    None,
                ],
                true,
            ),
            (
                &[
                    ("linkerd.io/multus", "enabled"),
                    ("linkerd.io/inject", "enabled"),
                    (UID_RANGE, &long),
                    ("config.linkerd.io/skip-subnets", "10.0.0.0/8"),
                ],
                [
                    Some("enabled"),
                    Some("enabled"),
                    Some(&long),
                    Some("10.0.0.0/8"),
                ],
                false,
            ),
        ];
        for (annotations, found, inline) in cases {
            let entry = Annotations::of(&meta(annotations), &kept, None);
            for (key, want) in kept.iter().zip(found) {
                assert_eq!(entry.lookup(key), *want, "{key} in {annotations:?}");
            }
            assert_eq!(entry.lookup("other"), None, "a key not kept is not held");
            assert_eq!(!entry.pairs.spilled(), *inline, "{annotations:?}");
            for (key, _) in &entry.pairs {
                assert!(
                    kept.iter().any(|k| Arc::ptr_eq(k, key)),
                    "{key} is the cache's own key, not a copy"
                );
            }
        }
    }

    #[test]
    fn a_stored_entry_is_found_by_its_key_and_replaced_whole() {
        let kept = keys(&["linkerd.io/multus".into()]);
        let entry = |key: &str, value: &str| {
            let annotations = Annotations::of(&meta(&[("linkerd.io/multus", value)]), &kept, None);
            ByKey(Stored::new(key.into(), annotations))
        };
        let mut table = std::collections::HashSet::new();
        for i in 0..100 {
            table.insert(entry(&format!("team-{i:05}"), "enabled"));
        }
        table.replace(entry("team-00042", "disabled"));
        assert_eq!(table.len(), 100);
        let found = |key: &str| {
            let stored = &table.get(key)?.0;
            assert_eq!(stored.key(), key);
            stored.annotations().lookup("linkerd.io/multus")
        };
        assert_eq!(found("team-00041"), Some("enabled"));
        assert_eq!(found("team-00042"), Some("disabled"), "replaced, not kept");
        assert_eq!(found("team-00100"), None);
        assert_eq!(found("team-0004"), None);
    }

    #[test]
    fn a_nad_is_ordered_as_its_key_would_be() {
        let parts = [
            "",
            "a",
            "a-b",
            "ab",
            "a/b",
            "b",
            "team-00042",
            "linkerd-cni",
            "é",
        ];
        let keys = parts
            .iter()
            .flat_map(|ns| parts.iter().map(move |name| nad_key(ns, name)))
            .chain(parts.iter().map(|p| CompactString::from(*p)))
            .chain(["a/", "/", "a.b", "a0"].map(CompactString::from));
        for key in keys {
            for namespace in parts {
                for name in parts {
                    assert_eq!(
                        cmp_nad_key(&key, namespace, name),
                        key.as_str().cmp(&nad_key(namespace, name)),
                        "{key:?} against {namespace:?} {name:?}"
                    );
                }
            }
        }
    }
}
