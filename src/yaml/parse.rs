//! Builds [`Node`] trees from the events of `saphyr-parser`.

use std::borrow::Cow;
use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::{Anchor, Map, Node, Props, Scalar, Seq, Style, Text};

/// Aliases are expanded (and remembered, see [`Anchor`]); this caps the nodes
/// they may copy, against "billion laughs" inputs.
const MAX_ALIAS_NODES: usize = 1_000_000;

/// A YAML syntax error with its position (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl ParseError {
    fn at(span: &Span, message: impl Into<String>) -> Self {
        ParseError {
            line: span.start.line(),
            column: span.start.col() + 1,
            message: message.into(),
        }
    }
}

/// Parses a stream of documents. Empty documents come out as null scalars.
///
/// Quoted scalars whose continuation lines are indented less than their key
/// (`config: '{` ... `}'` with the brace at column 0, as Multus's examples
/// write them) are read as libyaml, go-yaml and kubectl read them, although
/// YAML 1.2 and saphyr-parser refuse them: continuation lines carry no
/// meaning in their indentation, so the text is re-indented and read again.
/// Only a failed read pays for this.
pub fn parse_stream(src: &str) -> Result<Vec<Node>, ParseError> {
    let mut text = std::borrow::Cow::Borrowed(src);
    let mut last = None;
    for _ in 0..MAX_REINDENTS {
        match Builder::new(&text).run() {
            Ok(docs) => return Ok(docs),
            Err(failure)
                if failure.error.message == QUOTED_INDENT && last != Some(failure.index) =>
            {
                last = Some(failure.index);
                match reindent_quoted(&text, failure.index) {
                    Some(fixed) => text = fixed.into(),
                    None => return Err(failure.error),
                }
            }
            Err(failure) => return Err(failure.error),
        }
    }
    Builder::new(&text).run().map_err(|f| f.error)
}

/// saphyr-parser's message for a quoted scalar's line indented less than YAML 1.2 allows.
const QUOTED_INDENT: &str = "invalid indentation in quoted scalar";

/// How many such scalars one source may hold: each costs a read of the whole text.
const MAX_REINDENTS: usize = 64;

/// The text with the continuation lines of the quoted scalar starting at
/// character `index` indented past its opening quote, which changes nothing
/// of its value (leading white space of those lines is not content). `None`
/// when there is no such scalar, or a line in it is a document marker, which
/// every reader refuses.
fn reindent_quoted(text: &str, index: usize) -> Option<String> {
    let at = text.char_indices().nth(index)?.0;
    let quote = *text.as_bytes().get(at)?;
    if !matches!(quote, b'\'' | b'"') {
        return None;
    }
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let pad = text[line_start..at].chars().count() + 1;
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let mut i = at + 1;
    loop {
        match *bytes.get(i)? {
            // An escaped line break is still a line break to re-indent after.
            b'\\' if quote == b'"' && !matches!(bytes.get(i + 1), Some(b'\n' | b'\r')) => i += 1,
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
            b if b == quote => break,
            b'\n' => lines.push(i + 1),
            _ => {}
        }
        i += 1;
    }
    let mut out = String::with_capacity(text.len() + lines.len() * pad);
    let mut from = 0;
    for start in lines {
        let line = &text[start..];
        if (line.starts_with("---") || line.starts_with("..."))
            && line[3..].starts_with([' ', '\t', '\r', '\n'])
        {
            return None;
        }
        if line
            .trim_start_matches([' ', '\t'])
            .starts_with(['\r', '\n'])
        {
            continue;
        }
        out.push_str(&text[from..start]);
        out.extend(std::iter::repeat_n(' ', pad));
        from = start;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// Parses a source that must hold exactly one document.
pub fn parse_document(src: &str) -> Result<Node, ParseError> {
    let mut docs = parse_stream(src)?;
    match docs.len() {
        1 => Ok(docs.pop().expect("one document")),
        0 => Err(ParseError {
            line: 1,
            column: 1,
            message: "the input is empty".into(),
        }),
        n => Err(ParseError {
            line: 1,
            column: 1,
            message: format!("expected one YAML document, found {n}"),
        }),
    }
}

/// A parse error and the character index it points at.
struct Failure {
    error: ParseError,
    index: usize,
}

impl From<ParseError> for Failure {
    fn from(error: ParseError) -> Self {
        Failure { error, index: 0 }
    }
}

enum Frame {
    Seq(Seq, usize),
    Map(Map, usize, Option<Node>),
}

struct Builder<'s> {
    src: &'s str,
    stack: Vec<Frame>,
    docs: Vec<Node>,
    /// Each anchor by id: its name, and the value an alias copies with its size.
    anchors: HashMap<usize, (Box<str>, Node, usize)>,
    /// The name of each anchor whose node is not complete yet.
    open_anchors: HashMap<usize, Box<str>>,
    alias_nodes: usize,
    cursor: CharCursor,
    /// The source's length in characters, once needed.
    src_chars: Option<usize>,
}

/// Maps the parser's character positions to bytes, moving forward only
/// (events come in source order), so a whole parse costs one pass at most.
struct CharCursor {
    ascii: bool,
    chars: usize,
    bytes: usize,
}

impl CharCursor {
    fn new(src: &str) -> Self {
        CharCursor {
            ascii: src.is_ascii(),
            chars: 0,
            bytes: 0,
        }
    }

    /// The byte offset of a character index (the source's length past its end).
    fn byte_at(&mut self, src: &str, index: usize) -> usize {
        if self.ascii {
            return index.min(src.len());
        }
        if index < self.chars {
            self.chars = 0;
            self.bytes = 0;
        }
        for c in src[self.bytes..].chars() {
            if self.chars == index {
                return self.bytes;
            }
            self.chars += 1;
            self.bytes += c.len_utf8();
        }
        self.bytes
    }
}

/// Whether a character ends an anchor name: blanks, breaks and flow indicators.
fn ends_anchor(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '\u{feff}' | ',' | '[' | ']' | '{' | '}'
    )
}

