//! The tree to and from JSON values, for fronts that speak JSON (the webhook).
//!
//! JSON strings become double-quoted scalars, so their meaning never depends on
//! a resolver; numbers, booleans and null become plain scalars. Back to JSON, a
//! plain scalar is resolved with the YAML 1.2 core schema, the one JSON is a
//! subset of: the scalars this crate writes itself are quoted whenever a reader
//! could take them for anything but a string.

use serde_json::{Map as JsonMap, Number, Value};

use super::{Map, Node, Scalar, Seq, Style, TextPosition};

/// How a JSON value is named in error messages: `a string`, `a list`, `null`.
pub(crate) fn describe_json(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Why a text (a scalar's value) is not JSON, and where in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// What is wrong, without the position.
    pub message: String,
    /// Where in the text, when the parser knows.
    pub at: Option<TextPosition>,
}

impl From<serde_json::Error> for JsonError {
    fn from(error: serde_json::Error) -> Self {
        let message = error.to_string();
        if error.line() == 0 {
            return JsonError { message, at: None };
        }
        let suffix = format!(" at line {} column {}", error.line(), error.column());
        JsonError {
            message: message
                .strip_suffix(&suffix)
                .unwrap_or(&message)
                .to_string(),
            at: Some(TextPosition {
                line: error.line(),
                column: error.column(),
            }),
        }
    }
}

impl std::fmt::Display for JsonError {
    /// The message and where in the value: `expected `,` or `}` at line 12
    /// column 5 of the value`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match self.at {
            Some(at) => write!(f, " at line {} column {} of the value", at.line, at.column),
            None => Ok(()),
        }
    }
}

impl Node {
    /// The tree of a JSON value.
    pub fn from_json(value: &Value) -> Node {
        match value {
            Value::Null => Node::plain("null"),
            Value::Bool(b) => Node::plain(if *b { "true" } else { "false" }),
            Value::Number(n) => Node::plain(n.to_string()),
            Value::String(s) => Node::Scalar(Scalar {
                value: s.as_str().into(),
                style: Style::DoubleQuoted,
                props: None,
            }),
            Value::Array(items) => Node::Seq(Seq {
                items: items.iter().map(Node::from_json).collect(),
                ..Seq::default()
            }),
            Value::Object(entries) => Node::Map(Map {
                entries: entries
                    .iter()
                    .map(|(k, v)| (Node::string(k.as_str()), Node::from_json(v)))
                    .collect(),
                ..Map::default()
            }),
        }
    }

    /// The JSON value of the tree. Mapping keys are taken as strings.
    pub fn to_json(&self) -> Value {
        match self {
            Node::Scalar(s) => scalar_to_json(s),
            Node::Seq(seq) => Value::Array(seq.items.iter().map(Node::to_json).collect()),
            Node::Map(map) => {
                let mut out = JsonMap::with_capacity(map.entries.len());
                for (k, v) in &map.entries {
                    let key = match k {
                        Node::Scalar(s) => s.value.to_string(),
                        other => other.to_json().to_string(),
                    };
                    out.insert(key, v.to_json());
                }
                Value::Object(out)
            }
        }
    }
}

fn scalar_to_json(s: &Scalar) -> Value {
    let text = s.value.as_str();
    if s.style != Style::Plain || s.tag().is_some_and(|t| t == "!!str" || t.ends_with(":str")) {
        return Value::String(text.to_string());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    number(text).map_or_else(|| Value::String(text.to_string()), Value::Number)
}

/// A YAML 1.2 core-schema integer or float that JSON can hold.
fn number(text: &str) -> Option<Number> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if unsigned.is_empty() {
        return None;
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok().map(Number::from);
    }
    if let Some(octal) = text.strip_prefix("0o") {
        return u64::from_str_radix(octal, 8).ok().map(Number::from);
    }
    if unsigned.bytes().all(|b| b.is_ascii_digit()) {
        let digits = text.strip_prefix('+').unwrap_or(text);
        if let Ok(n) = digits.parse::<i64>() {
            return Some(n.into());
        }
        if let Ok(n) = digits.parse::<u64>() {
            return Some(n.into());
        }
    }
    let float_chars = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
    let starts_well = unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if float_chars && starts_well {
        return text.parse::<f64>().ok().and_then(Number::from_f64);
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::yaml::parse_document;

    #[test]
    fn json_round_trips() {
        let value = json!({
            "metadata": {"name": "web", "annotations": {"a": "1", "b": "true", "c": ""}},
            "spec": {"replicas": 2, "ratio": 0.5, "on": true, "none": null, "list": [1, "x", {}]}
        });
        assert_eq!(Node::from_json(&value).to_json(), value);
    }

    #[test]
    fn plain_scalars_resolve_as_yaml_1_2() {
        let doc = parse_document(
            "a: 10\nb: -3\nc: 0x1F\nd: 1.5e3\ne: true\nf: ~\ng: web\nh: '10'\ni: .inf\nj: 0o17\nk: 1.2.3\nl: !!str 5\nm: 18446744073709551615\n",
        )
        .unwrap();
        assert_eq!(
            doc.to_json(),
            json!({"a": 10, "b": -3, "c": 31, "d": 1500.0, "e": true, "f": null, "g": "web",
                   "h": "10", "i": ".inf", "j": 15, "k": "1.2.3", "l": "5",
                   "m": 18446744073709551615u64})
        );
    }

    #[test]
    fn strings_the_crate_writes_stay_strings() {
        for s in [
            "1000002102",
            "true",
            "null",
            "",
            "0x10",
            "linkerd-cni",
            "a, b",
        ] {
            assert_eq!(Node::string(s).to_json(), json!(s), "{s}");
        }
    }
}
