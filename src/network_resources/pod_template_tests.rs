use super::*;
use crate::network_resources::record::Share;
use crate::network_resources::{NODE_SELECTOR_ANNOTATION, NadTable, nad_table, settings};
use crate::yaml::parse_document;

fn nads() -> NadTable {
    nad_table(&[
        ("ns", "a", &[(settings::RESOURCE_NAME_ANNOTATION, "r/a")]),
        ("ns", "rack1", &[(NODE_SELECTOR_ANNOTATION, "rack=1")]),
        ("ns", "rack2", &[(NODE_SELECTOR_ANNOTATION, "rack = 2")]),
    ])
}

/// The first container's requests of `r/a` after applying the rules.
fn requests(template: &Map) -> Option<String> {
    containers(template.get("spec")?.as_map()?)
        .first()
        .and_then(|c| resource_value(c, "requests", "r/a"))
        .and_then(Node::as_text)
        .map(str::to_string)
}

/// Networks, first container's requests, honor, recorded share, wanted requests and share.
type Case = (
    &'static str,
    Option<&'static str>,
    bool,
    BTreeMap<String, Share>,
    Option<&'static str>,
    Option<Share>,
);

#[test]
fn resources_by_what_was_recorded() {
    let set = |n| BTreeMap::from([("r/a".to_string(), Share::Set(n))]);
    let added = |n| BTreeMap::from([("r/a".to_string(), Share::Added(n))]);
    let cases: [Case; 8] = [
        (
            "a, a",
            None,
            false,
            BTreeMap::new(),
            Some("2"),
            Some(Share::Set(2)),
        ),
        (
            "a",
            Some("2"),
            false,
            set(2),
            Some("1"),
            Some(Share::Set(1)),
        ),
        ("", Some("2"), false, set(2), None, None),
        ("a", Some("5"), false, set(2), Some("5"), None),
        (
            "a",
            Some("4"),
            true,
            BTreeMap::new(),
            Some("5"),
            Some(Share::Added(1)),
        ),
        (
            "a, a",
            Some("5"),
            true,
            added(1),
            Some("6"),
            Some(Share::Added(2)),
        ),
        ("", Some("5"), true, added(1), Some("4"), None),
        ("a", Some("3"), false, BTreeMap::new(), Some("3"), None),
    ];
    for (networks, current, honor, owned, want, want_share) in cases {
        let resources = current
            .map(|v| format!("resources: {{requests: {{r/a: '{v}'}}, limits: {{r/a: '{v}'}}}}"))
            .unwrap_or_default();
        let src = format!(
            "metadata: {{annotations: {{k8s.v1.cni.cncf.io/networks: '{networks}'}}}}\nspec: {{containers: [{{name: c, {resources}}}]}}"
        );
        let mut template = parse_document(&src).unwrap().as_map().unwrap().clone();
        let settings = Settings {
            honor_resources: honor,
            ..Settings::default()
        };
        let before = Record {
            requests: owned.clone(),
            limits: owned,
            ..Record::default()
        };
        let applied = apply(&mut template, &settings, "ns", &nads(), &before).unwrap();
        let case = format!("{networks:?} {current:?} honor={honor}");
        assert_eq!(requests(&template).as_deref(), want, "{case}");
        assert_eq!(
            applied.record.requests.get("r/a").copied(),
            want_share,
            "{case}"
        );
        assert_eq!(applied.record.requests, applied.record.limits, "{case}");
    }
}

/// Templates the rules refuse: metadata, spec (empty: a scalar) and a part of
/// the error.
const ERROR_CASES: [(&str, &str, &str); 14] = [
    (
        "labels: {blue: 'true', green: 'true'}",
        "containers: [{name: c}]",
        "injections blue and green set annotation team to different values",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a/b/c'}",
        "containers: [{name: c}]",
        "more than one \"/\"",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'ns/a, other/a'}",
        "containers: [{name: c}]",
        "give one of them an explicit interface",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'absent'}",
        "containers: [{name: c}]",
        "selects NetworkAttachmentDefinition ns/absent, which does not exist",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'rack1, rack2'}",
        "containers: [{name: c}]",
        "ns/rack1 asks for \"1\" but NetworkAttachmentDefinition ns/rack2 for \"2\"",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'rack1'}",
        "nodeSelector: {old: x, rack: '9'}, containers: [{name: c}]",
        "but the workload's own spec.nodeSelector for \"9\"",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: []",
        "spec.containers is empty or missing",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: [c]",
        "spec.containers[0] is a scalar, not a mapping",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: [{name: c, resources: x}]",
        "spec.containers[0].resources is a scalar, not a mapping",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: [{name: c, resources: {limits: [1]}}]",
        "spec.containers[0].resources.limits is a sequence, not a mapping",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, volumes: {}, containers: [{name: c}]",
        "spec.volumes is a mapping, not a list",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: [{name: c}, {name: d, volumeMounts: x}]",
        "spec.containers[1].volumeMounts is a scalar, not a list",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "nodeSelector: {old: x}, containers: [{name: c, env: {}}]",
        "spec.containers[0].env is a mapping, not a list",
    ),
    (
        "annotations: {k8s.v1.cni.cncf.io/networks: 'a'}",
        "",
        "spec is a scalar, not a mapping",
    ),
];

