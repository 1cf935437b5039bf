//! Deterministic Multus interface names, the Kaloom podagent rule: a selection of the networks
//! annotation without an interface gets `net` + the first 12 hex digits of the MD5 of its
//! network (NetworkAttachmentDefinition) name, so `green` is always `net9f27410725ab`.

use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;

use md5::{Digest, Md5};

use crate::multus::networks::{MAX_INTERFACE_LEN, Networks, NetworksError, Selection};

/// How many bytes of the digest go into a name: 12 hex digits.
const DIGEST_BYTES: usize = 6;

/// One selection of the annotation, as errors name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Position in the annotation, from 1.
    pub index: usize,
    /// The selection in comma form, `[namespace/]name[@interface]`, with its explicit interface.
    pub selection: String,
}

impl Item {
    fn new(index: usize, selection: &Selection) -> Self {
        Self {
            index: index + 1,
            selection: selection.to_string(),
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "item {} {:?}", self.index, self.selection)
    }
}

/// Why interfaces cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterfaceNameError {
    /// The annotation does not parse.
    #[error(transparent)]
    Networks(#[from] NetworksError),
    /// Two selections would have the same interface, explicit or generated.
    #[error("{first} and {second} would both have interface {interface:?}")]
    Collision {
        first: Item,
        second: Item,
        interface: String,
    },
    /// An interface name is longer than the kernel allows.
    #[error("{item}: interface name {interface:?} is longer than {MAX_INTERFACE_LEN} bytes")]
    TooLong { item: Item, interface: String },
}

/// The interface name of a selection of `network_name`: `net` + the first 12 lowercase hex
/// digits of its MD5.
pub fn deterministic(network_name: &str) -> String {
    let digest = Md5::digest(network_name.as_bytes());
    let mut name = String::with_capacity(3 + 2 * DIGEST_BYTES);
    name.push_str("net");
    for byte in &digest[..DIGEST_BYTES] {
        write!(name, "{byte:02x}").expect("writing to a String cannot fail");
    }
    name
}

