//! Writes [`Node`] trees as block-style YAML.
//!
//! Each scalar is written in its own style when that style can carry its value
//! in the position it is in, and double-quoted otherwise, so the output always
//! reads back to the same tree: emitting is a fixed point of parse-then-emit.

use std::collections::HashMap;

use super::scalar::{is_block_content, is_printable_line};
use super::{Anchor, Map, Node, Scalar, Seq, Style};

/// Writes one document.
pub fn emit_document(node: &Node) -> String {
    let mut out = String::new();
    Emitter::new(&mut out, false).document(node);
    out
}

/// Writes one document whose top-level entries, and the items of its
/// top-level sequences, are read apart (a ResourceList's items go to files of
/// their own): an alias is written only to an anchor of the same item.
/// Appends to `out`, which may be a buffer already in memory.
pub fn emit_document_of_items(node: &Node, out: &mut String) {
    Emitter::new(out, true).document(node);
}

/// Writes documents separated by `---`.
pub fn emit_stream<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> String {
    let mut out = String::new();
    for (i, node) in nodes.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        Emitter::new(&mut out, false).document(node);
    }
    out
}

/// Where a scalar stands, which decides the styles it can take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A mapping key: one line, no block styles.
    Key,
    /// A mapping value: every style.
    Value,
    /// A sequence item or a whole document: block styles without an indentation indicator.
    Item,
    /// Inside a flow collection: one line, no flow indicators in plain scalars.
    Flow,
}

struct Emitter<'o, 'n> {
    out: &'o mut String,
    /// What each anchor written so far stands for.
    anchors: HashMap<&'n str, &'n Node>,
    /// Whether top-level entries and items are read apart (see [`emit_document_of_items`]).
    items_apart: bool,
    /// Where the last alias, or anchor or tag of an empty scalar, written ends:
    /// a key written so needs a space before its `:`, which they may hold.
    alias_end: usize,
}

const SPACES: &str = "                                                                ";

impl<'o, 'n> Emitter<'o, 'n> {
    fn new(out: &'o mut String, items_apart: bool) -> Self {
        Emitter {
            out,
            anchors: HashMap::new(),
            items_apart,
            alias_end: usize::MAX,
        }
    }

    /// Writes `*name` when `node` came from that alias and still holds what
    /// `&name` stands for here; otherwise `node` is written out.
    fn alias(&mut self, node: &Node) -> bool {
        let Some(Anchor::AliasOf(name)) = node.anchor() else {
            return false;
        };
        if !self
            .anchors
            .get(&**name)
            .is_some_and(|target| target.same_content(node))
        {
            return false;
        }
        self.out.push('*');
        self.out.push_str(name);
        self.alias_end = self.out.len();
        true
    }

    /// Writes `&name` for an anchor `node` defines (no space after) and
    /// remembers it; `false` when it defines none.
    fn anchor(&mut self, node: &'n Node) -> bool {
        match node.anchor() {
            Some(Anchor::Defines(name)) => {
                self.anchors.insert(name, node);
                self.out.push('&');
                self.out.push_str(name);
                true
            }
            _ => false,
        }
    }

    /// Writes the `:` after a key.
    fn colon(&mut self) {
        if self.out.len() == self.alias_end {
            self.out.push(' ');
        }
        self.out.push(':');
    }

    /// Whether a block collection has properties for a line of their own.
    fn has_properties(node: &Node, tag: Option<&str>) -> bool {
        tag.is_some() || matches!(node.anchor(), Some(Anchor::Defines(_)))
    }

    fn indent(&mut self, n: usize) {
        let mut n = n;
        while n > 0 {
            let chunk = n.min(SPACES.len());
            self.out.push_str(&SPACES[..chunk]);
            n -= chunk;
        }
    }

    fn document(&mut self, node: &'n Node) {
        match node {
            Node::Map(map) if !map.entries.is_empty() => {
                if Self::has_properties(node, map.tag()) {
                    self.properties_line(node, map.tag(), false);
                }
                self.block_map(map, 0, false);
            }
            Node::Seq(seq) if !seq.items.is_empty() => {
                if Self::has_properties(node, seq.tag()) {
                    self.properties_line(node, seq.tag(), false);
                }
                self.block_seq(seq, 0, false);
            }
            _ => {
                self.inline(node, 0, Place::Item);
                self.out.push('\n');
            }
        }
    }

