//! Malformed input: exit 1, nothing on stdout, a first stderr line `error: ...` that says
//! what is wrong (naming the item index and its path when there is one), and never a panic.

use crate::common;

use common::*;

const VALID_ITEM: &str = "\
- apiVersion: v1
  kind: Namespace
  metadata:
    name: demo
    annotations:
      config.kubernetes.io/index: '0'
      config.kubernetes.io/path: 'namespaces/demo.yaml'
      internal.config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'namespaces/demo.yaml'
      internal.config.kubernetes.io/id: '1'
";

fn resource_list(items: &str) -> String {
    format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n{items}")
}

/// Asserts a clean rejection and returns the first stderr line.
fn rejected(what: &str, input: &[u8]) -> String {
    let got = run(input);
    assert!(
        !got.panicked(),
        "{what}: the binary crashed (exit {}):\n{}",
        got.code,
        got.stderr
    );
    assert_eq!(got.code, 1, "{what}: exit code; stderr:\n{}", got.stderr);
    assert_eq!(got.stdout, "", "{what}: stdout must be empty");
    let line = got.stderr_first_line().to_string();
    assert!(
        line.starts_with("error: ") && line.len() > "error: ".len() + 5,
        "{what}: first stderr line is not a clear `error: ...`: {line:?}"
    );
    line
}

/// Asserts the message names item `index` and its `path`.
fn names_item(what: &str, line: &str, index: usize, path: &str) {
    let forms = [
        format!("item {index}"),
        format!("items[{index}]"),
        format!("item #{index}"),
        format!("index {index}"),
        format!("item[{index}]"),
    ];
    assert!(
        forms.iter().any(|f| line.contains(f.as_str())),
        "{what}: message does not name item index {index}: {line:?}"
    );
    assert!(
        line.contains(path),
        "{what}: message does not name the item's path {path}: {line:?}"
    );
}

#[test]
fn not_yaml() {
    rejected("unterminated flow sequence", b"a: [");
    rejected(
        "tab indentation",
        b"apiVersion: v1\nkind: ResourceList\nitems:\n\t- a\n",
    );
    rejected(
        "bad quoting",
        b"apiVersion: \"config.kubernetes.io/v1\nkind: ResourceList\n",
    );
    rejected(
        "invalid UTF-8",
        b"apiVersion: config.kubernetes.io/v1\nkind: \xff\xfe\n",
    );
}

#[test]
fn empty_input() {
    rejected("empty input", b"");
    rejected("only whitespace", b"\n  \n");
    rejected("only a comment", b"# nothing here\n");
}

#[test]
fn not_a_resource_list() {
    rejected("a YAML list", b"- apiVersion: v1\n  kind: Namespace\n");
    rejected("a scalar", b"hello\n");
    let line = rejected(
        "wrong kind",
        b"apiVersion: config.kubernetes.io/v1\nkind: List\nitems: []\n",
    );
    assert!(line.contains("List") || line.contains("kind"), "{line}");
    let line = rejected(
        "wrong apiVersion",
        b"apiVersion: v1\nkind: ResourceList\nitems: []\n",
    );
    assert!(line.contains("apiVersion") || line.contains("v1"), "{line}");
    rejected(
        "a plain Kubernetes object",
        VALID_ITEM[2..].replace("\n  ", "\n").as_bytes(),
    );
}

#[test]
fn items_not_a_list() {
    let line = rejected(
        "items is a mapping",
        b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n  a: b\n",
    );
    assert!(line.contains("items"), "{line}");
    rejected(
        "items is a scalar",
        b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: nothing\n",
    );
    rejected(
        "an item is a scalar",
        resource_list(&format!("{VALID_ITEM}- just a string\n")).as_bytes(),
    );
    rejected(
        "an item is a list",
        resource_list(&format!("{VALID_ITEM}- [a, b]\n")).as_bytes(),
    );
}

fn second_item(body: &str) -> String {
    resource_list(&format!("{VALID_ITEM}{body}"))
}

#[test]
fn item_without_kind() {
    let input = second_item(
        "- apiVersion: apps/v1
  metadata:
    name: web
    namespace: demo
    annotations:
      config.kubernetes.io/index: '0'
      config.kubernetes.io/path: 'apps/web.yaml'
      internal.config.kubernetes.io/path: 'apps/web.yaml'
  spec: {}
",
    );
    let line = rejected("item without kind", input.as_bytes());
    assert!(line.contains("kind"), "{line}");
    names_item("item without kind", &line, 1, "apps/web.yaml");
}

