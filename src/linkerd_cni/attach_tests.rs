use std::collections::BTreeMap;

use super::*;
use crate::yaml::{emit_document, parse_document};

fn lookup(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A namespace that enables Linkerd and Multus.
const ON: [(&str, &str); 2] = [
    (MULTUS_ANNOTATION, "enabled"),
    (INJECT_ANNOTATION, "enabled"),
];
/// A namespace UID range.
const RANGE: [(&str, &str); 1] = [("openshift.io/sa.scc.uid-range", "1000000000/10000")];
/// A control-plane label.
const CP: [(&str, &str); 1] = [(CONTROL_PLANE_LABEL, "destination")];

/// A decision case: name, pod namespace, pod annotations, pod labels,
/// namespace annotations, and whether it is attached and with which proxy UID.
type DecisionCase = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    bool,
    Option<u64>,
);

const DECISIONS: &[DecisionCase] = &[
    ("namespace enables", "demo", &[], &[], &ON, true, None),
    ("pod enables", "demo", &ON, &[], &[], true, None),
    (
        "ingress counts",
        "demo",
        &[
            (MULTUS_ANNOTATION, "enabled"),
            (INJECT_ANNOTATION, "ingress"),
        ],
        &[],
        &[],
        true,
        None,
    ),
    (
        "pod overrides namespace",
        "demo",
        &[(MULTUS_ANNOTATION, "disabled")],
        &[],
        &ON,
        false,
        None,
    ),
    (
        "per-key fallback",
        "demo",
        &[(INJECT_ANNOTATION, "enabled")],
        &[],
        &[(MULTUS_ANNOTATION, "enabled")],
        true,
        None,
    ),
    (
        "inject disabled",
        "demo",
        &[(INJECT_ANNOTATION, "disabled")],
        &[],
        &ON,
        false,
        None,
    ),
    ("nothing", "demo", &[], &[], &[], false, None),
    ("control plane", "linkerd", &[], &CP, &[], true, None),
    (
        "empty control-plane label",
        "linkerd",
        &[],
        &[(CONTROL_PLANE_LABEL, "")],
        &[],
        false,
        None,
    ),
    (
        "control-plane label elsewhere",
        "demo",
        &[],
        &CP,
        &[],
        false,
        None,
    ),
    (
        "uid range",
        "demo",
        &ON,
        &[],
        &RANGE,
        true,
        Some(1_000_002_102),
    ),
    (
        "no uid for control plane",
        "linkerd",
        &[],
        &CP,
        &[RANGE[0], ON[0], ON[1]],
        true,
        None,
    ),
];

#[test]
fn decision_table() {
    let s = Settings::default();
    for (name, ns, ann, labels, ns_ann, attach, uid) in DECISIONS {
        let mut ns_ann = lookup(ns_ann);
        if *name == "uid range" {
            ns_ann.extend(lookup(&ON));
        }
        let d = decide(&s, ns, &lookup(ann), &lookup(labels), &ns_ann);
        assert_eq!((d.attach, d.proxy_uid), (*attach, *uid), "{name}");
    }
}

#[test]
fn bad_ranges_are_explained() {
    for (range, want) in [
        ("1000/x", "is not a range like 1000000000/10000"),
        ("1000", "is not a range"),
        (
            "1000/100",
            "proxy UID offset 2102 is outside the range \"1000/100\"",
        ),
        ("4294967290/10000", "is not a valid UID"),
    ] {
        assert!(
            proxy_uid(range, 2102).unwrap_err().contains(want),
            "{range}"
        );
    }
}

#[test]
fn owned_round_trips() {
    for text in [
        "network=created",
        "network=appended,proxy-uid=1000002102",
        "proxy-uid=5",
        "",
    ] {
        assert_eq!(Owned::parse(text).unwrap().to_string(), text);
    }
    assert!(Owned::parse("network=mine").is_err());
}