    fn block_map(&mut self, map: &'n Map, indent: usize, inline_first: bool) {
        let apart = self.items_apart && indent == 0;
        for (i, (key, value)) in map.entries.iter().enumerate() {
            if apart {
                self.anchors.clear();
            }
            if i > 0 || !inline_first {
                self.indent(indent);
            }
            match key {
                Node::Scalar(s) if s.value.len() < 1024 => {
                    if !self.alias(key) {
                        self.scalar(key, s, indent, Place::Key);
                    }
                }
                _ => {
                    self.out.push('?');
                    self.after_indicator(key, indent);
                    self.indent(indent);
                }
            }
            self.colon();
            if !self.block_collection(value, indent, false) {
                self.after_indicator_inline(value, indent, Place::Value);
            }
        }
    }

    fn block_seq(&mut self, seq: &'n Seq, indent: usize, inline_first: bool) {
        let apart = self.items_apart && indent == 0;
        for (i, item) in seq.items.iter().enumerate() {
            if apart {
                self.anchors.clear();
            }
            if i > 0 || !inline_first {
                self.indent(indent);
            }
            self.out.push('-');
            self.after_indicator(item, indent);
        }
    }

    /// Writes a non-empty block collection after a `key:` (`item` false) or a
    /// `-` or `?` (`item` true) at `indent`, through the end of its last line;
    /// `false`, writing nothing, when `node` is not one or is written as an alias.
    fn block_collection(&mut self, node: &'n Node, indent: usize, item: bool) -> bool {
        let (map, seq, tag) = match node {
            Node::Map(m) if !m.entries.is_empty() && !m.flow => (Some(m), None, m.tag()),
            Node::Seq(s) if !s.items.is_empty() && !s.flow => (None, Some(s), s.tag()),
            _ => return false,
        };
        if matches!(node.anchor(), Some(Anchor::AliasOf(_))) && self.would_alias(node) {
            return false;
        }
        // A sequence under a key may start at the key's own indentation.
        let seq_indent = if item { indent + 2 } else { indent };
        if Self::has_properties(node, tag) || !item {
            self.properties_line(node, tag, true);
            match (map, seq) {
                (Some(m), _) => self.block_map(m, indent + 2, false),
                (_, Some(s)) => self.block_seq(s, seq_indent, false),
                _ => unreachable!("a collection"),
            }
        } else {
            self.out.push(' ');
            match (map, seq) {
                (Some(m), _) => self.block_map(m, indent + 2, true),
                (_, Some(s)) => self.block_seq(s, seq_indent, true),
                _ => unreachable!("a collection"),
            }
        }
        true
    }

    /// Whether `node` is written as nothing at all: an empty null without an anchor.
    fn bare_null(&self, node: &Node) -> bool {
        node.is_null()
            && node.as_str() == Some("")
            && !matches!(node.anchor(), Some(Anchor::Defines(_)))
            && !self.would_alias(node)
    }

    /// Whether [`Self::alias`] would write `node` as an alias.
    fn would_alias(&self, node: &Node) -> bool {
        matches!(node.anchor(), Some(Anchor::AliasOf(name))
            if self.anchors.get(&**name).is_some_and(|t| t.same_content(node)))
    }

    /// Writes a node after a `-` or `?` indicator at `indent`, through the end of its last line.
    fn after_indicator(&mut self, node: &'n Node, indent: usize) {
        if !self.block_collection(node, indent, true) {
            self.after_indicator_inline(node, indent, Place::Item);
        }
    }

    /// Writes a scalar, flow collection or alias after an indicator, through the end of its line.
    fn after_indicator_inline(&mut self, node: &'n Node, indent: usize, place: Place) {
        if self.bare_null(node) {
            self.out.push('\n');
        } else {
            self.out.push(' ');
            self.inline(node, indent, place);
            self.out.push('\n');
        }
    }

