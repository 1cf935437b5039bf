//! Reading an `admission.k8s.io/v1` AdmissionReview body in one pass, borrowing
//! its strings: the request's identity and what the rules read of the object.
//! The rest of the object (status, managed fields: most of the bytes) is
//! skipped unparsed, and the pod's `spec` is kept as its raw text.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::value::SeqAccessDeserializer;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::k8s::namespace::Lookup;

/// The API version of the reviews this webhook reads and writes.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of review objects.
pub const KIND: &str = "AdmissionReview";

/// A body that is not an AdmissionReview the webhook can read: answered with 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadReview(String);

/// A group, version and kind or resource, as the API server names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersion<'a> {
    /// The API group; empty for the core group.
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    /// The version.
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    /// The resource (`pods`) of a `resource`.
    #[serde(default, borrow)]
    pub resource: Cow<'a, str>,
}

/// The part of an AdmissionRequest the webhook reads, borrowed from the body.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    /// Echoed in the response.
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    /// The resource acted on.
    #[serde(default, borrow)]
    pub resource: GroupVersion<'a>,
    /// A subresource (`status`), if any.
    #[serde(default, borrow)]
    pub sub_resource: Cow<'a, str>,
    /// The object's name; empty for `generateName` creations.
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    /// The object's namespace.
    #[serde(default, borrow)]
    pub namespace: Cow<'a, str>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(default, borrow)]
    pub operation: Cow<'a, str>,
    /// The object as it will be stored, as far as the rules read it.
    #[serde(default, borrow)]
    pub object: Option<Object<'a>>,
    /// Whether the request only simulates the change.
    #[serde(default)]
    pub dry_run: bool,
}

/// What the rules read of the object: its metadata's name, labels and
/// annotations, and its `spec` unparsed (the network-resources rules read it).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Object<'a> {
    /// The metadata.
    #[serde(default, borrow)]
    pub metadata: Option<Metadata<'a>>,
    /// The spec's JSON text.
    #[serde(default, borrow)]
    pub spec: Option<&'a RawValue>,
}

/// The metadata the rules read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata<'a> {
    /// `name`, as JSON text.
    #[serde(default, borrow)]
    pub name: Option<&'a RawValue>,
    /// `generateName`, as JSON text.
    #[serde(default, borrow)]
    pub generate_name: Option<&'a RawValue>,
    /// `labels`.
    #[serde(default, borrow)]
    pub labels: Option<Strings<'a>>,
    /// `annotations`.
    #[serde(default, borrow)]
    pub annotations: Option<Strings<'a>>,
}

impl Object<'_> {
    /// The object as a JSON value: the metadata read, with its name (so that
    /// a patch removing its last annotation leaves `metadata` in place as it
    /// would on the whole pod), and the spec.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        let mut metadata = serde_json::Map::new();
        if let Some(m) = &self.metadata {
            let text = [("name", m.name), ("generateName", m.generate_name)];
            for (key, value) in text {
                if let Some(value) = value {
                    metadata.insert(key.into(), serde_json::from_str(value.get())?);
                }
            }
            let strings = [("labels", &m.labels), ("annotations", &m.annotations)];
            for (key, value) in strings {
                if let Some(value) = value {
                    metadata.insert(key.into(), value.to_value()?);
                }
            }
        }
        let mut object = serde_json::Map::new();
        object.insert("metadata".into(), Value::Object(metadata));
        if let Some(spec) = self.spec {
            object.insert("spec".into(), serde_json::from_str(spec.get())?);
        }
        Ok(Value::Object(object))
    }
}

/// Labels or annotations as the review holds them: an object's members,
/// their names borrowed from the body and their values kept as JSON text,
/// a string decoded only when it is read (most annotations, such as kubectl's
/// last-applied configuration, never are).
#[derive(Debug, Clone, PartialEq)]
pub enum Strings<'a> {
    /// An object's members, in order.
    Members(Vec<Member<'a>>),
    /// Anything but an object.
    Other(Value),
}

/// One member of [`Strings`].
#[derive(Debug, Clone)]
pub struct Member<'a> {
    /// The name.
    pub name: Cow<'a, str>,
    /// The value's JSON text.
    pub value: &'a RawValue,
    /// The string value, decoded when first read if it has escapes.
    decoded: OnceLock<Option<String>>,
}

impl PartialEq for Member<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.value.get() == other.value.get()
    }
}

impl<'a> Member<'a> {
    /// A member with this name and value text.
    pub fn new(name: Cow<'a, str>, value: &'a RawValue) -> Self {
        Member {
            name,
            value,
            decoded: OnceLock::new(),
        }
    }

    /// The string value; `None` when the value is not a string.
    pub fn text(&self) -> Option<&str> {
        let raw = self.value.get();
        let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
        if !inner.contains('\\') {
            return Some(inner);
        }
        self.decoded
            .get_or_init(|| serde_json::from_str(raw).ok())
            .as_deref()
    }

