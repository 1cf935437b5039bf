//! Config rollouts: attached pod templates carry a hash of the NAD config they
//! use, so that a changed Linkerd-CNI config in Git changes exactly the pod
//! templates of the workloads that use it, and the cluster rolls them. The
//! declarative form of linkerd-config's restart of `config.linkerd.io/reconcile:
//! auto` pods. Pure code.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::k8s::namespace::Lookup;
use crate::k8s::workload;
use crate::yaml::Map;
use compact_str::CompactString;

/// The pod template annotation holding the hash; the function's own key.
pub const HASH_ANNOTATION: &str = "multus.linkerd.io/config-hash";
/// The pod label that opts a workload in under [`ConfigRollout::Labelled`].
pub const RECONCILE_LABEL: &str = "config.linkerd.io/reconcile";
/// Its opting-in value.
pub const RECONCILE_AUTO: &str = "auto";
/// Hex characters of the SHA-256 kept in the annotation.
pub const HASH_LEN: usize = 16;

/// Which attached pod templates carry the hash (the `configRollout` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigRollout {
    /// None: any hash is removed.
    #[default]
    Off,
    /// Every attached pod template.
    All,
    /// Attached pod templates labelled `config.linkerd.io/reconcile: auto`.
    Labelled,
}

impl ConfigRollout {
    /// The setting's values, as written.
    pub const VALUES: [&'static str; 3] = ["off", "all", "labelled"];

    /// Reads a setting value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "off" => Some(ConfigRollout::Off),
            "all" => Some(ConfigRollout::All),
            "labelled" => Some(ConfigRollout::Labelled),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigRollout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigRollout::Off => "off",
            ConfigRollout::All => "all",
            ConfigRollout::Labelled => "labelled",
        })
    }
}

/// The hash of a NAD's `spec.config` text: the first [`HASH_LEN`] lowercase
/// hex characters of its SHA-256.
pub fn config_hash(config: &str) -> String {
    let digest = Sha256::digest(config.as_bytes());
    let mut hex = String::with_capacity(HASH_LEN);
    for byte in &digest[..HASH_LEN / 2] {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Why a pod template carries no hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unstamped {
    /// The setting is `off`.
    Off,
    /// The rules do not attach the workload.
    NotAttached,
    /// The setting is `labelled` and the pod template is not.
    NotLabelled,
    /// The NAD it uses has no `spec.config` to hash.
    NoConfig,
    /// The NAD it uses does not exist (the webhook's stamp of a pod).
    NoNad,
}

impl fmt::Display for Unstamped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unstamped::Off => write!(f, "configRollout is off"),
            Unstamped::NotAttached => write!(f, "the workload is not attached"),
            Unstamped::NotLabelled => write!(
                f,
                "the pod template is not labelled {RECONCILE_LABEL}: {RECONCILE_AUTO}"
            ),
            Unstamped::NoConfig => write!(f, "its NetworkAttachmentDefinition has no spec.config"),
            Unstamped::NoNad => write!(f, "its NetworkAttachmentDefinition does not exist"),
        }
    }
}

/// The hash a pod template should carry: `attached` says whether the rules
/// attach it, `labels` are its labels, `hash` the [`config_hash`] of the NAD
/// its attachment uses after the render (`None` when that NAD has no config).
pub fn wanted(
    mode: ConfigRollout,
    attached: bool,
    labels: &dyn Lookup,
    hash: Option<&str>,
) -> Result<CompactString, Unstamped> {
    match mode {
        ConfigRollout::Off => return Err(Unstamped::Off),
        _ if !attached => return Err(Unstamped::NotAttached),
        ConfigRollout::Labelled if labels.lookup(RECONCILE_LABEL) != Some(RECONCILE_AUTO) => {
            return Err(Unstamped::NotLabelled);
        }
        _ => {}
    }
    hash.map(CompactString::from).ok_or(Unstamped::NoConfig)
}

/// A change of a pod template's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The hash was added.
    Set(CompactString),
    /// The hash was replaced.
    Changed {
        /// The value it had.
        from: CompactString,
        /// The value it has now.
        to: CompactString,
    },
    /// The hash was removed.
    Removed(Unstamped),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Set(hash) => write!(f, "set {HASH_ANNOTATION} to {hash}"),
            Change::Changed { from, to } => write!(
                f,
                "changed {HASH_ANNOTATION} from {from} to {to}, the hash of its NAD's config: the workload rolls"
            ),
            Change::Removed(why) => write!(f, "removed {HASH_ANNOTATION}: {why}"),
        }
    }
}

