use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::linkerd_cni::restarts::{Key, Kind, Subject};
use crate::multus::nad::Maker;

const CONFIG_MAP: &str = include_str!("../../../../shared/fixtures/linkerd-cni/version-2.19.yaml");

fn namespace(name: &str, annotations: &[(&str, &str)]) -> Meta {
    Meta {
        name: name.into(),
        annotations: (annotations.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Meta::default()
    }
}

/// The ConfigMap's file: the one named linkerd-cni-config among others, or the only one;
/// each refusal names what is wrong and what to do.
#[test]
fn the_config_is_read_from_the_config_maps_file() {
    let settings = Settings::default();
    let want = config_text(CONFIG_MAP, &settings).unwrap();
    assert!(want.contains("\"log_level\": \"info\""), "{want}");
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  a: b\n";
    for (case, text, outcome) in [
        ("alone", CONFIG_MAP.to_string(), Ok(want.clone())),
        (
            "among others",
            format!("{other}---\n{CONFIG_MAP}"),
            Ok(want.clone()),
        ),
        (
            "no such ConfigMap",
            format!("{other}---\n{other}"),
            Err("holds no ConfigMap linkerd-cni-config"),
        ),
        (
            "an invalid config",
            CONFIG_MAP.replace("\"type\": \"linkerd-cni\"", "\"type\": \"bridge\""),
            Err("\"type\" is \"bridge\", not \"linkerd-cni\""),
        ),
        ("not YAML", "a: [".to_string(), Err("not YAML")),
    ] {
        match (config_text(&text, &settings), outcome) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{case}"),
            (Err(got), Err(want)) => assert!(got.contains(want), "{case}: {got}"),
            (got, want) => panic!("{case}: {got:?}, wanted {want:?}"),
        }
    }
}

/// Each namespace's NAD once the controller has written the new config: its own and the
/// ones it makes get the new hash, Git's and a user's keep theirs, one it removes has none.
#[test]
fn each_namespace_gets_the_hash_its_nad_will_hold() {
    let settings = Settings::default();
    let text = config_text(CONFIG_MAP, &settings).unwrap();
    let (new, git) = (config_hash(&text), "{\"name\": \"git\"}");
    let on = [("linkerd.io/multus", "enabled")];
    let namespaces = [
        namespace("changed", &on),
        namespace("current", &on),
        namespace("git", &on),
        namespace("made", &on),
        namespace("removed", &[]),
        namespace("plain", &[]),
    ];
    let nads: BTreeMap<String, Nad> = [
        ("changed", Maker::Controller, "{\"name\": \"old\"}"),
        ("current", Maker::Controller, text.as_str()),
        ("git", Maker::Rendered, git),
        ("removed", Maker::Controller, text.as_str()),
    ]
    .into_iter()
    .map(|(ns, maker, config)| (ns.to_string(), Nad::new(maker, Some(config.into()))))
    .collect();
    let (written, hashes) = nad_hashes(&namespaces, &nads, &settings, &text);
    assert_eq!(written, ["changed", "made"]);
    let want: BTreeMap<String, String> = [
        ("changed", new.clone()),
        ("current", new.clone()),
        ("git", config_hash(git)),
        ("made", new),
    ]
    .into_iter()
    .map(|(ns, hash)| (ns.to_string(), hash))
    .collect();
    assert_eq!(hashes, want);
}

/// The text names the pacing, each wave, each eviction, what is left and why, what did not
/// opt in, and that nothing was changed.
#[test]
fn the_text_says_what_happens_in_order() {
    let key = |ns: &str, name: &str| Key {
        kind: Kind::Deployment,
        namespace: ns.into(),
        name: name.into(),
    };
    let preview = Preview {
        waves: vec![vec![key("a", "w0"), key("b", "w0")], vec![key("a", "w1")]],
        evictions: vec!["d/batch".into()],
        left: vec![(Subject::Workload(key("c", "git")), "held by Git".into())],
        unopted: vec![key("e", "plain")],
    };
    let pacing = Pacing {
        concurrency: 2,
        deadline: Duration::from_secs(600),
        on: true,
    };
    let written = ["a".to_string(), "b".to_string()];
    assert_eq!(
        text("new.yaml", "0123456789abcdef", &written, pacing, &preview),
        "new.yaml: a Linkerd-CNI config of hash 0123456789abcdef; the NAD controller writes it into the NAD of 2 namespace(s): a, b
restarts, --restart-concurrency=2 --restart-deadline=10m: each wave once the one before has rolled out, or its deadline has passed
  wave 1: Deployment a/w0, Deployment b/w0
  wave 2: Deployment a/w1
evicted at once (their namespace is annotated multus.linkerd.io/evict-on-config-change=enabled):
  Pod d/batch
left to you (each reported by a StaleConfig Event):
  Deployment c/git: held by Git
not opted in, neither restarted nor reported (annotate the pod template or the namespace multus.linkerd.io/restart-on-config-change=enabled, or restart them yourself):
  Deployment e/plain
nothing was changed
"
    );
    let off = Pacing {
        on: false,
        ..pacing
    };
    let quiet = text(
        "new.yaml",
        "0123456789abcdef",
        &[],
        off,
        &Preview::default(),
    );
    assert_eq!(
        quiet.lines().skip(1).collect::<Vec<_>>(),
        [
            "the NAD controller runs without --restart-stale-workloads: it restarts and evicts nothing; what it would do with it follows",
            "restarts: none",
            "nothing was changed"
        ]
    );
}