fn run(src: &str, attach: bool, uid: Option<u64>, before: &str) -> (String, Applied) {
    let mut doc = parse_document(src).unwrap();
    let decision = Decision {
        attach,
        proxy_uid: uid,
        ..Decision::default()
    };
    let applied = apply(
        doc.as_map_mut().unwrap(),
        &Settings::default(),
        "demo",
        &decision,
        &Owned::parse(before).unwrap(),
    )
    .unwrap();
    (emit_document(&doc), applied)
}

#[test]
fn attaching_and_detaching_round_trips() {
    let cases = [
        "spec: {}\n",
        "metadata:\n  labels:\n    app: web\nspec: {}\n",
        "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
        "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\", \"ips\": [\"10.0.0.1/24\"]}]'\n",
        "metadata:\n  annotations:\n    x: y1\n",
    ];
    for src in cases {
        let (attached, applied) = run(src, true, Some(1_000_002_102), "");
        assert!(attached.contains("linkerd-cni"), "{attached}");
        assert!(
            attached.contains("config.linkerd.io/proxy-uid: \"1000002102\""),
            "{attached}"
        );
        let owned = applied.owned.to_string();
        let (again, same) = run(&attached, true, Some(1_000_002_102), &owned);
        assert_eq!(again, attached, "not idempotent");
        assert!(same.changes.is_empty());
        assert_eq!(same.owned, applied.owned);
        let (detached, undone) = run(&attached, false, None, &owned);
        assert_eq!(detached, src, "detach did not restore");
        assert_eq!(
            undone.changes[..],
            [Change::Detached, Change::ProxyUidRemoved]
        );
        assert!(undone.owned.is_empty());
    }
}

/// An empty proxy UID counts as none, as in the Go operator: the range's UID
/// replaces it; a later detach removes the annotation (`""` and none mean the same).
#[test]
fn an_empty_proxy_uid_is_none() {
    let src = "metadata:\n  annotations:\n    config.linkerd.io/proxy-uid: \"\"\n";
    let (attached, applied) = run(src, true, Some(1_000_002_102), "");
    assert!(
        attached.contains("config.linkerd.io/proxy-uid: \"1000002102\""),
        "{attached}"
    );
    assert_eq!(
        applied.changes[..],
        [Change::Attached, Change::ProxyUidSet("1000002102".into())]
    );
    let owned = applied.owned.to_string();
    assert_eq!(owned, "network=created,proxy-uid=1000002102");
    let (again, same) = run(&attached, true, Some(1_000_002_102), &owned);
    assert_eq!((again.as_str(), same.changes.len()), (attached.as_str(), 0));
    let (detached, _) = run(&attached, false, None, &owned);
    assert!(!detached.contains("proxy-uid"), "{detached}");
    // Not attached, or no range: an empty value stays as the user wrote it.
    for (attach, uid) in [(false, None), (true, None)] {
        let (out, applied) = run(src, attach, uid, "");
        assert!(out.contains("config.linkerd.io/proxy-uid: \"\""), "{out}");
        assert_eq!(applied.owned.proxy_uid, None);
    }
    // A user's UID blanked after the function set its own: the range's UID again.
    let (out, applied) = run(src, true, Some(1_000_002_102), "proxy-uid=1000002102");
    assert!(out.contains("\"1000002102\""), "{out}");
    assert_eq!(applied.owned.proxy_uid.as_deref(), Some("1000002102"));
}

/// `src` after interface naming has run on its networks annotation.
fn with_named_interfaces(src: &str) -> String {
    let mut doc = parse_document(src).unwrap();
    let template = doc.as_map_mut().unwrap();
    let text = template_annotations(template)
        .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
        .map(str::to_owned);
    if let Some(named) = text.and_then(|t| interface_name::name_interfaces(&t).unwrap()) {
        set_annotation(template, NETWORKS_ANNOTATION, named).unwrap();
    }
    emit_document(&doc)
}

