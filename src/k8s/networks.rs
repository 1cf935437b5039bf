//! The Multus pod annotation `k8s.v1.cni.cncf.io/networks`.
//!
//! [`Networks::parse`] reads both forms Multus accepts (comma list and JSON list) and remembers
//! where each selection sits in the text, so [`Networks::with_appended`],
//! [`Networks::without_first`] and [`Networks::with_interfaces`] edit the user's text in place
//! instead of re-serialising it.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::error::Category;
use serde_json::value::RawValue;

use crate::yaml::describe_json;

/// The Multus networks annotation key.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// The pod annotation selecting the cluster default network.
pub const DEFAULT_NETWORK_ANNOTATION: &str = "v1.multus-cni.io/default-network";

/// Longest DNS-1123 label.
const MAX_LABEL_LEN: usize = 63;
/// Longest interface name the kernel accepts (`IFNAMSIZ - 1` bytes).
pub(crate) const MAX_INTERFACE_LEN: usize = 15;

/// The form of a networks annotation, decided the way Multus decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Empty or whitespace-only: no selections.
    Empty,
    /// Comma-separated items such as `a, other/b@net2`.
    Comma,
    /// A JSON list of objects such as `[{"name": "a"}]`.
    Json,
}

/// One network selection of the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Name of the NetworkAttachmentDefinition.
    pub name: String,
    /// Namespace of the NetworkAttachmentDefinition; `None` means the pod's namespace.
    pub namespace: Option<String>,
    /// Requested interface name; `None` lets Multus pick one.
    pub interface: Option<String>,
    /// Byte span of the item (comma form) or element (JSON form) in the annotation text.
    span: Range<usize>,
    /// Whether the item is exactly the name (JSON: an object whose only key is `name`).
    plain: bool,
    /// Whether the item has no namespace and, in JSON form, no keys but `name` and `interface`.
    bare: bool,
    /// Where an interface name goes in the text.
    slot: Slot,
}

/// Where [`Networks::with_interfaces`] writes a selection's interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// Comma form: `@interface` after the item.
    Comma,
    /// JSON form: the span of the value of the element's `interface` member, which is replaced.
    Value(Range<usize>),
    /// JSON form without an `interface` member: a new member goes after the last one, whose
    /// value spans `last`; `previous` is where the value of the member before it ends.
    After {
        previous: Option<usize>,
        last: Range<usize>,
    },
}

impl Selection {
    /// The selection's namespace, or `pod_ns` when it has none.
    pub fn namespace_or<'s>(&'s self, pod_ns: &'s str) -> &'s str {
        self.namespace.as_deref().unwrap_or(pod_ns)
    }

    /// Whether this selection refers to network `name` in `pod_namespace`.
    pub fn refers_to(&self, name: &str, pod_namespace: &str) -> bool {
        self.name == name && self.namespace_or(pod_namespace) == pod_namespace
    }

    /// Whether the selection is exactly its name: no namespace, no interface, no other keys.
    pub fn is_plain(&self) -> bool {
        self.plain
    }

    /// Whether the selection is exactly `name@interface`: no namespace and, in JSON form, an
    /// object whose only keys are `name` and `interface`.
    pub fn is_exactly(&self, name: &str, interface: &str) -> bool {
        self.bare && self.name == name && self.interface.as_deref() == Some(interface)
    }
}

/// The comma form of the selection, `[namespace/]name[@interface]`.
impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)?;
        if let Some(interface) = &self.interface {
            write!(f, "@{interface}")?;
        }
        Ok(())
    }
}

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

/// A parsed networks annotation that remembers its text, so edits keep the user's form.
///
/// Edits are textual: everything outside the edited item is kept byte for byte. For a text
/// without a plain selection of `n`, `parse(with_appended(n)).without_plain(n)` gives the text
/// back exactly.
#[derive(Debug, Clone)]
pub struct Networks<'a> {
    text: &'a str,
    form: Form,
    selections: Vec<Selection>,
}

impl<'a> Networks<'a> {
    /// Parses an annotation value; any text Multus would reject is an error.
    ///
    /// In JSON form, a `namespace` or `interface` that is `null` or `""` counts as absent,
    /// as it does for Multus.
    pub fn parse(text: &'a str) -> Result<Self, NetworksError> {
        let (form, selections) = if text.trim().is_empty() {
            (Form::Empty, Vec::new())
        } else if text.contains(['[', '{', '"']) {
            (Form::Json, parse_json(text)?)
        } else {
            (Form::Comma, parse_comma(text)?)
        };
        Ok(Self {
            text,
            form,
            selections,
        })
    }

