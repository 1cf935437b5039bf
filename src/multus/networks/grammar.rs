//! What Multus accepts in a networks annotation: the comma form's items, the
//! JSON form's elements and the members Multus reads into typed fields, and
//! the errors that say what it would refuse.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::error::Category;
use serde_json::value::RawValue;

use super::{Selection, Slot};
use crate::k8s::names::is_dns1123_label;
use crate::yaml::describe_json;

/// Longest DNS-1123 label.
/// Longest interface name the kernel accepts (`IFNAMSIZ - 1` bytes).
pub(crate) const MAX_INTERFACE_LEN: usize = 15;

/// Why an annotation value is not a valid networks annotation.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum NetworksError {
    /// A comma-form item (numbered from 1) is malformed.
    #[error("item {index} {item:?}: {problem}")]
    Item {
        index: usize,
        item: String,
        problem: ItemProblem,
    },
    /// A JSON-form element (numbered from 1) is malformed.
    #[error("JSON element {index}: {problem}")]
    Element { index: usize, problem: ItemProblem },
    /// The value is JSON but not a list of objects.
    #[error("not a JSON list of objects: {0}")]
    NotList(String),
    /// The value looks like JSON but is not well-formed.
    #[error("invalid JSON: {0}")]
    Syntax(String),
}

