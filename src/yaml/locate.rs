//! Where a scalar is in the YAML text that holds it: for a message about a
//! line of a value (a JSON error in a ConfigMap's value) to name the line of
//! the file. The tree keeps no positions; this reads the text again, once,
//! when a message needs it.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A line and a column of a text, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextPosition {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

/// Where a scalar's value is in the text of its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarPlace {
    /// The line the scalar starts at (a block scalar: its first line of content).
    pub line: usize,
    /// Whether each line of the value is a line of the file, at
    /// [`ScalarPlace::indent`] columns (a literal block: `|`, `|-`, `|+`).
    lines_are_the_files: bool,
    /// The columns before the value on each of its lines, in a literal block.
    indent: usize,
}

impl ScalarPlace {
    /// The position in the file of `at`, a position in the value; `None`
    /// when the value's lines are not the file's (quoted, folded and plain
    /// scalars fold their lines and unescape their text).
    pub fn in_file(&self, at: TextPosition) -> Option<TextPosition> {
        self.lines_are_the_files.then(|| TextPosition {
            line: self.line + at.line - 1,
            column: self.indent + at.column,
        })
    }
}

/// The scalar at `path` (mapping keys and sequence indexes, joined by `.`;
/// a key may itself hold dots) in document `document` (from 0, empty
/// documents counted) of the YAML stream `src`; `None` when it is not there,
/// is not a scalar, or the text does not parse.
pub fn locate(src: &str, document: usize, path: &str) -> Option<ScalarPlace> {
    let mut events = Parser::new_from_str(src).map(|e| e.ok());
    let mut documents = 0;
    loop {
        match events.next()?? {
            (Event::DocumentStart(_), _) if documents == document => break,
            (Event::DocumentStart(_), _) => documents += 1,
            (Event::StreamEnd, _) => return None,
            _ => {}
        }
    }
    let mut tree = Tree { events };
    let (node, _) = tree.node()?;
    node.find(path)
}

/// A node of the located document: its scalars with their spans.
enum Lite {
    Scalar {
        value: String,
        style: ScalarStyle,
        span: Span,
    },
    Seq(Vec<Lite>),
    Map(Vec<(Lite, Lite)>),
    /// An alias: not followed.
    Alias,
}

impl Lite {
    fn find(&self, path: &str) -> Option<ScalarPlace> {
        match self {
            Lite::Map(entries) => entries.iter().find_map(|(key, value)| {
                let Lite::Scalar { value: key, .. } = key else {
                    return None;
                };
                match path.strip_prefix(key.as_str())? {
                    "" => value.place(),
                    rest => value.find(rest.strip_prefix('.')?),
                }
            }),
            Lite::Seq(items) => {
                let (index, rest) = path.split_once('.').unwrap_or((path, ""));
                let item = items.get(index.parse::<usize>().ok()?)?;
                if rest.is_empty() {
                    item.place()
                } else {
                    item.find(rest)
                }
            }
            Lite::Scalar { .. } | Lite::Alias => None,
        }
    }

    /// Where the scalar is; `None` for a collection or an alias.
    fn place(&self) -> Option<ScalarPlace> {
        let Lite::Scalar { value, style, span } = self else {
            return None;
        };
        // A literal block's span starts at its first line of content; the
        // value's leading line breaks are the empty lines before it.
        let literal = *style == ScalarStyle::Literal;
        let empty_lines = if literal {
            value.chars().take_while(|c| *c == '\n').count()
        } else {
            0
        };
        Some(ScalarPlace {
            line: span.start.line() - empty_lines,
            lines_are_the_files: literal,
            indent: span.start.col(),
        })
    }
}

/// The events of one document, read into [`Lite`] nodes.
struct Tree<I> {
    events: I,
}

impl<'a, I: Iterator<Item = Option<(Event<'a>, Span)>>> Tree<I> {
    /// The next node, and whether it ended a collection instead (`None`
    /// node, `true`); `None` at the end of the document or on a parse error.
    fn node(&mut self) -> Option<(Lite, bool)> {
        let (event, span) = self.events.next()??;
        Some(match event {
            Event::Scalar(value, style, ..) => (
                Lite::Scalar {
                    value: value.into_owned(),
                    style,
                    span,
                },
                false,
            ),
            Event::Alias(_) => (Lite::Alias, false),
            Event::SequenceStart(..) => {
                let mut items = Vec::new();
                loop {
                    match self.node()? {
                        (_, true) => break,
                        (item, false) => items.push(item),
                    }
                }
                (Lite::Seq(items), false)
            }
            Event::MappingStart(..) => {
                let mut entries = Vec::new();
                loop {
                    let key = match self.node()? {
                        (_, true) => break,
                        (key, false) => key,
                    };
                    let (value, _) = self.node()?;
                    entries.push((key, value));
                }
                (Lite::Map(entries), false)
            }
            Event::SequenceEnd | Event::MappingEnd => (Lite::Alias, true),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "# a comment\n---\n---\nkind: ConfigMap\ndata:\n  a.b: |-\n    {\n      \"x\": 1\n    }\n  quoted: \"{\\\"x\\\":\n    1}\"\n  folded: >\n    {}\n  lead: |\n\n    {}\n  list: [a, {k: v}]\n";

    #[test]
    fn finds_scalars_and_maps_literal_lines() {
        let at = |line, column| TextPosition { line, column };
        // Document 0 is the empty one before the second `---`.
        let literal = locate(STREAM, 1, "data.a.b").unwrap();
        assert_eq!(literal.line, 7);
        assert_eq!(literal.in_file(at(2, 3)), Some(at(8, 7)));
        let quoted = locate(STREAM, 1, "data.quoted").unwrap();
        assert_eq!((quoted.line, quoted.in_file(at(1, 1))), (10, None));
        let folded = locate(STREAM, 1, "data.folded").unwrap();
        assert_eq!((folded.line, folded.in_file(at(1, 1))), (13, None));
        // The empty line the value starts with is its line 1.
        let lead = locate(STREAM, 1, "data.lead").unwrap();
        assert_eq!(lead.in_file(at(2, 1)), Some(at(16, 5)));
        assert_eq!(locate(STREAM, 1, "data.list.1.k").unwrap().line, 17);
        for (document, path) in [
            (1, "data"),
            (1, "data.a"),
            (1, "data.missing"),
            (1, "data.list.2"),
            (0, "data.a.b"),
            (2, "data.a.b"),
        ] {
            assert_eq!(locate(STREAM, document, path), None, "{document} {path}");
        }
        assert_eq!(locate("a: [", 0, "a"), None);
    }
}
