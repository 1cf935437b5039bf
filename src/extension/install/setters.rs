//! kpt's setters, as `apply-setters` applies them: a line ending in `#
//! kpt-set: PATTERN` gets the pattern as its value, each `${name}` replaced by
//! the setter's value; a line naming a setter that is not given is left as it
//! is. The value keeps the kind the package wrote (a number stays a number, a
//! string stays a string), quoted where it would otherwise read as another.
//! A key with no value before the comment is an array setter: the block
//! sequence below it gets the items of the value, a YAML list (`[a, b]`).

use std::collections::BTreeMap;

use crate::yaml::{Node, parse_document};

/// The comment that marks a setter.
const MARK: &str = " # kpt-set: ";

/// `text` with the setters of `values` applied, still YAML text (the comments kept).
pub fn apply(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if let Some(items) = array_items(line, values) {
            out.push_str(line);
            let key_indent = indent(line);
            let mut item_indent = None;
            while let Some(next) = lines.peek() {
                let at = indent(next);
                let is_item = next[at..].starts_with("- ") && at >= key_indent;
                if !is_item || item_indent.is_some_and(|i| i != at) {
                    break;
                }
                item_indent = Some(at);
                lines.next();
            }
            let pad = " ".repeat(item_indent.unwrap_or(key_indent));
            for item in items {
                out.push_str(&format!("{pad}- {}\n", written_like("x", &item)));
            }
            continue;
        }
        match set_line(line, values) {
            Some(new) => out.push_str(&new),
            None => out.push_str(line),
        }
    }
    out
}

