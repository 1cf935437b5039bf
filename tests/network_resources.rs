//! The `NetworkResources` function: golden cases under `testdata/network-resources/`
//! (the format of tests/golden.rs, `UPDATE_GOLDEN=1` to rewrite them), including
//! network-resources-injector's own table cases, determinism and idempotence, and
//! checks on meaning that hold whatever the golden files say.

use crate::common;
use crate::common::process::Guarded;

use std::path::PathBuf;

use common::golden::{self, read};
use common::*;

fn case_dirs() -> Vec<PathBuf> {
    golden::case_dirs(&repo_path("testdata/network-resources"), 15)
}

#[test]
fn golden_outputs_match() {
    golden::outputs_match(&case_dirs());
}

#[test]
fn deterministic_and_idempotent() {
    golden::deterministic_and_idempotent(&case_dirs());
}

/// The output of a case, as a tree.
fn rendered(case: &str) -> (Run, Vec<Yaml>) {
    let input = read(
        &repo_path("testdata/network-resources").join(case),
        "input.yaml",
    )
    .unwrap_or_else(|| panic!("no case {case}"));
    let got = run(input.as_bytes());
    assert!(!got.panicked(), "{case}: {}", got.stderr);
    let list = parse_yaml(&got.stdout).unwrap_or_else(|e| panic!("{case}: {e}"));
    let items = items_of(&list);
    (got, items)
}

fn pod<'a>(items: &'a [Yaml], name: &str) -> &'a Yaml {
    items
        .iter()
        .find(|i| i.str_at(&["metadata", "name"]) == Some(name))
        .unwrap_or_else(|| panic!("no item {name}"))
}

/// `resources.<field>.<resource>` of container `index` of a pod.
fn quantity<'a>(pod: &'a Yaml, index: usize, field: &str, resource: &str) -> Option<&'a str> {
    pod.at(&["spec", "containers"])?
        .seq()
        .get(index)?
        .str_at(&["resources", field, resource])
}

/// Requests and limits of the first container, by pod: the injector's table.
#[test]
fn counts_follow_the_injectors_table() {
    for (case, name, resource, want) in [
        ("table-comma-form", "repeated", "intel.com/sriov", Some("2")),
        (
            "table-comma-form",
            "namespaced-interface",
            "mellanox.com/cx5",
            Some("1"),
        ),
        ("table-comma-form", "mixed", "intel.com/sriov", Some("1")),
        ("table-comma-form", "mixed", "mellanox.com/cx5", Some("1")),
        ("table-json-form", "json", "intel.com/sriov", Some("2")),
        ("table-json-form", "json", "mellanox.com/cx5", Some("1")),
        (
            "table-default-network",
            "default-only",
            "intel.com/sriov",
            Some("1"),
        ),
        (
            "table-default-network",
            "default-and-networks",
            "intel.com/sriov",
            Some("1"),
        ),
        (
            "table-default-network",
            "default-and-networks",
            "mellanox.com/cx5",
            Some("1"),
        ),
        (
            "user-set-resource",
            "second-container",
            "intel.com/sriov",
            None,
        ),
        (
            "user-set-resource",
            "second-container",
            "mellanox.com/cx5",
            Some("1"),
        ),
        (
            "honor-resources",
            "adds-to-first",
            "intel.com/sriov",
            Some("3"),
        ),
        (
            "resource-name-keys",
            "custom-key",
            "example.com/vf",
            Some("1"),
        ),
        ("resource-name-keys", "custom-key", "mellanox.com/cx5", None),
    ] {
        let (got, items) = rendered(case);
        assert_eq!(got.code, 0, "{case}: {}", got.stderr);
        let pod = pod(&items, name);
        for field in ["requests", "limits"] {
            assert_eq!(
                quantity(pod, 0, field, resource),
                want,
                "{case} {name} {field} {resource}"
            );
        }
    }
}

/// Every error case exits 1 with one error result naming the resource, and
/// leaves every item as it was.
#[test]
fn errors_change_nothing() {
    for (case, needle) in [
        (
            "error-missing-nad",
            "NetworkAttachmentDefinitions apps/absent and other/gone, which do not exist",
        ),
        (
            "error-bad-networks",
            "item 1 \"a/b/c\": more than one \"/\"",
        ),
        (
            "error-node-selector-conflict",
            "NetworkAttachmentDefinition other/mlx asks for \"cx5\" but the workload's own spec.nodeSelector for \"e810\"",
        ),
        (
            "error-node-selector-malformed",
            "\"nic=cx5=x\" has more than one \"=\"",
        ),
        (
            "error-bad-setting",
            "setting honorResources: must be true or false",
        ),
        (
            "error-unknown-container",
            "Deployment apps/typo: annotation multus.linkerd.io/network-resources-container names container \"compute\", which the pod template does not have (its containers: proxy, app)",
        ),
    ] {
        let (got, items) = rendered(case);
        assert_eq!(got.code, 1, "{case}");
        assert!(
            got.stderr_first_line().contains(needle),
            "{case}: {}",
            got.stderr
        );
        let input = read(
            &repo_path("testdata/network-resources").join(case),
            "input.yaml",
        )
        .unwrap();
        let before = items_of(&parse_yaml(&input).unwrap());
        assert_eq!(before.len(), items.len(), "{case}");
        for (b, a) in before.iter().zip(&items) {
            assert!(
                tree_difference(b, a, "").is_none(),
                "{case}: an item changed"
            );
        }
    }
}