    /// The annotation text as parsed.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The form of the annotation.
    pub fn form(&self) -> Form {
        self.form
    }

    /// The selections in order; a network listed twice appears twice.
    pub fn selections(&self) -> &[Selection] {
        &self.selections
    }

    /// Whether a selection refers to network `name` in `pod_namespace` (selection namespace absent or equal).
    pub fn references(&self, name: &str, pod_namespace: &str) -> bool {
        self.selections
            .iter()
            .any(|s| s.refers_to(name, pod_namespace))
    }

    /// The annotation text with a plain selection of `name` appended, in the annotation's own form and spacing.
    ///
    /// `name` should be a DNS-1123 label; it is inserted right after the last item, so trailing
    /// text is kept. Empty form gives `name` inside the text's whitespace. Comma form separates with `, ` if any existing
    /// separator has whitespace after its comma and with `,` otherwise (so a single item `a`
    /// gives `a,name`). JSON form copies the separator between the last two elements; with one
    /// element it continues a multi-line list on a new line with the same indentation and
    /// otherwise uses `, ` if the text uses `, ` or `: ` anywhere. The new element is
    /// `{"name": "…"}` if the text uses `: ` (or the list is empty) and `{"name":"…"}` otherwise.
    pub fn with_appended(&self, name: &str) -> String {
        let text = self.text;
        match (self.form, self.selections.as_slice()) {
            (Form::Empty, _) | (Form::Comma, []) => {
                // Whitespace around nothing stays around the new item, so removal restores it.
                let at = text.len() - text.trim_start().len();
                splice(text, at..at, name)
            }
            (Form::Comma, [.., last]) => {
                let spaced = self.separators().any(|sep| {
                    sep.split_once(',')
                        .is_some_and(|(_, after)| after.starts_with(char::is_whitespace))
                });
                let sep = if spaced { ", " } else { "," };
                splice(text, last.span.end..last.span.end, &format!("{sep}{name}"))
            }
            (Form::Json, []) => {
                let at = self.after_open_bracket();
                splice(text, at..at, &json_element(name, true))
            }
            (Form::Json, [only]) => {
                let indent = &text[self.after_open_bracket()..only.span.start];
                let sep = match indent.rfind('\n') {
                    Some(nl) if indent[..nl].ends_with('\r') => format!(",{}", &indent[nl - 1..]),
                    Some(nl) => format!(",{}", &indent[nl..]),
                    None if text.contains(", ") || text.contains(": ") => ", ".to_owned(),
                    None => ",".to_owned(),
                };
                let element = json_element(name, text.contains(": "));
                let end = only.span.end;
                splice(text, end..end, &format!("{sep}{element}"))
            }
            (Form::Json, [.., prev, last]) => {
                let sep = &text[prev.span.end..last.span.start];
                let element = json_element(name, text.contains(": "));
                let end = last.span.end;
                splice(text, end..end, &format!("{sep}{element}"))
            }
        }
    }

    /// The annotation text without the first *plain* selection of `name` (a selection that is exactly `name`: no namespace, no interface, and in JSON form an object whose only key is "name"), or None if there is none; see [`Networks::without_first`].
    pub fn without_plain(&self, name: &str) -> Option<String> {
        self.without_first(|s| s.plain && s.name == name)
    }

    /// The annotation text without the first selection that `matches`, or None if none does.
    /// Other items keep their exact text.
    ///
    /// One adjacent separator goes with the item: the preceding one, or the following one for
    /// the first item. Removing the only item leaves the text around it in comma form and, in JSON
    /// form, removes the element and the whitespace before it (`[{"name": "a"}]` gives `[]`).
    pub fn without_first(&self, matches: impl Fn(&Selection) -> bool) -> Option<String> {
        let sels = &self.selections;
        let i = sels.iter().position(matches)?;
        let this = &sels[i];
        let cut = match (i.checked_sub(1).and_then(|p| sels.get(p)), sels.get(i + 1)) {
            (Some(prev), _) => prev.span.end..this.span.end,
            (None, Some(next)) => this.span.start..next.span.start,
            (None, None) if self.form == Form::Json => self.after_open_bracket()..this.span.end,
            (None, None) => this.span.clone(),
        };
        Some(splice(self.text, cut, ""))
    }

