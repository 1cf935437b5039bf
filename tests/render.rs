//! The plain renderer (`render`, `render --diff`, `diff`, `post-render`) as users run it: on
//! files and directories, with settings from files, flags and the environment.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{
    Yaml, bin, copy_dir, kinds, parse_yaml_stream, repo_path, snapshot, template_networks,
};

/// One run of the binary with arguments, environment and a working directory.
/// A run of the binary.
type Out = common::Run;

#[path = "render/apply_order.rs"]
mod apply_order;
#[path = "render/diff.rs"]
mod diff;
#[path = "render/foreign_nad.rs"]
mod foreign_nad;
#[path = "render/multus_values.rs"]
mod multus_values;

fn linkerd_multus(args: &[&str], env: &[(&str, &str)], cwd: &Path, stdin: &str) -> Out {
    common::run_clean(args, env, cwd, stdin)
}

fn render(args: &[&str], cwd: &Path) -> Out {
    linkerd_multus(args, &[], cwd, "")
}

/// A copy of the repository's example package in a temporary directory.
fn example_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_path("functions/linkerd-multus/examples/kpt"),
        dir.path(),
    );
    dir
}

fn find<'a>(docs: &'a [Yaml], kind: &str, name: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| {
            d.str_at(&["kind"]) == Some(kind) && d.str_at(&["metadata", "name"]) == Some(name)
        })
        .unwrap_or_else(|| panic!("no {kind} {name} in the output"))
}

fn networks(doc: &Yaml) -> &str {
    template_networks(doc).unwrap_or("")
}

#[test]
fn renders_a_directory_to_a_stream() {
    let dir = example_copy();
    let out = render(&["render", "."], dir.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    // In apply order (the Namespace, its NAD, then the rest in file order); the
    // local-config ConfigMap and the Kptfile left out.
    assert_eq!(
        kinds(&docs),
        [
            "Namespace",
            "NetworkAttachmentDefinition",
            "CronJob",
            "Deployment"
        ]
    );
    assert_eq!(
        networks(find(&docs, "Deployment", "web")),
        "storage@net1,linkerd-cni"
    );
    let nad = find(&docs, "NetworkAttachmentDefinition", "linkerd-cni");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), Some("demo"));
    assert!(
        !out.stdout.contains("config.kubernetes.io/path")
            && !out.stdout.contains("config.kubernetes.io/index"),
        "the renderer's own annotations leak:\n{}",
        out.stdout
    );
    // The octal mode is written as the user wrote it.
    assert!(out.stdout.contains("defaultMode: 0644"));
}

#[test]
fn rendering_is_deterministic_and_idempotent() {
    let dir = example_copy();
    let first = render(&["render", "."], dir.path());
    let again = render(&["render", "."], dir.path());
    assert_eq!(first.stdout, again.stdout);
    // The output, with the ConfigMap it needs, renders to itself.
    let config = std::fs::read_to_string(dir.path().join("linkerd-cni/configmap.yaml")).unwrap();
    let twice = linkerd_multus(
        &["render", "-", "--context", "linkerd-cni"],
        &[],
        dir.path(),
        &first.stdout,
    );
    assert_eq!(twice.code, 0, "{}", twice.stderr);
    assert_eq!(twice.stdout, first.stdout);
    assert!(config.contains("local-config"));
}