    /// Ends the current line with a block collection's anchor and tag, if any
    /// (`after` a key or indicator: with a space before them).
    fn properties_line(&mut self, node: &'n Node, tag: Option<&str>, after: bool) {
        if matches!(node.anchor(), Some(Anchor::Defines(_))) {
            if after {
                self.out.push(' ');
            }
            self.anchor(node);
            if tag.is_some() {
                self.out.push(' ');
            }
        } else if after && tag.is_some() {
            self.out.push(' ');
        }
        if let Some(tag) = tag {
            self.out.push_str(tag);
        }
        self.out.push('\n');
    }

    /// Writes a scalar, a flow collection or an alias on the current line (a
    /// block scalar continues on the lines below, without a final line break).
    fn inline(&mut self, node: &'n Node, indent: usize, place: Place) {
        if self.alias(node) {
            return;
        }
        match node {
            Node::Scalar(s) => self.scalar(node, s, indent, place),
            Node::Map(m) => {
                self.flow_properties(node, m.tag());
                self.out.push('{');
                for (i, (k, v)) in m.entries.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.inline(k, indent, Place::Flow);
                    self.colon();
                    if !self.bare_null(v) {
                        self.out.push(' ');
                        self.inline(v, indent, Place::Flow);
                    }
                }
                self.out.push('}');
            }
            Node::Seq(s) => {
                self.flow_properties(node, s.tag());
                self.out.push('[');
                for (i, item) in s.items.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.inline(item, indent, Place::Flow);
                }
                self.out.push(']');
            }
        }
    }

    /// Writes the anchor and tag of a flow collection, each followed by a space.
    fn flow_properties(&mut self, node: &'n Node, tag: Option<&str>) {
        if self.anchor(node) {
            self.out.push(' ');
        }
        if let Some(tag) = tag {
            self.out.push_str(tag);
            self.out.push(' ');
        }
    }

    fn scalar(&mut self, node: &'n Node, s: &Scalar, indent: usize, place: Place) {
        let anchored = self.anchor(node);
        if anchored && (s.tag().is_some() || !(s.style == Style::Plain && s.value.is_empty())) {
            self.out.push(' ');
        }
        if let Some(tag) = s.tag() {
            self.out.push_str(tag);
            if s.style == Style::Plain && s.value.is_empty() {
                // As after an anchor: a `:` right after a tag is read as part of it.
                self.alias_end = self.out.len();
                return;
            }
            self.out.push(' ');
        }
        if anchored && s.style == Style::Plain && s.value.is_empty() {
            // Nothing follows the name: a `:` after it would be read as part of it.
            self.alias_end = self.out.len();
            return;
        }
        let value = s.value.as_str();
        let one_line = !value.contains('\n');
        let plain_ok = one_line
            && is_printable_line(value)
            && can_start_plain(value)
            && (place != Place::Flow || is_flow_plain(value));
        match s.style {
            Style::Plain if plain_ok => self.out.push_str(value),
            Style::SingleQuoted if one_line && is_printable_line(value) => {
                self.out.push('\'');
                if value.contains('\'') {
                    self.out.push_str(&value.replace('\'', "''"));
                } else {
                    self.out.push_str(value);
                }
                self.out.push('\'');
            }
            Style::Folded
                if matches!(place, Place::Value | Place::Item) && self.folded(value, indent) => {}
            Style::Literal | Style::Folded
                if matches!(place, Place::Value | Place::Item)
                    && self.literal(value, indent, place) => {}
            _ => self.double_quoted(value),
        }
    }

    /// The header of a block scalar, or `None` when `value` cannot be one here.
    fn block_header(value: &str, place: Place) -> Option<(&str, &'static str, bool)> {
        let content = value.trim_end_matches('\n');
        if content.is_empty() || !is_block_content(value) {
            return None;
        }
        let chomp = match value.len() - content.len() {
            0 => "-",
            1 => "",
            _ => "+",
        };
        let first = content.split('\n').find(|l| !l.is_empty()).unwrap_or("");
        let needs_indicator = first.starts_with(' ');
        if needs_indicator && place != Place::Value {
            return None;
        }
        Some((content, chomp, needs_indicator))
    }

    fn literal(&mut self, value: &str, indent: usize, place: Place) -> bool {
        let Some((content, chomp, indicator)) = Self::block_header(value, place) else {
            return false;
        };
        self.out.push('|');
        if indicator {
            self.out.push('2');
        }
        self.out.push_str(chomp);
        for line in content.split('\n') {
            self.out.push('\n');
            if !line.is_empty() {
                self.indent(indent + 2);
                self.out.push_str(line);
            }
        }
        self.keep_trailing(value, content);
        true
    }

    /// A folded block, for text whose lines need no protection from folding.
    fn folded(&mut self, value: &str, indent: usize) -> bool {
        let Some((content, chomp, _)) = Self::block_header(value, Place::Value) else {
            return false;
        };
        if content.starts_with('\n')
            || content
                .split('\n')
                .any(|l| l.starts_with([' ', '\t']) || l.ends_with([' ', '\t']))
        {
            return false;
        }
        self.out.push('>');
        self.out.push_str(chomp);
        self.out.push('\n');
        let mut lines = content.split('\n').peekable();
        while let Some(line) = lines.next() {
            if line.is_empty() {
                self.out.push('\n');
                continue;
            }
            self.indent(indent + 2);
            self.out.push_str(line);
            if lines.peek().is_some() {
                // A single line break folds into a space: write it as an empty line.
                self.out.push_str("\n\n");
            }
        }
        self.keep_trailing(value, content);
        true
    }

    /// Writes the extra empty lines that `+` chomping keeps.
    fn keep_trailing(&mut self, value: &str, content: &str) {
        for _ in 1..value.len() - content.len() {
            self.out.push('\n');
        }
    }

    fn double_quoted(&mut self, value: &str) {
        self.out.push('"');
        let mut rest = value;
        while let Some(at) = rest.find(|c: char| needs_escape(c)) {
            self.out.push_str(&rest[..at]);
            let c = rest[at..].chars().next().expect("found a char");
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\t' => self.out.push_str("\\t"),
                '\r' => self.out.push_str("\\r"),
                '\0' => self.out.push_str("\\0"),
                '\u{1b}' => self.out.push_str("\\e"),
                '\u{85}' => self.out.push_str("\\N"),
                '\u{2028}' => self.out.push_str("\\L"),
                '\u{2029}' => self.out.push_str("\\P"),
                c if (c as u32) < 0x100 => self.out.push_str(&format!("\\x{:02X}", c as u32)),
                c => self.out.push_str(&format!("\\u{:04X}", c as u32)),
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.out.push_str(rest);
        self.out.push('"');
    }
}