impl<'s> Builder<'s> {
    fn new(src: &'s str) -> Self {
        Builder {
            src,
            stack: Vec::new(),
            docs: Vec::new(),
            anchors: HashMap::new(),
            open_anchors: HashMap::new(),
            alias_nodes: 0,
            cursor: CharCursor::new(src),
            src_chars: None,
        }
    }

    /// A node's properties at the start of its span: the anchor's name, if
    /// `with_properties`, and the first character of its content.
    fn properties(
        &mut self,
        span: &Span,
        with_properties: bool,
    ) -> (Option<Box<str>>, Option<char>) {
        let start = self.cursor.byte_at(self.src, span.start.index());
        let mut rest = &self.src[start..];
        let mut anchor = None;
        if with_properties {
            // An anchor and a tag, in either order.
            for _ in 0..2 {
                rest = skip_separation(rest);
                if let Some(after) = rest.strip_prefix('&') {
                    let len = after.find(ends_anchor).unwrap_or(after.len());
                    anchor.get_or_insert_with(|| Box::from(&after[..len]));
                    rest = &after[len..];
                } else if rest.starts_with('!') {
                    let len = rest.find(ends_anchor).unwrap_or(rest.len());
                    rest = &rest[len..];
                } else {
                    break;
                }
            }
            rest = skip_separation(rest);
        }
        (anchor, rest.chars().next())
    }

    fn collection_start(&mut self, span: &Span, anchor: usize, has_tag: bool, open: char) -> bool {
        let (name, first) = self.properties(span, anchor != 0 || has_tag);
        if anchor != 0 {
            self.open_anchors
                .insert(anchor, name.unwrap_or_else(|| Box::from("")));
        }
        first == Some(open)
    }

    /// Whether a block scalar ends at the end of a source without a final
    /// line break: saphyr-parser then adds one that is not there.
    fn ends_without_break(&mut self, span: &Span) -> bool {
        if self.src.ends_with(['\n', '\r']) {
            return false;
        }
        let chars = *self
            .src_chars
            .get_or_insert_with(|| self.src.chars().count());
        span.end.index() >= chars
    }

    fn run(mut self) -> Result<Vec<Node>, Failure> {
        let src = self.src;
        let mut parser = Parser::new_from_str(src);
        while let Some(next) = parser.next_event() {
            let (event, span) = next.map_err(|e| Failure {
                error: ParseError {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                    message: e.info().to_string(),
                },
                index: e.marker().index(),
            })?;
            match event {
                Event::Scalar(value, style, anchor, tag) => {
                    self.scalar(&span, value, style, anchor, tag)
                }
                Event::SequenceStart(anchor, tag) => {
                    let flow = self.collection_start(&span, anchor, tag.is_some(), '[');
                    self.stack.push(Frame::Seq(
                        Seq {
                            items: Vec::new(),
                            props: Props::new(tag.map(|t| tag_text(&t)), None),
                            flow,
                        },
                        anchor,
                    ))
                }
                Event::MappingStart(anchor, tag) => {
                    let flow = self.collection_start(&span, anchor, tag.is_some(), '{');
                    self.stack.push(Frame::Map(
                        Map {
                            entries: Vec::new(),
                            props: Props::new(tag.map(|t| tag_text(&t)), None),
                            flow,
                        },
                        anchor,
                        None,
                    ))
                }
                Event::SequenceEnd | Event::MappingEnd => self.collection_end(&span)?,
                Event::Alias(id) => self.alias(&span, id)?,
                // An alias names an anchor of its own document only.
                Event::DocumentEnd => self.anchors.clear(),
                Event::StreamStart
                | Event::StreamEnd
                | Event::DocumentStart(_)
                | Event::Nothing => {}
            }
        }
        Ok(self.docs)
    }