/// `from-injector` on the injector's README ConfigMap and the flags of its
/// deployment example: the object on stdout, which the function then takes
/// as its settings, and the notes on stderr.
#[test]
fn from_injector_prints_the_equivalent_settings() {
    let dir = repo_path("testdata/injector");
    let flags: Vec<String> = std::fs::read_to_string(dir.join("deployments-server-args.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .chain(["-honor-resources".to_string()])
        .collect();
    let out = std::process::Command::new(bin())
        .args(["from-injector", "--config-map"])
        .arg(dir.join("readme-user-defined-injections.yaml"))
        .arg("--")
        .args(&flags)
        .guarded_output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "apiVersion: multus.linkerd.io/v1alpha1
kind: NetworkResources
metadata:
  name: network-resources
  annotations:
    config.kubernetes.io/local-config: \"true\"
spec:
  honorResources: true
  downwardAPI: true
  injections:
    feature.pod.kubernetes.io_sriov-network:
      annotations:
        k8s.v1.cni.cncf.io/networks: sriov-net-attach-def
"
    );
    assert!(
        stderr.starts_with("note: user-defined injection"),
        "{stderr}"
    );
    // The object is a settings object the function takes.
    let input = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n{}items: []\n",
        stdout
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    );
    let got = run(input.as_bytes());
    assert_eq!(got.code, 0, "{}", got.stderr);
    // Bad input names the file.
    let out = std::process::Command::new(bin())
        .args(["from-injector", "--config-map"])
        .arg(dir.join("deployments-server-args.txt"))
        .guarded_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: ") && stderr.contains("deployments-server-args.txt: "),
        "{stderr}"
    );
}

/// `from-injector` carries over an injected networks value in the comma or
/// JSON form when it names networks only (as names), and refuses one that
/// names a namespace or an interface, naming the file, the injection, the
/// value and what to do: nothing is dropped with exit 0.
#[test]
fn from_injector_carries_or_refuses_injected_networks() {
    let dir = tempfile::tempdir().unwrap();
    let config_map = |injections: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nri-control-switches\n  namespace: kube-system\ndata:\n  config.json: |\n    {{\"user-defined-injections\": {{{injections}}}}}\n"
        )
    };
    let injection = |label: &str, networks: &str| {
        format!(
            r#""{label}": {{"op": "add", "path": "/metadata/annotations", "value": {{"k8s.v1.cni.cncf.io/networks": {networks}}}}}"#
        )
    };
    let from_injector = |file: &str, text: String| {
        std::fs::write(dir.path().join(file), text).unwrap();
        let out = std::process::Command::new(bin())
            .current_dir(dir.path())
            .args(["from-injector", "--config-map", file, "--"])
            .args([
                "-injectHugepageDownApi",
                "-log_link=/var/log/nri",
                "-logbuflevel",
                "-1",
            ])
            .guarded_output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let accepted = [
        injection("comma", r#""sriov-a, sriov-b""#),
        injection("json", r#""[{\"name\": \"sriov-net\"}]""#),
    ]
    .join(", ");
    let (code, stdout, stderr) = from_injector("accepted.yaml", config_map(&accepted));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "apiVersion: multus.linkerd.io/v1alpha1
kind: NetworkResources
metadata:
  name: network-resources
  annotations:
    config.kubernetes.io/local-config: \"true\"
spec:
  downwardAPI: true
  injections:
    comma:
      annotations:
        k8s.v1.cni.cncf.io/networks: sriov-a, sriov-b
    json:
      annotations:
        k8s.v1.cni.cncf.io/networks: sriov-net
"
    );
    assert_eq!(
        stderr,
        "note: user-defined injection \"comma\": its networks are appended to the pod's own; the injector replaced them
note: user-defined injection \"json\": its networks are appended to the pod's own; the injector replaced them
"
    );
    let refused = [
        injection("comma", r#""sriov-a""#),
        injection("sriov-other", r#""other/sriov-net""#),
    ]
    .join(", ");
    let (code, stdout, stderr) = from_injector("refused.yaml", config_map(&refused));
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "error: refused.yaml: config.json: user-defined injection \"sriov-other\": k8s.v1.cni.cncf.io/networks \"other/sriov-net\": selection other/sriov-net names namespace other, and NetworkResources injections add networks by name, from the pod's own namespace; list it in the labelled workloads' own k8s.v1.cni.cncf.io/networks instead, or change the injection to name networks only\n"
    );
}