#[test]
fn item_without_api_version() {
    let input = second_item(
        "- kind: Deployment
  metadata:
    name: web
    annotations:
      config.kubernetes.io/path: 'apps/web.yaml'
",
    );
    let line = rejected("item without apiVersion", input.as_bytes());
    assert!(line.contains("apiVersion"), "{line}");
    names_item("item without apiVersion", &line, 1, "apps/web.yaml");
}

#[test]
fn item_without_metadata() {
    let input = second_item("- apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: b\n");
    let line = rejected("item without metadata", input.as_bytes());
    assert!(line.contains("metadata"), "{line}");
    let forms = ["item 1", "items[1]", "item #1", "index 1", "item[1]"];
    assert!(
        forms.iter().any(|f| line.contains(f)),
        "item index not named: {line}"
    );
    let input = second_item("- apiVersion: v1\n  kind: ConfigMap\n  metadata: 42\n");
    rejected("metadata is a scalar", input.as_bytes());
}

#[test]
fn item_without_name() {
    let input = second_item(
        "- apiVersion: v1
  kind: ConfigMap
  metadata:
    namespace: demo
    annotations:
      config.kubernetes.io/index: '2'
      config.kubernetes.io/path: 'config/settings.yaml'
",
    );
    let line = rejected("item without metadata.name", input.as_bytes());
    assert!(line.contains("name"), "{line}");
    names_item(
        "item without metadata.name",
        &line,
        1,
        "config/settings.yaml",
    );
    let input = resource_list(
        "- apiVersion: v1
  kind: ConfigMap
  metadata:
    annotations:
      internal.config.kubernetes.io/path: 'config/only-internal.yaml'
",
    );
    rejected("item without name, internal path only", input.as_bytes());
}

#[test]
fn items_without_paths_are_still_named() {
    let input = resource_list(&format!(
        "{VALID_ITEM}{VALID_ITEM}- apiVersion: v1\n  kind: Secret\n  metadata: {{}}\n"
    ));
    let line = rejected("third item without name", input.as_bytes());
    let forms = ["item 2", "items[2]", "item #2", "index 2", "item[2]"];
    assert!(
        forms.iter().any(|f| line.contains(f)),
        "item index not named: {line}"
    );
}

/// Valid input in JSON and in flow style must work and come out as block YAML.
#[test]
fn json_and_flow_resource_lists_are_valid() {
    let json = r#"{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList",
 "items": [
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "annotations": {"linkerd.io/multus": "enabled", "linkerd.io/inject": "enabled"}}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "demo"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flags", "namespace": "demo"}, "data": {"a": "yes", "b": "0644"}},
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "linkerd-cni-config", "namespace": "linkerd-cni"},
   "data": {"dest_cni_net_dir": "/etc/cni/net.d", "cni_network_config": "{\"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}, \"linkerd\": {\"proxy-uid\": 2102}}"}}
 ]}"#;
    let flow = "{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: [\
        {apiVersion: v1, kind: Namespace, metadata: {name: demo, annotations: {linkerd.io/multus: enabled, linkerd.io/inject: enabled}}}, \
        {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: demo}, spec: {containers: [{name: web, image: nginx}]}}, \
        {apiVersion: v1, kind: ConfigMap, metadata: {name: flags, namespace: demo}, data: {a: \"yes\", b: \"0644\"}}, \
        {apiVersion: v1, kind: ConfigMap, metadata: {name: linkerd-cni-config, namespace: linkerd-cni}, \
         data: {dest_cni_net_dir: /etc/cni/net.d, cni_network_config: '{\"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}, \"linkerd\": {\"proxy-uid\": 2102}}'}}]}\n";
    for (what, input) in [("JSON", json), ("flow YAML", flow)] {
        let got = run(input.as_bytes());
        assert_eq!(got.code, 0, "{what} ResourceList rejected:\n{}", got.stderr);
        assert!(
            got.stdout
                .starts_with("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"),
            "{what}: output is not a block YAML ResourceList:\n{}",
            got.stdout
        );
        let rl = parse_yaml(&got.stdout).expect("output parses");
        let items = items_of(&rl);
        let pod = items
            .iter()
            .find(|i| i.str_at(&["kind"]) == Some("Pod"))
            .expect("pod");
        assert_eq!(
            pod.annotation("k8s.v1.cni.cncf.io/networks"),
            Some("linkerd-cni"),
            "{what}: pod not attached"
        );
        assert!(
            items.iter().any(is_generated_nad),
            "{what}: no NAD generated"
        );
        let flags = items
            .iter()
            .find(|i| i.id().2 == "flags")
            .expect("flags ConfigMap");
        for (k, v) in [("a", "yes"), ("b", "0644")] {
            assert!(
                matches!(flags.at(&["data", k]), Some(Yaml::Scalar { value, plain: false, .. }) if value == v),
                "{what}: data.{k} lost its value or quotes"
            );
        }
        // No path annotations in, none out.
        assert!(!got.stdout.contains("config.kubernetes.io/path"), "{what}");
    }
}

