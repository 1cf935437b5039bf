//! The edits of a networks annotation, made in the user's own text: append a
//! selection, remove one, name interfaces.

use std::ops::Range;

use serde_json::Value;

use super::{Form, Networks, Selection, Slot};

impl<'a> Networks<'a> {
    /// The annotation text with a plain selection of `name` appended, in the annotation's own form and spacing.
    ///
    /// `name` should be a DNS-1123 label; it is inserted right after the last item, so trailing
    /// text is kept. Empty form gives `name` inside the text's whitespace. Comma form separates with `, ` if any existing
    /// separator has whitespace after its comma and with `,` otherwise (so a single item `a`
    /// gives `a,name`). JSON form copies the separator between the last two elements; with one
    /// element it continues a multi-line list on a new line with the same indentation and
    /// otherwise uses `, ` if the text uses `, ` or `: ` anywhere. The new element is
    /// `{"name": "…"}` if the text uses `: ` (or the list is empty) and `{"name":"…"}` otherwise.
    pub fn with_appended(&self, name: &str) -> String {
        let text = self.text;
        match (self.form, self.selections.as_slice()) {
            (Form::Empty, _) | (Form::Comma, []) => {
                // Whitespace around nothing stays around the new item, so removal restores it.
                let at = text.len() - text.trim_start().len();
                splice(text, at..at, name)
            }
            (Form::Comma, [.., last]) => {
                let spaced = self.separators().any(|sep| {
                    sep.split_once(',')
                        .is_some_and(|(_, after)| after.starts_with(char::is_whitespace))
                });
                let sep = if spaced { ", " } else { "," };
                splice(text, last.span.end..last.span.end, &format!("{sep}{name}"))
            }
            (Form::Json, []) => {
                let at = self.after_open_bracket();
                splice(text, at..at, &json_element(name, true))
            }
            (Form::Json, [only]) => {
                let indent = &text[self.after_open_bracket()..only.span.start];
                let sep = match indent.rfind('\n') {
                    Some(nl) if indent[..nl].ends_with('\r') => format!(",{}", &indent[nl - 1..]),
                    Some(nl) => format!(",{}", &indent[nl..]),
                    None if text.contains(", ") || text.contains(": ") => ", ".to_owned(),
                    None => ",".to_owned(),
                };
                let element = json_element(name, text.contains(": "));
                let end = only.span.end;
                splice(text, end..end, &format!("{sep}{element}"))
            }
            (Form::Json, [.., prev, last]) => {
                let sep = &text[prev.span.end..last.span.start];
                let element = json_element(name, text.contains(": "));
                let end = last.span.end;
                splice(text, end..end, &format!("{sep}{element}"))
            }
        }
    }

    /// The annotation text without the first *plain* selection of `name` (a selection that is exactly `name`: no namespace, no interface, and in JSON form an object whose only key is "name"), or None if there is none; see [`Networks::without_first`].
    pub fn without_plain(&self, name: &str) -> Option<String> {
        self.without_first(|s| s.plain && s.name == name)
    }

    /// The annotation text without the first selection that `matches`, or None if none does.
    /// Other items keep their exact text.
    ///
    /// One adjacent separator goes with the item: the preceding one, or the following one for
    /// the first item. Removing the only item leaves the text around it in comma form and, in JSON
    /// form, removes the element and the whitespace before it (`[{"name": "a"}]` gives `[]`).
    pub fn without_first(&self, matches: impl Fn(&Selection) -> bool) -> Option<String> {
        let sels = &self.selections;
        let i = sels.iter().position(matches)?;
        let this = &sels[i];
        let cut = match (i.checked_sub(1).and_then(|p| sels.get(p)), sels.get(i + 1)) {
            (Some(prev), _) => prev.span.end..this.span.end,
            (None, Some(next)) => this.span.start..next.span.start,
            (None, None) if self.form == Form::Json => self.after_open_bracket()..this.span.end,
            (None, None) => this.span.clone(),
        };
        Some(splice(self.text, cut, ""))
    }

