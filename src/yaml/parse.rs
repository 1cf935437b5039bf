//! Builds [`Node`] trees from the events of `saphyr-parser`.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::{Map, Node, Scalar, Seq, Style, Text};

/// Aliases are expanded; this caps the nodes they may copy, against
/// "billion laughs" inputs.
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
pub fn parse_stream(src: &str) -> Result<Vec<Node>, ParseError> {
    Builder::new(src).run()
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

enum Frame {
    Seq(Seq, usize),
    Map(Map, usize, Option<Node>),
}

struct Builder<'s> {
    src: &'s str,
    stack: Vec<Frame>,
    docs: Vec<Node>,
    anchors: HashMap<usize, (Node, usize)>,
    alias_nodes: usize,
    cursor: CharCursor,
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

    /// The character at a character index.
    fn char_at(&mut self, src: &str, index: usize) -> Option<char> {
        if self.ascii {
            return src.as_bytes().get(index).map(|&b| char::from(b));
        }
        if index < self.chars {
            self.chars = 0;
            self.bytes = 0;
        }
        for c in src[self.bytes..].chars() {
            if self.chars == index {
                return Some(c);
            }
            self.chars += 1;
            self.bytes += c.len_utf8();
        }
        None
    }
}

impl<'s> Builder<'s> {
    fn new(src: &'s str) -> Self {
        Builder {
            src,
            stack: Vec::new(),
            docs: Vec::new(),
            anchors: HashMap::new(),
            alias_nodes: 0,
            cursor: CharCursor::new(src),
        }
    }

    fn starts_with(&mut self, span: &Span, c: char) -> bool {
        self.cursor.char_at(self.src, span.start.index()) == Some(c)
    }

    fn run(mut self) -> Result<Vec<Node>, ParseError> {
        let src = self.src;
        let mut parser = Parser::new_from_str(src);
        while let Some(next) = parser.next_event() {
            let (event, span) = next.map_err(|e| ParseError {
                line: e.marker().line(),
                column: e.marker().col() + 1,
                message: e.info().to_string(),
            })?;
            match event {
                Event::Scalar(value, style, anchor, tag) => {
                    let node = Node::Scalar(Scalar {
                        value: Text::from(value),
                        style: style_of(style),
                        tag: tag.map(|t| tag_text(&t)),
                    });
                    self.complete(node, anchor);
                }
                Event::SequenceStart(anchor, tag) => {
                    let flow = self.starts_with(&span, '[');
                    self.stack.push(Frame::Seq(
                        Seq {
                            items: Vec::new(),
                            tag: tag.map(|t| tag_text(&t)),
                            flow,
                        },
                        anchor,
                    ))
                }
                Event::MappingStart(anchor, tag) => {
                    let flow = self.starts_with(&span, '{');
                    self.stack.push(Frame::Map(
                        Map {
                            entries: Vec::new(),
                            tag: tag.map(|t| tag_text(&t)),
                            flow,
                        },
                        anchor,
                        None,
                    ))
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let (node, anchor) = match self.stack.pop() {
                        Some(Frame::Seq(seq, anchor)) => (Node::Seq(seq), anchor),
                        Some(Frame::Map(map, anchor, _)) => (Node::Map(map), anchor),
                        None => return Err(ParseError::at(&span, "unbalanced collection end")),
                    };
                    self.complete(node, anchor);
                }
                Event::Alias(id) => {
                    let (node, size) = self
                        .anchors
                        .get(&id)
                        .ok_or_else(|| ParseError::at(&span, "alias to an unknown anchor"))?;
                    self.alias_nodes += size;
                    if self.alias_nodes > MAX_ALIAS_NODES {
                        return Err(ParseError::at(
                            &span,
                            format!("aliases expand to more than {MAX_ALIAS_NODES} nodes"),
                        ));
                    }
                    let node = node.clone();
                    self.complete(node, 0);
                }
                Event::StreamStart
                | Event::StreamEnd
                | Event::DocumentStart(_)
                | Event::DocumentEnd
                | Event::Nothing => {}
            }
        }
        Ok(self.docs)
    }

    fn complete(&mut self, node: Node, anchor: usize) {
        if anchor != 0 {
            self.anchors
                .insert(anchor, (node.clone(), count_nodes(&node)));
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
mod tests {
    use super::*;

    #[test]
    fn keeps_scalar_text_and_style() {
        let doc = parse_document(
            "a: 0644\nb: \"yes\"\nc: 123456789012345678901234567890\nd: 'x'\ne: |\n  z\n",
        )
        .unwrap();
        let map = doc.as_map().unwrap();
        let got: Vec<_> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| match map.get(k).unwrap() {
                Node::Scalar(s) => (s.value.to_string(), s.style),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            [
                ("0644".to_string(), Style::Plain),
                ("yes".into(), Style::DoubleQuoted),
                ("123456789012345678901234567890".into(), Style::Plain),
                ("x".into(), Style::SingleQuoted),
                ("z\n".into(), Style::Literal),
            ]
        );
    }

    #[test]
    fn expands_aliases_and_keeps_tags() {
        let doc = parse_document("a: &x {k: v}\nb: *x\nc: !!str 12\n").unwrap();
        let map = doc.as_map().unwrap();
        assert_eq!(map.get("a"), map.get("b"));
        let Node::Scalar(c) = map.get("c").unwrap() else {
            panic!()
        };
        assert_eq!(c.tag.as_deref(), Some("!!str"));
    }

    #[test]
    fn errors_carry_positions() {
        let err = parse_document("a: b\n c: d: e\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err = parse_document("a: [1, 2\n").unwrap_err();
        assert!(err.to_string().starts_with("line "), "{err}");
    }

    #[test]
    fn counts_documents() {
        assert_eq!(
            parse_stream("---\na: 1\n---\n---\nb: 2\n").unwrap().len(),
            3
        );
        assert!(parse_document("").is_err());
        assert!(parse_document("a: 1\n---\nb: 1\n").is_err());
    }

    #[test]
    fn limits_alias_expansion() {
        let mut src = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            src.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse_document(&src).unwrap_err();
        assert!(err.message.contains("aliases expand"), "{err}");
    }
}