/// The items of the array setter on `line` (`key: # kpt-set: ${name}`),
/// when it is one and its value is given as a list of scalars.
fn array_items(line: &str, values: &BTreeMap<&str, String>) -> Option<Vec<String>> {
    let (before, pattern) = line.split_once(MARK)?;
    if !before.trim_end().ends_with(':') {
        return None;
    }
    let name = pattern.trim().strip_prefix("${")?.strip_suffix('}')?;
    let node = parse_document(values.get(name)?).ok()?;
    node.as_seq()?
        .items
        .iter()
        .map(|item| item.as_text().map(str::to_string))
        .collect()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The names of the setters `text` uses, sorted.
pub fn names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some((_, pattern)) = line.split_once(MARK) else {
            continue;
        };
        let mut rest = pattern;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            names.push(rest[start + 2..start + len].to_string());
            rest = &rest[start + len..];
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The line with its setter applied; `None` when it has none, or one not given.
fn set_line(line: &str, values: &BTreeMap<&str, String>) -> Option<String> {
    let (before, pattern) = line.split_once(MARK)?;
    if before.trim_end().ends_with(':') {
        return None;
    }
    let pattern = pattern.trim_end();
    let mut value = pattern.to_string();
    for name in names(line) {
        let given = values.get(name.as_str())?;
        value = value.replace(&format!("${{{name}}}"), given);
    }
    let (key, old) = split_value(before)?;
    let written = written_like(old, &value);
    let end = if line.ends_with('\n') { "\n" } else { "" };
    Some(format!("{key}{written}{MARK}{pattern}{end}"))
}

/// The text of a line before its value (indentation, `- `, `key: `), and the
/// value, which may hold spaces of its own.
fn split_value(before: &str) -> Option<(&str, &str)> {
    let indent = indent(before);
    let rest = &before[indent..];
    let item = if rest.starts_with("- ") { 2 } else { 0 };
    let after_dash = &rest[item..];
    let key = match after_dash.starts_with(['"', '\'']) {
        true => 0,
        false => after_dash.find(": ").map_or(0, |i| i + 2),
    };
    let at = indent + item + key;
    let value = before[at..].trim_end();
    (!value.is_empty()).then(|| (&before[..at], value))
}

/// `value` written as `old` was: plain where plain reads back as the same
/// kind of value (a string as a string, a number as a number), double-quoted
/// otherwise.
fn written_like(old: &str, value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    if old.starts_with(['"', '\'']) {
        return quoted;
    }
    let kind = |text: &str| {
        parse_document(&format!("x: {text}\n"))
            .ok()
            .and_then(|doc| doc.get_path(&["x"]).cloned())
    };
    let was_string = kind(old).is_some_and(|n| n.to_json().is_string());
    match kind(value) {
        Some(Node::Scalar(s)) if s.value == value && s.style == crate::yaml::Style::Plain => {
            let is_string = Node::Scalar(s).to_json().is_string();
            if is_string == was_string {
                value.to_string()
            } else {
                quoted
            }
        }
        _ => quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    #[test]
    fn sets_values_as_the_package_wrote_them() {
        let text = "a: x # kpt-set: ${ns}\n  - --flag=x # kpt-set: --flag=${ns}\nn: 2 # kpt-set: ${n}\nq: \"x\" # kpt-set: ${ns}\nkeep: y # kpt-set: ${other}\nplain: z\n";
        for (ns, n, want) in [
            (
                "mesh",
                "3",
                "a: mesh # kpt-set: ${ns}\n  - --flag=mesh # kpt-set: --flag=${ns}\nn: 3 # kpt-set: ${n}\nq: \"mesh\" # kpt-set: ${ns}\n",
            ),
            // A string that would read as a number stays a string.
            (
                "123",
                "4",
                "a: \"123\" # kpt-set: ${ns}\n  - --flag=123 # kpt-set: --flag=${ns}\nn: 4 # kpt-set: ${n}\nq: \"123\" # kpt-set: ${ns}\n",
            ),
            // A string that is not plain-safe is quoted.
            (
                "a: b",
                "5",
                "a: \"a: b\" # kpt-set: ${ns}\n  - \"--flag=a: b\" # kpt-set: --flag=${ns}\nn: 5 # kpt-set: ${n}\nq: \"a: b\" # kpt-set: ${ns}\n",
            ),
        ] {
            let out = apply(text, &values(&[("ns", ns), ("n", n)]));
            let tail = "keep: y # kpt-set: ${other}\nplain: z\n";
            assert_eq!(out, format!("{want}{tail}"), "{ns}");
        }
    }

    /// A quoted value with spaces of its own (a CEL expression) is replaced whole.
    #[test]
    fn values_with_spaces_are_replaced_whole() {
        let text = "  - name: x\n    expression: \"!'[]'.split(',').exists(n, n == 'a b')\" # kpt-set: !'${list}'.split(',').exists(n, n == 'a b')\n- a b c # kpt-set: ${v}\n";
        let want = "  - name: x\n    expression: \"!'[x, y]'.split(',').exists(n, n == 'a b')\" # kpt-set: !'${list}'.split(',').exists(n, n == 'a b')\n- \"d: e\" # kpt-set: ${v}\n";
        assert_eq!(
            apply(text, &values(&[("list", "[x, y]"), ("v", "d: e")])),
            want
        );
    }

    #[test]
    fn array_setters_set_the_sequence_below_their_key() {
        let text = "a:\n  values: # kpt-set: ${list}\n  - one\n  - two\n  after: x\nb: # kpt-set: ${list}\n    - deep\nc: 1\n";
        for (list, want) in [
            (
                "[x, y, z]",
                "a:\n  values: # kpt-set: ${list}\n  - x\n  - y\n  - z\n  after: x\nb: # kpt-set: ${list}\n    - x\n    - y\n    - z\nc: 1\n",
            ),
            (
                "[\"123\"]",
                "a:\n  values: # kpt-set: ${list}\n  - \"123\"\n  after: x\nb: # kpt-set: ${list}\n    - \"123\"\nc: 1\n",
            ),
            ("not a list", text),
        ] {
            assert_eq!(apply(text, &values(&[("list", list)])), want, "{list}");
        }
        assert_eq!(apply(text, &values(&[])), text);
        assert_eq!(names(text), ["list"]);
    }

    #[test]
    fn names_lists_each_setter_once() {
        assert_eq!(
            names("a: b # kpt-set: ${x}.${y}\nc: d # kpt-set: ${x}\ne: f\n"),
            ["x", "y"]
        );
    }
}