    /// The annotation text with an interface name for each selection that has none and for
    /// which `name_for` gives one; `None` when nothing changes. The names should be valid
    /// interface names.
    ///
    /// Comma form: `ns/name` becomes `ns/name@if` (and `name@`, `name@if`). JSON form: an `"interface"` that is `null` or
    /// `""` gets the name as its value; an element without `"interface"` gets it as a new last
    /// member, with the member separator and colon spacing the element already uses (a
    /// one-member element on several lines continues on a new line with the same indentation).
    /// Everything else is kept byte for byte.
    pub fn with_interfaces(
        &self,
        mut name_for: impl FnMut(&Selection) -> Option<String>,
    ) -> Option<String> {
        let mut out = String::new();
        let mut copied = 0;
        let mut changed = false;
        // Read once, not for each selection: the edits stay linear in the text.
        let spaced = self.text.contains(", ");
        for selection in self.selections.iter().filter(|s| s.interface.is_none()) {
            crate::work::count(1);
            let Some(interface) = name_for(selection) else {
                continue;
            };
            let (range, insert) = self.interface_edit(selection, &interface, spaced);
            out.push_str(&self.text[copied..range.start]);
            out.push_str(&insert);
            copied = range.end;
            changed = true;
        }
        out.push_str(&self.text[copied..]);
        changed.then_some(out)
    }

    /// The span to replace and the text to put there to give `selection` its `interface`;
    /// `spaced`: whether the text holds `, ` anywhere.
    fn interface_edit(
        &self,
        selection: &Selection,
        interface: &str,
        spaced: bool,
    ) -> (Range<usize>, String) {
        let text = self.text;
        match &selection.slot {
            Slot::Comma => {
                // An item with an empty interface (`net1@`) ends with its `@`.
                let end = selection.span.end;
                let at = if text[..end].ends_with('@') { "" } else { "@" };
                (end..end, format!("{at}{interface}"))
            }
            Slot::Value(value) => (value.clone(), Value::from(interface).to_string()),
            Slot::After { previous, last } => {
                let key = match previous {
                    Some(end) => {
                        let after_comma = skip_json_space(text, *end) + 1;
                        skip_json_space(text, after_comma)
                    }
                    None => skip_json_space(text, selection.span.start + 1),
                };
                let before_colon = text[..last.start].trim_end_matches(JSON_SPACE);
                let key_end = before_colon[..before_colon.len() - 1]
                    .trim_end_matches(JSON_SPACE)
                    .len();
                let colon = &text[key_end..last.start];
                let sep = match previous {
                    Some(end) => text[*end..key].to_owned(),
                    None => {
                        let indent = &text[selection.span.start + 1..key];
                        match indent.rfind('\n') {
                            Some(nl) if indent[..nl].ends_with('\r') => {
                                format!(",{}", &indent[nl - 1..])
                            }
                            Some(nl) => format!(",{}", &indent[nl..]),
                            None if colon.contains(' ') || spaced => ", ".to_owned(),
                            None => ",".to_owned(),
                        }
                    }
                };
                let member = format!("{sep}\"interface\"{colon}{}", Value::from(interface));
                (last.end..last.end, member)
            }
        }
    }

    /// The texts between consecutive items.
    fn separators(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.selections
            .windows(2)
            .map(|w| &self.text[w[0].span.end..w[1].span.start])
    }

    /// Byte offset just after the `[` that opens a JSON list.
    fn after_open_bracket(&self) -> usize {
        self.text.find('[').map_or(0, |i| i + 1)
    }
}

/// `text` with `range` replaced by `insert`.
fn splice(text: &str, range: Range<usize>, insert: &str) -> String {
    let mut out = String::with_capacity(text.len() + insert.len());
    out.push_str(&text[..range.start]);
    out.push_str(insert);
    out.push_str(&text[range.end..]);
    out
}