/// Brings a pod template's hash annotation to `wanted`; `None` when it already
/// is. The error says which field does not have the shape it needs.
pub fn stamp(
    template: &mut Map,
    wanted: Result<CompactString, Unstamped>,
) -> Result<Option<Change>, String> {
    let current = workload::template_annotations(template).and_then(|a| a.get(HASH_ANNOTATION));
    match (wanted, current) {
        (Ok(hash), Some(node)) if node.as_text() == Some(hash.as_str()) => Ok(None),
        (Ok(hash), current) => {
            let change = match current {
                None => Change::Set(hash.clone()),
                Some(node) => Change::Changed {
                    from: node.as_text().unwrap_or("").into(),
                    to: hash.clone(),
                },
            };
            workload::set_annotation(template, HASH_ANNOTATION, hash)?;
            Ok(Some(change))
        }
        (Err(_), None) => Ok(None),
        (Err(why), Some(_)) => {
            workload::remove_annotation(template, HASH_ANNOTATION);
            Ok(Some(Change::Removed(why)))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::yaml::{emit_document, parse_document};

    type Labels = BTreeMap<String, String>;
    /// The hash wanted, or why there is none.
    type Want = Result<&'static str, Unstamped>;

    #[test]
    fn hashes() {
        for (config, want) in [
            ("", "e3b0c44298fc1c14"),
            ("hello world", "b94d27b9934d3e08"),
            ("{\n  \"type\": \"linkerd-cni\"\n}", "1a8873dfb117e46f"),
            // The exact text: a trailing newline is a different config.
            ("{}", "44136fa355b3678a"),
            ("{}\n", "ca3d163bab055381"),
        ] {
            assert_eq!(config_hash(config), want, "{config:?}");
        }
    }

    #[test]
    fn values() {
        for (text, want) in [
            ("off", Some(ConfigRollout::Off)),
            ("all", Some(ConfigRollout::All)),
            ("labelled", Some(ConfigRollout::Labelled)),
            ("labeled", None),
            ("All", None),
            ("", None),
        ] {
            assert_eq!(ConfigRollout::parse(text), want, "{text:?}");
        }
        for value in ConfigRollout::VALUES {
            assert_eq!(ConfigRollout::parse(value).unwrap().to_string(), value);
        }
        assert_eq!(ConfigRollout::default(), ConfigRollout::Off);
    }

    #[test]
    fn wanted_table() {
        use ConfigRollout::*;
        let auto: Labels = [(RECONCILE_LABEL.to_string(), RECONCILE_AUTO.to_string())].into();
        let manual: Labels = [(RECONCILE_LABEL.to_string(), "manual".to_string())].into();
        let none = BTreeMap::new();
        let h = "0123456789abcdef";
        // Mode, attached, labels, the NAD config's hash, the hash wanted.
        let cases: &[(ConfigRollout, bool, &Labels, Option<&str>, Want)] = &[
            (Off, true, &auto, Some(h), Err(Unstamped::Off)),
            (Off, false, &none, None, Err(Unstamped::Off)),
            (All, true, &none, Some(h), Ok(h)),
            (All, true, &auto, Some(h), Ok(h)),
            (All, false, &auto, Some(h), Err(Unstamped::NotAttached)),
            (All, true, &none, None, Err(Unstamped::NoConfig)),
            (Labelled, true, &auto, Some(h), Ok(h)),
            (
                Labelled,
                true,
                &manual,
                Some(h),
                Err(Unstamped::NotLabelled),
            ),
            (Labelled, true, &none, Some(h), Err(Unstamped::NotLabelled)),
            (Labelled, false, &auto, Some(h), Err(Unstamped::NotAttached)),
        ];
        for (i, (mode, attached, labels, config, want)) in cases.iter().enumerate() {
            let got = wanted(*mode, *attached, *labels, *config);
            assert_eq!(got, want.map(CompactString::from), "case {i}");
        }
    }

    #[test]
    fn stamp_table() {
        let h1 = "0123456789abcdef";
        let h2 = "1234567890123456";
        // Pod template, the hash wanted, the pod template after, the change reported.
        let cases: &[(&str, Want, &str, Option<Change>)] = &[
            (
                "spec: {}\n",
                Ok(h1),
                // A new value starting with a digit is quoted: `12e45...` would read as a number.
                "spec: {}\nmetadata:\n  annotations:\n    multus.linkerd.io/config-hash: \"0123456789abcdef\"\n",
                Some(Change::Set(h1.into())),
            ),
            (
                "metadata:\n  annotations:\n    multus.linkerd.io/config-hash: 0123456789abcdef\n",
                Ok(h1),
                "metadata:\n  annotations:\n    multus.linkerd.io/config-hash: 0123456789abcdef\n",
                None,
            ),
            (
                // All digits: quoted, or readers take it for a number.
                "metadata:\n  annotations:\n    multus.linkerd.io/config-hash: 0123456789abcdef\n",
                Ok(h2),
                "metadata:\n  annotations:\n    multus.linkerd.io/config-hash: \"1234567890123456\"\n",
                Some(Change::Changed {
                    from: h1.into(),
                    to: h2.into(),
                }),
            ),
            (
                "metadata:\n  labels:\n    app: web\n  annotations:\n    multus.linkerd.io/config-hash: 0123456789abcdef\n",
                Err(Unstamped::Off),
                "metadata:\n  labels:\n    app: web\n",
                Some(Change::Removed(Unstamped::Off)),
            ),
            (
                "metadata:\n  annotations:\n    a: b\n    multus.linkerd.io/config-hash: x\n",
                Err(Unstamped::NotAttached),
                "metadata:\n  annotations:\n    a: b\n",
                Some(Change::Removed(Unstamped::NotAttached)),
            ),
            (
                "metadata:\n  annotations:\n    a: b\n",
                Err(Unstamped::NotLabelled),
                "metadata:\n  annotations:\n    a: b\n",
                None,
            ),
        ];
        for (src, want, out, change) in cases {
            let mut doc = parse_document(src).unwrap();
            let got = stamp(doc.as_map_mut().unwrap(), want.map(CompactString::from)).unwrap();
            assert_eq!(&got, change, "{src}");
            assert_eq!(emit_document(&doc), *out, "{src}");
        }
        let mut bad = parse_document("metadata:\n  annotations: x\n").unwrap();
        assert!(stamp(bad.as_map_mut().unwrap(), Ok(h1.into())).is_err());
        assert_eq!(
            bad,
            parse_document("metadata:\n  annotations: x\n").unwrap()
        );
    }
}
