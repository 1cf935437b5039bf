//! The Multus pod annotation `k8s.v1.cni.cncf.io/networks`.
//!
//! [`Networks::parse`] reads both forms Multus accepts (comma list and JSON list) and remembers
//! where each selection sits in the text, so [`Networks::with_appended`],
//! [`Networks::without_first`] and [`Networks::with_interfaces`] edit the user's text in place
//! instead of re-serialising it. What Multus accepts is in `grammar`, the
//! edits in `edit`.

mod edit;
mod grammar;

use std::fmt;
use std::ops::Range;

pub(crate) use grammar::MAX_INTERFACE_LEN;
pub use grammar::{ItemProblem, NetworksError};
use grammar::{parse_comma, parse_json};

/// The Multus networks annotation key.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// The pod annotation selecting the cluster default network.
pub const DEFAULT_NETWORK_ANNOTATION: &str = "v1.multus-cni.io/default-network";

/// The most selections one networks annotation may hold (the selections cap): more are not
/// read, and the annotation is refused. Multus attaches each selection as an interface of the
/// pod; SR-IOV and macvlan pods select a handful (one per VF or VLAN they use), and a CNF
/// with a data plane a dozen or two. Every rule walks the selections, and the
/// secondary-network rule reads a NAD's IPAM for each, so without a cap one pod's 256 KiB of
/// annotations could select tens of thousands of networks.
pub const MAX_SELECTIONS: usize = 64;
/// The most addresses one selection's `ips` may list (the ips cap): a static IPAM with the
/// `ips` capability gives the interface these, and an interface has one address per family,
/// a few at most.
pub const MAX_IPS: usize = 16;

/// The form of a networks annotation, decided the way Multus decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Empty or whitespace-only: no selections.
    Empty,
    /// Comma-separated items such as `a, other/b@net2`.
    Comma,
    /// A JSON list of objects such as `[{"name": "a"}]`.
    Json,
}

/// One network selection of the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Name of the NetworkAttachmentDefinition.
    pub name: String,
    /// Namespace of the NetworkAttachmentDefinition; `None` means the pod's namespace.
    pub namespace: Option<String>,
    /// Requested interface name; `None` lets Multus pick one.
    pub interface: Option<String>,
    /// The addresses it asks for (JSON form's `ips`, for IPAMs with the `ips` capability),
    /// each with its prefix.
    pub ips: Vec<ipnet::IpNet>,
    /// Byte span of the item (comma form) or element (JSON form) in the annotation text.
    span: Range<usize>,
    /// Whether the item is exactly the name (JSON: an object whose only key is `name`).
    plain: bool,
    /// Whether the item has no namespace and, in JSON form, no keys but `name` and `interface`.
    bare: bool,
    /// Where an interface name goes in the text.
    slot: Slot,
}

/// Where [`Networks::with_interfaces`] writes a selection's interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// Comma form: `@interface` after the item.
    Comma,
    /// JSON form: the span of the value of the element's `interface` member, which is replaced.
    Value(Range<usize>),
    /// JSON form without an `interface` member: a new member goes after the last one, whose
    /// value spans `last`; `previous` is where the value of the member before it ends.
    After {
        previous: Option<usize>,
        last: Range<usize>,
    },
}

impl Selection {
    /// The selection's namespace, or `pod_ns` when it has none.
    pub fn namespace_or<'s>(&'s self, pod_ns: &'s str) -> &'s str {
        self.namespace.as_deref().unwrap_or(pod_ns)
    }

    /// Whether this selection refers to network `name` in `pod_namespace`.
    pub fn refers_to(&self, name: &str, pod_namespace: &str) -> bool {
        self.name == name && self.namespace_or(pod_namespace) == pod_namespace
    }

    /// Whether the selection is exactly its name: no namespace, no interface, no other keys.
    pub fn is_plain(&self) -> bool {
        self.plain
    }

    /// Whether the selection is exactly `name@interface`: no namespace and, in JSON form, an
    /// object whose only keys are `name` and `interface`.
    pub fn is_exactly(&self, name: &str, interface: &str) -> bool {
        self.bare && self.name == name && self.interface.as_deref() == Some(interface)
    }
}

/// The comma form of the selection, `[namespace/]name[@interface]`.
impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)?;
        if let Some(interface) = &self.interface {
            write!(f, "@{interface}")?;
        }
        Ok(())
    }
}

