//! A YAML tree that keeps what Kubernetes tools care about on a round trip.
//!
//! Every scalar keeps its source text and its style: a plain `0644` stays the
//! plain text `0644` (the integer 420 for kubectl), a quoted `"yes"` stays quoted,
//! and an integer beyond 64 bits keeps every digit. Nothing is resolved to a
//! number or a boolean, so nothing can change meaning. Anchors and aliases are
//! kept (see [`Anchor`]). Comments are not kept: kpt restores them itself from
//! `internal.config.kubernetes.io/id`.

mod emit;
mod json;
mod locate;
mod parse;
mod scalar;

pub use emit::{emit_document, emit_document_of_items, emit_stream};
pub use json::JsonError;
pub(crate) use json::describe_json;
pub use locate::{ScalarPlace, TextPosition, locate};
pub use parse::{ParseError, parse_document, parse_stream};
pub use scalar::is_plain_safe;

use compact_str::CompactString;

/// A scalar's text. Most Kubernetes keys and values fit inline, which saves one
/// allocation per scalar on large inputs.
pub type Text = CompactString;

/// How a scalar was (or will be) written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Unquoted; its meaning is whatever a reader resolves the text to.
    Plain,
    /// `'...'`
    SingleQuoted,
    /// `"..."`
    DoubleQuoted,
    /// `|` block.
    Literal,
    /// `>` block.
    Folded,
}

/// A YAML node.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar of any style.
    Scalar(Scalar),
    /// A sequence.
    Seq(Seq),
    /// A mapping, in source order.
    Map(Map),
}

/// A scalar: its text, its style and an optional explicit tag (`!!str`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The scalar's value after unescaping and folding.
    pub value: Text,
    /// How it is written.
    pub style: Style,
    /// Its tag and anchor, when it has either.
    pub props: Option<Box<Props>>,
}

/// A node's properties: few nodes have any, so they take one word in the others.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Props {
    /// An explicit tag as written in YAML (`!!str`, `!custom`).
    pub tag: Option<Box<str>>,
    /// The anchor it defines or the alias it was written as.
    pub anchor: Option<Anchor>,
}

impl Props {
    /// The properties, `None` when there are none.
    pub fn new(tag: Option<Box<str>>, anchor: Option<Anchor>) -> Option<Box<Props>> {
        (tag.is_some() || anchor.is_some()).then(|| Box::new(Props { tag, anchor }))
    }
}

/// The tag in optional properties.
fn tag_of(props: &Option<Box<Props>>) -> Option<&str> {
    props.as_ref()?.tag.as_deref()
}

impl Scalar {
    /// Its explicit tag.
    pub fn tag(&self) -> Option<&str> {
        tag_of(&self.props)
    }
}

impl Seq {
    /// Its explicit tag.
    pub fn tag(&self) -> Option<&str> {
        tag_of(&self.props)
    }
}

impl Map {
    /// Its explicit tag.
    pub fn tag(&self) -> Option<&str> {
        tag_of(&self.props)
    }
}

/// How a node was tied to others in its source, so it is written back the same way.
///
/// Aliases are expanded when read (every rule sees plain values); the emitter
/// writes `*name` again only where the copy still equals what `&name` stands
/// for at that point of the output, and the value itself otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// Written `&name`.
    Defines(Box<str>),
    /// Written `*name`: a copy of what `&name` held when read.
    AliasOf(Box<str>),
}

/// A sequence and its optional tag.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Seq {
    /// The items.
    pub items: Vec<Node>,
    /// Its tag and anchor, when it has either.
    pub props: Option<Box<Props>>,
    /// Written `[a, b]` rather than as a block.
    pub flow: bool,
}

/// A mapping: its entries in order and an optional tag.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    /// The entries in source order.
    pub entries: Vec<(Node, Node)>,
    /// Its tag and anchor, when it has either.
    pub props: Option<Box<Props>>,
    /// Written `{a: b}` rather than as a block.
    pub flow: bool,
}

