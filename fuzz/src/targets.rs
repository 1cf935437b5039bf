//! The fuzz targets: each reader of user input, with the invariants its output must
//! hold, not only "no panic". A broken invariant panics, which AFL++ records as a crash.
//!
//! Shared by the fuzzer (`fuzz/src/main.rs`, run by `scripts/fuzz.sh`) and the
//! regression tests (`tests/fuzz_regressions.rs`), which run every saved crash and the
//! seed corpus through the same functions.

use std::path::Path;

use base64::Engine as _;
use linkerd_multus::admission::{self, MissingNad, NadCheck, NadConfigs, OnError};
use linkerd_multus::commands::function as krm;
use linkerd_multus::commands::manifests::Input;
use linkerd_multus::commands::render::{self, Mode, Options};
use linkerd_multus::k8s::namespace::Lookup;
use linkerd_multus::krm::resource_list::ResourceList;
use linkerd_multus::linkerd_cni::cni_config::{nad_config, to_text};
use linkerd_multus::linkerd_cni::settings::Settings;
use linkerd_multus::linkerd_cni::skip_subnets::{
    self, Context, NadIpams, OPT_IN_ANNOTATION, PluginSettings, WORK_BUDGET,
};
use linkerd_multus::multus::ipam::{self as ipam_reader, Ipam, IpamError};
use linkerd_multus::multus::networks::Networks;
use linkerd_multus::network_resources::Nads;
use linkerd_multus::pipeline::settings::{self, Given, Sources, Takes};
use linkerd_multus::yaml::{self, Map, Node};
use serde_json::{Value, json};

/// A target: its name and the function checking one input.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("krm", krm_function),
    ("manifests", manifests),
    ("networks", networks),
    ("cni-config", cni_config),
    ("ipam", ipam),
    ("settings", settings),
    ("admission", admission_review),
    ("work", work_per_byte),
];

/// The target of a name.
pub fn find(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The KRM function on a ResourceList (YAML or JSON): a refused input says so
/// (exit 1, a message, or error results); an accepted one renders to a ResourceList
/// that renders to the same items again.
pub fn krm_function(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let out = krm::run(text);
    if out.stdout.is_empty() {
        assert_ne!(out.code, 0, "empty stdout with exit 0");
        assert!(out.stderr.starts_with("error: "), "{:?}", out.stderr);
        return;
    }
    let list = ResourceList::parse(&out.stdout)
        .unwrap_or_else(|e| panic!("the output does not read back: {e}\n{}", out.stdout));
    if out.code != 0 {
        assert!(
            out.stdout.contains("\n  severity: error\n") && !out.stderr.is_empty(),
            "exit {} without an error result:\n{}",
            out.code,
            out.stdout
        );
        return;
    }
    let again = krm::run(&out.stdout);
    assert_eq!(again.code, 0, "the output is refused: {}", again.stderr);
    let again = ResourceList::parse(&again.stdout).expect("the second output reads back");
    assert!(
        again.items == list.items,
        "rendering the output again changed it:\n{}",
        out.stdout
    );
}

/// The manifest reader and the YAML emitter, through `post-render`: what is written
/// reads back to the same tree and writes the same text again; a rendered stream
/// renders to itself; a refused input exits non-zero with a message and no output.
pub fn manifests(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(docs) = yaml::parse_stream(text) {
        // Empty documents are no resources: every front leaves them out.
        let docs: Vec<Node> = docs.into_iter().filter(|d| !d.is_null()).collect();
        let once = yaml::emit_stream(&docs);
        let read = yaml::parse_stream(&once)
            .unwrap_or_else(|e| panic!("the emitted YAML does not parse: {e}\n{once}"));
        assert_eq!(read.len(), docs.len(), "documents lost:\n{once}");
        assert_eq!(
            yaml::emit_stream(&read),
            once,
            "emitting is not a fixed point"
        );
    }
    let out = post_render(text);
    if out.code != 0 {
        assert!(out.stdout.is_empty(), "output despite exit {}", out.code);
        assert!(
            !out.stderr.trim().is_empty(),
            "exit {} without a message",
            out.code
        );
        return;
    }
    let again = post_render(&out.stdout);
    assert_eq!(again.code, 0, "the output is refused: {}", again.stderr);
    assert!(
        again.stdout == out.stdout,
        "rendering the output again changed it:\n{}\n---- again ----\n{}",
        out.stdout,
        again.stdout
    );
}

fn post_render(text: &str) -> krm::Outcome {
    let options = Options {
        inputs: vec![Input::Stdin],
        context: Vec::new(),
        config: None,
        flags: Vec::new(),
        mode: Mode::Stream,
        allow_empty: true,
        namespace_variables: &[],
        namespace_hint: None,
    };
    render::run(&options, &|_| None, || Ok(text.to_string()))
}

/// The networks annotation: a parsed annotation printed as a JSON list reads back to
/// the same selections; appending `linkerd-cni` in the user's form and removing it
/// again gives the text back exactly.
pub fn networks(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = Networks::parse(text) else {
        return;
    };
    let triples = |n: &Networks<'_>| -> Vec<(String, Option<String>, Option<String>)> {
        n.selections()
            .iter()
            .map(|s| (s.name.clone(), s.namespace.clone(), s.interface.clone()))
            .collect()
    };
    let printed = Value::Array(
        parsed
            .selections()
            .iter()
            .map(|s| json!({"name": s.name, "namespace": s.namespace, "interface": s.interface}))
            .collect(),
    )
    .to_string();
    let reread = Networks::parse(&printed)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed} does not parse: {e}"));
    assert_eq!(
        triples(&reread),
        triples(&parsed),
        "{text:?} printed as {printed}"
    );

    const NAME: &str = "linkerd-cni";
    if parsed
        .selections()
        .iter()
        .any(|s| s.is_plain() && s.name == NAME)
    {
        return;
    }
    let appended = parsed.with_appended(NAME);
    let with = Networks::parse(&appended).unwrap_or_else(|e| {
        panic!("{text:?} with {NAME} appended, {appended:?}, does not parse: {e}")
    });
    let mut want = triples(&parsed);
    want.push((NAME.to_string(), None, None));
    assert_eq!(triples(&with), want, "{text:?} appended as {appended:?}");
    assert_eq!(
        with.without_plain(NAME).as_deref(),
        Some(text),
        "{text:?} appended as {appended:?}"
    );
}

