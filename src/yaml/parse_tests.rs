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
    let (a, b) = (map.get("a").unwrap(), map.get("b").unwrap());
    assert!(a.same_content(b));
    assert_eq!(a.anchor(), Some(&Anchor::Defines("x".into())));
    assert_eq!(b.anchor(), Some(&Anchor::AliasOf("x".into())));
    let Node::Scalar(c) = map.get("c").unwrap() else {
        panic!()
    };
    assert_eq!(c.tag(), Some("!!str"));
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
fn an_alias_names_an_anchor_of_its_own_document() {
    let err = parse_stream("a: &x 1\n---\nb: *x\n").unwrap_err();
    assert_eq!((err.line, err.column), (3, 4), "{err}");
    let docs = parse_stream("a: &x 1\n---\nb: &x 2\nc: *x\n").unwrap();
    assert_eq!(docs[1].get_path(&["c"]).and_then(Node::as_str), Some("2"));
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

fn value_of(src: &str, key: &str) -> String {
    let doc = parse_document(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
    doc.get_path(&key.split('.').collect::<Vec<_>>())
        .and_then(Node::as_str)
        .unwrap_or_else(|| panic!("{src:?}: no {key}"))
        .to_string()
}

#[test]
fn reads_quoted_scalars_whose_lines_are_indented_less_than_their_key() {
    // Each value as PyYAML (libyaml) and go-yaml read it.
    let cases = [
        // Multus's NAD examples: the closing brace at column 0.
        (
            "spec:\n  config: '{\n    \"cniVersion\": \"0.3.1\",\n    \"type\": \"macvlan\"\n}'\n",
            "spec.config",
            "{ \"cniVersion\": \"0.3.1\", \"type\": \"macvlan\" }",
        ),
        ("config: '{\n  \"a\": 1\n}'\n", "config", "{ \"a\": 1 }"),
        ("a:\n  b:\n    c: \"x\n  y\n\n z\"\n", "a.b.c", "x y\nz"),
        ("a:\n  b: 'it''s\nhere'\n", "a.b", "it's here"),
        ("a:\n  b: \"one\\\ntwo \\\"q\\\"\"\n", "a.b", "onetwo \"q\""),
        ("a:\r\n  b: 'x\r\ny'\r\n", "a.b", "x y"),
        ("a:\n  b: 'ü\nü'\n  c: 'é\né'\n", "a.c", "é é"),
    ];
    for (src, key, want) in cases {
        assert_eq!(value_of(src, key), want, "{src:?}");
    }
    let two = "x:\n  a: '1\n2'\n  b: \"3\n4\"\n";
    assert_eq!(value_of(two, "x.b"), "3 4");
    // Errors keep their lines; a document marker in a quoted scalar is
    // refused by every reader.
    let err = parse_document("a:\n  b: 'x\n---\ny'\n").unwrap_err();
    assert!(err.message.contains("document indicator"), "{err}");
    let err = parse_document("a:\n  b: 'x\ny'\n c: [\n").unwrap_err();
    assert!(err.line >= 4, "{err}");
}

#[test]
fn block_scalars_at_the_end_of_a_file_without_a_line_break() {
    // What PyYAML reads: the last line has no line break to keep.
    for (src, want) in [
        ("a: |\n  x", "x"),
        ("a: |+\n  x", "x"),
        ("a: |-\n  x", "x"),
        ("a: >\n  x\n  y", "x y"),
        ("a: |\n  x\n  ", "x\n"),
        ("a: |+\n  x\n\n  ", "x\n\n"),
        ("a: |\n\n  x", "\nx"),
        ("a: |\n  ü", "ü"),
        ("a: |\n  x\n", "x\n"),
        ("a: |\n  x\n# comment", "x\n"),
        ("a: |\n  x\nb: 1", "x\n"),
    ] {
        assert_eq!(value_of(src, "a"), want, "{src:?}");
    }
    let doc = parse_document("- |\n  x").unwrap();
    assert_eq!(doc.as_seq().unwrap().items[0].as_str(), Some("x"));
}

#[test]
fn remembers_anchors_and_aliases() {
    let doc = parse_document(
        "a: &m !t\n  k: &s v\nb: *m\nc: !!seq &l [1]\nd: *l\ne: &f {x: 1}\n&k key: *s\n",
    )
    .unwrap();
    let map = doc.as_map().unwrap();
    let anchor = |k: &str| map.get(k).unwrap().anchor().cloned();
    assert_eq!(anchor("a"), Some(Anchor::Defines("m".into())));
    assert_eq!(anchor("b"), Some(Anchor::AliasOf("m".into())));
    assert_eq!(anchor("c"), Some(Anchor::Defines("l".into())));
    assert_eq!(anchor("d"), Some(Anchor::AliasOf("l".into())));
    assert!(map.get("c").unwrap().is_flow() && map.get("e").unwrap().is_flow());
    assert!(!map.get("a").unwrap().is_flow());
    // The copy carries no anchor of its own inside: it is the value.
    let b = map.get("b").unwrap().as_map().unwrap();
    assert_eq!(b.get("k").unwrap().anchor(), None);
    let (key, value) = &map.entries[5];
    assert_eq!(key.anchor(), Some(&Anchor::Defines("k".into())));
    assert_eq!(value.anchor(), Some(&Anchor::AliasOf("s".into())));
}