/// The networks annotation value `text` with a [`deterministic`] interface name for every
/// selection that has none, edited in place in the user's form (see
/// [`Networks::with_interfaces`]); `None` when every selection has one already, or there is
/// none.
///
/// Fails when the value does not parse, or when two selections would have the same interface
/// (the same network twice without interfaces, or an explicit name equal to a generated one).
/// The output of a success gives `None`.
pub fn name_interfaces(text: &str) -> Result<Option<String>, InterfaceNameError> {
    let networks = Networks::parse(text)?;
    let mut taken: HashMap<String, usize> = HashMap::new();
    for (index, selection) in networks.selections().iter().enumerate() {
        let interface = selection
            .interface
            .clone()
            .unwrap_or_else(|| deterministic(&selection.name));
        if interface.len() > MAX_INTERFACE_LEN {
            return Err(InterfaceNameError::TooLong {
                item: Item::new(index, selection),
                interface,
            });
        }
        if let Some(&first) = taken.get(&interface) {
            return Err(InterfaceNameError::Collision {
                first: Item::new(first, &networks.selections()[first]),
                second: Item::new(index, selection),
                interface,
            });
        }
        taken.insert(interface, index);
    }
    Ok(networks.with_interfaces(|s| Some(deterministic(&s.name))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        for (network, interface) in [
            ("green", "net9f27410725ab"),
            ("linkerd-cni", "net6a72ae7dcd39"),
        ] {
            assert_eq!(deterministic(network), interface, "{network}");
        }
    }

    #[test]
    fn names_what_has_no_interface() {
        let cases = [
            ("", None),
            ("  ", None),
            ("[]", None),
            ("ns/net@if", None),
            ("green@eth1, ns/blue@eth2", None),
            (r#"[{"name": "green", "interface": "eth1"}]"#, None),
            // Multus reads the deprecated interfaceRequest when interface is empty, and keys
            // in any case: these already have an interface.
            (r#"[{"name": "green", "interfaceRequest": "eth1"}]"#, None),
            (
                r#"[{"name": "green", "interface": "", "interfaceRequest": "eth1"}]"#,
                None,
            ),
            (r#"[{"name": "green", "Interface": "eth1"}]"#, None),
            ("green @ eth1, ns / blue@eth2", None),
            // An empty interface is none: the name goes after the `@`.
            ("green@", Some("green@net9f27410725ab")),
            (" ns / green @ ", Some(" ns / green @net9f27410725ab ")),
            (
                r#"[{"Name": "green", "Interface": ""}]"#,
                Some(r#"[{"Name": "green", "Interface": "net9f27410725ab"}]"#),
            ),
            ("green", Some("green@net9f27410725ab")),
            ("ns/green", Some("ns/green@net9f27410725ab")),
            ("linkerd-cni", Some("linkerd-cni@net6a72ae7dcd39")),
            ("ns/net@if, green", Some("ns/net@if, green@net9f27410725ab")),
            (
                " green , linkerd-cni@eth1,\tns/linkerd-cni ",
                Some(" green@net9f27410725ab , linkerd-cni@eth1,\tns/linkerd-cni@net6a72ae7dcd39 "),
            ),
            (
                r#"[{"name": "green"}]"#,
                Some(r#"[{"name": "green", "interface": "net9f27410725ab"}]"#),
            ),
            (
                r#"[{"name":"green","namespace":"ns","interface":"eth1"},{"name":"linkerd-cni"}]"#,
                Some(
                    r#"[{"name":"green","namespace":"ns","interface":"eth1"},{"name":"linkerd-cni","interface":"net6a72ae7dcd39"}]"#,
                ),
            ),
            (
                r#"[{"name": "green", "ips": ["10.1.1.5/24"], "x-unknown": {"a": [1, null]}}]"#,
                Some(
                    r#"[{"name": "green", "ips": ["10.1.1.5/24"], "x-unknown": {"a": [1, null]}, "interface": "net9f27410725ab"}]"#,
                ),
            ),
            (
                r#"[{"name": "green", "interface": null, "mac": "c2:b0:57:49:47:f1"}]"#,
                Some(
                    r#"[{"name": "green", "interface": "net9f27410725ab", "mac": "c2:b0:57:49:47:f1"}]"#,
                ),
            ),
            (
                r#"[{"name": "green", "interface": ""}]"#,
                Some(r#"[{"name": "green", "interface": "net9f27410725ab"}]"#),
            ),
        ];
        for (text, expected) in cases {
            let named = name_interfaces(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(named.as_deref(), expected, "{text:?}");
            if let Some(named) = named {
                assert_eq!(
                    name_interfaces(&named),
                    Ok(None),
                    "not idempotent: {named:?}"
                );
            }
        }
    }

    #[test]
    fn refuses_collisions_and_bad_values() {
        let cases = [
            (
                "green, green",
                r#"item 1 "green" and item 2 "green" would both have interface "net9f27410725ab""#,
            ),
            (
                "green, other/green",
                r#"item 1 "green" and item 2 "other/green" would both have interface "net9f27410725ab""#,
            ),
            (
                "a@net9f27410725ab, green",
                r#"item 1 "a@net9f27410725ab" and item 2 "green" would both have interface "net9f27410725ab""#,
            ),
            (
                "green, blue@net9f27410725ab",
                r#"item 1 "green" and item 2 "blue@net9f27410725ab" would both have interface "net9f27410725ab""#,
            ),
            (
                "a@eth1, b@eth1",
                r#"item 1 "a@eth1" and item 2 "b@eth1" would both have interface "eth1""#,
            ),
            (
                r#"[{"name": "green"}, {"name": "green", "interface": null}]"#,
                r#"item 1 "green" and item 2 "green" would both have interface "net9f27410725ab""#,
            ),
            ("a,,b", r#"item 2 "": empty item"#),
        ];
        for (text, message) in cases {
            match name_interfaces(text) {
                Ok(named) => panic!("{text:?} gave {named:?}"),
                Err(e) => assert_eq!(e.to_string(), message, "{text:?}"),
            }
        }
        let too_long = InterfaceNameError::TooLong {
            item: Item {
                index: 2,
                selection: "green".to_owned(),
            },
            interface: "net9f27410725ab0".to_owned(),
        };
        assert_eq!(
            too_long.to_string(),
            r#"item 2 "green": interface name "net9f27410725ab0" is longer than 15 bytes"#
        );
        assert!(matches!(
            name_interfaces("[{"),
            Err(InterfaceNameError::Networks(NetworksError::Syntax(_)))
        ));
    }
}
