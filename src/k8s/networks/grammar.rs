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
use crate::yaml::describe_json;

/// Longest DNS-1123 label.
const MAX_LABEL_LEN: usize = 63;
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
        selections.push(Selection {
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            interface: interface.map(str::to_owned),
            span: start..start + item.len(),
            plain: namespace.is_none() && interface.is_none(),
            bare: namespace.is_none(),
            slot: Slot::Comma,
        });
    }
    Ok(selections)
}

/// Splits a trimmed comma-form item `[ns/]name[@interface]` and validates its parts.
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
        Some((target, interface)) => (target, Some(interface)),
        None => (item, None),
    };
    let (namespace, name) = match target.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, target),
    };
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
    // As in a JSON object read by Multus, the last of duplicate keys counts.
    let last = |key: &str| members.iter().rposition(|(k, _)| k == key);
    let value = |key: &str| {
        last(key)
            .map(|i| serde_json::from_str::<Value>(members[i].1.get()).map_err(syntax))
            .transpose()
    };
    let fail = move |problem| NetworksError::Element { index, problem };
    let name = match value("name")? {
        Some(Value::String(name)) => name,
        Some(_) => return Err(fail(ItemProblem::NotString("name"))),
        None => return Err(fail(ItemProblem::MissingName)),
    };
    let namespace = optional_string(value("namespace")?, "namespace").map_err(fail)?;
    let interface = optional_string(value("interface")?, "interface").map_err(fail)?;
    validate(&name, namespace.as_deref(), interface.as_deref()).map_err(fail)?;
    for key in ["interfaceRequest", "deviceID", "ipam-claim-reference"] {
        if value(key)?.is_some_and(|v| !(v.is_null() || v.is_string())) {
            return Err(fail(ItemProblem::NotString(key)));
        }
    }
    for key in ["mac", "infiniband-guid"] {
        if let Some(v) = value(key)? {
            hardware_address(key, &v).map_err(fail)?;
        }
    }
    if let Some(v) = value("ips")? {
        ip_list("ips", &v, true).map_err(fail)?;
    }
    if let Some(v) = value("default-route")? {
        ip_list("default-route", &v, false).map_err(fail)?;
    }
    for (key, list) in [
        ("portMappings", true),
        ("bandwidth", false),
        ("cni-args", false),
    ] {
        let fits = match value(key)? {
            None | Some(Value::Null) => true,
            Some(Value::Array(_)) => list,
            Some(Value::Object(_)) => !list,
            Some(_) => false,
        };
        if !fits {
            return Err(fail(ItemProblem::NotOfType {
                key,
                expected: if list { "a list" } else { "an object" },
            }));
        }
    }
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

/// A `mac` or `infiniband-guid` member: a string that is empty or an address
/// Go's `net.ParseMAC` reads, as Multus checks it.
fn hardware_address(key: &'static str, value: &Value) -> Result<(), ItemProblem> {
    match value {
        Value::Null => Ok(()),
        Value::String(s) if s.is_empty() || is_hardware_address(s) => Ok(()),
        Value::String(s) => Err(ItemProblem::BadValue {
            key,
            value: s.clone(),
            expected: "a MAC address (6, 8 or 20 bytes as xx:xx:..., xx-xx-... or xxxx.xxxx...)",
        }),
        _ => Err(ItemProblem::NotString(key)),
    }
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

/// The string `value` of `key`; absent, `null` and `""` all give `None`.
fn optional_string(value: Option<Value>, key: &'static str) -> Result<Option<String>, ItemProblem> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ItemProblem::NotString(key)),
    }
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
    if let Some(interface) = interface.filter(|i| !is_interface_name(i)) {
        return Err(ItemProblem::Interface(interface.to_owned()));
    }
    Ok(())
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 characters.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    (1..=MAX_LABEL_LEN).contains(&bytes.len())
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// 1 to 15 bytes, no `/` or whitespace, not `.` or `..`.
fn is_interface_name(s: &str) -> bool {
    (1..=MAX_INTERFACE_LEN).contains(&s.len())
        && s != "."
        && s != ".."
        && !s.contains(|c: char| c == '/' || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::networks::Networks;

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
                "a@",
                r#"item 1 "a@": interface name "" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
            ),
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
            ("/a", r#"item 1 "/a": namespace "" is not a DNS-1123 label"#),
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