/// What is wrong with one item or element.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ItemProblem {
    /// An empty comma-form item, e.g. in `a,,b` or `a,`.
    #[error("empty item")]
    Empty,
    /// More than one `/` in a comma-form item.
    #[error("more than one \"/\"")]
    TooManySlashes,
    /// More than one `@` in a comma-form item.
    #[error("more than one \"@\"")]
    TooManyAts,
    /// The network name is not a DNS-1123 label.
    #[error("network name {0:?} is not a DNS-1123 label")]
    Name(String),
    /// The namespace is not a DNS-1123 label.
    #[error("namespace {0:?} is not a DNS-1123 label")]
    Namespace(String),
    /// The interface name is not a valid Linux interface name.
    #[error(
        "interface name {0:?} is not valid (1 to 15 bytes, no \"/\" or whitespace, not \".\" or \"..\")"
    )]
    Interface(String),
    /// An interface name holding a character the kernel refuses there (`:`, or one
    /// encoded with the byte 0xA0, which the kernel counts as a space).
    #[error("interface name {name:?} is not valid: the kernel refuses {character:?} in it")]
    InterfaceCharacter {
        /// The interface name.
        name: String,
        /// The first character refused.
        character: char,
    },
    /// A JSON element without a `name` key.
    #[error("no \"name\" key")]
    MissingName,
    /// A JSON element whose `name`, `namespace` or `interface` is not a string.
    #[error("{0:?} is not a string")]
    NotString(&'static str),
    /// A JSON element member Multus reads as another JSON type.
    #[error("{key:?} is not {expected}")]
    NotOfType {
        /// The member.
        key: &'static str,
        /// The type Multus reads it as.
        expected: &'static str,
    },
    /// A MAC address, InfiniBand GUID or IP address Multus cannot parse.
    #[error("{key:?} {value:?} is not {expected}")]
    BadValue {
        /// The member.
        key: &'static str,
        /// The value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

/// The byte span of `part`, a slice of `text`, in `text`.
fn span_in(text: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let span = start..start.saturating_add(part.len());
    (text.get(span.clone()) == Some(part)).then_some(span)
}

pub(super) fn parse_comma(text: &str) -> Result<Vec<Selection>, NetworksError> {
    let mut selections = Vec::new();
    let mut offset = 0;
    for (i, raw) in text.split(',').enumerate() {
        let item = raw.trim();
        let start = offset + raw.len() - raw.trim_start().len();
        offset += raw.len() + 1;
        let (name, namespace, interface) =
            parse_item(item).map_err(|problem| NetworksError::Item {
                index: i + 1,
                item: item.to_owned(),
                problem,
            })?;
        // Exactly `name` or `name@interface`: no namespace part, no spaces, no empty part.
        let exact = item.len() == name.len() + interface.map_or(0, |i| i.len() + 1);
        selections.push(Selection {
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            interface: interface.map(str::to_owned),
            span: start..start + item.len(),
            plain: exact && interface.is_none(),
            bare: exact,
            slot: Slot::Comma,
        });
    }
    Ok(selections)
}

/// Splits a trimmed comma-form item `[ns/]name[@interface]` as Multus does
/// (`parsePodNetworkObjectName`): spaces around each part are trimmed, and an
/// empty namespace or interface counts as none. Then validates the parts.
fn parse_item(item: &str) -> Result<(&str, Option<&str>, Option<&str>), ItemProblem> {
    if item.is_empty() {
        return Err(ItemProblem::Empty);
    }
    if item.matches('@').count() > 1 {
        return Err(ItemProblem::TooManyAts);
    }
    if item.matches('/').count() > 1 {
        return Err(ItemProblem::TooManySlashes);
    }
    let (target, interface) = match item.split_once('@') {
        Some((target, interface)) => (target, Some(interface.trim())),
        None => (item, None),
    };
    let (namespace, name) = match target.split_once('/') {
        Some((namespace, name)) => (Some(namespace.trim()), name.trim()),
        None => (None, target.trim()),
    };
    let namespace = namespace.filter(|n| !n.is_empty());
    let interface = interface.filter(|i| !i.is_empty());
    validate(name, namespace, interface)?;
    Ok((name, namespace, interface))
}

pub(super) fn parse_json(text: &str) -> Result<Vec<Selection>, NetworksError> {
    let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| match e.classify() {
        Category::Data => NetworksError::NotList(e.to_string()),
        _ => NetworksError::Syntax(e.to_string()),
    })?;
    elements
        .iter()
        .enumerate()
        .map(|(i, raw)| json_selection(text, i + 1, raw.get()))
        .collect()
}

/// Validates one JSON element, a slice of `text`.
fn json_selection(text: &str, index: usize, element: &str) -> Result<Selection, NetworksError> {
    let syntax = |e: serde_json::Error| NetworksError::Syntax(format!("element {index}: {e}"));
    let locate = |part: &str| {
        span_in(text, part).ok_or_else(|| {
            NetworksError::Syntax(format!("element {index} could not be located in the text"))
        })
    };
    let span = locate(element)?;
    if !element.starts_with('{') {
        let value: Value = serde_json::from_str(element).map_err(syntax)?;
        return Err(NetworksError::NotList(format!(
            "element {index} is {}",
            describe_json(&value)
        )));
    }
    let Members(members) = serde_json::from_str(element).map_err(syntax)?;
    let fail = move |problem| NetworksError::Element { index, problem };
    // Go's encoding/json, which Multus reads the list with, gives a member to a field whose
    // name matches its key exactly or ignoring case; every such member is decoded (a wrong
    // type anywhere fails), a later one overwrites an earlier one and `null` leaves a string
    // as it was.
    let mut strings: [Option<&str>; STRING_FIELDS.len()] = [None; STRING_FIELDS.len()];
    let mut typed: [Option<Value>; TYPED_FIELDS.len()] = Default::default();
    for (key, raw) in &members {
        let raw = raw.get();
        if let Some(i) = STRING_FIELDS.iter().position(|f| names_field(key, f)) {
            match raw.as_bytes().first() {
                Some(b'"') => strings[i] = Some(raw),
                _ if raw == "null" => {}
                _ => return Err(fail(ItemProblem::NotString(STRING_FIELDS[i]))),
            }
        } else if let Some(i) = TYPED_FIELDS.iter().position(|f| names_field(key, f)) {
            let value: Value = serde_json::from_str(raw).map_err(syntax)?;
            check_type(TYPED_FIELDS[i], &value).map_err(fail)?;
            typed[i] = Some(value);
        }
    }
    let string = |field: &str| -> Result<Option<String>, NetworksError> {
        let i = STRING_FIELDS.iter().position(|f| *f == field).unwrap_or(0);
        strings[i]
            .map(|raw| serde_json::from_str::<String>(raw).map_err(syntax))
            .transpose()
    };
    let Some(name) = string("name")? else {
        return Err(fail(
            match members.iter().any(|(k, _)| names_field(k, "name")) {
                true => ItemProblem::NotString("name"),
                false => ItemProblem::MissingName,
            },
        ));
    };
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let namespace = non_empty(string("namespace")?);
    // Multus reads the deprecated `interfaceRequest` when `interface` is empty.
    let interface = match non_empty(string("interface")?) {
        Some(interface) => Some(interface),
        None => non_empty(string("interfaceRequest")?),
    };
    validate(&name, namespace.as_deref(), interface.as_deref()).map_err(fail)?;
    for key in ["mac", "infiniband-guid"] {
        if let Some(address) = non_empty(string(key)?) {
            hardware_address(key, &address).map_err(fail)?;
        }
    }
    if let [Some(ips), ..] = &typed {
        ip_list("ips", ips, true).map_err(fail)?;
    }
    let last = |field: &str| members.iter().rposition(|(k, _)| names_field(k, field));
    let slot = match last("interface") {
        Some(i) => Slot::Value(locate(members[i].1.get())?),
        None => {
            // `name` is a member, so there is a last one.
            let n = members.len() - 1;
            let previous = match n.checked_sub(1) {
                Some(p) => Some(locate(members[p].1.get())?.end),
                None => None,
            };
            Slot::After {
                previous,
                last: locate(members[n].1.get())?,
            }
        }
    };
    Ok(Selection {
        name,
        namespace,
        interface,
        span,
        plain: members.iter().all(|(k, _)| k == "name"),
        bare: members.iter().all(|(k, _)| k == "name" || k == "interface"),
        slot,
    })
}

/// The members of a JSON object in order, each value as its exact text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;

        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }

        deserializer.deserialize_map(MembersVisitor)
    }
}