    /// A scalar; a block scalar that ends the stream without a line break
    /// keeps none.
    fn scalar(
        &mut self,
        span: &Span,
        value: Cow<'_, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<Cow<'_, Tag>>,
    ) {
        let mut value = Text::from(value);
        if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            && value.ends_with('\n')
            && self.ends_without_break(span)
        {
            value.pop();
        }
        let name = if anchor != 0 {
            let (name, _) = self.properties(span, true);
            Some(Anchor::Defines(name.unwrap_or_else(|| Box::from(""))))
        } else {
            None
        };
        let node = Node::Scalar(Scalar {
            value,
            style: style_of(style),
            props: Props::new(tag.map(|t| tag_text(&t)), name),
        });
        self.complete(node, anchor);
    }

    /// The end of the innermost sequence or mapping.
    fn collection_end(&mut self, span: &Span) -> Result<(), Failure> {
        let (mut node, anchor) = match self.stack.pop() {
            Some(Frame::Seq(seq, anchor)) => (Node::Seq(seq), anchor),
            Some(Frame::Map(map, anchor, _)) => (Node::Map(map), anchor),
            None => {
                return Err(ParseError::at(span, "unbalanced collection end").into());
            }
        };
        if let Some(name) = self.open_anchors.remove(&anchor) {
            set_anchor(&mut node, Some(Anchor::Defines(name)));
        }
        self.complete(node, anchor);
        Ok(())
    }

    /// An alias: a copy of its anchor's node, within [`MAX_ALIAS_NODES`].
    fn alias(&mut self, span: &Span, id: usize) -> Result<(), Failure> {
        let (name, node, size) = self
            .anchors
            .get(&id)
            .ok_or_else(|| ParseError::at(span, "alias to an unknown anchor"))?;
        self.alias_nodes += size;
        if self.alias_nodes > MAX_ALIAS_NODES {
            return Err(ParseError::at(
                span,
                format!("aliases expand to more than {MAX_ALIAS_NODES} nodes"),
            )
            .into());
        }
        let mut node = node.clone();
        set_anchor(&mut node, Some(Anchor::AliasOf(name.clone())));
        self.complete(node, 0);
        Ok(())
    }

    fn complete(&mut self, node: Node, anchor: usize) {
        if anchor != 0 {
            let name = match node.anchor() {
                Some(Anchor::Defines(name)) => name.clone(),
                _ => Box::from(""),
            };
            let mut copy = node.clone();
            strip_anchors(&mut copy);
            let size = count_nodes(&copy);
            self.anchors.insert(anchor, (name, copy, size));
        }
        match self.stack.last_mut() {
            Some(Frame::Seq(seq, _)) => seq.items.push(node),
            Some(Frame::Map(map, _, key)) => match key.take() {
                Some(k) => map.entries.push((k, node)),
                None => *key = Some(node),
            },
            None => self.docs.push(node),
        }
    }
}

/// Skips blanks, line breaks and comments between a node's properties.
fn skip_separation(mut rest: &str) -> &str {
    loop {
        rest = rest.trim_start_matches([' ', '\t', '\r', '\n']);
        match rest.strip_prefix('#') {
            Some(comment) => rest = comment.find('\n').map_or("", |i| &comment[i..]),
            None => return rest,
        }
    }
}

fn set_anchor(node: &mut Node, anchor: Option<Anchor>) {
    let props = match node {
        Node::Scalar(s) => &mut s.props,
        Node::Seq(s) => &mut s.props,
        Node::Map(m) => &mut m.props,
    };
    let tag = props.take().and_then(|p| p.tag);
    *props = Props::new(tag, anchor);
}

/// Removes the anchors a copy would define again: an alias's copy stands for
/// the value, not for the anchors inside it (aliases inside it stay).
fn strip_anchors(node: &mut Node) {
    if matches!(node.anchor(), Some(Anchor::Defines(_))) {
        set_anchor(node, None);
    }
    match node {
        Node::Scalar(_) => {}
        Node::Seq(s) => s.items.iter_mut().for_each(strip_anchors),
        Node::Map(m) => m.entries.iter_mut().for_each(|(k, v)| {
            strip_anchors(k);
            strip_anchors(v);
        }),
    }
}

fn count_nodes(node: &Node) -> usize {
    match node {
        Node::Scalar(_) => 1,
        Node::Seq(s) => 1 + s.items.iter().map(count_nodes).sum::<usize>(),
        Node::Map(m) => {
            1 + m
                .entries
                .iter()
                .map(|(k, v)| count_nodes(k) + count_nodes(v))
                .sum::<usize>()
        }
    }
}

fn style_of(style: ScalarStyle) -> Style {
    match style {
        ScalarStyle::Plain => Style::Plain,
        ScalarStyle::SingleQuoted => Style::SingleQuoted,
        ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
        ScalarStyle::Literal => Style::Literal,
        ScalarStyle::Folded => Style::Folded,
    }
}

/// A tag as it is written in YAML.
fn tag_text(tag: &Tag) -> Box<str> {
    match tag.handle.as_str() {
        "tag:yaml.org,2002:" => format!("!!{}", tag.suffix),
        "!" => format!("!{}", tag.suffix),
        handle => format!("!<{handle}{}>", tag.suffix),
    }
    .into_boxed_str()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