/// Whether a plain scalar's text can be written plain anywhere: it does not begin
/// with an indicator, white space or a document marker, nor end with `:`. Readers
/// are lenient about some of these inside flow collections; written in a block,
/// they would change what is read (found by fuzzing: a plain `>x` read in a flow
/// mapping was written as a key starting a folded block). What a plain scalar
/// cannot hold anywhere (`: `, ` #`, white space at its ends) no reader lets in.
/// Constant time: it runs on every plain scalar written.
fn can_start_plain(value: &str) -> bool {
    let bytes = value.as_bytes();
    let Some(&first) = bytes.first() else {
        return true;
    };
    let starts_ok = match first {
        b'-' | b'?' | b':' => bytes
            .get(1)
            .is_some_and(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n')),
        c => !b" \t\r\n,[]{}#&*!|>'\"%@`".contains(&c),
    };
    starts_ok && !value.starts_with("---") && !value.starts_with("...") && !value.ends_with(':')
}

/// Whether a plain scalar can stand inside a flow collection.
fn is_flow_plain(value: &str) -> bool {
    !value.is_empty()
        && !value.contains([',', '[', ']', '{', '}'])
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
}

fn needs_escape(c: char) -> bool {
    matches!(c, '"' | '\\' | '\u{feff}' | '\u{2028}' | '\u{2029}') || c.is_control()
}

#[cfg(test)]
#[path = "emit_tests.rs"]
mod tests;