    /// The annotation text with an interface name for each selection that has none and for
    /// which `name_for` gives one; `None` when nothing changes. The names should be valid
    /// interface names.
    ///
    /// Comma form: `ns/name` becomes `ns/name@if`. JSON form: an `"interface"` that is `null` or
    /// `""` gets the name as its value; an element without `"interface"` gets it as a new last
    /// member, with the member separator and colon spacing the element already uses (a
    /// one-member element on several lines continues on a new line with the same indentation).
    /// Everything else is kept byte for byte.
    pub fn with_interfaces(
        &self,
        mut name_for: impl FnMut(&Selection) -> Option<String>,
    ) -> Option<String> {
        let mut out = String::new();
        let mut copied = 0;
        let mut changed = false;
        for selection in self.selections.iter().filter(|s| s.interface.is_none()) {
            let Some(interface) = name_for(selection) else {
                continue;
            };
            let (range, insert) = self.interface_edit(selection, &interface);
            out.push_str(&self.text[copied..range.start]);
            out.push_str(&insert);
            copied = range.end;
            changed = true;
        }
        out.push_str(&self.text[copied..]);
        changed.then_some(out)
    }

    /// The span to replace and the text to put there to give `selection` its `interface`.
    fn interface_edit(&self, selection: &Selection, interface: &str) -> (Range<usize>, String) {
        let text = self.text;
        match &selection.slot {
            Slot::Comma => {
                let end = selection.span.end;
                (end..end, format!("@{interface}"))
            }
            Slot::Value(value) => (value.clone(), Value::from(interface).to_string()),
            Slot::After { previous, last } => {
                let key = match previous {
                    Some(end) => {
                        let after_comma = skip_json_space(text, *end) + 1;
                        skip_json_space(text, after_comma)
                    }
                    None => skip_json_space(text, selection.span.start + 1),
                };
                let before_colon = text[..last.start].trim_end_matches(JSON_SPACE);
                let key_end = before_colon[..before_colon.len() - 1]
                    .trim_end_matches(JSON_SPACE)
                    .len();
                let colon = &text[key_end..last.start];
                let sep = match previous {
                    Some(end) => text[*end..key].to_owned(),
                    None => {
                        let indent = &text[selection.span.start + 1..key];
                        match indent.rfind('\n') {
                            Some(nl) if indent[..nl].ends_with('\r') => {
                                format!(",{}", &indent[nl - 1..])
                            }
                            Some(nl) => format!(",{}", &indent[nl..]),
                            None if colon.contains(' ') || text.contains(", ") => ", ".to_owned(),
                            None => ",".to_owned(),
                        }
                    }
                };
                let member = format!("{sep}\"interface\"{colon}{}", Value::from(interface));
                (last.end..last.end, member)
            }
        }
    }

    /// The texts between consecutive items.
    fn separators(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.selections
            .windows(2)
            .map(|w| &self.text[w[0].span.end..w[1].span.start])
    }

    /// Byte offset just after the `[` that opens a JSON list.
    fn after_open_bracket(&self) -> usize {
        self.text.find('[').map_or(0, |i| i + 1)
    }
}

/// `text` with `range` replaced by `insert`.
fn splice(text: &str, range: Range<usize>, insert: &str) -> String {
    let mut out = String::with_capacity(text.len() + insert.len());
    out.push_str(&text[..range.start]);
    out.push_str(insert);
    out.push_str(&text[range.end..]);
    out
}

/// The whitespace JSON allows between tokens.
const JSON_SPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// The offset of the first non-whitespace byte of `text` at or after `at`.
fn skip_json_space(text: &str, at: usize) -> usize {
    text.len() - text[at..].trim_start_matches(JSON_SPACE).len()
}

/// The byte span of `part`, a slice of `text`, in `text`.
fn span_in(text: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let span = start..start.saturating_add(part.len());
    (text.get(span.clone()) == Some(part)).then_some(span)
}

/// A JSON element selecting `name`, with or without a space after the colon.
fn json_element(name: &str, colon_space: bool) -> String {
    let colon = if colon_space { ": " } else { ":" };
    format!("{{\"name\"{colon}{}}}", Value::from(name))
}