#[test]
fn reads_files_json_lists_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("ns.json"),
        r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "annotations": {"linkerd.io/inject": "enabled", "linkerd.io/multus": "enabled"}}}"#,
    )
    .unwrap();
    std::fs::write(
        p.join("list.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, namespace: demo}\n  spec: {containers: [{name: a, image: a}]}\n",
    )
    .unwrap();
    std::fs::create_dir(p.join(".hidden")).unwrap();
    std::fs::write(p.join(".hidden/broken.yaml"), "{{ not yaml").unwrap();
    let cm = std::fs::read_to_string(repo_path(
        "functions/linkerd-multus/examples/kpt/linkerd-cni/configmap.yaml",
    ))
    .unwrap();
    let pod_on_stdin = "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: demo}\nspec: {containers: [{name: b, image: b}]}\n";
    std::fs::write(p.join("cm.yaml"), &cm).unwrap();
    let out = linkerd_multus(
        &[
            "render",
            "ns.json",
            "list.yaml",
            "-",
            "--context",
            "cm.yaml",
        ],
        &[],
        p,
        pod_on_stdin,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    let names: Vec<_> = docs
        .iter()
        .map(|d| d.str_at(&["metadata", "name"]).unwrap().to_string())
        .collect();
    assert_eq!(names, ["demo", "linkerd-cni", "a", "b"]);
    for pod in ["a", "b"] {
        assert_eq!(
            find(&docs, "Pod", pod).str_at(&[
                "metadata",
                "annotations",
                "k8s.v1.cni.cncf.io/networks"
            ]),
            Some("linkerd-cni")
        );
    }
    // JSON input comes out as YAML.
    assert!(out.stdout.starts_with("apiVersion: v1\nkind: Namespace\n"));
}

#[test]
fn settings_from_config_file_environment_and_flags() {
    let dir = example_copy();
    std::fs::write(
        dir.path().join("settings.yaml"),
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nmetadata: {name: s}\nspec:\n  nadName: from-file\n  cniVersion: 0.4.0\n",
    )
    .unwrap();
    let nad_of = |out: &Out| {
        assert_eq!(out.code, 0, "{}", out.stderr);
        let docs = parse_yaml_stream(&out.stdout).unwrap();
        let nad = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("NetworkAttachmentDefinition"))
            .expect("a NAD");
        (
            nad.str_at(&["metadata", "name"]).unwrap().to_string(),
            nad.str_at(&["spec", "config"]).unwrap().to_string(),
        )
    };
    let from_file = linkerd_multus(
        &[
            "render",
            "apps",
            "namespaces",
            "linkerd-cni",
            "--config",
            "settings.yaml",
        ],
        &[],
        dir.path(),
        "",
    );
    let (name, config) = nad_of(&from_file);
    assert_eq!(name, "from-file");
    assert!(config.contains("\"cniVersion\": \"0.4.0\""));
    // The environment overrides the file, flags override both.
    let env = [("LINKERD_MULTUS_NAD_NAME", "from-env")];
    let args = [
        "render",
        "apps",
        "namespaces",
        "linkerd-cni",
        "--config",
        "settings.yaml",
    ];
    let from_env = linkerd_multus(&args, &env, dir.path(), "");
    assert_eq!(nad_of(&from_env).0, "from-env");
    let mut with_flag = args.to_vec();
    with_flag.extend(["--nad-name", "from-flag"]);
    assert_eq!(
        nad_of(&linkerd_multus(&with_flag, &env, dir.path(), "")).0,
        "from-flag"
    );
    // A LinkerdMultus among the inputs is the settings, and is not printed.
    let inline = render(&["render", "."], dir.path());
    assert_eq!(nad_of(&inline).0, "from-file");
    assert!(!inline.stdout.contains("kind: LinkerdMultus"));
}

#[test]
fn config_rollout_from_environment_and_flags() {
    let dir = example_copy();
    let args = ["render", "apps", "namespaces", "linkerd-cni"];
    let hashes = |out: &Out| -> Vec<String> {
        assert_eq!(out.code, 0, "{}", out.stderr);
        parse_yaml_stream(&out.stdout)
            .unwrap()
            .iter()
            .filter_map(|d| {
                d.str_at(&[
                    "spec",
                    "template",
                    "metadata",
                    "annotations",
                    "multus.linkerd.io/config-hash",
                ])
                .map(str::to_string)
            })
            .collect()
    };
    assert!(
        hashes(&render(&args, dir.path())).is_empty(),
        "off by default"
    );
    let env = [("LINKERD_MULTUS_CONFIG_ROLLOUT", "all")];
    let from_env = hashes(&linkerd_multus(&args, &env, dir.path(), ""));
    assert!(
        !from_env.is_empty(),
        "LINKERD_MULTUS_CONFIG_ROLLOUT=all stamps nothing"
    );
    assert!(from_env.iter().all(|h| h.len() == 16));
    let mut with_flag = args.to_vec();
    with_flag.extend(["--config-rollout", "off"]);
    assert!(
        hashes(&linkerd_multus(&with_flag, &env, dir.path(), "")).is_empty(),
        "the flag wins over the environment"
    );
}

/// A bad invocation: its arguments, its environment and the start of its error.
type ErrorCase = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    &'static str,
);

