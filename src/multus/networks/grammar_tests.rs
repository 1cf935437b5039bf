use super::*;
use crate::multus::networks::Networks;

/// Members Multus reads into typed fields and checks (`parsePodNetworkAnnotation`):
/// what it refuses is refused here too.
#[test]
fn json_members_multus_checks() {
    for ok in [
        r#"[{"name": "a", "mac": "02:00:00:00:00:01", "ips": ["10.1.1.7/24", "fd00::7", "10.1.1.8"]}]"#,
        r#"[{"name": "a", "mac": "02-00-00-00-00-01", "infiniband-guid": "0000.0000.fe80.0000.0000.0000.0200.5e10.0000.0001"}]"#,
        r#"[{"name": "a", "mac": "", "ips": null, "default-route": ["10.1.1.1"], "deviceID": "0000:03:00.1"}]"#,
        r#"[{"name": "a", "portMappings": [{"hostPort": 80, "containerPort": 8080}], "bandwidth": {"ingressRate": 1}, "cni-args": {"x": 1}}]"#,
    ] {
        assert!(
            Networks::parse(ok).is_ok(),
            "{ok}: {:?}",
            Networks::parse(ok).err()
        );
    }
    for (bad, want) in [
        (
            r#"[{"name": "a", "mac": "02:00:00:00:00"}]"#,
            "JSON element 1: \"mac\" \"02:00:00:00:00\" is not a MAC address",
        ),
        (
            r#"[{"name": "a", "mac": "02:00:00-00:00:01"}]"#,
            "JSON element 1: \"mac\" \"02:00:00-00:00:01\" is not a MAC address",
        ),
        (
            r#"[{"name": "a", "mac": 2}]"#,
            "JSON element 1: \"mac\" is not a string",
        ),
        (
            r#"[{"name": "a", "infiniband-guid": "zz:00:00:00:00:01"}]"#,
            "JSON element 1: \"infiniband-guid\" \"zz:00:00:00:00:01\" is not a MAC address",
        ),
        (
            r#"[{"name": "a", "ips": "10.1.1.7/24"}]"#,
            "JSON element 1: \"ips\" is not a list of strings",
        ),
        (
            r#"[{"name": "a", "ips": ["10.1.1.7/33"]}]"#,
            "JSON element 1: \"ips\" \"10.1.1.7/33\" is not an IP address or CIDR",
        ),
        (
            r#"[{"name": "a"}, {"name": "b", "ips": ["10.1.1"]}]"#,
            "JSON element 2: \"ips\" \"10.1.1\" is not an IP address or CIDR",
        ),
        (
            r#"[{"name": "a", "default-route": ["10.1.1.0/24"]}]"#,
            "JSON element 1: \"default-route\" \"10.1.1.0/24\" is not an IP address",
        ),
        (
            r#"[{"name": "a", "deviceID": 3}]"#,
            "JSON element 1: \"deviceID\" is not a string",
        ),
        (
            r#"[{"name": "a", "portMappings": {"hostPort": 80}}]"#,
            "JSON element 1: \"portMappings\" is not a list",
        ),
        (
            r#"[{"name": "a", "cni-args": "x=1"}]"#,
            "JSON element 1: \"cni-args\" is not an object",
        ),
    ] {
        let err = Networks::parse(bad).unwrap_err().to_string();
        assert!(err.starts_with(want), "{bad}:\n  got  {err}\n  want {want}");
    }
}

