//! What Multus accepts in a networks annotation: the comma form's items, the
//! JSON form's elements and the members Multus reads into typed fields, and
//! the errors that say what it would refuse.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::error::Category;
use serde_json::value::RawValue;

use super::{MAX_IPS, MAX_SELECTIONS, Selection, Slot};
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
    /// More selections than [`MAX_SELECTIONS`].
    #[error(
        "selects {count} networks; at most {MAX_SELECTIONS} are read (the selections cap): Multus attaches each as an interface of the pod, and SR-IOV and macvlan pods select a handful; select fewer networks, or split the workload"
    )]
    TooManySelections {
        /// How many it selects.
        count: usize,
    },
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
    /// An `ips` listing more than [`MAX_IPS`] addresses.
    #[error(
        "\"ips\" lists {count} addresses; at most {MAX_IPS} are read (the ips cap): an interface has one address per family, a few at most; list fewer"
    )]
    TooManyIps {
        /// How many it lists.
        count: usize,
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

/// Refuses more than [`MAX_SELECTIONS`] selections before any is read.
fn capped(count: usize) -> Result<(), NetworksError> {
    crate::work::count(1);
    match count > MAX_SELECTIONS {
        true => Err(NetworksError::TooManySelections { count }),
        false => Ok(()),
    }
}

pub(super) fn parse_comma(text: &str) -> Result<Vec<Selection>, NetworksError> {
    capped(text.bytes().filter(|&b| b == b',').count() + 1)?;
    let mut selections = Vec::new();
    let mut offset = 0;
    for (i, raw) in text.split(',').enumerate() {
        crate::work::count(1);
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
            ips: Vec::new(),
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
    capped(elements.len())?;
    elements
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            crate::work::count(1);
            json_selection(text, i + 1, raw.get())
        })
        .collect()
}

/// Validates one JSON element, a slice of `text`.
fn json_selection(text: &str, index: usize, element: &str) -> Result<Selection, NetworksError> {
    let span = locate(text, index, element)?;
    if !element.starts_with('{') {
        let value: Value = serde_json::from_str(element).map_err(|e| syntax(index, e))?;
        return Err(NetworksError::NotList(format!(
            "element {index} is {}",
            describe_json(&value)
        )));
    }
    let Members(members) = serde_json::from_str(element).map_err(|e| syntax(index, e))?;
    let fail = move |problem| NetworksError::Element { index, problem };
    let fields = Fields::decode(&members, index)?;
    let string = |field: &str| fields.string(field, index);
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
    let mut ips = Vec::new();
    if let [Some(list), ..] = &fields.typed {
        let count = list.as_array().map_or(0, Vec::len);
        if count > MAX_IPS {
            return Err(fail(ItemProblem::TooManyIps { count }));
        }
        crate::work::count(count);
        ip_list("ips", list, true).map_err(fail)?;
        // Checked above as Multus reads them; ipnet reads the same forms.
        ips = list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.as_str()?.parse().ok())
            .collect();
    }
    Ok(Selection {
        name,
        namespace,
        interface,
        ips,
        span,
        plain: members.iter().all(|(k, _)| k == "name"),
        bare: members.iter().all(|(k, _)| k == "name" || k == "interface"),
        slot: interface_slot(text, index, &members)?,
    })
}

/// The error of JSON element `index` that does not decode.
fn syntax(index: usize, e: serde_json::Error) -> NetworksError {
    NetworksError::Syntax(format!("element {index}: {e}"))
}

/// Where `part` of JSON element `index` is in the text.
fn locate(text: &str, index: usize, part: &str) -> Result<Range<usize>, NetworksError> {
    span_in(text, part).ok_or_else(|| {
        NetworksError::Syntax(format!("element {index} could not be located in the text"))
    })
}

/// The members of an element given to Multus's fields, each field's last.
struct Fields<'a> {
    /// The raw JSON string of each of [`STRING_FIELDS`].
    strings: [Option<&'a str>; STRING_FIELDS.len()],
    /// The value of each of [`TYPED_FIELDS`], its type checked.
    typed: [Option<Value>; TYPED_FIELDS.len()],
}

impl<'a> Fields<'a> {
    /// Go's encoding/json, which Multus reads the list with, gives a member to a
    /// field whose name matches its key exactly or ignoring case; every such
    /// member is decoded (a wrong type anywhere fails), a later one overwrites
    /// an earlier one and `null` leaves a string as it was.
    fn decode(members: &[(String, &'a RawValue)], index: usize) -> Result<Self, NetworksError> {
        let fail = move |problem| NetworksError::Element { index, problem };
        let mut strings: [Option<&str>; STRING_FIELDS.len()] = [None; STRING_FIELDS.len()];
        let mut typed: [Option<Value>; TYPED_FIELDS.len()] = Default::default();
        for (key, raw) in members {
            let raw = raw.get();
            if let Some(i) = STRING_FIELDS.iter().position(|f| names_field(key, f)) {
                match raw.as_bytes().first() {
                    Some(b'"') => strings[i] = Some(raw),
                    _ if raw == "null" => {}
                    _ => return Err(fail(ItemProblem::NotString(STRING_FIELDS[i]))),
                }
            } else if let Some(i) = TYPED_FIELDS.iter().position(|f| names_field(key, f)) {
                let value: Value = serde_json::from_str(raw).map_err(|e| syntax(index, e))?;
                check_type(TYPED_FIELDS[i], &value).map_err(fail)?;
                typed[i] = Some(value);
            }
        }
        Ok(Fields { strings, typed })
    }

    /// The string a member gave `field`, decoded.
    fn string(&self, field: &str, index: usize) -> Result<Option<String>, NetworksError> {
        let i = STRING_FIELDS.iter().position(|f| *f == field).unwrap_or(0);
        self.strings[i]
            .map(|raw| serde_json::from_str::<String>(raw).map_err(|e| syntax(index, e)))
            .transpose()
    }
}

/// Where an interface name goes in JSON element `index`: over the value of
/// its last `interface` member, or after its last member.
fn interface_slot(
    text: &str,
    index: usize,
    members: &[(String, &RawValue)],
) -> Result<Slot, NetworksError> {
    let locate = |raw: &RawValue| locate(text, index, raw.get());
    Ok(
        match members
            .iter()
            .rposition(|(k, _)| names_field(k, "interface"))
        {
            Some(i) => Slot::Value(locate(members[i].1)?),
            None => {
                // `name` is a member, so there is a last one.
                let n = members.len() - 1;
                let previous = match n.checked_sub(1) {
                    Some(p) => Some(locate(members[p].1)?.end),
                    None => None,
                };
                Slot::After {
                    previous,
                    last: locate(members[n].1)?,
                }
            }
        },
    )
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
#[path = "grammar_tests.rs"]
mod tests;