/// Arguments, environment and the start of the error of each bad invocation.
const ERROR_CASES: &[ErrorCase] = &[
    (
        &["render", "apps", "--proxy-uid-offset", "x"],
        &[],
        "error: --proxy-uid-offset: setting proxyUIDOffset: \"x\" is not a whole number",
    ),
    (
        &["render", "apps"],
        &[("LINKERD_MULTUS_CNI_VERSION", "9")],
        "error: environment variable LINKERD_MULTUS_CNI_VERSION: setting cniVersion: \"9\" is not a CNI spec version",
    ),
    (
        &["render", "apps", "--config-rollout", "yes"],
        &[],
        "error: --config-rollout: setting configRollout: \"yes\" is not a rollout mode; valid: off, all, labelled",
    ),
    (
        &["render", "apps"],
        &[("LINKERD_MULTUS_CONFIG_ROLLOUT", "Labelled")],
        "error: environment variable LINKERD_MULTUS_CONFIG_ROLLOUT: setting configRollout: \"Labelled\" is not a rollout mode; valid: off, all, labelled",
    ),
    (
        &["render", "apps"],
        &[(
            "ARGOCD_APP_PARAMETERS",
            r#"[{"name":"nadname","string":"x"}]"#,
        )],
        "error: environment variable ARGOCD_APP_PARAMETERS: unknown parameter \"nadname\"",
    ),
    (
        &["render", "apps", "--config", "other.yaml"],
        &[],
        "error: --config other.yaml: functionConfig must be a LinkerdMultus",
    ),
    (
        &["render", ".", "--config", "settings.yaml"],
        &[],
        "error: settings are given twice: --config settings.yaml and the LinkerdMultus in settings.yaml",
    ),
    (
        &["render", "empty-dir"],
        &[],
        "error: no Kubernetes objects in empty-dir: pass --allow-empty if an empty output is what you want",
    ),
    (
        &["render", "apps", "namespaces"],
        &[],
        "error: ConfigMap linkerd-cni/linkerd-cni-config: this ConfigMap is not in the input",
    ),
];

#[test]
fn errors_name_the_source_and_print_nothing() {
    let dir = example_copy();
    let p = dir.path();
    std::fs::write(p.join("settings.yaml"), "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nmetadata: {name: s}\nspec: {nadName: a}\n").unwrap();
    std::fs::write(
        p.join("other.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
    )
    .unwrap();
    std::fs::create_dir(p.join("empty-dir")).unwrap();
    for (args, env, want) in ERROR_CASES {
        let out = linkerd_multus(args, env, p, "");
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?} printed output on error");
        assert!(out.stderr.starts_with(want), "{args:?}:\n{}", out.stderr);
    }
    // A broken file: named with its line, and nothing printed.
    std::fs::write(p.join("apps/broken.yaml"), "apiVersion: v1\nkind: [\n").unwrap();
    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert!(
        out.stderr
            .starts_with("error: apps/broken.yaml: not valid YAML: line 3 column 1"),
        "{}",
        out.stderr
    );
    std::fs::write(
        p.join("apps/broken.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: ConfigMap\n",
    )
    .unwrap();
    let out = render(&["render", "."], p);
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert!(
        out.stderr.starts_with(
            "error: apps/broken.yaml (document 2): not a Kubernetes object: metadata:"
        ),
        "{}",
        out.stderr
    );
}

/// Every message names a file as the user gave it (`dir/` is walked, yet
/// `dir/sub/a.yaml` is shown, not `sub/a.yaml`), and counts documents from 1.
#[test]
fn errors_name_files_as_given_and_count_documents_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("dir/sub")).unwrap();
    let write = |text: &str| std::fs::write(p.join("dir/sub/a.yaml"), text).unwrap();
    let first_line = |args: &[&str]| {
        let out = render(args, p);
        assert_ne!(out.code, 0, "{args:?}");
        out.stderr.lines().next().unwrap_or_default().to_string()
    };

    write("apiVersion: v1\nkind: [\n");
    let yaml = "error: dir/sub/a.yaml: not valid YAML: line 3 column 1: while parsing a node, did not find expected node content";
    for command in ["render", "diff", "validate"] {
        assert_eq!(first_line(&[command, "dir/"]), yaml, "{command}");
    }

    write(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: ConfigMap\n",
    );
    let not_a_resource = "error: dir/sub/a.yaml (document 2): not a Kubernetes object: metadata: is missing or not a mapping";
    for command in ["render", "diff", "validate"] {
        assert_eq!(first_line(&[command, "dir/"]), not_a_resource, "{command}");
    }

    // The rules' own messages name the same file and document.
    write(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: demo}\nspec:\n  template:\n    metadata:\n      annotations:\n        k8s.v1.cni.cncf.io/networks: a,,b\n    spec: {containers: []}\n",
    );
    let out = render(&["render", "dir/", "--namespaces", "{demo: {}}"], p);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error: Deployment demo/web (dir/sub/a.yaml (document 2)): annotation k8s.v1.cni.cncf.io/networks: item 2 \"\": empty item\n"
    );
    let out = render(&["validate", "dir/"], p);
    assert_eq!(
        out.stdout.lines().next().unwrap(),
        "dir/sub/a.yaml (document 2): error: Deployment demo/web: spec.template.metadata.annotations.k8s.v1.cni.cncf.io/networks: Multus rejects the networks annotation: item 2 \"\": empty item"
    );
}

