//! JSONPatch (RFC 6902) from one JSON document to another: only the operations
//! needed, with RFC 6901 escaping of path segments, written as JSON text.

use serde::Serialize;
use serde_json::Value;

/// One patch operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operation {
    /// `add`, `remove` or `replace`.
    pub op: Op,
    /// A JSON pointer.
    pub path: String,
    /// The new value, for `add` and `replace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// The operations a diff uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Adds a member or an element; a missing parent map is added whole.
    Add,
    /// Removes a member or an element.
    Remove,
    /// Replaces a value.
    Replace,
}

/// The operations that turn `before` into `after`: members are added,
/// removed or replaced one by one, maps that do not exist yet are added whole,
/// and an array changes element by element when its length stays or grows,
/// else it is replaced.
pub fn diff(before: &Value, after: &Value) -> Vec<Operation> {
    let mut ops = Vec::new();
    diff_into(&mut String::new(), before, after, &mut ops);
    ops
}

fn diff_into(path: &mut String, before: &Value, after: &Value, ops: &mut Vec<Operation>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                ops.push(Operation {
                    op: Op::Remove,
                    path: child(path, key),
                    value: None,
                });
            }
            for (key, new) in a {
                match b.get(key) {
                    Some(old) => {
                        let len = path.len();
                        push_segment(path, key);
                        diff_into(path, old, new, ops);
                        path.truncate(len);
                    }
                    None => ops.push(Operation {
                        op: Op::Add,
                        path: child(path, key),
                        value: Some(new.clone()),
                    }),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if a.len() >= b.len() => {
            for (i, (old, new)) in b.iter().zip(a).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                diff_into(path, old, new, ops);
                path.truncate(len);
            }
            for (i, new) in a.iter().enumerate().skip(b.len()) {
                ops.push(Operation {
                    op: Op::Add,
                    path: format!("{path}/{i}"),
                    value: Some(new.clone()),
                });
            }
        }
        (b, a) if b == a => {}
        (_, a) => ops.push(Operation {
            op: Op::Replace,
            path: path.clone(),
            value: Some(a.clone()),
        }),
    }
}

/// The pointer to member `key` of the value at `path`.
fn child(path: &str, key: &str) -> String {
    let mut out = String::with_capacity(path.len() + key.len() + 4);
    out.push_str(path);
    push_segment(&mut out, key);
    out
}

/// Appends `/` and a member name as a JSON-pointer segment: `~` is `~0`,
/// `/` is `~1`.
fn push_segment(path: &mut String, key: &str) {
    path.push('/');
    escape_segment(key, |piece| path.push_str(piece));
}

/// Gives `key` as a JSON-pointer segment, piece by piece: the runs of it that stay as they
/// are, and `~0` for each `~`, `~1` for each `/`.
fn escape_segment<'a>(key: &'a str, mut emit: impl FnMut(&'a str)) {
    let mut start = 0;
    for (i, b) in key.bytes().enumerate() {
        let escaped = match b {
            b'~' => "~0",
            b'/' => "~1",
            _ => continue,
        };
        emit(&key[start..i]);
        emit(escaped);
        start = i + 1;
    }
    emit(&key[start..]);
}

