//! Which strings may be written without quotes.
//!
//! Kubernetes reads YAML with 1.1 rules (`yes`, `on`, `y` are booleans, `0755`
//! is octal, `12:30` is sexagesimal, timestamps are timestamps); YAML 1.2 readers
//! take `1e3` and `.5` for floats. A string is written plain only when no such
//! reader could take it for anything else and the plain syntax can carry it.

/// Words that YAML 1.1 or 1.2 resolve to booleans or null, compared case-insensitively.
const RESERVED_WORDS: &[&str] = &[
    "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~", "<<", "=",
];

/// Whether `s` reads back as the same string when written plain, in any
/// position (mapping key, value or sequence item), under YAML 1.1 and 1.2.
pub fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if first.is_whitespace() || s.ends_with(char::is_whitespace) || s.ends_with(':') {
        return false;
    }
    // Indicators, and characters that start a number, a timestamp or `.inf`.
    if "-?:,[]{}#&*!|>'\"%@`.+".contains(first) || first.is_ascii_digit() {
        return false;
    }
    if RESERVED_WORDS.iter().any(|w| w.eq_ignore_ascii_case(s)) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") {
        return false;
    }
    if s.is_ascii() {
        return s
            .bytes()
            .all(|b| is_printable_ascii(b) && !matches!(b, b'[' | b']' | b'{' | b'}'));
    }
    s.chars().all(is_plain_char)
}

/// The ASCII case of [`is_printable`], byte by byte.
fn is_printable_ascii(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

/// Characters a block plain scalar can hold without escaping. Brackets are
/// left out although block context allows them, so a reader never guesses flow.
fn is_plain_char(c: char) -> bool {
    match c {
        ' ' => true,
        '[' | ']' | '{' | '}' => false,
        c => is_printable(c),
    }
}

/// Whether `s` can be written as a YAML double-quoted scalar without escapes
/// other than for `"` and `\`: printable text on one line.
pub(super) fn is_printable_line(s: &str) -> bool {
    if s.is_ascii() {
        return s.bytes().all(is_printable_ascii);
    }
    s.chars().all(is_printable)
}

/// Whether `s` can be a block scalar's content: printable text and line feeds.
pub(super) fn is_block_content(s: &str) -> bool {
    s.chars().all(|c| c == '\n' || c == '\t' || is_printable(c))
}

/// A character YAML can carry unescaped: no control characters, no byte-order
/// mark, no Unicode line or paragraph separators.
fn is_printable(c: char) -> bool {
    !(c.is_control() || matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_safety_table() {
        let cases = [
            ("linkerd-cni", true),
            ("k8s.v1.cni.cncf.io/networks", true),
            ("nginx:1.25", true),
            ("a b", true),
            ("http://x", true),
            ("yes", false),
            ("Yes", false),
            ("ON", false),
            ("off", false),
            ("y", false),
            ("N", false),
            ("null", false),
            ("~", false),
            ("0755", false),
            ("1e3", false),
            ("2102", false),
            ("-1", false),
            ("+1", false),
            (".5", false),
            (".inf", false),
            ("2026-11-22", false),
            ("12:30", false),
            ("<<", false),
            ("=", false),
            ("", false),
            (" a", false),
            ("a ", false),
            ("a: b", false),
            ("a #b", false),
            ("key:", false),
            ("- a", false),
            ("*x", false),
            ("&x", false),
            ("!x", false),
            ("@x", false),
            ("a,b", true),
            ("[a]", false),
            ("a\nb", false),
            ("a\tb", false),
            ("'q'", false),
            ("\"q\"", false),
            ("%x", false),
        ];
        for (s, want) in cases {
            assert_eq!(is_plain_safe(s), want, "{s:?}");
        }
    }
}