    /// What kind of value this is, in the words of error messages about
    /// objects read from YAML or JSON.
    pub fn kind_name(&self) -> &'static str {
        match self.value.get().as_bytes().first() {
            Some(b'{') => "a mapping",
            Some(b'[') => "a sequence",
            Some(b'n') => "null",
            _ => "a scalar",
        }
    }

    /// Whether the value is null.
    pub fn is_null(&self) -> bool {
        self.value.get() == "null"
    }
}

impl<'a> Strings<'a> {
    /// The members, when this is an object.
    pub fn members(&self) -> Option<&[Member<'a>]> {
        match self {
            Strings::Members(members) => Some(members),
            Strings::Other(_) => None,
        }
    }

    /// A member, the last one when the name repeats (as a JSON map keeps it).
    pub fn get(&self, name: &str) -> Option<&Member<'a>> {
        self.members()?.iter().rev().find(|m| m.name == name)
    }

    /// The value as a `serde_json::Value`.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        match self {
            Strings::Members(members) => members
                .iter()
                .map(|m| Ok((m.name.to_string(), serde_json::from_str(m.value.get())?)))
                .collect::<Result<_, _>>()
                .map(Value::Object),
            Strings::Other(v) => Ok(v.clone()),
        }
    }
}

/// The string members of an object; nothing for anything else.
impl Lookup for Strings<'_> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key)?.text()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Strings<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StringsVisitor(PhantomData))
    }
}

struct StringsVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for StringsVisitor<'a> {
    type Value = Strings<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strings<'a>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Name(name)) = map.next_key()? {
            members.push(Member::new(name, map.next_value()?));
        }
        Ok(Strings::Members(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Strings<'a>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Strings::Other)
    }

    fn visit_str<E>(self, v: &str) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(v.into()))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(v.into()))
    }

    fn visit_unit<E>(self) -> Result<Strings<'a>, E> {
        Ok(Strings::Other(Value::Null))
    }
}

/// A member name, borrowed from the body unless it has escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(NameVisitor(PhantomData))
    }
}

struct NameVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for NameVisitor<'a> {
    type Value = Name<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'a>, E> {
        Ok(Name(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Name<'a>, E> {
        Ok(Name(Cow::Owned(v.to_owned())))
    }
}

/// A review read in one pass: the common case.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    #[serde(default, borrow)]
    api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    request: Option<Request<'a>>,
}

/// A review read with its request left unparsed, to say what is wrong with
/// one that does not read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReview<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<&'a RawValue>,
}

/// Reads an AdmissionReview body: the request, and of its object the
/// metadata the rules read and the raw `spec`.
pub fn parse(body: &[u8]) -> Result<Request<'_>, BadReview> {
    // One pass over the body; the request's bytes are mostly the pod, which
    // costs as much to skip as to scan, so a second pass would double the cost.
    // The body is checked as UTF-8 once, so the strings read from it are not;
    // and a body that is not UTF-8 is not JSON (RFC 8259), even where its bad
    // bytes are in a member serde_json would skip without looking.
    let body = std::str::from_utf8(body).map_err(|e| {
        BadReview(format!(
            "the body is not an {API_VERSION} {KIND}: not UTF-8 JSON: {e}"
        ))
    })?;
    let request = match serde_json::from_str::<Review>(body) {
        Ok(review) => {
            check_type(&review.api_version, &review.kind)?;
            review.request.ok_or_else(no_request)?
        }
        Err(_) => explain(body)?,
    };
    if request.uid.is_empty() {
        return Err(BadReview(format!("the {KIND}'s request has no uid")));
    }
    Ok(request)
}

/// Reads a body that did not read in one pass again, in two, to name the part
/// that is wrong: the body, its type or its request.
fn explain(body: &str) -> Result<Request<'_>, BadReview> {
    let review: RawReview = serde_json::from_str(body).map_err(|e| {
        BadReview(format!(
            "the body is not an {API_VERSION} {KIND}: not a JSON object: {e}"
        ))
    })?;
    check_type(&review.api_version, &review.kind)?;
    let request = review.request.ok_or_else(no_request)?;
    serde_json::from_str(request.get())
        .map_err(|e| BadReview(format!("the {KIND}'s request does not parse: {e}")))
}

fn check_type(api_version: &str, kind: &str) -> Result<(), BadReview> {
    if api_version != API_VERSION || kind != KIND {
        return Err(BadReview(format!(
            "the body is a {api_version:?} {kind:?}, not an {API_VERSION} {KIND} (the MutatingWebhookConfiguration must list admissionReviewVersions: [v1])"
        )));
    }
    Ok(())
}

fn no_request() -> BadReview {
    BadReview(format!("the {KIND} has no request"))
}