/// A non-empty `mac` or `infiniband-guid`: an address Go's `net.ParseMAC` reads,
/// as Multus checks it.
fn hardware_address(key: &'static str, value: &str) -> Result<(), ItemProblem> {
    if is_hardware_address(value) {
        return Ok(());
    }
    Err(ItemProblem::BadValue {
        key,
        value: value.to_owned(),
        expected: "a MAC address (6, 8 or 20 bytes as xx:xx:..., xx-xx-... or xxxx.xxxx...)",
    })
}

/// The string members of Multus's `NetworkSelectionElement`, by JSON name.
const STRING_FIELDS: [&str; 8] = [
    "name",
    "namespace",
    "interface",
    "interfaceRequest",
    "mac",
    "infiniband-guid",
    "deviceID",
    "ipam-claim-reference",
];

/// Its members of other types (`ips` first), by JSON name.
const TYPED_FIELDS: [&str; 5] = [
    "ips",
    "default-route",
    "portMappings",
    "bandwidth",
    "cni-args",
];

/// Whether a member named `key` goes to the field `field` (ASCII) in Go's encoding/json:
/// the same name, or the same ignoring case as Go folds it (`K` Kelvin, `ſ`, `ı` and `İ`
/// fold to ASCII letters too).
fn names_field(key: &str, field: &str) -> bool {
    if key == field {
        return true;
    }
    let mut expected = field.bytes();
    key.chars().all(|c| {
        let folded = match c {
            '\u{212A}' => b'K',
            '\u{17F}' => b'S',
            '\u{131}' | '\u{130}' => b'I',
            c if c.is_ascii() => (c as u8).to_ascii_uppercase(),
            _ => return false,
        };
        expected.next().map(|b| b.to_ascii_uppercase()) == Some(folded)
    }) && expected.next().is_none()
}