/// Every error, including those found after edits have begun in the
/// order of the rules (here, an owned node label to remove first),
/// leaves the template as it was.
#[test]
fn errors_leave_the_template_as_it_was() {
    let nads = nad_table(&[
        ("ns", "a", &[(settings::RESOURCE_NAME_ANNOTATION, "r/a")]),
        ("other", "a", &[]),
        ("ns", "rack1", &[(NODE_SELECTOR_ANNOTATION, "rack=1")]),
        ("ns", "rack2", &[(NODE_SELECTOR_ANNOTATION, "rack=2")]),
    ]);
    let injection = |team: &str| BTreeMap::from([("team".to_string(), team.to_string())]);
    let settings = Settings {
        downward_api: true,
        interface_names: InterfaceNames::Deterministic,
        injections: BTreeMap::from([
            ("blue".to_string(), injection("b")),
            ("green".to_string(), injection("g")),
        ]),
        ..Settings::default()
    };
    let before = Record {
        node_selector: BTreeMap::from([("old".to_string(), "x".to_string())]),
        ..Record::default()
    };
    for (metadata, spec, want) in ERROR_CASES {
        let spec = if spec.is_empty() {
            "x".to_string()
        } else {
            format!("{{{spec}}}")
        };
        let src = format!("metadata: {{{metadata}}}\nspec: {spec}");
        let mut template = parse_document(&src).unwrap().as_map().unwrap().clone();
        let original = template.clone();
        let err = apply(&mut template, &settings, "ns", &nads, &before)
            .expect_err(&src)
            .to_string();
        assert!(err.contains(want), "{src}: {err}");
        assert_eq!(template, original, "{src}: an error changes nothing");
    }
}

/// The record needs `metadata.annotations` of the workload itself: a bad
/// one is found before the template changes.
#[test]
fn a_workload_without_room_for_its_record_is_left_as_it_was() {
    let kinds = crate::k8s::workload::WorkloadKinds::new(&[]);
    let deployment = kinds.find("apps", "Deployment").unwrap();
    for (metadata, want) in [
        (
            "{name: web, annotations: [x]}",
            "metadata.annotations is a sequence, not a mapping",
        ),
        ("web", "metadata is a scalar, not a mapping"),
    ] {
        let src = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {metadata}\nspec:\n  template:\n    metadata: {{annotations: {{k8s.v1.cni.cncf.io/networks: a}}}}\n    spec: {{containers: [{{name: c}}]}}\n"
        );
        let mut object = parse_document(&src).unwrap();
        let original = object.clone();
        let err =
            workload(&mut object, deployment, &Settings::default(), "ns", &nads()).unwrap_err();
        assert_eq!(err.to_string(), want, "{metadata}");
        assert_eq!(object, original, "{metadata}: an error changes nothing");
    }
}

#[test]
fn node_selectors_conflict_by_source() {
    let mut template = parse_document(
            "metadata: {annotations: {k8s.v1.cni.cncf.io/networks: 'rack1, rack2'}}\nspec: {containers: [{name: c}]}",
        )
        .unwrap()
        .as_map()
        .unwrap()
        .clone();
    let original = template.clone();
    let err = apply(
        &mut template,
        &Settings::default(),
        "ns",
        &nads(),
        &Record::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.nodeSelector rack: NetworkAttachmentDefinition ns/rack1 asks for \"1\" but NetworkAttachmentDefinition ns/rack2 for \"2\""
    );
    assert_eq!(template, original, "an error changes nothing");
}