fn parse_comma(text: &str) -> Result<Vec<Selection>, NetworksError> {
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

fn parse_json(text: &str) -> Result<Vec<Selection>, NetworksError> {
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

    type Triple = (&'static str, Option<&'static str>, Option<&'static str>);

    fn triples(networks: &Networks<'_>) -> Vec<(String, Option<String>, Option<String>)> {
        networks
            .selections()
            .iter()
            .map(|s| (s.name.clone(), s.namespace.clone(), s.interface.clone()))
            .collect()
    }

    fn owned(expected: &[Triple]) -> Vec<(String, Option<String>, Option<String>)> {
        expected
            .iter()
            .map(|(n, ns, i)| (n.to_string(), ns.map(str::to_owned), i.map(str::to_owned)))
            .collect()
    }

    const LONG_LABEL: &str = "a23456789012345678901234567890123456789012345678901234567890123";

    /// Valid texts, their form and selections.
    fn valid_cases() -> Vec<(&'static str, Form, Vec<Triple>)> {
        use Form::*;
        vec![
            ("", Empty, vec![]),
            ("   ", Empty, vec![]),
            ("\t\n", Empty, vec![]),
            ("a", Comma, vec![("a", None, None)]),
            ("  a  ", Comma, vec![("a", None, None)]),
            ("ns/net@if", Comma, vec![("net", Some("ns"), Some("if"))]),
            ("net@eth1", Comma, vec![("net", None, Some("eth1"))]),
            (
                "a, other/b@net2",
                Comma,
                vec![("a", None, None), ("b", Some("other"), Some("net2"))],
            ),
            (
                " a ,b,\tc ",
                Comma,
                vec![("a", None, None), ("b", None, None), ("c", None, None)],
            ),
            ("a,a", Comma, vec![("a", None, None), ("a", None, None)]),
            (
                "a@net1, a@net2",
                Comma,
                vec![("a", None, Some("net1")), ("a", None, Some("net2"))],
            ),
            (
                "x/linkerd-cni, linkerd-cni@e",
                Comma,
                vec![
                    ("linkerd-cni", Some("x"), None),
                    ("linkerd-cni", None, Some("e")),
                ],
            ),
            (LONG_LABEL, Comma, vec![(LONG_LABEL, None, None)]),
            (
                "0/1@abcdefghijklmno",
                Comma,
                vec![("1", Some("0"), Some("abcdefghijklmno"))],
            ),
            ("[]", Json, vec![]),
            (" [ ] \n", Json, vec![]),
            ("[{\"name\": \"a\"}]", Json, vec![("a", None, None)]),
            ("[{\"name\":\"a\"}]", Json, vec![("a", None, None)]),
            (
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}]"#,
                Json,
                vec![("a", None, None), ("b", Some("other"), Some("net2"))],
            ),
            (
                r#"[{"name":"a","namespace":"x"},{"name":"a","namespace":"x"}]"#,
                Json,
                vec![("a", Some("x"), None), ("a", Some("x"), None)],
            ),
            (
                r#"[{"name": "macvlan", "ips": ["10.1.1.5/24"], "mac": "c2:b0:57:49:47:f1", "cni-args": {"a": {"b": [1, 2]}}, "default-route": ["10.1.1.1"], "portMappings": [{"hostPort": 80}], "bandwidth": {"ingressRate": 1}, "x-unknown": null}]"#,
                Json,
                vec![("macvlan", None, None)],
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\",\n    \"interface\": \"net1\"\n  }\n]\n",
                Json,
                vec![("a", None, None), ("b", None, Some("net1"))],
            ),
            ("[\n  {\"name\": \"a\"}\n]", Json, vec![("a", None, None)]),
            (
                "[\r\n  {\"name\": \"a\"}\r\n]",
                Json,
                vec![("a", None, None)],
            ),
            ("  [ {\"name\":\"a\"} ]  ", Json, vec![("a", None, None)]),
            (
                r#"[{"name": "a", "namespace": "", "interface": null}]"#,
                Json,
                vec![("a", None, None)],
            ),
            (r#"[{"name": "a\u002db"}]"#, Json, vec![("a-b", None, None)]),
        ]
    }

    #[test]
    fn parses_valid_texts() {
        for (text, form, expected) in valid_cases() {
            let parsed = Networks::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(parsed.form(), form, "{text:?}");
            assert_eq!(triples(&parsed), owned(&expected), "{text:?}");
            assert_eq!(parsed.text(), text);
        }
    }

    #[test]
    fn plainness() {
        let cases: &[(&str, &[bool])] = &[
            ("a, ns/a, a@e, ns/a@e", &[true, false, false, false]),
            (
                r#"[{"name":"a"},{"name":"a","namespace":"n"},{"name":"a","ips":[]},{"name":"a","interface":""}]"#,
                &[true, false, false, false],
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let plain: Vec<bool> = parsed
                .selections()
                .iter()
                .map(Selection::is_plain)
                .collect();
            assert_eq!(&plain, expected, "{text:?}");
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

    #[test]
    fn appends_in_the_users_form() {
        let cases = [
            ("", "linkerd-cni"),
            ("  ", "  linkerd-cni"),
            ("a", "a,linkerd-cni"),
            ("a  ", "a,linkerd-cni  "),
            ("a,b", "a,b,linkerd-cni"),
            ("a, other/b@net2", "a, other/b@net2, linkerd-cni"),
            ("a ,b", "a ,b,linkerd-cni"),
            ("a,b,\tc", "a,b,\tc, linkerd-cni"),
            ("linkerd-cni@e", "linkerd-cni@e,linkerd-cni"),
            ("[]", r#"[{"name": "linkerd-cni"}]"#),
            ("[ ]\n", "[{\"name\": \"linkerd-cni\"} ]\n"),
            (
                r#"[{"name":"a"}]"#,
                r#"[{"name":"a"},{"name":"linkerd-cni"}]"#,
            ),
            (
                r#"[{"name": "a"}]"#,
                r#"[{"name": "a"}, {"name": "linkerd-cni"}]"#,
            ),
            (
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}]"#,
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}, {"name": "linkerd-cni"}]"#,
            ),
            (
                r#"[{"name":"a"} , {"name":"b"}] "#,
                r#"[{"name":"a"} , {"name":"b"} , {"name":"linkerd-cni"}] "#,
            ),
            (
                "[\n  {\"name\": \"a\"}\n]\n",
                "[\n  {\"name\": \"a\"},\n  {\"name\": \"linkerd-cni\"}\n]\n",
            ),
            (
                "[\r\n    {\"name\":\"a\"}\r\n]",
                "[\r\n    {\"name\":\"a\"},\r\n    {\"name\":\"linkerd-cni\"}\r\n]",
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\"\n  }\n]",
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\"\n  },\n  {\"name\": \"linkerd-cni\"}\n]",
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let appended = parsed.with_appended("linkerd-cni");
            assert_eq!(appended, expected, "{text:?}");
            let reparsed = Networks::parse(&appended).expect("appended text parses");
            assert!(reparsed.references("linkerd-cni", "any"), "{appended:?}");
        }
    }

    #[test]
    fn removes_the_first_plain_selection() {
        let cases = [
            ("", None),
            ("a, b", None),
            ("ns/linkerd-cni, linkerd-cni@eth1", None),
            ("linkerd-cni", Some("")),
            ("  linkerd-cni  ", Some("    ")),
            ("a, linkerd-cni, b", Some("a, b")),
            ("linkerd-cni, a", Some("a")),
            ("a,linkerd-cni", Some("a")),
            ("a , linkerd-cni , b ", Some("a , b ")),
            ("linkerd-cni, linkerd-cni", Some("linkerd-cni")),
            ("ns/linkerd-cni, linkerd-cni", Some("ns/linkerd-cni")),
            ("[]", None),
            (r#"[{"name": "linkerd-cni", "ips": []}]"#, None),
            (r#"[{"name": "linkerd-cni", "interface": "e"}]"#, None),
            (
                r#"[{"name": "a"}, {"name": "linkerd-cni"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (r#"[{"name": "linkerd-cni"}]"#, Some("[]")),
            (r#" [ {"name": "linkerd-cni"} ] "#, Some(" [ ] ")),
            (
                r#"[{"name": "linkerd-cni"}, {"name": "a"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (
                r#"[{"name":"a"},{"name":"linkerd-cni"},{"name":"b","mac":"02:00:00:00:00:01"}]"#,
                Some(r#"[{"name":"a"},{"name":"b","mac":"02:00:00:00:00:01"}]"#),
            ),
            (
                "[\n  {\"name\": \"linkerd-cni\"},\n  {\"name\": \"a\"}\n]",
                Some("[\n  {\"name\": \"a\"}\n]"),
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\"name\": \"linkerd-cni\"}\n]",
                Some("[\n  {\"name\": \"a\"}\n]"),
            ),
            ("[\n  {\"name\": \"linkerd-cni\"}\n]\n", Some("[\n]\n")),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let removed = parsed.without_plain("linkerd-cni");
            assert_eq!(removed.as_deref(), expected, "{text:?}");
            if let Some(removed) = removed {
                Networks::parse(&removed).expect("result parses");
            }
        }
    }

    /// `if-<name>` for every selection, except those of network `skip`.
    fn name_all_but(skip: &str) -> impl Fn(&Selection) -> Option<String> + '_ {
        move |s| (s.name != skip).then(|| format!("if-{}", s.name))
    }

    #[test]
    fn names_interfaces_in_the_users_form() {
        let cases = [
            ("", None),
            ("  ", None),
            ("[]", None),
            ("ns/net@if", None),
            ("a@e1, ns/b@e2", None),
            ("skip", None),
            ("a", Some("a@if-a")),
            ("ns/a", Some("ns/a@if-a")),
            (" a ,ns/b@e2,\tc  ", Some(" a@if-a ,ns/b@e2,\tc@if-c  ")),
            ("a, skip, b", Some("a@if-a, skip, b@if-b")),
            ("a,a", Some("a@if-a,a@if-a")),
            (
                r#"[{"name": "a"}]"#,
                Some(r#"[{"name": "a", "interface": "if-a"}]"#),
            ),
            (
                r#"[{"name":"a"}]"#,
                Some(r#"[{"name":"a","interface":"if-a"}]"#),
            ),
            (
                r#"[ { "name" : "a" } ]"#,
                Some(r#"[ { "name" : "a", "interface" : "if-a" } ]"#),
            ),
            (
                r#"[{"name":"a","ips":["10.0.0.1/24"],"x-unknown":{"k":[1,{}]}}]"#,
                Some(
                    r#"[{"name":"a","ips":["10.0.0.1/24"],"x-unknown":{"k":[1,{}]},"interface":"if-a"}]"#,
                ),
            ),
            (
                r#"[{"name": "a", "interface": null, "mac": "c2:b0:57:49:47:f1"}]"#,
                Some(r#"[{"name": "a", "interface": "if-a", "mac": "c2:b0:57:49:47:f1"}]"#),
            ),
            (
                r#"[{"interface":"", "name":"a"}]"#,
                Some(r#"[{"interface":"if-a", "name":"a"}]"#),
            ),
            (
                r#"[{"name":"a","interf\u0061ce":null}]"#,
                Some(r#"[{"name":"a","interf\u0061ce":"if-a"}]"#),
            ),
            (
                r#"[{"name":"a","interface":"e1","interface":null}]"#,
                Some(r#"[{"name":"a","interface":"e1","interface":"if-a"}]"#),
            ),
            (
                r#"[{"name": "a", "interface": "e1"}, {"name": "b", "namespace": "n"}, {"name": "skip"}]"#,
                Some(
                    r#"[{"name": "a", "interface": "e1"}, {"name": "b", "namespace": "n", "interface": "if-b"}, {"name": "skip"}]"#,
                ),
            ),
            (
                "[\n  {\n    \"name\": \"a\"\n  }\n]\n",
                Some("[\n  {\n    \"name\": \"a\",\n    \"interface\": \"if-a\"\n  }\n]\n"),
            ),
            (
                "[\r\n  {\r\n    \"name\":\"a\"\r\n  }\r\n]",
                Some("[\r\n  {\r\n    \"name\":\"a\",\r\n    \"interface\":\"if-a\"\r\n  }\r\n]"),
            ),
            (
                "[\n  {\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]}\n  }\n]",
                Some(
                    "[\n  {\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]},\n    \"interface\": \"if-c\"\n  }\n]",
                ),
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let named = parsed.with_interfaces(name_all_but("skip"));
            assert_eq!(named.as_deref(), expected, "{text:?}");
            let Some(named) = named else { continue };
            let reparsed = Networks::parse(&named).unwrap_or_else(|e| panic!("{named:?}: {e}"));
            let want: Vec<_> = triples(&parsed)
                .into_iter()
                .map(|(name, ns, interface)| {
                    let interface =
                        interface.or_else(|| (name != "skip").then(|| format!("if-{name}")));
                    (name, ns, interface)
                })
                .collect();
            assert_eq!(triples(&reparsed), want, "{named:?}");
            assert_eq!(reparsed.with_interfaces(name_all_but("skip")), None);
        }
    }

    #[test]
    fn named_interfaces_survive_round_trips() {
        for (text, _, _) in valid_cases() {
            let parsed = Networks::parse(text).expect("valid");
            let named = parsed
                .with_interfaces(|_| Some("if".to_owned()))
                .unwrap_or_else(|| text.to_owned());
            let reparsed = Networks::parse(&named).unwrap_or_else(|e| panic!("{named:?}: {e}"));
            assert!(reparsed.selections().iter().all(|s| s.interface.is_some()));
            let appended = reparsed.with_appended("linkerd-cni");
            let back = Networks::parse(&appended)
                .expect("appended text parses")
                .without_plain("linkerd-cni");
            assert_eq!(back.as_deref(), Some(named.as_str()), "{text:?}");
        }
    }

    #[test]
    fn exact_selections() {
        let cases = [
            ("linkerd-cni@net6a72ae7dcd39", true),
            ("  linkerd-cni@net6a72ae7dcd39 ", true),
            ("linkerd-cni", false),
            ("linkerd-cni@eth1", false),
            ("demo/linkerd-cni@net6a72ae7dcd39", false),
            ("other@net6a72ae7dcd39", false),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39"}]"#,
                true,
            ),
            (
                r#"[{"interface":"net6a72ae7dcd39","name":"linkerd-cni"}]"#,
                true,
            ),
            (r#"[{"name": "linkerd-cni"}]"#, false),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "namespace": ""}]"#,
                false,
            ),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "ips": []}]"#,
                false,
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let [selection] = parsed.selections() else {
                panic!("{text:?}: not one selection");
            };
            assert_eq!(
                selection.is_exactly("linkerd-cni", "net6a72ae7dcd39"),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn removes_the_first_matching_selection() {
        let named = |s: &Selection| s.is_exactly("linkerd-cni", "net6a72ae7dcd39");
        let cases = [
            ("linkerd-cni", None),
            ("linkerd-cni@eth1, a", None),
            ("linkerd-cni@net6a72ae7dcd39", Some("")),
            ("a, linkerd-cni@net6a72ae7dcd39", Some("a")),
            ("linkerd-cni@net6a72ae7dcd39 , a@e", Some("a@e")),
            (
                r#"[{"name": "a"}, {"name": "linkerd-cni", "interface": "net6a72ae7dcd39"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (
                r#"[{"name":"linkerd-cni","interface":"net6a72ae7dcd39"}]"#,
                Some("[]"),
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            assert_eq!(parsed.without_first(named).as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn selections_display_in_comma_form() {
        let parsed = Networks::parse(
            r#"[{"name": "a"}, {"name": "b", "namespace": "n", "interface": "e1", "ips": []}]"#,
        )
        .expect("valid");
        let shown: Vec<String> = parsed.selections().iter().map(|s| s.to_string()).collect();
        assert_eq!(shown, ["a", "n/b@e1"]);
    }

    #[test]
    fn references_respect_namespaces() {
        let cases = [
            ("linkerd-cni", "app", true),
            ("app/linkerd-cni", "app", true),
            ("other/linkerd-cni", "app", false),
            ("linkerd-cni@net1", "app", true),
            ("a, b", "app", false),
            ("", "app", false),
            (r#"[{"name": "linkerd-cni"}]"#, "app", true),
            (
                r#"[{"name": "linkerd-cni", "namespace": "app"}]"#,
                "app",
                true,
            ),
            (
                r#"[{"name": "linkerd-cni", "namespace": "x"}]"#,
                "app",
                false,
            ),
            (r#"[{"name": "linkerd-cni", "namespace": ""}]"#, "app", true),
        ];
        for (text, pod_ns, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            assert_eq!(
                parsed.references("linkerd-cni", pod_ns),
                expected,
                "{text:?}"
            );
        }
        let parsed = Networks::parse("a, x/b").expect("valid");
        let namespaces: Vec<&str> = parsed
            .selections()
            .iter()
            .map(|s| s.namespace_or("pod"))
            .collect();
        assert_eq!(namespaces, ["pod", "x"]);
    }

    #[test]
    fn append_then_remove_round_trips() {
        for (text, _, _) in valid_cases() {
            let parsed = Networks::parse(text).expect("valid");
            for name in ["linkerd-cni", "a", "b"] {
                if parsed
                    .selections()
                    .iter()
                    .any(|s| s.is_plain() && s.name == name)
                {
                    continue;
                }
                let appended = parsed.with_appended(name);
                let back = Networks::parse(&appended)
                    .expect("appended text parses")
                    .without_plain(name);
                let expected = text;
                assert_eq!(back.as_deref(), Some(expected), "{text:?} + {name}");
            }
        }
    }

    /// A tiny deterministic generator for the fuzz-ish tests.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }

        fn pick<'t>(&mut self, options: &[&'t str]) -> &'t str {
            options[self.below(options.len())]
        }
    }

    #[test]
    fn arbitrary_text_never_panics() {
        let alphabet: Vec<char> = "abz09-/@,[]{}\" :\n\té\\".chars().collect();
        let mut rng = Lcg(7);
        let mut valid = 0;
        for _ in 0..2000 {
            let len = rng.below(24);
            let text: String = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            if let Ok(parsed) = Networks::parse(&text) {
                valid += 1;
                if let Some(named) = parsed.with_interfaces(|_| Some("if".to_owned())) {
                    Networks::parse(&named)
                        .unwrap_or_else(|e| panic!("{text:?} -> {named:?}: {e}"));
                }
                let appended = parsed.with_appended("linkerd-cni");
                let reparsed = Networks::parse(&appended)
                    .unwrap_or_else(|e| panic!("{text:?} -> {appended:?}: {e}"));
                let removed = reparsed
                    .without_plain("linkerd-cni")
                    .expect("plain selection");
                Networks::parse(&removed).unwrap_or_else(|e| panic!("{removed:?}: {e}"));
            }
        }
        assert!(valid > 50, "only {valid} texts parsed");
    }

    #[test]
    fn arbitrary_valid_text_round_trips() {
        let comma_items = [
            "a",
            "b",
            "ns/a",
            "a@e1",
            "ns/b@e2",
            "linkerd-cni",
            "x/linkerd-cni",
        ];
        let comma_seps = [",", ", ", " , ", ",\t", " ,"];
        let json_items = [
            r#"{"name": "a"}"#,
            r#"{"name":"b","ips":["1.2.3.4/24"]}"#,
            r#"{"name": "linkerd-cni"}"#,
            r#"{"name": "linkerd-cni", "namespace": "x"}"#,
            "{\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]}\n  }",
            r#"{ "interface" : null , "name" : "d" }"#,
            "{\r\n  \"name\": \"e\"\r\n}",
        ];
        let json_seps = [",", ", ", ",\n  ", " ,\n", "\r\n,"];
        let pads = ["", " ", "\n", "  \t"];
        let mut rng = Lcg(42);
        for round in 0..600 {
            let json = round % 2 == 1;
            let (items, seps) = if json {
                (&json_items[..], &json_seps[..])
            } else {
                (&comma_items[..], &comma_seps[..])
            };
            let count = rng.below(5) + usize::from(!json);
            let mut text = String::from(if json { rng.pick(&pads) } else { "" });
            if json {
                text.push('[');
                text.push_str(rng.pick(&pads));
            }
            for i in 0..count {
                if i > 0 {
                    text.push_str(rng.pick(seps));
                }
                text.push_str(rng.pick(items));
            }
            if json {
                text.push_str(rng.pick(&pads));
                text.push(']');
            }
            text.push_str(rng.pick(&pads));

            let parsed = Networks::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(parsed.selections().len(), count, "{text:?}");
            let named = parsed
                .with_interfaces(|_| Some("if".to_owned()))
                .unwrap_or_else(|| text.clone());
            let reparsed =
                Networks::parse(&named).unwrap_or_else(|e| panic!("{text:?} -> {named:?}: {e}"));
            assert_eq!(reparsed.selections().len(), count, "{named:?}");
            assert!(
                reparsed.selections().iter().all(|s| s.interface.is_some()),
                "{named:?}"
            );
            let appended = parsed.with_appended("linkerd-cni");
            let reparsed = Networks::parse(&appended)
                .unwrap_or_else(|e| panic!("{text:?} -> {appended:?}: {e}"));
            assert_eq!(reparsed.selections().len(), count + 1, "{appended:?}");
            let removed = reparsed
                .without_plain("linkerd-cni")
                .expect("plain selection");
            Networks::parse(&removed).unwrap_or_else(|e| panic!("{removed:?}: {e}"));
            if !parsed
                .selections()
                .iter()
                .any(|s| s.is_plain() && s.name == "linkerd-cni")
            {
                assert_eq!(removed, text, "{text:?}");
            }
        }
    }
}
