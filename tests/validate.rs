//! Validation: golden cases under `testdata/validate/` (the format of tests/golden.rs,
//! `UPDATE_GOLDEN=1` to rewrite them) for the `Validation` function configuration, and the
//! `linkerd-multus validate` command on files: its lines, summary and exit codes, and its
//! errors for settings it cannot use.

use crate::common;

use std::path::{Path, PathBuf};

use common::golden::{self, read};
use common::*;

fn case_dirs() -> Vec<PathBuf> {
    golden::case_dirs(&repo_path("testdata/validate"), 7)
}

#[test]
fn golden_outputs_match() {
    golden::outputs_match(&case_dirs());
}

#[test]
fn deterministic_and_idempotent() {
    golden::deterministic_and_idempotent(&case_dirs());
}

/// A validator never changes an item: the items and functionConfig of every case come out
/// as they went in, whatever the results.
#[test]
fn items_are_never_changed() {
    golden::for_each_case(&case_dirs(), |dir| {
        let input = read(dir, "input.yaml").unwrap();
        let got = run(input.as_bytes());
        let mut problems = Vec::new();
        let (Ok(before), Ok(after)) = (parse_yaml(&input), parse_yaml(&got.stdout)) else {
            problems.push(format!("unreadable input or output:\n{}", got.stdout));
            return problems;
        };
        if let Some(d) = tree_difference(
            &Yaml::Seq(items_of(&before)),
            &Yaml::Seq(items_of(&after)),
            "items",
        ) {
            problems.push(d);
        }
        problems
    });
}

/// Exit 1 exactly when a case has an error result; every error names a resource, a field
/// and (where the host said) a file.
#[test]
fn errors_fail_and_name_resource_field_and_file() {
    golden::for_each_case(&case_dirs(), |dir| {
        let input = read(dir, "input.yaml").unwrap();
        let got = run(input.as_bytes());
        let results = results_of(&parse_yaml(&got.stdout).unwrap());
        let errors: Vec<&Yaml> = results
            .iter()
            .filter(|r| r.str_at(&["severity"]) == Some("error"))
            .collect();
        let mut problems = Vec::new();
        if got.code != i32::from(!errors.is_empty()) {
            problems.push(format!("exit {} with {} errors", got.code, errors.len()));
        }
        for error in errors {
            let has = |path: &[&str]| error.at(path).is_some();
            if !has(&["resourceRef", "kind"]) || !has(&["field", "path"]) {
                problems.push(format!("error without resource or field: {error:?}"));
            }
            let in_items = error.str_at(&["field", "path"]) != Some("functionConfig");
            if in_items && input.contains("config.kubernetes.io/path") && !has(&["file", "path"]) {
                problems.push(format!("error without file: {error:?}"));
            }
        }
        problems
    });
}

/// A package of files for the command.
fn package(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let path = tmp.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    tmp
}

fn validate(dir: &Path, args: &[&str]) -> Run {
    let dir = dir.to_string_lossy().into_owned();
    let mut all = vec!["validate"];
    all.extend_from_slice(args);
    all.push(&dir);
    run_with_args(b"", &all)
}

const NADS: &str = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: macvlan\n  namespace: apps\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\"}'\n---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: chain\n  namespace: apps\nspec:\n  config: '{\"cniVersion\": \"0.4.0\", \"name\": \"chain\", \"plugins\": [{\"type\": \"bridge\"}, {\"mtu\": 9000}]}'\n";
const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  template:\n    metadata:\n      annotations:\n        k8s.v1.cni.cncf.io/networks: macvlan, storage/backend@net2\n    spec:\n      containers: []\n";
const WORKER: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: worker\n  namespace: apps\nspec:\n  template:\n    metadata:\n      annotations:\n        k8s.v1.cni.cncf.io/networks: macvlan@eth 1\n    spec:\n      containers: []\n";