/// A parsed networks annotation that remembers its text, so edits keep the user's form.
///
/// Edits are textual: everything outside the edited item is kept byte for byte. For a text
/// without a plain selection of `n`, `parse(with_appended(n)).without_plain(n)` gives the text
/// back exactly.
#[derive(Debug, Clone)]
pub struct Networks<'a> {
    text: &'a str,
    form: Form,
    selections: Vec<Selection>,
}

impl<'a> Networks<'a> {
    /// Parses an annotation value; any text Multus would reject is an error.
    ///
    /// In JSON form, a `namespace` or `interface` that is `null` or `""` counts as absent,
    /// as it does for Multus.
    pub fn parse(text: &'a str) -> Result<Self, NetworksError> {
        let (form, selections) = if text.trim().is_empty() {
            (Form::Empty, Vec::new())
        } else if text.contains(['[', '{', '"']) {
            (Form::Json, parse_json(text)?)
        } else {
            (Form::Comma, parse_comma(text)?)
        };
        Ok(Self {
            text,
            form,
            selections,
        })
    }

    /// The annotation text as parsed.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The form of the annotation.
    pub fn form(&self) -> Form {
        self.form
    }

    /// The selections in order; a network listed twice appears twice.
    pub fn selections(&self) -> &[Selection] {
        &self.selections
    }