/// The whitespace JSON allows between tokens.
const JSON_SPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// The offset of the first non-whitespace byte of `text` at or after `at`.
fn skip_json_space(text: &str, at: usize) -> usize {
    text.len() - text[at..].trim_start_matches(JSON_SPACE).len()
}

/// A JSON element selecting `name`, with or without a space after the colon.
fn json_element(name: &str, colon_space: bool) -> String {
    let colon = if colon_space { ": " } else { ":" };
    format!("{{\"name\"{colon}{}}}", Value::from(name))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{triples, valid_cases};
    use super::*;

    #[test]
    fn appends_in_the_users_form() {
        let cases = [
            ("", "linkerd-cni"),
            ("  ", "  linkerd-cni"),
            ("a", "a,linkerd-cni"),
            ("a  ", "a,linkerd-cni  "),
            ("a,b", "a,b,linkerd-cni"),
            ("a, other/b@net2", "a, other/b@net2, linkerd-cni"),
            ("a ,b", "a ,b,linkerd-cni"),
            ("a,b,\tc", "a,b,\tc, linkerd-cni"),
            ("linkerd-cni@e", "linkerd-cni@e,linkerd-cni"),
            ("[]", r#"[{"name": "linkerd-cni"}]"#),
            ("[ ]\n", "[{\"name\": \"linkerd-cni\"} ]\n"),
            (
                r#"[{"name":"a"}]"#,
                r#"[{"name":"a"},{"name":"linkerd-cni"}]"#,
            ),
            (
                r#"[{"name": "a"}]"#,
                r#"[{"name": "a"}, {"name": "linkerd-cni"}]"#,
            ),
            (
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}]"#,
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}, {"name": "linkerd-cni"}]"#,
            ),
            (
                r#"[{"name":"a"} , {"name":"b"}] "#,
                r#"[{"name":"a"} , {"name":"b"} , {"name":"linkerd-cni"}] "#,
            ),
            (
                "[\n  {\"name\": \"a\"}\n]\n",
                "[\n  {\"name\": \"a\"},\n  {\"name\": \"linkerd-cni\"}\n]\n",
            ),
            (
                "[\r\n    {\"name\":\"a\"}\r\n]",
                "[\r\n    {\"name\":\"a\"},\r\n    {\"name\":\"linkerd-cni\"}\r\n]",
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\"\n  }\n]",
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\"\n  },\n  {\"name\": \"linkerd-cni\"}\n]",
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let appended = parsed.with_appended("linkerd-cni");
            assert_eq!(appended, expected, "{text:?}");
            let reparsed = Networks::parse(&appended).expect("appended text parses");
            assert!(reparsed.references("linkerd-cni", "any"), "{appended:?}");
        }
    }

    #[test]
    fn removes_the_first_plain_selection() {
        let cases = [
            ("", None),
            ("a, b", None),
            ("ns/linkerd-cni, linkerd-cni@eth1", None),
            ("linkerd-cni", Some("")),
            ("  linkerd-cni  ", Some("    ")),
            ("a, linkerd-cni, b", Some("a, b")),
            ("linkerd-cni, a", Some("a")),
            ("a,linkerd-cni", Some("a")),
            ("a , linkerd-cni , b ", Some("a , b ")),
            ("linkerd-cni, linkerd-cni", Some("linkerd-cni")),
            ("ns/linkerd-cni, linkerd-cni", Some("ns/linkerd-cni")),
            ("[]", None),
            (r#"[{"name": "linkerd-cni", "ips": []}]"#, None),
            (r#"[{"name": "linkerd-cni", "interface": "e"}]"#, None),
            (
                r#"[{"name": "a"}, {"name": "linkerd-cni"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (r#"[{"name": "linkerd-cni"}]"#, Some("[]")),
            (r#" [ {"name": "linkerd-cni"} ] "#, Some(" [ ] ")),
            (
                r#"[{"name": "linkerd-cni"}, {"name": "a"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (
                r#"[{"name":"a"},{"name":"linkerd-cni"},{"name":"b","mac":"02:00:00:00:00:01"}]"#,
                Some(r#"[{"name":"a"},{"name":"b","mac":"02:00:00:00:00:01"}]"#),
            ),
            (
                "[\n  {\"name\": \"linkerd-cni\"},\n  {\"name\": \"a\"}\n]",
                Some("[\n  {\"name\": \"a\"}\n]"),
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\"name\": \"linkerd-cni\"}\n]",
                Some("[\n  {\"name\": \"a\"}\n]"),
            ),
            ("[\n  {\"name\": \"linkerd-cni\"}\n]\n", Some("[\n]\n")),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let removed = parsed.without_plain("linkerd-cni");
            assert_eq!(removed.as_deref(), expected, "{text:?}");
            if let Some(removed) = removed {
                Networks::parse(&removed).expect("result parses");
            }
        }
    }

    /// `if-<name>` for every selection, except those of network `skip`.
    fn name_all_but(skip: &str) -> impl Fn(&Selection) -> Option<String> + '_ {
        move |s| (s.name != skip).then(|| format!("if-{}", s.name))
    }

    /// Annotations, and what naming every network but `skip` makes of them
    /// (`None`: nothing to name).
    const NAMINGS: &[(&str, Option<&str>)] = &[
        ("", None),
        ("  ", None),
        ("[]", None),
        ("ns/net@if", None),
        ("a@e1, ns/b@e2", None),
        ("skip", None),
        ("a", Some("a@if-a")),
        ("ns/a", Some("ns/a@if-a")),
        (" a ,ns/b@e2,\tc  ", Some(" a@if-a ,ns/b@e2,\tc@if-c  ")),
        ("a, skip, b", Some("a@if-a, skip, b@if-b")),
        ("a,a", Some("a@if-a,a@if-a")),
        (
            r#"[{"name": "a"}]"#,
            Some(r#"[{"name": "a", "interface": "if-a"}]"#),
        ),
        (
            r#"[{"name":"a"}]"#,
            Some(r#"[{"name":"a","interface":"if-a"}]"#),
        ),
        (
            r#"[ { "name" : "a" } ]"#,
            Some(r#"[ { "name" : "a", "interface" : "if-a" } ]"#),
        ),
        (
            r#"[{"name":"a","ips":["10.0.0.1/24"],"x-unknown":{"k":[1,{}]}}]"#,
            Some(
                r#"[{"name":"a","ips":["10.0.0.1/24"],"x-unknown":{"k":[1,{}]},"interface":"if-a"}]"#,
            ),
        ),
        (
            r#"[{"name": "a", "interface": null, "mac": "c2:b0:57:49:47:f1"}]"#,
            Some(r#"[{"name": "a", "interface": "if-a", "mac": "c2:b0:57:49:47:f1"}]"#),
        ),
        (
            r#"[{"interface":"", "name":"a"}]"#,
            Some(r#"[{"interface":"if-a", "name":"a"}]"#),
        ),
        (
            r#"[{"name":"a","interf\u0061ce":null}]"#,
            Some(r#"[{"name":"a","interf\u0061ce":"if-a"}]"#),
        ),
        // Go's decoder leaves a string as it was on `null`: the interface is `e1`.
        (r#"[{"name":"a","interface":"e1","interface":null}]"#, None),
        (
            r#"[{"name":"a","interface":"","Interface":null}]"#,
            Some(r#"[{"name":"a","interface":"","Interface":"if-a"}]"#),
        ),
        (r#"[{"name":"a","interfaceRequest":"e1"}]"#, None),
        (
            r#"[{"name":"a","interfaceRequest":""}]"#,
            Some(r#"[{"name":"a","interfaceRequest":"","interface":"if-a"}]"#),
        ),
        ("a@", Some("a@if-a")),
        (" ns / a @ , b", Some(" ns / a @if-a , b@if-b")),
        ("/a", Some("/a@if-a")),
        (
            r#"[{"name": "a", "interface": "e1"}, {"name": "b", "namespace": "n"}, {"name": "skip"}]"#,
            Some(
                r#"[{"name": "a", "interface": "e1"}, {"name": "b", "namespace": "n", "interface": "if-b"}, {"name": "skip"}]"#,
            ),
        ),
        (
            "[\n  {\n    \"name\": \"a\"\n  }\n]\n",
            Some("[\n  {\n    \"name\": \"a\",\n    \"interface\": \"if-a\"\n  }\n]\n"),
        ),
        (
            "[\r\n  {\r\n    \"name\":\"a\"\r\n  }\r\n]",
            Some("[\r\n  {\r\n    \"name\":\"a\",\r\n    \"interface\":\"if-a\"\r\n  }\r\n]"),
        ),
        (
            "[\n  {\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]}\n  }\n]",
            Some(
                "[\n  {\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]},\n    \"interface\": \"if-c\"\n  }\n]",
            ),
        ),
    ];

    #[test]
    fn names_interfaces_in_the_users_form() {
        for &(text, expected) in NAMINGS {
            let parsed = Networks::parse(text).expect("valid");
            let named = parsed.with_interfaces(name_all_but("skip"));
            assert_eq!(named.as_deref(), expected, "{text:?}");
            let Some(named) = named else { continue };
            let reparsed = Networks::parse(&named).unwrap_or_else(|e| panic!("{named:?}: {e}"));
            let want: Vec<_> = triples(&parsed)
                .into_iter()
                .map(|(name, ns, interface)| {
                    let interface =
                        interface.or_else(|| (name != "skip").then(|| format!("if-{name}")));
                    (name, ns, interface)
                })
                .collect();
            assert_eq!(triples(&reparsed), want, "{named:?}");
            assert_eq!(reparsed.with_interfaces(name_all_but("skip")), None);
        }
    }

    #[test]
    fn named_interfaces_survive_round_trips() {
        for (text, _, _) in valid_cases() {
            let parsed = Networks::parse(text).expect("valid");
            let named = parsed
                .with_interfaces(|_| Some("if".to_owned()))
                .unwrap_or_else(|| text.to_owned());
            let reparsed = Networks::parse(&named).unwrap_or_else(|e| panic!("{named:?}: {e}"));
            assert!(reparsed.selections().iter().all(|s| s.interface.is_some()));
            let appended = reparsed.with_appended("linkerd-cni");
            let back = Networks::parse(&appended)
                .expect("appended text parses")
                .without_plain("linkerd-cni");
            assert_eq!(back.as_deref(), Some(named.as_str()), "{text:?}");
        }
    }

    #[test]
    fn removes_the_first_matching_selection() {
        let named = |s: &Selection| s.is_exactly("linkerd-cni", "net6a72ae7dcd39");
        let cases = [
            ("linkerd-cni", None),
            ("linkerd-cni@eth1, a", None),
            ("linkerd-cni@net6a72ae7dcd39", Some("")),
            ("a, linkerd-cni@net6a72ae7dcd39", Some("a")),
            ("linkerd-cni@net6a72ae7dcd39 , a@e", Some("a@e")),
            (
                r#"[{"name": "a"}, {"name": "linkerd-cni", "interface": "net6a72ae7dcd39"}]"#,
                Some(r#"[{"name": "a"}]"#),
            ),
            (
                r#"[{"name":"linkerd-cni","interface":"net6a72ae7dcd39"}]"#,
                Some("[]"),
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            assert_eq!(parsed.without_first(named).as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn append_then_remove_round_trips() {
        for (text, _, _) in valid_cases() {
            let parsed = Networks::parse(text).expect("valid");
            for name in ["linkerd-cni", "a", "b"] {
                if parsed
                    .selections()
                    .iter()
                    .any(|s| s.is_plain() && s.name == name)
                {
                    continue;
                }
                let appended = parsed.with_appended(name);
                let back = Networks::parse(&appended)
                    .expect("appended text parses")
                    .without_plain(name);
                let expected = text;
                assert_eq!(back.as_deref(), Some(expected), "{text:?} + {name}");
            }
        }
    }
}