#[test]
fn command_prints_one_line_per_problem_and_exits_1() {
    let pkg = package(&[
        ("apps/nads.yaml", NADS),
        ("apps/web.yaml", WEB),
        ("apps/worker.yaml", WORKER),
    ]);
    let got = validate(pkg.path(), &["--namespace-isolation"]);
    assert_eq!(got.code, 1, "{}{}", got.stdout, got.stderr);
    let root = pkg.path().display().to_string();
    let lines: Vec<String> = got
        .stdout
        .lines()
        .map(|l| l.replace(&root, "PKG"))
        .collect();
    assert_eq!(
        lines,
        [
            "PKG/apps/nads.yaml (document 2): error: NetworkAttachmentDefinition apps/chain: spec.config: CNI configuration has no \"plugins[1].type\"",
            "PKG/apps/web.yaml: error: Deployment apps/web: spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks: selects storage/backend, but with namespace isolation a pod in namespace apps may select only NADs in apps or in a global namespace (default, openshift-multus, openshift-sriov-network-operator)",
            "PKG/apps/worker.yaml: error: Deployment apps/worker: spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks: Multus rejects the networks annotation: item 1 \"macvlan@eth 1\": interface name \"eth 1\" is not valid (1 to 15 bytes, no \"/\" or whitespace, not \".\" or \"..\")",
            "linkerd-multus validate: 2 NetworkAttachmentDefinitions and 2 workloads checked; 3 errors, 0 warnings",
        ]
    );
    assert_eq!(got.stderr, "");
    // The field names the annotation; the message does not repeat it.
    assert_eq!(lines[2].matches("k8s.v1.cni.cncf.io/networks").count(), 1);

    // The selection across namespaces is fine once its namespace is global, or without isolation.
    for args in [
        &[
            "--namespace-isolation",
            "--global-namespace",
            "default,storage",
        ][..],
        &[
            "--namespace-isolation",
            "--global-namespace",
            "default",
            "--global-namespace",
            "storage",
        ][..],
        &["--namespace-isolation=false"][..],
        &[][..],
    ] {
        let got = validate(pkg.path(), args);
        assert_eq!(got.code, 1, "{args:?}");
        assert_eq!(got.stdout.lines().count(), 3, "{args:?}: {}", got.stdout);
        assert!(
            !got.stdout.contains("storage/backend"),
            "{args:?}: {}",
            got.stdout
        );
    }
}

#[test]
fn command_passes_a_clean_package() {
    let pkg = package(&[("apps/web.yaml", WEB)]);
    let got = validate(pkg.path(), &[]);
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
    assert_eq!(
        got.stdout,
        "linkerd-multus validate: 0 NetworkAttachmentDefinitions and 1 workload checked; 0 errors, 0 warnings\n"
    );
    // Stdin works as for render.
    let got = run_with_args(WEB.as_bytes(), &["validate", "-"]);
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
}

#[test]
fn command_reads_a_validation_object_or_a_config_file() {
    let validation = "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata:\n  name: validation\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  namespaceIsolation: true\n  globalNamespaces: [default]\n";
    let pkg = package(&[("apps/web.yaml", WEB), ("validation.yaml", validation)]);
    let got = validate(pkg.path(), &[]);
    assert_eq!(got.code, 1, "{}", got.stdout);
    assert!(
        got.stdout.contains("global namespace (default)"),
        "{}",
        got.stdout
    );
    // Flags win over the object.
    let got = validate(pkg.path(), &["--global-namespace", "storage"]);
    assert_eq!(got.code, 0, "{}", got.stdout);

    let only_web = package(&[("apps/web.yaml", WEB)]);
    let config = pkg.path().join("validation.yaml");
    let config = config.to_string_lossy();
    let got = validate(only_web.path(), &["--config", &config]);
    assert_eq!(got.code, 1, "{}", got.stdout);
    // A ConfigMap's data works too, with Multus's comma list.
    let cm = package(&[(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: v\ndata:\n  namespaceIsolation: \"true\"\n  globalNamespaces: default, storage\n",
    )]);
    let cm_path = cm.path().join("cm.yaml");
    let got = validate(only_web.path(), &["--config", &cm_path.to_string_lossy()]);
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
    // Both: an error naming both.
    let got = validate(pkg.path(), &["--config", &config]);
    assert_eq!(got.code, 1);
    assert!(
        got.stderr
            .starts_with("error: settings are given twice: --config ")
            && got.stderr.contains("validation.yaml; keep one"),
        "{}",
        got.stderr
    );
}