impl Scalar {
    /// A string scalar, quoted when a YAML 1.1 or 1.2 reader could take it
    /// for anything but a string.
    pub fn string(value: impl Into<Text>) -> Self {
        let value = value.into();
        let style = if scalar::is_plain_safe(&value) {
            Style::Plain
        } else {
            Style::DoubleQuoted
        };
        Scalar {
            value,
            style,
            props: None,
        }
    }
}

impl Node {
    /// A string scalar (see [`Scalar::string`]).
    pub fn string(value: impl Into<Text>) -> Self {
        Node::Scalar(Scalar::string(value))
    }

    /// A plain scalar written as is, for numbers this crate formats itself.
    pub fn plain(value: impl Into<Text>) -> Self {
        Node::Scalar(Scalar {
            value: value.into(),
            style: Style::Plain,
            props: None,
        })
    }

    /// A multi-line string written as a literal block when it can be.
    pub fn literal(value: impl Into<Text>) -> Self {
        Node::Scalar(Scalar {
            value: value.into(),
            style: Style::Literal,
            props: None,
        })
    }

    /// An empty mapping.
    pub fn map() -> Self {
        Node::Map(Map::default())
    }

    /// A block mapping built by this crate, in the order given. The keys are
    /// names written plain as they are (no quoting check), so they must be
    /// plain-safe; the values keep their own styles.
    pub fn mapping(entries: impl IntoIterator<Item = (&'static str, Node)>) -> Self {
        Node::Map(Map {
            entries: entries
                .into_iter()
                .map(|(k, v)| {
                    debug_assert!(scalar::is_plain_safe(k), "{k:?} is not plain-safe");
                    (Node::plain(k), v)
                })
                .collect(),
            ..Map::default()
        })
    }

    /// The scalar text, whatever its style.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
            _ => None,
        }
    }

    /// The mapping, if this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The mapping, if this is one.
    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The sequence, if this is one.
    pub fn as_seq(&self) -> Option<&Seq> {
        match self {
            Node::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// Whether this is a null: an empty or `~`/`null` plain scalar without tag.
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(s) if s.style == Style::Plain
            && s.tag().is_none()
            && matches!(s.value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The scalar text if this is a string-like scalar, `None` for nulls and collections.
    pub fn as_text(&self) -> Option<&str> {
        if self.is_null() { None } else { self.as_str() }
    }

    /// What kind of node this is, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Node::Scalar(_) if self.is_null() => "null",
            Node::Scalar(_) => "a scalar",
            Node::Seq(_) => "a sequence",
            Node::Map(_) => "a mapping",
        }
    }

    /// Writes this node and everything in it as blocks: for documents that
    /// arrived as JSON, whose flow style is the file format, not the user's choice.
    pub fn into_block_style(&mut self) {
        self.restyle(false);
    }

    /// Turns a JSON document into idiomatic YAML: blocks, and no quotes on
    /// strings that read back the same without them.
    pub fn into_yaml_style(&mut self) {
        self.restyle(true);
    }

    fn restyle(&mut self, unquote: bool) {
        match self {
            Node::Scalar(s) => {
                if unquote
                    && s.style == Style::DoubleQuoted
                    && s.tag().is_none()
                    && is_plain_safe(&s.value)
                {
                    s.style = Style::Plain;
                }
            }
            Node::Seq(s) => {
                s.flow = false;
                s.items.iter_mut().for_each(|i| i.restyle(unquote));
            }
            Node::Map(m) => {
                m.flow = false;
                for (k, v) in &mut m.entries {
                    k.restyle(unquote);
                    v.restyle(unquote);
                }
            }
        }
    }

    /// Whether this is a collection written in flow style.
    pub fn is_flow(&self) -> bool {
        match self {
            Node::Scalar(_) => false,
            Node::Seq(s) => s.flow,
            Node::Map(m) => m.flow,
        }
    }

    /// The anchor this node defines or the alias it was written as.
    pub fn anchor(&self) -> Option<&Anchor> {
        let props = match self {
            Node::Scalar(s) => &s.props,
            Node::Seq(s) => &s.props,
            Node::Map(m) => &m.props,
        };
        props.as_ref()?.anchor.as_ref()
    }

    /// Whether two nodes hold the same data written the same way, whatever
    /// anchors and aliases they carry: whether an alias may stand for `other`.
    pub fn same_content(&self, other: &Node) -> bool {
        match (self, other) {
            (Node::Scalar(a), Node::Scalar(b)) => {
                a.value == b.value && a.style == b.style && a.tag() == b.tag()
            }
            (Node::Seq(a), Node::Seq(b)) => {
                a.tag() == b.tag()
                    && a.flow == b.flow
                    && a.items.len() == b.items.len()
                    && a.items.iter().zip(&b.items).all(|(x, y)| x.same_content(y))
            }
            (Node::Map(a), Node::Map(b)) => {
                a.tag() == b.tag()
                    && a.flow == b.flow
                    && a.entries.len() == b.entries.len()
                    && a.entries
                        .iter()
                        .zip(&b.entries)
                        .all(|((k, v), (l, w))| k.same_content(l) && v.same_content(w))
            }
            _ => false,
        }
    }

    /// Follows a path of mapping keys.
    pub fn get_path(&self, path: &[&str]) -> Option<&Node> {
        path.iter()
            .try_fold(self, |node, key| node.as_map()?.get(key))
    }
}