/// The Linkerd-CNI ConfigMap's `cni_network_config`: an accepted config becomes a NAD
/// config that is JSON, holds no placeholder, and comes out the same when read again.
pub fn cni_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let settings = Settings::default();
    let config_map = |config: &str| {
        let mut map = Map::default();
        map.insert("cni_network_config", Node::string(config));
        map
    };
    let Ok(config) = nad_config(Some(&config_map(text)), &settings) else {
        return;
    };
    let written = to_text(&config);
    let read: Value = serde_json::from_str(&written)
        .unwrap_or_else(|e| panic!("the NAD config is not JSON: {e}\n{written}"));
    assert_eq!(
        read, config,
        "the NAD config does not read back:\n{written}"
    );
    assert!(
        !has_placeholder(&written),
        "a placeholder is left in the NAD config:\n{written}"
    );
    let again = nad_config(Some(&config_map(&written)), &settings)
        .unwrap_or_else(|e| panic!("the NAD config is refused when read again: {e}\n{written}"));
    assert_eq!(again, config, "reading the NAD config again changed it");
}

/// A NAD's CNI configuration, for its IPAM: the networks read are masked and each once, and
/// written back as a host-local IPAM with those subnets and routes, they read the same.
pub fn ipam(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Ipam::Subnets { subnets, routes }) = ipam_reader::read(text) else {
        return;
    };
    for list in [&subnets, &routes] {
        for (i, net) in list.iter().enumerate() {
            assert_eq!(*net, net.trunc(), "{net} is not masked to its network");
            assert!(!list[..i].contains(net), "{net} twice in {list:?}");
        }
    }
    // A static IPAM without addresses gives none: its addresses come from the pod's `ips`.
    // Written back as host-local, which needs a range, it would not read.
    if subnets.is_empty() {
        return;
    }
    let written = json!({
        "type": "bridge",
        "ipam": {
            "type": "host-local",
            "ranges": subnets.iter().map(|s| json!([{"subnet": s.to_string()}])).collect::<Vec<_>>(),
            "routes": routes.iter().map(|r| json!({"dst": r.to_string()})).collect::<Vec<_>>(),
        }
    })
    .to_string();
    assert_eq!(
        ipam_reader::read(&written),
        Ok(Ipam::Subnets { subnets, routes }),
        "the networks do not read back:\n{written}"
    );
}

/// Whether a text holds an `__UPPER_CASE__` placeholder.
fn has_placeholder(text: &str) -> bool {
    text.match_indices("__").any(|(at, _)| {
        let rest = &text[at + 2..];
        let len = rest
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || *b == b'_' || b.is_ascii_digit())
            .count();
        len > 2 && rest[..len].ends_with("__") && rest.as_bytes()[0].is_ascii_uppercase()
    })
}