#[test]
fn bad_settings_name_the_field_and_the_file() {
    let bad = |spec: &str| {
        let pkg = package(&[
            ("apps/web.yaml", WEB),
            (
                "validation.yaml",
                &format!(
                    "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata:\n  name: v\nspec:\n{spec}"
                ),
            ),
        ]);
        let got = validate(pkg.path(), &[]);
        assert_eq!(got.code, 1, "{spec}");
        assert_eq!(got.stdout, "", "{spec}");
        got.stderr.replace(&pkg.path().display().to_string(), "PKG")
    };
    for (spec, want) in [
        (
            "  namespaceIsolation: yes\n",
            "error: PKG/validation.yaml: setting namespaceIsolation: must be true or false\n",
        ),
        (
            "  globalNamespace: [default]\n",
            "error: PKG/validation.yaml: unknown setting \"globalNamespace\" (did you mean globalNamespaces?); valid settings are namespaceIsolation, globalNamespaces, workloadKinds, defaultNamespace\n",
        ),
        (
            "  globalNamespaces: {default: true}\n",
            "error: PKG/validation.yaml: setting globalNamespaces: must be a string, not a mapping\n",
        ),
        (
            "  globalNamespaces: [Default]\n",
            "error: PKG/validation.yaml: setting globalNamespaces: \"Default\" is not a namespace name\n",
        ),
        (
            "  workloadKinds: [{kind: Rollout}]\n",
            "error: PKG/validation.yaml: setting workloadKinds: item 0: apiVersion is required\n",
        ),
        (
            "  - namespaceIsolation\n",
            "error: PKG/validation.yaml: functionConfig spec is a sequence, not a mapping\n",
        ),
    ] {
        assert_eq!(bad(spec), want, "{spec}");
    }
    let pkg = package(&[("apps/web.yaml", WEB)]);
    let got = validate(pkg.path(), &["--global-namespace", "Storage"]);
    assert_eq!(got.code, 1);
    assert_eq!(
        got.stderr,
        "error: --global-namespace: setting globalNamespaces: \"Storage\" is not a namespace name\n"
    );
    let got = validate(pkg.path(), &["--namespace-isolation=maybe"]);
    assert_eq!(
        got.stderr,
        "error: --namespace-isolation: setting namespaceIsolation: must be true or false\n"
    );
    let missing = pkg.path().join("nothing.yaml");
    let got = validate(pkg.path(), &["--config", &missing.to_string_lossy()]);
    assert_eq!(got.code, 1);
    assert!(got.stderr.starts_with("error: --config "), "{}", got.stderr);
    // A NAD that is not YAML: the file is named.
    let broken = package(&[("nad.yaml", "kind: [\n")]);
    let got = validate(broken.path(), &[]);
    assert_eq!(got.code, 1);
    assert!(
        got.stderr.contains("nad.yaml: not valid YAML"),
        "{}",
        got.stderr
    );
}

/// The same checks run in the KRM function when its config is a Validation, and a
/// malformed Validation there is an error result on the functionConfig.
#[test]
fn function_config_errors_are_results() {
    let got = run(
        read(&repo_path("testdata/validate/bad-setting"), "input.yaml")
            .unwrap()
            .as_bytes(),
    );
    assert_eq!(got.code, 1);
    assert_eq!(
        got.stderr_first_line(),
        "error: Validation validation: unknown setting \"globalNamespace\" (did you mean globalNamespaces?); valid settings are namespaceIsolation, globalNamespaces, workloadKinds, defaultNamespace"
    );
}