#[test]
fn empty_items_is_valid() {
    let got = run(b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n");
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert!(
        got.stdout
            .starts_with("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"),
        "{}",
        got.stdout
    );
}

// ------------------------------------------------------------------------------------------
// Property-style: random truncations and mutations never crash the binary.

/// A small deterministic generator (xorshift64*), so failures are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const NOISE: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ":",
    ": ",
    "- ",
    "'",
    "\"",
    "#",
    "&a ",
    "*a",
    "!",
    "|",
    ">",
    "%",
    "\t",
    "\n",
    "  ",
    ",",
    "@",
    "\\",
    "~",
    "null",
    "0644",
    "yes",
    "[{\"name\": ",
    "---\n",
    "...\n",
    "\u{feff}",
    "é",
    "\0",
];

fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = base.to_vec();
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        let lines: Vec<&[u8]> = data.split_inclusive(|b| *b == b'\n').collect();
        let pick = rng.below(lines.len());
        data = match rng.below(8) {
            // Truncate anywhere, even inside a UTF-8 sequence.
            0 => data[..rng.below(data.len())].to_vec(),
            // Delete a line.
            1 => lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != pick)
                .flat_map(|(_, l)| l.iter().copied())
                .collect(),
            // Duplicate a line.
            2 => lines
                .iter()
                .enumerate()
                .flat_map(|(i, l)| {
                    let times = if i == pick { 2 } else { 1 };
                    std::iter::repeat_n(l.iter().copied(), times).flatten()
                })
                .collect(),
            // Change a line's indentation.
            3 => lines
                .iter()
                .enumerate()
                .flat_map(|(i, l)| {
                    let mut l = l.to_vec();
                    if i == pick {
                        if l.starts_with(b"  ") {
                            l.drain(..2);
                        } else {
                            l.splice(0..0, b"   ".iter().copied());
                        }
                    }
                    l
                })
                .collect(),
            // Swap two lines.
            4 => {
                let other = rng.below(lines.len());
                let mut v: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
                v.swap(pick, other);
                v.concat()
            }
            // Flip a byte.
            5 => {
                let mut d = data.clone();
                if !d.is_empty() {
                    let i = rng.below(d.len());
                    d[i] = (rng.next() & 0xff) as u8;
                }
                d
            }
            // Insert noise.
            _ => {
                let mut d = data.clone();
                let at = rng.below(d.len() + 1);
                let noise = NOISE[rng.below(NOISE.len())].as_bytes();
                d.splice(at..at, noise.iter().copied());
                d
            }
        };
    }
    data
}

#[test]
fn random_mutations_never_panic() {
    let bases: Vec<Vec<u8>> = [
        "networks-json",
        "yaml-fidelity",
        "openshift-uid-range",
        "json-items",
    ]
    .iter()
    .map(|c| {
        std::fs::read(repo_path(&format!("testdata/golden/{c}/input.yaml"))).expect("golden input")
    })
    .collect();
    let mut inputs = Vec::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..200 {
        let base = &bases[i % bases.len()];
        inputs.push((i, mutate(base, &mut rng)));
    }
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for chunk in inputs.chunks(25) {
            let failures = &failures;
            s.spawn(move || {
                for (i, input) in chunk {
                    let got = run(input);
                    let problem = if got.panicked() {
                        Some(format!("crashed with exit {}: {}", got.code, got.stderr))
                    } else if got.code != 0 && got.code != 1 {
                        Some(format!("exit code {}", got.code))
                    } else if got.code == 1 && !got.stderr_first_line().starts_with("error: ") {
                        Some(format!(
                            "exit 1 without `error: ` line: {:?}",
                            got.stderr_first_line()
                        ))
                    } else if got.code == 0 && got.stdout.is_empty() {
                        Some("exit 0 with empty stdout".into())
                    } else {
                        None
                    };
                    if let Some(p) = problem {
                        let path =
                            std::env::temp_dir().join(format!("linkerd-multus-mutation-{i}.yaml"));
                        let _ = std::fs::write(&path, input);
                        failures.lock().unwrap().push(format!(
                            "mutation {i} (input saved to {}): {p}",
                            path.display()
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