    /// Whether a selection refers to network `name` in `pod_namespace` (selection namespace absent or equal).
    pub fn references(&self, name: &str, pod_namespace: &str) -> bool {
        self.selections
            .iter()
            .any(|s| s.refers_to(name, pod_namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) type Triple = (&'static str, Option<&'static str>, Option<&'static str>);

    pub(super) fn triples(
        networks: &Networks<'_>,
    ) -> Vec<(String, Option<String>, Option<String>)> {
        networks
            .selections()
            .iter()
            .map(|s| (s.name.clone(), s.namespace.clone(), s.interface.clone()))
            .collect()
    }

    pub(super) fn owned(expected: &[Triple]) -> Vec<(String, Option<String>, Option<String>)> {
        expected
            .iter()
            .map(|(n, ns, i)| (n.to_string(), ns.map(str::to_owned), i.map(str::to_owned)))
            .collect()
    }

    pub(super) const LONG_LABEL: &str =
        "a23456789012345678901234567890123456789012345678901234567890123";

    /// Valid texts, their form and selections.
    pub(super) fn valid_cases() -> Vec<(&'static str, Form, Vec<Triple>)> {
        use Form::*;
        vec![
            ("", Empty, vec![]),
            ("   ", Empty, vec![]),
            ("\t\n", Empty, vec![]),
            ("a", Comma, vec![("a", None, None)]),
            ("  a  ", Comma, vec![("a", None, None)]),
            ("ns/net@if", Comma, vec![("net", Some("ns"), Some("if"))]),
            ("net@eth1", Comma, vec![("net", None, Some("eth1"))]),
            (
                "a, other/b@net2",
                Comma,
                vec![("a", None, None), ("b", Some("other"), Some("net2"))],
            ),
            (
                " a ,b,\tc ",
                Comma,
                vec![("a", None, None), ("b", None, None), ("c", None, None)],
            ),
            ("a,a", Comma, vec![("a", None, None), ("a", None, None)]),
            (
                "a@net1, a@net2",
                Comma,
                vec![("a", None, Some("net1")), ("a", None, Some("net2"))],
            ),
            (
                "x/linkerd-cni, linkerd-cni@e",
                Comma,
                vec![
                    ("linkerd-cni", Some("x"), None),
                    ("linkerd-cni", None, Some("e")),
                ],
            ),
            (LONG_LABEL, Comma, vec![(LONG_LABEL, None, None)]),
            (
                "0/1@abcdefghijklmno",
                Comma,
                vec![("1", Some("0"), Some("abcdefghijklmno"))],
            ),
            ("[]", Json, vec![]),
            (" [ ] \n", Json, vec![]),
            ("[{\"name\": \"a\"}]", Json, vec![("a", None, None)]),
            ("[{\"name\":\"a\"}]", Json, vec![("a", None, None)]),
            (
                r#"[{"name": "a"}, {"name": "b", "namespace": "other", "interface": "net2"}]"#,
                Json,
                vec![("a", None, None), ("b", Some("other"), Some("net2"))],
            ),
            (
                r#"[{"name":"a","namespace":"x"},{"name":"a","namespace":"x"}]"#,
                Json,
                vec![("a", Some("x"), None), ("a", Some("x"), None)],
            ),
            (
                r#"[{"name": "macvlan", "ips": ["10.1.1.5/24"], "mac": "c2:b0:57:49:47:f1", "cni-args": {"a": {"b": [1, 2]}}, "default-route": ["10.1.1.1"], "portMappings": [{"hostPort": 80}], "bandwidth": {"ingressRate": 1}, "x-unknown": null}]"#,
                Json,
                vec![("macvlan", None, None)],
            ),
            (
                "[\n  {\"name\": \"a\"},\n  {\n    \"name\": \"b\",\n    \"interface\": \"net1\"\n  }\n]\n",
                Json,
                vec![("a", None, None), ("b", None, Some("net1"))],
            ),
            ("[\n  {\"name\": \"a\"}\n]", Json, vec![("a", None, None)]),
            (
                "[\r\n  {\"name\": \"a\"}\r\n]",
                Json,
                vec![("a", None, None)],
            ),
            ("  [ {\"name\":\"a\"} ]  ", Json, vec![("a", None, None)]),
            (
                r#"[{"name": "a", "namespace": "", "interface": null}]"#,
                Json,
                vec![("a", None, None)],
            ),
            (r#"[{"name": "a\u002db"}]"#, Json, vec![("a-b", None, None)]),
        ]
    }

    #[test]
    fn parses_valid_texts() {
        for (text, form, expected) in valid_cases() {
            let parsed = Networks::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(parsed.form(), form, "{text:?}");
            assert_eq!(triples(&parsed), owned(&expected), "{text:?}");
            assert_eq!(parsed.text(), text);
        }
    }

    #[test]
    fn plainness() {
        let cases: &[(&str, &[bool])] = &[
            ("a, ns/a, a@e, ns/a@e", &[true, false, false, false]),
            (
                r#"[{"name":"a"},{"name":"a","namespace":"n"},{"name":"a","ips":[]},{"name":"a","interface":""}]"#,
                &[true, false, false, false],
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let plain: Vec<bool> = parsed
                .selections()
                .iter()
                .map(Selection::is_plain)
                .collect();
            assert_eq!(&plain, expected, "{text:?}");
        }
    }

    #[test]
    fn exact_selections() {
        let cases = [
            ("linkerd-cni@net6a72ae7dcd39", true),
            ("  linkerd-cni@net6a72ae7dcd39 ", true),
            ("linkerd-cni", false),
            ("linkerd-cni@eth1", false),
            ("demo/linkerd-cni@net6a72ae7dcd39", false),
            ("other@net6a72ae7dcd39", false),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39"}]"#,
                true,
            ),
            (
                r#"[{"interface":"net6a72ae7dcd39","name":"linkerd-cni"}]"#,
                true,
            ),
            (r#"[{"name": "linkerd-cni"}]"#, false),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "namespace": ""}]"#,
                false,
            ),
            (
                r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "ips": []}]"#,
                false,
            ),
        ];
        for (text, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            let [selection] = parsed.selections() else {
                panic!("{text:?}: not one selection");
            };
            assert_eq!(
                selection.is_exactly("linkerd-cni", "net6a72ae7dcd39"),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn selections_display_in_comma_form() {
        let parsed = Networks::parse(
            r#"[{"name": "a"}, {"name": "b", "namespace": "n", "interface": "e1", "ips": []}]"#,
        )
        .expect("valid");
        let shown: Vec<String> = parsed.selections().iter().map(|s| s.to_string()).collect();
        assert_eq!(shown, ["a", "n/b@e1"]);
    }

    #[test]
    fn references_respect_namespaces() {
        let cases = [
            ("linkerd-cni", "app", true),
            ("app/linkerd-cni", "app", true),
            ("other/linkerd-cni", "app", false),
            ("linkerd-cni@net1", "app", true),
            ("a, b", "app", false),
            ("", "app", false),
            (r#"[{"name": "linkerd-cni"}]"#, "app", true),
            (
                r#"[{"name": "linkerd-cni", "namespace": "app"}]"#,
                "app",
                true,
            ),
            (
                r#"[{"name": "linkerd-cni", "namespace": "x"}]"#,
                "app",
                false,
            ),
            (r#"[{"name": "linkerd-cni", "namespace": ""}]"#, "app", true),
        ];
        for (text, pod_ns, expected) in cases {
            let parsed = Networks::parse(text).expect("valid");
            assert_eq!(
                parsed.references("linkerd-cni", pod_ns),
                expected,
                "{text:?}"
            );
        }
        let parsed = Networks::parse("a, x/b").expect("valid");
        let namespaces: Vec<&str> = parsed
            .selections()
            .iter()
            .map(|s| s.namespace_or("pod"))
            .collect();
        assert_eq!(namespaces, ["pod", "x"]);
    }

    /// A tiny deterministic generator for the fuzz-ish tests.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }

        fn pick<'t>(&mut self, options: &[&'t str]) -> &'t str {
            options[self.below(options.len())]
        }
    }

    #[test]
    fn arbitrary_text_never_panics() {
        let alphabet: Vec<char> = "abz09-/@,[]{}\" :\n\té\\".chars().collect();
        let mut rng = Lcg(7);
        let mut valid = 0;
        for _ in 0..2000 {
            let len = rng.below(24);
            let text: String = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            if let Ok(parsed) = Networks::parse(&text) {
                valid += 1;
                if let Some(named) = parsed.with_interfaces(|_| Some("if".to_owned())) {
                    Networks::parse(&named)
                        .unwrap_or_else(|e| panic!("{text:?} -> {named:?}: {e}"));
                }
                let appended = parsed.with_appended("linkerd-cni");
                let reparsed = Networks::parse(&appended)
                    .unwrap_or_else(|e| panic!("{text:?} -> {appended:?}: {e}"));
                let removed = reparsed
                    .without_plain("linkerd-cni")
                    .expect("plain selection");
                Networks::parse(&removed).unwrap_or_else(|e| panic!("{removed:?}: {e}"));
            }
        }
        assert!(valid > 50, "only {valid} texts parsed");
    }

    #[test]
    fn arbitrary_valid_text_round_trips() {
        let comma_items = [
            "a",
            "b",
            "ns/a",
            "a@e1",
            "ns/b@e2",
            "linkerd-cni",
            "x/linkerd-cni",
        ];
        let comma_seps = [",", ", ", " , ", ",\t", " ,"];
        let json_items = [
            r#"{"name": "a"}"#,
            r#"{"name":"b","ips":["1.2.3.4/24"]}"#,
            r#"{"name": "linkerd-cni"}"#,
            r#"{"name": "linkerd-cni", "namespace": "x"}"#,
            "{\n    \"name\": \"c\",\n    \"cni-args\": {\"k\": [1, {}]}\n  }",
            r#"{ "interface" : null , "name" : "d" }"#,
            "{\r\n  \"name\": \"e\"\r\n}",
        ];
        let json_seps = [",", ", ", ",\n  ", " ,\n", "\r\n,"];
        let pads = ["", " ", "\n", "  \t"];
        let mut rng = Lcg(42);
        for round in 0..600 {
            let json = round % 2 == 1;
            let (items, seps) = if json {
                (&json_items[..], &json_seps[..])
            } else {
                (&comma_items[..], &comma_seps[..])
            };
            let count = rng.below(5) + usize::from(!json);
            let mut text = String::from(if json { rng.pick(&pads) } else { "" });
            if json {
                text.push('[');
                text.push_str(rng.pick(&pads));
            }
            for i in 0..count {
                if i > 0 {
                    text.push_str(rng.pick(seps));
                }
                text.push_str(rng.pick(items));
            }
            if json {
                text.push_str(rng.pick(&pads));
                text.push(']');
            }
            text.push_str(rng.pick(&pads));

            let parsed = Networks::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(parsed.selections().len(), count, "{text:?}");
            let named = parsed
                .with_interfaces(|_| Some("if".to_owned()))
                .unwrap_or_else(|| text.clone());
            let reparsed =
                Networks::parse(&named).unwrap_or_else(|e| panic!("{text:?} -> {named:?}: {e}"));
            assert_eq!(reparsed.selections().len(), count, "{named:?}");
            assert!(
                reparsed.selections().iter().all(|s| s.interface.is_some()),
                "{named:?}"
            );
            let appended = parsed.with_appended("linkerd-cni");
            let reparsed = Networks::parse(&appended)
                .unwrap_or_else(|e| panic!("{text:?} -> {appended:?}: {e}"));
            assert_eq!(reparsed.selections().len(), count + 1, "{appended:?}");
            let removed = reparsed
                .without_plain("linkerd-cni")
                .expect("plain selection");
            Networks::parse(&removed).unwrap_or_else(|e| panic!("{removed:?}: {e}"));
            if !parsed
                .selections()
                .iter()
                .any(|s| s.is_plain() && s.name == "linkerd-cni")
            {
                assert_eq!(removed, text, "{text:?}");
            }
        }
    }
}