/// The JSON type Multus decodes a member of `field` (one of [`TYPED_FIELDS`]) into; the
/// addresses of `default-route` are checked while decoding, as Go's `net.IP` does.
fn check_type(field: &'static str, value: &Value) -> Result<(), ItemProblem> {
    let fits = match (field, value) {
        (_, Value::Null) => true,
        ("ips", Value::Array(items)) => items.iter().all(Value::is_string),
        ("ips", _) => {
            return Err(ItemProblem::NotOfType {
                key: field,
                expected: "a list of strings",
            });
        }
        ("default-route", _) => return ip_list("default-route", value, false),
        ("portMappings", Value::Array(_)) => true,
        ("bandwidth" | "cni-args", Value::Object(_)) => true,
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let list = field == "portMappings" || field == "ips";
    Err(ItemProblem::NotOfType {
        key: field,
        expected: if list { "a list" } else { "an object" },
    })
}

/// Go's `net.ParseMAC` formats: 6, 8 or 20 octets as pairs of hex digits
/// separated by `:` or `-`, or as groups of four separated by `.`.
fn is_hardware_address(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let (group, separator) = match (b[2], b[4]) {
        (b':' | b'-', _) => (2, b[2]),
        (_, b'.') => (4, b'.'),
        _ => return false,
    };
    if !(b.len() + 1).is_multiple_of(group + 1) {
        return false;
    }
    let octets = (b.len() + 1) / (group + 1) * group / 2;
    [6, 8, 20].contains(&octets)
        && b.chunks(group + 1).all(|chunk| {
            chunk[..group].iter().all(u8::is_ascii_hexdigit)
                && (chunk.len() == group || chunk[group] == separator)
        })
}

/// An `ips` (addresses or CIDRs) or `default-route` (addresses) member: a list
/// of strings Multus can parse.
fn ip_list(key: &'static str, value: &Value, cidr: bool) -> Result<(), ItemProblem> {
    let items = match value {
        Value::Null => return Ok(()),
        Value::Array(items) => items,
        _ => {
            return Err(ItemProblem::NotOfType {
                key,
                expected: "a list of strings",
            });
        }
    };
    for item in items {
        let Value::String(text) = item else {
            return Err(ItemProblem::NotOfType {
                key,
                expected: "a list of strings",
            });
        };
        let ok = match text.split_once('/') {
            // default-route's addresses may be empty (no gateway), as Go reads them.
            _ if text.is_empty() => !cidr,
            Some((ip, prefix)) if cidr => {
                let max = match ip.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V4(_)) => 32,
                    Ok(std::net::IpAddr::V6(_)) => 128,
                    Err(_) => 0,
                };
                max > 0
                    && !prefix.is_empty()
                    && prefix.bytes().all(|b| b.is_ascii_digit())
                    && prefix.parse::<u32>().is_ok_and(|p| p <= max)
            }
            Some(_) => false,
            None => text.parse::<std::net::IpAddr>().is_ok(),
        };
        if !ok {
            return Err(ItemProblem::BadValue {
                key,
                value: text.clone(),
                expected: if cidr {
                    "an IP address or CIDR"
                } else {
                    "an IP address"
                },
            });
        }
    }
    Ok(())
}

fn validate(
    name: &str,
    namespace: Option<&str>,
    interface: Option<&str>,
) -> Result<(), ItemProblem> {
    if !is_dns1123_label(name) {
        return Err(ItemProblem::Name(name.to_owned()));
    }
    if let Some(ns) = namespace.filter(|ns| !is_dns1123_label(ns)) {
        return Err(ItemProblem::Namespace(ns.to_owned()));
    }
    if let Some(interface) = interface {
        if !is_interface_name(interface) {
            return Err(ItemProblem::Interface(interface.to_owned()));
        }
        if let Some(character) = refused_character(interface) {
            return Err(ItemProblem::InterfaceCharacter {
                name: interface.to_owned(),
                character,
            });
        }
    }
    Ok(())
}

/// 1 to 15 bytes, no `/` or ASCII whitespace, not `.` or `..`: Multus's check of the comma
/// form (at most 15 bytes, no `/` or ASCII whitespace) and the kernel's (`dev_valid_name`)
/// but for the characters [`refused_character`] finds.
fn is_interface_name(s: &str) -> bool {
    (1..=MAX_INTERFACE_LEN).contains(&s.len())
        && s != "."
        && s != ".."
        && !s.contains(|c: char| matches!(c, '/' | ' ' | '\t'..='\r'))
}