#[test]
fn post_render_places_resources_in_the_release_namespace() {
    let manifests = "---\n# Source: web/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: web}]}\n";
    let context = repo_path("functions/linkerd-multus/examples/kpt");
    let ctx_ns = context.join("namespaces");
    let ctx_cm = context.join("linkerd-cni");
    let args = [
        "post-render",
        "--context",
        ctx_ns.to_str().unwrap(),
        "--context",
        ctx_cm.to_str().unwrap(),
    ];
    let out = linkerd_multus(
        &args,
        &[("LINKERD_MULTUS_DEFAULT_NAMESPACE", "demo")],
        Path::new("/"),
        manifests,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    assert_eq!(docs.len(), 2, "{}", out.stdout);
    let web = find(&docs, "Deployment", "web");
    assert_eq!(
        web.str_at(&["metadata", "namespace"]),
        None,
        "the namespace is Helm's to set"
    );
    assert_eq!(networks(web), "linkerd-cni");
    let nad = find(&docs, "NetworkAttachmentDefinition", "linkerd-cni");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), Some("demo"));
    // The Namespace from the context is not printed: Helm does not own it.
    assert!(!out.stdout.contains("kind: Namespace"));
    // Without a namespace the deployment is decided on its own annotations.
    // HELM_NAMESPACE is not read: Helm does not set it for post-renderers, and
    // an exported one can name another namespace than `helm install -n`.
    let out = linkerd_multus(
        &args,
        &[("HELM_NAMESPACE", "demo")],
        Path::new("/"),
        manifests,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    assert_eq!(networks(find(&docs, "Deployment", "web")), "");
    assert!(out.stderr.contains("warning: "), "{}", out.stderr);
}

/// Makes the directory a kpt package whose pipeline runs the binary.
fn add_exec_pipeline(p: &Path) {
    std::fs::write(
        p.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: example\npipeline:\n  mutators:\n  - exec: {}\n",
            bin()
        ),
    )
    .unwrap();
}

#[test]
fn a_misspelt_variable_is_named_with_the_one_probably_meant() {
    let dir = example_copy();
    let p = dir.path();
    let env = [
        ("LINKERD_MULTUS_NAD_NAMES", "mesh"),
        ("ARGOCD_ENV_LINKERD_MULTUS_CNINAMESPACE", "cni"),
    ];
    let want = "\
warning: environment variable ARGOCD_ENV_LINKERD_MULTUS_CNINAMESPACE (LINKERD_MULTUS_CNINAMESPACE in the Application's plugin env) is not one linkerd-multus reads; did you mean LINKERD_MULTUS_CNI_NAMESPACE?
warning: environment variable LINKERD_MULTUS_NAD_NAMES is not one linkerd-multus reads; did you mean LINKERD_MULTUS_NAD_NAME?
";
    for args in [
        &["render", "."][..],
        &["diff", "."],
        &["render", "--diff", "."],
    ] {
        let out = linkerd_multus(args, &env, p, "");
        let mut warnings: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("environment variable"))
            .collect();
        warnings.sort();
        assert_eq!(warnings.join("\n") + "\n", want, "{args:?}: {}", out.stderr);
    }
    let out = linkerd_multus(&["post-render"], &env, p, "");
    assert!(
        out.stderr.contains(want.lines().last().unwrap()),
        "{}",
        out.stderr
    );
    // Nothing to say about the variables it reads.
    let out = linkerd_multus(
        &["render", "."],
        &[("LINKERD_MULTUS_NAD_NAME", "linkerd-cni")],
        p,
        "",
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
}