/// The settings kinds (`LinkerdMultus`, `NetworkResources`, `Validation`, or a
/// ConfigMap of either): each reader accepts or says why, and never panics.
pub fn settings(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(node) = yaml::parse_document(text) else {
        return;
    };
    for takes in [Takes::Any, Takes::Validation, Takes::NetworkResources] {
        let mut sources = Sources::new(takes);
        sources.given = Given::FunctionConfig(&node);
        if let Err(e) = settings::resolve(sources) {
            assert!(!e.to_string().trim().is_empty(), "an empty error");
        }
    }
}

/// A cluster where every namespace has every NAD, without annotations and with
/// one config: the missing-NAD check runs and lets every attached pod through,
/// and each gets the config's hash.
struct EveryNad;

impl Nads for EveryNad {
    fn annotations(&self, _: &str, _: &str) -> Option<&dyn Lookup> {
        static NONE: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        Some(&NONE)
    }
}

impl NadConfigs for EveryNad {
    fn config_hash(&self, _: &str, _: &str) -> Option<&str> {
        Some("a6c07c0f59f1dd14")
    }
    fn other_network(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn ipam(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&Result<linkerd_multus::multus::ipam::Ipam, linkerd_multus::multus::ipam::IpamError>>
    {
        None
    }
    fn plugin_settings(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&linkerd_multus::linkerd_cni::skip_subnets::PluginSettings> {
        None
    }
}

/// The AdmissionReview reader and the webhook's answer: a review that reads gets a
/// response with its uid; the patch, applied to the pod, gives a pod the rules leave
/// alone.
pub fn admission_review(data: &[u8]) {
    let request = match admission::parse(data) {
        Ok(request) => request,
        Err(e) => {
            assert!(!e.to_string().trim().is_empty(), "an empty error");
            return;
        }
    };
    let namespace: std::collections::BTreeMap<String, String> = [
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "enabled"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let answer = |request: &admission::Request<'_>| {
        let check = NadCheck {
            nads: &EveryNad,
            policy: MissingNad::Deny,
        };
        admission::answer(
            request,
            &namespace,
            &Settings::default(),
            None,
            Some(&check),
            OnError::Allow,
        )
    };
    let first = answer(&request);
    let body: Value = serde_json::from_slice(&first.body).expect("the response is JSON");
    let response = &body["response"];
    assert_eq!(response["uid"].as_str(), Some(&*request.uid), "{body}");
    let Some(patch) = response["patch"].as_str() else {
        return;
    };
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("the patch is base64");
    let patch: json_patch::Patch =
        serde_json::from_slice(&patch).expect("the patch is a JSONPatch");
    let mut review: Value = serde_json::from_slice(data).expect("the review is JSON");
    let object = &mut review["request"]["object"];
    json_patch::patch(object, &patch)
        .unwrap_or_else(|e| panic!("the patch does not apply: {e}\n{patch:?}"));
    let patched = serde_json::to_vec(&review).expect("JSON");
    let request = admission::parse(&patched).expect("the patched review reads");
    let second = answer(&request);
    let body: Value = serde_json::from_slice(&second.body).expect("the response is JSON");
    assert!(
        body["response"]["patch"].is_null(),
        "the patched pod is patched again: {body}"
    );
}

/// Units of work the `work` target allows per byte of its input.
pub const WORK_PER_BYTE: u64 = 16;
/// Units it allows whatever the input: the rule's own steps, and the ranges the work budget
/// lets one pod examine.
pub const WORK_FIXED: u64 = 4 * WORK_BUDGET as u64 + 2_000;

/// Every NAD of the `work` target: the one IPAM read from its input.
struct OneIpam(Result<Ipam, IpamError>);

impl NadIpams for OneIpam {
    fn ipam(&self, _: &str, _: &str) -> Option<&Result<Ipam, IpamError>> {
        Some(&self.0)
    }
}

/// A NAD's CNI configuration and, after a NUL byte, a networks annotation whose every
/// selection is that NAD: the secondary-network rule reads the NAD as the webhook's watch
/// stores it and decides on a pod opted in, within [`WORK_PER_BYTE`] units of work
/// (`linkerd_multus::work`) per byte of input, plus [`WORK_FIXED`]. A loop nested in another
/// over the same input breaks it.
pub fn work_per_byte(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (config, networks) = text.split_once('\0').unwrap_or((text, ""));
    let settings = Settings {
        cluster_cidrs: vec![
            "10.128.0.0/14".parse().unwrap(),
            "10.96.0.0/12".parse().unwrap(),
        ],
        ..Settings::default()
    };
    let plugin = PluginSettings::default();
    let namespace: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    let annotations: std::collections::BTreeMap<String, String> = [
        ("k8s.v1.cni.cncf.io/networks", networks),
        (OPT_IN_ANNOTATION, "enabled"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (planned, units) = linkerd_multus::work::measure(|| {
        let nads = OneIpam(ipam_reader::read(config));
        let cx = Context {
            settings: &settings,
            pod_namespace: "demo",
            namespace: &namespace,
            nads: Some(&nads),
            plugin: Some(&plugin),
        };
        skip_subnets::plan(&annotations, Some(networks), true, &cx)
    });
    let bound = WORK_PER_BYTE * data.len() as u64 + WORK_FIXED;
    assert!(
        units <= bound,
        "{units} units of work for {} bytes: past {WORK_PER_BYTE} a byte and {WORK_FIXED}",
        data.len()
    );
    if let Ok(planned) = planned {
        for (key, value) in &planned.edits {
            let entries = value.as_deref().map_or(0, |v| v.split(',').count());
            assert!(
                *key != skip_subnets::ANNOTATION || entries <= skip_subnets::MAX_SUBNETS,
                "{entries} entries written to {key}"
            );
        }
    }
}

/// The seed corpus of each target, made from `testdata/` under `root`: whole files for
/// the stream readers; networks annotations, CNI configs, settings objects and pods
/// (wrapped in AdmissionReviews) picked out of them for the others.
pub fn seeds(root: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut files: Vec<_> = walk(&root.join("testdata"));
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if text.len() > 64 * 1024 {
            continue;
        }
        let is_list = text.contains("kind: ResourceList") || text.contains("\"ResourceList\"");
        seeds.push((
            if is_list { "krm" } else { "manifests" },
            text.clone().into_bytes(),
        ));
        let Ok(docs) = yaml::parse_stream(&text) else {
            continue;
        };
        let mut nodes = Vec::new();
        for doc in &docs {
            collect(doc, &mut nodes);
        }
        for node in nodes {
            let kind = node
                .get_path(&["kind"])
                .and_then(Node::as_str)
                .unwrap_or("");
            if matches!(kind, "LinkerdMultus" | "NetworkResources" | "Validation") {
                seeds.push(("settings", yaml::emit_document(node).into_bytes()));
            }
            if let Some(config) = node
                .get_path(&["data", "cni_network_config"])
                .and_then(Node::as_str)
            {
                seeds.push(("cni-config", config.as_bytes().to_vec()));
            }
            if let Some(config) = node.get_path(&["spec", "config"]).and_then(Node::as_str) {
                seeds.push(("ipam", config.as_bytes().to_vec()));
            }
            if let Some(networks) = node
                .get_path(&["metadata", "annotations", "k8s.v1.cni.cncf.io/networks"])
                .and_then(Node::as_str)
            {
                seeds.push(("networks", networks.as_bytes().to_vec()));
            }
            if node.get_path(&["spec", "containers"]).is_some()
                && node.get_path(&["metadata"]).is_some()
            {
                let pod = node.to_json();
                let review = json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {
                        "uid": "seed",
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "demo",
                        "operation": "CREATE",
                        "object": pod,
                    }
                });
                seeds.push(("admission", review.to_string().into_bytes()));
            }
        }
    }
    // The `work` target: each NAD config beside a networks annotation.
    let configs: Vec<Vec<u8>> = seeds
        .iter()
        .filter(|(t, _)| *t == "ipam")
        .map(|(_, d)| d.clone())
        .collect();
    let networks: Vec<Vec<u8>> = seeds
        .iter()
        .filter(|(t, _)| *t == "networks")
        .map(|(_, d)| d.clone())
        .collect();
    for (config, networks) in configs.iter().zip(networks.iter().cycle()) {
        let mut seed = config.clone();
        seed.push(0);
        seed.extend_from_slice(networks);
        seeds.push(("work", seed));
    }
    seeds.sort();
    seeds.dedup();
    seeds
}

/// Every mapping in a tree that could be a resource or a pod template.
fn collect<'n>(node: &'n Node, out: &mut Vec<&'n Node>) {
    match node {
        Node::Map(map) => {
            out.push(node);
            for (_, v) in &map.entries {
                collect(v, out);
            }
        }
        Node::Seq(seq) => seq.items.iter().for_each(|i| collect(i, out)),
        Node::Scalar(_) => {}
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
    out
}