/// Whether JSON escapes any character of `s`: a quote, a backslash or a control character.
/// Eight bytes at a time: this runs on every string of every answer.
fn needs_escape(s: &str) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether a byte of `x` is below `n` (at most 0x80): the classic bit trick, exact for
    // whether there is one.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let equal = |x: u64, b: u8| below(x ^ (ONES * u64::from(b)), 1);
    let bytes = s.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_ne_bytes(chunk.try_into().expect("a chunk of eight"));
        if below(x, 0x20) || equal(x, b'"') || equal(x, b'\\') {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Appends `s` as a JSON string, as serde_json writes it; one with nothing to escape (every
/// annotation key and nearly every value) is copied whole.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s) {
        serde_json::to_writer(out, s).expect("a string serializes");
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// A JSONPatch written as JSON text operation by operation, without
/// [`Operation`] values: how the webhook writes the patch of its annotation
/// edits, and the operations of a [`diff`].
#[derive(Debug, Default)]
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// Appends an operation on member `key` of the value at `parent`, with
    /// `value` for `add` and `replace`.
    pub fn push(&mut self, op: Op, parent: &str, key: &str, value: Option<&str>) {
        self.open(op);
        if needs_escape(parent) || needs_escape(key) {
            // A pointer whose text JSON escapes (no annotation key is one): made whole first.
            write_str(&mut self.out, &child(parent, key));
        } else {
            // Written in place: nothing to escape for JSON, `~` and `/` for the pointer.
            self.out.push(b'"');
            self.out.extend_from_slice(parent.as_bytes());
            self.out.push(b'/');
            let out = &mut self.out;
            escape_segment(key, |piece| out.extend_from_slice(piece.as_bytes()));
            self.out.push(b'"');
        }
        if let Some(value) = value {
            self.out.extend_from_slice(b",\"value\":");
            write_str(&mut self.out, value);
        }
        self.out.push(b'}');
    }

    /// Appends an operation on the value at `path`.
    pub fn push_at(&mut self, op: Op, path: &str, value: Option<&impl Serialize>) {
        self.open(op);
        write_str(&mut self.out, path);
        if let Some(value) = value {
            self.out.extend_from_slice(b",\"value\":");
            serde_json::to_writer(&mut self.out, value).expect("a JSON value serializes");
        }
        self.out.push(b'}');
    }

    /// Writes the start of an operation, up to its path.
    fn open(&mut self, op: Op) {
        if self.out.is_empty() {
            // Room for a few annotation edits at once (the three of an attached pod take 330
            // bytes).
            self.out.reserve(512);
            self.out.push(b'[');
        } else {
            self.out.push(b',');
        }
        self.out.extend_from_slice(match op {
            Op::Add => b"{\"op\":\"add\",\"path\":",
            Op::Remove => b"{\"op\":\"remove\",\"path\":",
            Op::Replace => b"{\"op\":\"replace\",\"path\":",
        });
    }

    /// Whether no operation was written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The patch's JSON text.
    pub fn finish(mut self) -> Vec<u8> {
        if self.out.is_empty() {
            self.out.push(b'[');
        }
        self.out.push(b']');
        self.out
    }
}

impl From<&[Operation]> for Writer {
    fn from(ops: &[Operation]) -> Self {
        let mut writer = Writer::default();
        for op in ops {
            writer.push_at(op.op, &op.path, op.value.as_ref());
        }
        writer
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The diff, checking that the writer writes it as serde does.
    fn ops(before: Value, after: Value) -> Value {
        let ops = diff(&before, &after);
        let written = Writer::from(&ops[..]).finish();
        assert_eq!(written, serde_json::to_vec(&ops).unwrap());
        serde_json::to_value(ops).unwrap()
    }

    #[test]
    fn table() {
        let cases = [
            ("no change", json!({"a": 1}), json!({"a": 1}), json!([])),
            (
                "escapes ~ and /",
                json!({"metadata": {"annotations": {}}}),
                json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "x", "a~b": "y"}}}),
                json!([
                    {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "x"},
                    {"op": "add", "path": "/metadata/annotations/a~0b", "value": "y"}
                ]),
            ),
            (
                "escapes in nested paths",
                json!({"x/y": {"a~/b/~": 1}}),
                json!({"x/y": {"a~/b/~": 2}}),
                json!([{"op": "replace", "path": "/x~1y/a~0~1b~1~0", "value": 2}]),
            ),
            (
                "missing parent map added whole",
                json!({"metadata": {"name": "p"}}),
                json!({"metadata": {"name": "p", "annotations": {"a/b": "1"}}}),
                json!([{"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}}]),
            ),
            (
                "replace and remove",
                json!({"m": {"a": "1", "b": "2"}}),
                json!({"m": {"a": "3"}}),
                json!([
                    {"op": "remove", "path": "/m/b"},
                    {"op": "replace", "path": "/m/a", "value": "3"}
                ]),
            ),
            (
                "arrays grow or are replaced",
                json!({"l": [1, 2], "s": [1, 2]}),
                json!({"l": [1, 5, 3], "s": [1]}),
                json!([
                    {"op": "replace", "path": "/l/1", "value": 5},
                    {"op": "add", "path": "/l/2", "value": 3},
                    {"op": "replace", "path": "/s", "value": [1]}
                ]),
            ),
        ];
        for (name, before, after, want) in cases {
            assert_eq!(ops(before, after), want, "{name}");
        }
    }

    #[test]
    fn a_string_needs_escaping_exactly_when_serde_escapes_it() {
        let plain = "abcdefghijklmnopq";
        let mut cases: Vec<String> = vec![String::new(), "é".repeat(9), "~/\u{7f}".repeat(5)];
        for b in (0u8..=0x7f)
            .map(char::from)
            .chain(['é', '\u{80}', '\u{10ffff}'])
        {
            for at in 0..=plain.len() {
                let mut s = plain[..at].to_string();
                s.push(b);
                s.push_str(&plain[at..]);
                cases.push(s);
            }
        }
        for s in cases {
            let serde = serde_json::to_string(&s).unwrap();
            assert_eq!(needs_escape(&s), serde.len() != s.len() + 2, "{s:?}");
            let mut out = Vec::new();
            write_str(&mut out, &s);
            assert_eq!(String::from_utf8(out).unwrap(), serde, "{s:?}");
        }
    }

    #[test]
    fn push_writes_what_serde_writes() {
        // (parent, key, value)
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "/metadata/annotations",
                "k8s.v1.cni.cncf.io/networks",
                Some("linkerd-cni"),
            ),
            ("/metadata/annotations", "a~b/c~/", None),
            (
                "/metadata/annotations",
                "q\"uote",
                Some("back\\slash \"x\""),
            ),
            ("/m\"x", "tab\there", Some("line\nbreak\u{1}")),
            ("", "", Some("")),
            ("/a", "é/ü~", Some("\u{7f}é")),
        ];
        for (&(parent, key, value), op) in cases
            .iter()
            .flat_map(|c| [Op::Add, Op::Replace, Op::Remove].map(|op| (c, op)))
        {
            let mut writer = Writer::default();
            writer.push(op, parent, key, value);
            writer.push(Op::Remove, parent, key, None);
            let want = [
                Operation {
                    op,
                    path: child(parent, key),
                    value: value.map(|v| json!(v)),
                },
                Operation {
                    op: Op::Remove,
                    path: child(parent, key),
                    value: None,
                },
            ];
            assert_eq!(
                String::from_utf8(writer.finish()).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "{parent:?} {key:?} {value:?}"
            );
        }
    }

    #[test]
    fn patches_apply_with_an_independent_implementation() {
        let before = json!({"metadata": {"labels": {"x/y": "1"}}, "spec": {"c": [{"n": 1}]}});
        let after =
            json!({"metadata": {"annotations": {"a~/b": ""}}, "spec": {"c": [{"n": 2}, {}]}});
        let patch: json_patch::Patch =
            serde_json::from_value(ops(before.clone(), after.clone())).unwrap();
        let mut doc = before;
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, after);
    }
}