#[test]
fn rejects_invalid_texts() {
    assert_rejected(&[
        (
            "Foo",
            r#"item 1 "Foo": network name "Foo" is not a DNS-1123 label"#,
        ),
        (
            "a, Foo@",
            r#"item 2 "Foo@": network name "Foo" is not a DNS-1123 label"#,
        ),
        ("a,,b", r#"item 2 "": empty item"#),
        ("a, ", r#"item 2 "": empty item"#),
        (",a", r#"item 1 "": empty item"#),
        (
            "a@abcdefghijklmnop",
            r#"item 1 "a@abcdefghijklmnop": interface name "abcdefghijklmnop" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
        ),
        (
            "a@..",
            r#"item 1 "a@..": interface name ".." is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
        ),
        (
            "a@x/y",
            r#"item 1 "a@x/y": interface name "x/y" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
        ),
        ("a/b/c", r#"item 1 "a/b/c": more than one "/""#),
        ("a@b@c", r#"item 1 "a@b@c": more than one "@""#),
        (
            "Ns/a",
            r#"item 1 "Ns/a": namespace "Ns" is not a DNS-1123 label"#,
        ),
        (
            "ns/",
            r#"item 1 "ns/": network name "" is not a DNS-1123 label"#,
        ),
        (
            "@eth0",
            r#"item 1 "@eth0": network name "" is not a DNS-1123 label"#,
        ),
        (
            "-a",
            r#"item 1 "-a": network name "-a" is not a DNS-1123 label"#,
        ),
        (
            "a-",
            r#"item 1 "a-": network name "a-" is not a DNS-1123 label"#,
        ),
        (
            "a_b",
            r#"item 1 "a_b": network name "a_b" is not a DNS-1123 label"#,
        ),
        (
            "a b",
            r#"item 1 "a b": network name "a b" is not a DNS-1123 label"#,
        ),
        (
            "é",
            r#"item 1 "é": network name "é" is not a DNS-1123 label"#,
        ),
        (
            "a23456789012345678901234567890123456789012345678901234567890123x",
            r#"item 1 "a23456789012345678901234567890123456789012345678901234567890123x": network name "a23456789012345678901234567890123456789012345678901234567890123x" is not a DNS-1123 label"#,
        ),
    ]);
}

#[test]
fn rejects_invalid_json() {
    assert_rejected(&[
        (
            r#"{"name": "a"}"#,
            "not a JSON list of objects: invalid type: map, expected a sequence at line 1 column 0",
        ),
        (
            r#""a""#,
            r#"not a JSON list of objects: invalid type: string "a", expected a sequence at line 1 column 3"#,
        ),
        ("[1]", "not a JSON list of objects: element 1 is a number"),
        (
            r#"[{"name": "a"}, "b"]"#,
            "not a JSON list of objects: element 2 is a string",
        ),
        (
            r#"[{"namespace": "x"}]"#,
            r#"JSON element 1: no "name" key"#,
        ),
        (
            r#"[{"name": 1}]"#,
            r#"JSON element 1: "name" is not a string"#,
        ),
        (
            r#"[{"name": "a", "namespace": 2}]"#,
            r#"JSON element 1: "namespace" is not a string"#,
        ),
        (
            r#"[{"name": "a", "interface": []}]"#,
            r#"JSON element 1: "interface" is not a string"#,
        ),
        (
            r#"[{"name": "a"}, {"name": "B"}]"#,
            r#"JSON element 2: network name "B" is not a DNS-1123 label"#,
        ),
        (
            r#"[{"name": "a", "namespace": "X"}]"#,
            r#"JSON element 1: namespace "X" is not a DNS-1123 label"#,
        ),
        (
            r#"[{"name": "a", "interface": "a b"}]"#,
            r#"JSON element 1: interface name "a b" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
        ),
        (
            r#"[{"name": "a"}"#,
            "invalid JSON: EOF while parsing a list at line 1 column 14",
        ),
        (
            r#"[{"name": "a"},]"#,
            "invalid JSON: trailing comma at line 1 column 16",
        ),
        (
            r#"[{"name": "a"}] x"#,
            "invalid JSON: trailing characters at line 1 column 17",
        ),
        (r#"a"b"#, "invalid JSON: expected value at line 1 column 1"),
        ("a,[b]", "invalid JSON: expected value at line 1 column 1"),
    ]);
}

/// Asserts that each text fails to parse with its message.
fn assert_rejected(cases: &[(&str, &str)]) {
    for &(text, message) in cases {
        match Networks::parse(text) {
            Ok(n) => panic!("{text:?} parsed as {:?}", n.selections()),
            Err(e) => assert_eq!(e.to_string(), message, "{text:?}"),
        }
    }
}

/// A text and the selections read from it: name, namespace and interface.
type Case = (
    &'static str,
    &'static [(&'static str, Option<&'static str>, Option<&'static str>)],
);

/// Texts Multus reads, and what it reads from them.
const READS: &[Case] = &[
    // Comma form: each part is trimmed; an empty namespace or interface is none.
    ("ns / net @ eth0", &[("net", Some("ns"), Some("eth0"))]),
    ("ns/ net@\teth0", &[("net", Some("ns"), Some("eth0"))]),
    ("/net1", &[("net1", None, None)]),
    (" / net1 , a", &[("net1", None, None), ("a", None, None)]),
    ("net1@", &[("net1", None, None)]),
    ("net1 @ ", &[("net1", None, None)]),
    ("ns/net1@", &[("net1", Some("ns"), None)]),
    ("/net1@", &[("net1", None, None)]),
    // The kernel takes any byte but "/", ":" and its spaces in a name.
    ("a@e\u{2003}th", &[("a", None, Some("e\u{2003}th"))]),
    // JSON form: Go matches keys ignoring case, as it folds them.
    (
        r#"[{"Name": "a", "Namespace": "ns", "Interface": "eth1"}]"#,
        &[("a", Some("ns"), Some("eth1"))],
    ),
    (
        r#"[{"NAME": "a", "INTERFACE": "eth1"}]"#,
        &[("a", None, Some("eth1"))],
    ),
    (
        r#"[{"name": "a", "\u0131nterface": "eth1"}]"#,
        &[("a", None, Some("eth1"))],
    ),
    (
        r#"[{"name": "a", "interface": "eth1", "Interface": "eth2"}]"#,
        &[("a", None, Some("eth2"))],
    ),
    (r#"[{"name": "a", "Name": "b"}]"#, &[("b", None, None)]),
    // A null leaves a string as it was.
    (
        r#"[{"name": "a", "interface": "eth1", "interface": null}]"#,
        &[("a", None, Some("eth1"))],
    ),
    (r#"[{"name": "a", "name": null}]"#, &[("a", None, None)]),
    // The deprecated interfaceRequest names the interface when interface is empty.
    (
        r#"[{"name": "a", "interfaceRequest": "eth1"}]"#,
        &[("a", None, Some("eth1"))],
    ),
    (
        r#"[{"name": "a", "interface": "", "interfaceRequest": "eth1"}]"#,
        &[("a", None, Some("eth1"))],
    ),
    (
        r#"[{"name": "a", "interface": "eth2", "interfaceRequest": "eth1"}]"#,
        &[("a", None, Some("eth2"))],
    ),
    (
        r#"[{"name": "a", "InterfaceRequest": "eth1"}]"#,
        &[("a", None, Some("eth1"))],
    ),
    // Only the last mac and ips are checked, as decoded.
    (
        r#"[{"name": "a", "mac": "x", "mac": "02:00:00:00:00:01"}]"#,
        &[("a", None, None)],
    ),
    (
        r#"[{"name": "a", "ips": ["x"], "IPS": ["10.0.0.1"]}]"#,
        &[("a", None, None)],
    ),
    (
        r#"[{"name": "a", "mac": null, "ips": null, "cni-args": null}]"#,
        &[("a", None, None)],
    ),
    // Keys naming no field are ignored, whatever their case or type.
    (
        r#"[{"name": "a", "Interfaces": 1, "nameSpace2": []}]"#,
        &[("a", None, None)],
    ),
];

/// What Multus's parser (`parsePodNetworkAnnotation`, `parsePodNetworkObjectName`)
/// accepts and this parser once refused: input, and name, namespace and interface.
#[test]
fn reads_what_multus_reads() {
    for (text, expected) in READS {
        let parsed = Networks::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let got: Vec<_> = parsed
            .selections()
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.namespace.as_deref(),
                    s.interface.as_deref(),
                )
            })
            .collect();
        assert_eq!(got, *expected, "{text:?}");
    }
}

/// What Multus refuses, or lets through to a pod that then fails, stays refused.
#[test]
fn refuses_what_multus_refuses() {
    assert_rejected(&[
        // Go reports a member of the wrong type even when a later one is right.
        (
            r#"[{"name": 1, "name": "a"}]"#,
            r#"JSON element 1: "name" is not a string"#,
        ),
        (
            r#"[{"Name": 1}]"#,
            r#"JSON element 1: "name" is not a string"#,
        ),
        (
            r#"[{"name": "a", "Interface": 1}]"#,
            r#"JSON element 1: "interface" is not a string"#,
        ),
        (
            r#"[{"name": "a", "interfaceRequest": 1}]"#,
            r#"JSON element 1: "interfaceRequest" is not a string"#,
        ),
        (
            r#"[{"name": "a", "IPS": "10.0.0.1"}]"#,
            r#"JSON element 1: "ips" is not a list of strings"#,
        ),
        (
            r#"[{"name": "a", "Mac": "x"}]"#,
            r#"JSON element 1: "mac" "x" is not a MAC address (6, 8 or 20 bytes as xx:xx:..., xx-xx-... or xxxx.xxxx...)"#,
        ),
        (
            r#"[{"name": "a", "default-route": ["x"], "default-route": null}]"#,
            r#"JSON element 1: "default-route" "x" is not an IP address"#,
        ),
        (
            r#"[{"name": "a", "Bandwidth": []}]"#,
            r#"JSON element 1: "bandwidth" is not an object"#,
        ),
        (
            r#"[{"name": null}]"#,
            r#"JSON element 1: "name" is not a string"#,
        ),
        // An interfaceRequest is an interface name like any other.
        (
            r#"[{"name": "a", "interfaceRequest": "eth 1"}]"#,
            r#"JSON element 1: interface name "eth 1" is not valid (1 to 15 bytes, no "/" or whitespace, not "." or "..")"#,
        ),
        // Names the kernel refuses.
        (
            "a@eth:1",
            r#"item 1 "a@eth:1": interface name "eth:1" is not valid: the kernel refuses ':' in it"#,
        ),
        (
            "a@eth\u{a0}1",
            "item 1 \"a@eth\\u{a0}1\": interface name \"eth\\u{a0}1\" is not valid: the kernel refuses '\\u{a0}' in it",
        ),
        (
            "a@\u{e0}",
            "item 1 \"a@\u{e0}\": interface name \"\u{e0}\" is not valid: the kernel refuses '\u{e0}' in it",
        ),
        (
            "a@eth\u{b}1",
            "item 1 \"a@eth\\u{b}1\": interface name \"eth\\u{b}1\" is not valid (1 to 15 bytes, no \"/\" or whitespace, not \".\" or \"..\")",
        ),
        // An empty name: Multus's parser lets it through, and then finds no such network.
        (
            "ns/",
            r#"item 1 "ns/": network name "" is not a DNS-1123 label"#,
        ),
        (
            " / @ ",
            r#"item 1 "/ @": network name "" is not a DNS-1123 label"#,
        ),
        // Spaces inside a part are not trimmed.
        (
            "n s/a",
            r#"item 1 "n s/a": namespace "n s" is not a DNS-1123 label"#,
        ),
    ]);
}

#[test]
fn error_variants() {
    assert_eq!(
        Networks::parse("a,b@c@d").err(),
        Some(NetworksError::Item {
            index: 2,
            item: "b@c@d".into(),
            problem: ItemProblem::TooManyAts
        })
    );
    assert_eq!(
        Networks::parse(r#"[{}]"#).err(),
        Some(NetworksError::Element {
            index: 1,
            problem: ItemProblem::MissingName
        })
    );
    assert!(matches!(
        Networks::parse("[{"),
        Err(NetworksError::Syntax(_))
    ));
    assert!(matches!(
        Networks::parse("{}"),
        Err(NetworksError::NotList(_))
    ));
}

/// A networks annotation of `count` selections in `form` (`comma`, `json`), each of network
/// `n<i>`, JSON elements with `ips` addresses.
fn selecting(count: usize, form: &str, ips: usize) -> String {
    let ips: Vec<String> = (0..ips).map(|i| format!("\"10.0.{i}.1/24\"")).collect();
    let items: Vec<String> = (0..count)
        .map(|i| match form {
            "comma" => format!("n{i}"),
            _ => format!(r#"{{"name": "n{i}", "ips": [{}]}}"#, ips.join(", ")),
        })
        .collect();
    match form {
        "comma" => items.join(", "),
        _ => format!("[{}]", items.join(", ")),
    }
}

/// At each cap the annotation reads; one over it, it is refused with the cap named.
#[test]
fn the_caps_read_up_to_their_limit_and_name_themselves_past_it() {
    for form in ["comma", "json"] {
        let at = selecting(MAX_SELECTIONS, form, 1);
        let parsed = Networks::parse(&at).unwrap_or_else(|e| panic!("{form}: {e}"));
        assert_eq!(parsed.selections().len(), MAX_SELECTIONS, "{form}");
        for over in [MAX_SELECTIONS + 1, 20_000] {
            let error = Networks::parse(&selecting(over, form, 1)).unwrap_err();
            assert_eq!(error, NetworksError::TooManySelections { count: over });
            assert!(
                error.to_string().starts_with(&format!(
                    "selects {over} networks; at most 64 are read (the selections cap)"
                )),
                "{form}: {error}"
            );
        }
    }
    let at = selecting(1, "json", MAX_IPS);
    let parsed = Networks::parse(&at).unwrap();
    assert_eq!(parsed.selections()[0].ips.len(), MAX_IPS);
    let error = Networks::parse(&selecting(2, "json", MAX_IPS + 1)).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "JSON element 1: \"ips\" lists {} addresses; at most 16 are read (the ips cap): an interface has one address per family, a few at most; list fewer",
            MAX_IPS + 1
        )
    );
}

/// Past the cap, nothing but the count is read: the work does not grow with what follows.
#[test]
fn an_annotation_past_the_cap_is_refused_after_one_pass() {
    for form in ["comma", "json"] {
        let units =
            |count| crate::work::measure(|| Networks::parse(&selecting(count, form, 1)).is_ok()).1;
        assert_eq!(units(1_000), units(16_000), "{form}");
    }
}