impl Map {
    /// The value for a string key.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The value for a string key, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The string value of a key, `None` if absent, null or not a scalar.
    pub fn get_text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Node::as_text)
    }

    /// Sets a key, keeping its position when it exists and appending it otherwise.
    pub fn insert(&mut self, key: &str, value: Node) {
        match self.get_mut(key) {
            Some(slot) => *slot = value,
            None => self.entries.push((Node::string(key), value)),
        }
    }

    /// Removes a key and returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Node> {
        let at = self
            .entries
            .iter()
            .position(|(k, _)| k.as_str() == Some(key))?;
        Some(self.entries.remove(at).1)
    }

    /// The mapping under `key`, created (or replacing a null) when missing.
    /// Returns `None` when the key holds something that is not a mapping.
    pub fn map_entry(&mut self, key: &str) -> Option<&mut Map> {
        let at = match self
            .entries
            .iter()
            .position(|(k, _)| k.as_str() == Some(key))
        {
            Some(at) => at,
            None => {
                self.entries.push((Node::string(key), Node::map()));
                self.entries.len() - 1
            }
        };
        let slot = &mut self.entries[at].1;
        if slot.is_null() {
            *slot = Node::map();
        }
        slot.as_map_mut()
    }

    /// Whether the mapping has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl From<Map> for Node {
    fn from(map: Map) -> Self {
        Node::Map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_scalars_quote_what_readers_would_misread() {
        for (value, style) in [
            ("linkerd-cni", Style::Plain),
            ("yes", Style::DoubleQuoted),
            ("1000002102", Style::DoubleQuoted),
            ("", Style::DoubleQuoted),
            ("a: b", Style::DoubleQuoted),
        ] {
            assert_eq!(Scalar::string(value).style, style, "{value:?}");
        }
    }

    #[test]
    fn map_entry_creates_and_replaces_null() {
        let mut doc = parse_document("a: ~\nb: 1\n").unwrap();
        let map = doc.as_map_mut().unwrap();
        map.map_entry("a").unwrap().insert("x", Node::string("z"));
        map.map_entry("c").unwrap();
        assert!(map.map_entry("b").is_none());
        assert_eq!(emit_document(&doc), "a:\n  x: z\nb: 1\nc: {}\n");
    }
}