#[test]
fn the_own_entry_with_its_named_interface_stays_owned() {
    let cases = [
        ("spec: {}\n", "linkerd-cni@net6a72ae7dcd39"),
        (
            "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
            "a@net0cc175b9c0f1, other/b@net2, linkerd-cni@net6a72ae7dcd39",
        ),
        (
            "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\":\"a\",\"ips\":[\"10.0.0.1/24\"]}]'\n",
            r#"[{"name":"a","ips":["10.0.0.1/24"],"interface":"net0cc175b9c0f1"},{"name":"linkerd-cni","interface":"net6a72ae7dcd39"}]"#,
        ),
    ];
    for (src, networks) in cases {
        let (attached, applied) = run(src, true, None, "");
        let named = with_named_interfaces(&attached);
        let mut doc = parse_document(&named).unwrap();
        let value = template_annotations(doc.as_map_mut().unwrap())
            .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
            .map(str::to_owned);
        assert_eq!(value.as_deref(), Some(networks), "{src}");

        let owned = applied.owned.to_string();
        let (again, same) = run(&named, true, None, &owned);
        assert_eq!(again, named, "{src}");
        assert!(same.changes.is_empty(), "{src}: {:?}", same.changes);
        assert_eq!(same.owned, applied.owned, "{src}");
        assert_eq!(
            same.references[..],
            [NadReference {
                namespace: None,
                owned: true
            }],
            "{src}"
        );

        let (detached, undone) = run(&named, false, None, &owned);
        assert_eq!(detached, with_named_interfaces(src), "{src}");
        assert_eq!(undone.changes[..], [Change::Detached], "{src}");
        assert!(undone.owned.is_empty(), "{src}");
    }
}

#[test]
fn only_the_exact_named_entry_counts_as_own() {
    let template = |networks: &str| {
        format!("metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '{networks}'\n")
    };
    for networks in [
        "a, linkerd-cni@eth1",
        "a, demo/linkerd-cni@net6a72ae7dcd39",
        r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "ips": []}]"#,
    ] {
        let src = template(networks);
        let (out, applied) = run(&src, false, None, "network=appended");
        assert_eq!(out, src, "{networks}");
        assert!(applied.changes.is_empty(), "{networks}");
        assert_eq!(applied.warnings.len(), 1, "{networks}");
        let (out, applied) = run(&src, true, None, "network=appended");
        assert_eq!(out, src, "{networks}");
        assert!(applied.owned.is_empty(), "{networks}");
    }
    let src = template("linkerd-cni@net6a72ae7dcd39, b");
    let (out, applied) = run(&src, true, None, "");
    assert_eq!(out, src);
    assert!(applied.owned.is_empty(), "a user's entry is not taken over");
    assert_eq!(
        applied.references[..],
        [NadReference {
            namespace: None,
            owned: false
        }]
    );
    let (out, applied) = run(&src, false, None, "network=appended");
    assert_eq!(out, template("b"));
    assert_eq!(applied.changes[..], [Change::Detached]);
}

#[test]
fn user_values_are_never_taken_over() {
    let src = "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: demo/linkerd-cni@eth9\n    config.linkerd.io/proxy-uid: \"7\"\n";
    let (out, applied) = run(src, true, Some(1_000_002_102), "");
    assert_eq!(out, src);
    assert!(applied.owned.is_empty());
    let (out, applied) = run(src, false, None, "network=created,proxy-uid=1000002102");
    assert_eq!(out, src);
    assert_eq!(applied.warnings.len(), 1);
    assert_eq!(applied.changes[..], [Change::ProxyUidReleased]);
    assert!(applied.owned.is_empty());
}

#[test]
fn a_bad_annotation_changes_nothing() {
    let mut doc =
        parse_document("metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: 'a,,b'\n")
            .unwrap();
    let before = doc.clone();
    let err = apply(
        doc.as_map_mut().unwrap(),
        &Settings::default(),
        "demo",
        &Decision {
            attach: true,
            ..Decision::default()
        },
        &Owned::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("annotation k8s.v1.cni.cncf.io/networks: item 2"),
        "{err}"
    );
    assert_eq!(doc, before);
}