/// A package holding its local-config copy of the Linkerd-CNI ConfigMap, as a user applies it,
/// on the real API server: `render DIR | kubectl apply --server-side -f -` (the way the docs
/// show) leaves the cluster's ConfigMap, the chart's, as it is; `kubectl apply -R -f DIR`
/// replaces it with the copy. `validate DIR` warns of that copy (and of no other
/// local-config object), naming the ways that leave it out; exit 0.
#[test]
fn validate_warns_of_the_config_map_kubectl_apply_r_would_push() {
    use common::kube_apiserver::ControlPlane;
    let plane = ControlPlane::shared();
    plane.install_nad_crd();
    let cni = plane.namespace("cni", &[]);
    let team = plane.unique_name("team");
    let cluster_config = r#"{"name": "linkerd-cni", "type": "linkerd-cni", "log_level": "info", "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}}"#;
    let config_map = |config: &str, local: bool| {
        let annotations = match local {
            true => "  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
            false => "",
        };
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linkerd-cni-config\n  namespace: {cni}\n{annotations}data:\n  cni_network_config: '{config}'\n"
        )
    };
    // The cluster's ConfigMap, as the Linkerd-CNI chart applies it.
    plane.kubectl_ok(
        &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
        &config_map(cluster_config, false),
    );
    let copy = cluster_config.replace("\"info\"", "\"debug\"");
    let settings = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-settings\n  namespace: {team}\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  note: not the Linkerd-CNI ConfigMap\n"
    );
    let namespace = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {team}\n  annotations:\n    linkerd.io/multus: enabled\n"
    );
    let pkg = package(&[
        ("namespace.yaml", &namespace),
        ("linkerd-cni/configmap.yaml", &config_map(&copy, true)),
        ("settings.yaml", &settings),
    ]);

    let got = validate(pkg.path(), &[]);
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
    let root = pkg.path().display().to_string();
    assert_eq!(
        got.stdout.replace(&root, "PKG"),
        format!(
            "PKG/linkerd-cni/configmap.yaml: warning: ConfigMap {cni}/linkerd-cni-config: metadata.annotations.config.kubernetes.io/local-config: local-config: kpt and linkerd-multus render leave it out, but kubectl apply -R (or -f of its file) applies it, and this copy then replaces the cluster's ConfigMap of that name, which its owner (the Linkerd-CNI chart) applies: its next upgrade conflicts on .data; apply the rendered package with kpt live apply, or linkerd-multus render DIR | kubectl apply --server-side -f -\nlinkerd-multus validate: 0 NetworkAttachmentDefinitions and 0 workloads checked; 0 errors, 1 warning\n"
        )
    );
    // On stdin there are no files for kubectl apply -R to read: not a word.
    let got = run_with_args(config_map(&copy, true).as_bytes(), &["validate", "-"]);
    assert!(!got.stdout.contains("warning:"), "{}", got.stdout);

    let live = || {
        plane.kubectl(&[
            "get",
            "configmap",
            "-n",
            &cni,
            "linkerd-cni-config",
            "-o",
            "jsonpath={.data.cni_network_config}",
        ])
    };
    let dir = pkg.path().to_string_lossy().into_owned();
    let rendered = run_with_args(b"", &["render", "--cni-namespace", &cni, &dir]);
    assert_eq!(rendered.code, 0, "{}", rendered.stderr);
    assert!(
        !rendered.stdout.contains("kind: ConfigMap"),
        "{}",
        rendered.stdout
    );
    plane.kubectl_ok(&["apply", "--server-side", "-f", "-"], &rendered.stdout);
    assert_eq!(live(), cluster_config, "the rendered stream leaves it out");
    plane.kubectl_ok(&["apply", "-R", "-f", &dir], "");
    assert_eq!(live(), copy, "kubectl apply -R pushes the copy");
}