/// The first character of an interface name the kernel refuses that [`is_interface_name`]
/// lets through: `:`, or one whose UTF-8 holds the byte 0xA0 (a space to the kernel).
fn refused_character(s: &str) -> Option<char> {
    s.chars().find(|&c| {
        let mut utf8 = [0; 4];
        c == ':' || c.encode_utf8(&mut utf8).bytes().any(|b| b == 0xA0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multus::networks::Networks;

    /// Members Multus reads into typed fields and checks (`parsePodNetworkAnnotation`):
    /// what it refuses is refused here too.
    #[test]
    fn json_members_multus_checks() {
        for ok in [
            r#"[{"name": "a", "mac": "02:00:00:00:00:01", "ips": ["10.1.1.7/24", "fd00::7", "10.1.1.8"]}]"#,
            r#"[{"name": "a", "mac": "02-00-00-00-00-01", "infiniband-guid": "0000.0000.fe80.0000.0000.0000.0200.5e10.0000.0001"}]"#,
            r#"[{"name": "a", "mac": "", "ips": null, "default-route": ["10.1.1.1"], "deviceID": "0000:03:00.1"}]"#,
            r#"[{"name": "a", "portMappings": [{"hostPort": 80, "containerPort": 8080}], "bandwidth": {"ingressRate": 1}, "cni-args": {"x": 1}}]"#,
        ] {
            assert!(
                Networks::parse(ok).is_ok(),
                "{ok}: {:?}",
                Networks::parse(ok).err()
            );
        }
        for (bad, want) in [
            (
                r#"[{"name": "a", "mac": "02:00:00:00:00"}]"#,
                "JSON element 1: \"mac\" \"02:00:00:00:00\" is not a MAC address",
            ),
            (
                r#"[{"name": "a", "mac": "02:00:00-00:00:01"}]"#,
                "JSON element 1: \"mac\" \"02:00:00-00:00:01\" is not a MAC address",
            ),
            (
                r#"[{"name": "a", "mac": 2}]"#,
                "JSON element 1: \"mac\" is not a string",
            ),
            (
                r#"[{"name": "a", "infiniband-guid": "zz:00:00:00:00:01"}]"#,
                "JSON element 1: \"infiniband-guid\" \"zz:00:00:00:00:01\" is not a MAC address",
            ),
            (
                r#"[{"name": "a", "ips": "10.1.1.7/24"}]"#,
                "JSON element 1: \"ips\" is not a list of strings",
            ),
            (
                r#"[{"name": "a", "ips": ["10.1.1.7/33"]}]"#,
                "JSON element 1: \"ips\" \"10.1.1.7/33\" is not an IP address or CIDR",
            ),
            (
                r#"[{"name": "a"}, {"name": "b", "ips": ["10.1.1"]}]"#,
                "JSON element 2: \"ips\" \"10.1.1\" is not an IP address or CIDR",
            ),
            (
                r#"[{"name": "a", "default-route": ["10.1.1.0/24"]}]"#,
                "JSON element 1: \"default-route\" \"10.1.1.0/24\" is not an IP address",
            ),
            (
                r#"[{"name": "a", "deviceID": 3}]"#,
                "JSON element 1: \"deviceID\" is not a string",
            ),
            (
                r#"[{"name": "a", "portMappings": {"hostPort": 80}}]"#,
                "JSON element 1: \"portMappings\" is not a list",
            ),
            (
                r#"[{"name": "a", "cni-args": "x=1"}]"#,
                "JSON element 1: \"cni-args\" is not an object",
            ),
        ] {
            let err = Networks::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with(want), "{bad}:\n  got  {err}\n  want {want}");
        }
    }

    #[test]
    fn rejects_invalid_texts() {
        let cases = [
            (
                "Foo",
                r#"item 1 "Foo": network name "Foo" is not a DNS-1123 label"#,
            ),
            (
                "a, Foo@",
                r#"item 2 "Foo@": network name "Foo" is not a DNS-1123 label"#,
            ),
            ("a,,b", r#"item 2 "": empty item"#),
            ("a, ", r#"item 2 "": empty item"#),
            (",a", r#"item 1 "": empty item"#),
            (
                "a@abcdefghijklmnop",
                r#"item 1 "a@abcdefghijklmnop": interface name "abcdefghijklmnop" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
            (
                "a@..",
                r#"item 1 "a@..": interface name ".." is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
            (
                "a@x/y",
                r#"item 1 "a@x/y": interface name "x/y" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
            ("a/b/c", r#"item 1 "a/b/c": more than one "/""#),
            ("a@b@c", r#"item 1 "a@b@c": more than one "@""#),
            (
                "Ns/a",
                r#"item 1 "Ns/a": namespace "Ns" is not a DNS-1123 label"#,
            ),
            (
                "ns/",
                r#"item 1 "ns/": network name "" is not a DNS-1123 label"#,
            ),
            (
                "@eth0",
                r#"item 1 "@eth0": network name "" is not a DNS-1123 label"#,
            ),
            (
                "-a",
                r#"item 1 "-a": network name "-a" is not a DNS-1123 label"#,
            ),
            (
                "a-",
                r#"item 1 "a-": network name "a-" is not a DNS-1123 label"#,
            ),
            (
                "a_b",
                r#"item 1 "a_b": network name "a_b" is not a DNS-1123 label"#,
            ),
            (
                "a b",
                r#"item 1 "a b": network name "a b" is not a DNS-1123 label"#,
            ),
            (
                "é",
                r#"item 1 "é": network name "é" is not a DNS-1123 label"#,
            ),
            (
                "a23456789012345678901234567890123456789012345678901234567890123x",
                r#"item 1 "a23456789012345678901234567890123456789012345678901234567890123x": network name "a23456789012345678901234567890123456789012345678901234567890123x" is not a DNS-1123 label"#,
            ),
            (
                r#"{"name": "a"}"#,
                "not a JSON list of objects: invalid type: map, expected a sequence at line 1 column 0",
            ),
            (
                r#""a""#,
                r#"not a JSON list of objects: invalid type: string "a", expected a sequence at line 1 column 3"#,
            ),
            ("[1]", "not a JSON list of objects: element 1 is a number"),
            (
                r#"[{"name": "a"}, "b"]"#,
                "not a JSON list of objects: element 2 is a string",
            ),
            (
                r#"[{"namespace": "x"}]"#,
                r#"JSON element 1: no "name" key"#,
            ),
            (
                r#"[{"name": 1}]"#,
                r#"JSON element 1: "name" is not a string"#,
            ),
            (
                r#"[{"name": "a", "namespace": 2}]"#,
                r#"JSON element 1: "namespace" is not a string"#,
            ),
            (
                r#"[{"name": "a", "interface": []}]"#,
                r#"JSON element 1: "interface" is not a string"#,
            ),
            (
                r#"[{"name": "a"}, {"name": "B"}]"#,
                r#"JSON element 2: network name "B" is not a DNS-1123 label"#,
            ),
            (
                r#"[{"name": "a", "namespace": "X"}]"#,
                r#"JSON element 1: namespace "X" is not a DNS-1123 label"#,
            ),
            (
                r#"[{"name": "a", "interface": "a b"}]"#,
                r#"JSON element 1: interface name "a b" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
            (
                r#"[{"name": "a"}"#,
                "invalid JSON: EOF while parsing a list at line 1 column 14",
            ),
            (
                r#"[{"name": "a"},]"#,
                "invalid JSON: trailing comma at line 1 column 16",
            ),
            (
                r#"[{"name": "a"}] x"#,
                "invalid JSON: trailing characters at line 1 column 17",
            ),
            (r#"a"b"#, "invalid JSON: expected value at line 1 column 1"),
            ("a,[b]", "invalid JSON: expected value at line 1 column 1"),
        ];
        for (text, message) in cases {
            match Networks::parse(text) {
                Ok(n) => panic!("{text:?} parsed as {:?}", n.selections()),
                Err(e) => assert_eq!(e.to_string(), message, "{text:?}"),
            }
        }
    }

    /// What Multus's parser (`parsePodNetworkAnnotation`, `parsePodNetworkObjectName`)
    /// accepts and this parser once refused: input, and name, namespace and interface.
    #[test]
    fn reads_what_multus_reads() {
        type Case = (
            &'static str,
            &'static [(&'static str, Option<&'static str>, Option<&'static str>)],
        );
        let cases: &[Case] = &[
            // Comma form: each part is trimmed; an empty namespace or interface is none.
            ("ns / net @ eth0", &[("net", Some("ns"), Some("eth0"))]),
            ("ns/ net@\teth0", &[("net", Some("ns"), Some("eth0"))]),
            ("/net1", &[("net1", None, None)]),
            (" / net1 , a", &[("net1", None, None), ("a", None, None)]),
            ("net1@", &[("net1", None, None)]),
            ("net1 @ ", &[("net1", None, None)]),
            ("ns/net1@", &[("net1", Some("ns"), None)]),
            ("/net1@", &[("net1", None, None)]),
            // The kernel takes any byte but "/", ":" and its spaces in a name.
            ("a@e\u{2003}th", &[("a", None, Some("e\u{2003}th"))]),
            // JSON form: Go matches keys ignoring case, as it folds them.
            (
                r#"[{"Name": "a", "Namespace": "ns", "Interface": "eth1"}]"#,
                &[("a", Some("ns"), Some("eth1"))],
            ),
            (
                r#"[{"NAME": "a", "INTERFACE": "eth1"}]"#,
                &[("a", None, Some("eth1"))],
            ),
            (
                r#"[{"name": "a", "\u0131nterface": "eth1"}]"#,
                &[("a", None, Some("eth1"))],
            ),
            (
                r#"[{"name": "a", "interface": "eth1", "Interface": "eth2"}]"#,
                &[("a", None, Some("eth2"))],
            ),
            (r#"[{"name": "a", "Name": "b"}]"#, &[("b", None, None)]),
            // A null leaves a string as it was.
            (
                r#"[{"name": "a", "interface": "eth1", "interface": null}]"#,
                &[("a", None, Some("eth1"))],
            ),
            (r#"[{"name": "a", "name": null}]"#, &[("a", None, None)]),
            // The deprecated interfaceRequest names the interface when interface is empty.
            (
                r#"[{"name": "a", "interfaceRequest": "eth1"}]"#,
                &[("a", None, Some("eth1"))],
            ),
            (
                r#"[{"name": "a", "interface": "", "interfaceRequest": "eth1"}]"#,
                &[("a", None, Some("eth1"))],
            ),
            (
                r#"[{"name": "a", "interface": "eth2", "interfaceRequest": "eth1"}]"#,
                &[("a", None, Some("eth2"))],
            ),
            (
                r#"[{"name": "a", "InterfaceRequest": "eth1"}]"#,
                &[("a", None, Some("eth1"))],
            ),
            // Only the last mac and ips are checked, as decoded.
            (
                r#"[{"name": "a", "mac": "x", "mac": "02:00:00:00:00:01"}]"#,
                &[("a", None, None)],
            ),
            (
                r#"[{"name": "a", "ips": ["x"], "IPS": ["10.0.0.1"]}]"#,
                &[("a", None, None)],
            ),
            (
                r#"[{"name": "a", "mac": null, "ips": null, "cni-args": null}]"#,
                &[("a", None, None)],
            ),
            // Keys naming no field are ignored, whatever their case or type.
            (
                r#"[{"name": "a", "Interfaces": 1, "nameSpace2": []}]"#,
                &[("a", None, None)],
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let got: Vec<_> = parsed
                .selections()
                .iter()
                .map(|s| {
                    (
                        s.name.as_str(),
                        s.namespace.as_deref(),
                        s.interface.as_deref(),
                    )
                })
                .collect();
            assert_eq!(got, *expected, "{text:?}");
        }
    }

    /// What Multus refuses, or lets through to a pod that then fails, stays refused.
    #[test]
    fn refuses_what_multus_refuses() {
        for (text, message) in [
            // Go reports a member of the wrong type even when a later one is right.
            (
                r#"[{"name": 1, "name": "a"}]"#,
                r#"JSON element 1: "name" is not a string"#,
            ),
            (
                r#"[{"Name": 1}]"#,
                r#"JSON element 1: "name" is not a string"#,
            ),
            (
                r#"[{"name": "a", "Interface": 1}]"#,
                r#"JSON element 1: "interface" is not a string"#,
            ),
            (
                r#"[{"name": "a", "interfaceRequest": 1}]"#,
                r#"JSON element 1: "interfaceRequest" is not a string"#,
            ),
            (
                r#"[{"name": "a", "IPS": "10.0.0.1"}]"#,
                r#"JSON element 1: "ips" is not a list of strings"#,
            ),
            (
                r#"[{"name": "a", "Mac": "x"}]"#,
                r#"JSON element 1: "mac" "x" is not a MAC address (6, 8 or 20 bytes as xx:xx:..., xx-xx-... or xxxx.xxxx...)"#,
            ),
            (
                r#"[{"name": "a", "default-route": ["x"], "default-route": null}]"#,
                r#"JSON element 1: "default-route" "x" is not an IP address"#,
            ),
            (
                r#"[{"name": "a", "Bandwidth": []}]"#,
                r#"JSON element 1: "bandwidth" is not an object"#,
            ),
            (
                r#"[{"name": null}]"#,
                r#"JSON element 1: "name" is not a string"#,
            ),
            // An interfaceRequest is an interface name like any other.
            (
                r#"[{"name": "a", "interfaceRequest": "eth 1"}]"#,
                r#"JSON element 1: interface name "eth 1" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
            // Names the kernel refuses.
            (
                "a@eth:1",
                r#"item 1 "a@eth:1": interface name "eth:1" is not valid: the kernel refuses ':' in it"#,
            ),
            (
                "a@eth\u{a0}1",
                "item 1 \"a@eth\\u{a0}1\": interface name \"eth\\u{a0}1\" is not valid: the kernel refuses '\\u{a0}' in it",
            ),
            (
                "a@\u{e0}",
                "item 1 \"a@\u{e0}\": interface name \"\u{e0}\" is not valid: the kernel refuses '\u{e0}' in it",
            ),
            (
                "a@eth\u{b}1",
                "item 1 \"a@eth\\u{b}1\": interface name \"eth\\u{b}1\" is not valid (1 to 15 bytes, no \"/\" or whitespace, not \".\" or \"..\")",
            ),
            // An empty name: Multus's parser lets it through, and then finds no such network.
            (
                "ns/",
                r#"item 1 "ns/": network name "" is not a DNS-1123 label"#,
            ),
            (
                " / @ ",
                r#"item 1 "/ @": network name "" is not a DNS-1123 label"#,
            ),
            // Spaces inside a part are not trimmed.
            (
                "n s/a",
                r#"item 1 "n s/a": namespace "n s" is not a DNS-1123 label"#,
            ),
        ] {
            match Networks::parse(text) {
                Ok(n) => panic!("{text:?} parsed as {:?}", n.selections()),
                Err(e) => assert_eq!(e.to_string(), message, "{text:?}"),
            }
        }
    }

    #[test]
    fn error_variants() {
        assert_eq!(
            Networks::parse("a,b@c@d").err(),
            Some(NetworksError::Item {
                index: 2,
                item: "b@c@d".into(),
                problem: ItemProblem::TooManyAts
            })
        );
        assert_eq!(
            Networks::parse(r#"[{}]"#).err(),
            Some(NetworksError::Element {
                index: 1,
                problem: ItemProblem::MissingName
            })
        );
        assert!(matches!(
            Networks::parse("[{"),
            Err(NetworksError::Syntax(_))
        ));
        assert!(matches!(
            Networks::parse("{}"),
            Err(NetworksError::NotList(_))
        ));
    }
}
