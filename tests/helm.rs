//! Helm, on real Helm output (Helm SDK v4.2.3, see testdata/helm/README.md):
//! Helm 3's `--post-renderer` gets the `helm template` stream, Helm 4's
//! `postrenderer/v1` plugin gets Helm 4's annotated stream. The linkerd2-cni
//! chart's own output is the context that holds the Linkerd-CNI ConfigMap.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::process::Guard;
use common::{Yaml, bin, parse_yaml_stream, repo_path};
use linkerd_multus::yaml::{Node, parse_document};

const FILENAME_ANNOTATION: &str = "postrenderer.helm.sh/postrender-filename";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(program: &str, args: &[String], env: &[(&str, String)], stdin: &str) -> Out {
    let mut child = Guard::spawn(
        Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap_or_else(|e| panic!("start {program}: {e}"));
    let mut input = child.take_stdin().unwrap();
    let text = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(repo_path("testdata/helm").join(rel)).unwrap()
}

/// The context a user passes: the linkerd2-cni release's output (for its
/// ConfigMap) and the release namespace as the cluster has it.
fn context_args(dir: &Path) -> Vec<String> {
    std::fs::write(
        dir.join("namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n  annotations:\n    linkerd.io/inject: enabled\n    linkerd.io/multus: enabled\n",
    )
    .unwrap();
    vec![
        format!(
            "--context={}",
            repo_path("testdata/helm/linkerd2-cni/template.yaml").display()
        ),
        format!("--context={}", dir.join("namespace.yaml").display()),
        "--default-namespace=demo".into(),
    ]
}

fn kind_name(d: &Yaml) -> (String, String) {
    (
        d.str_at(&["kind"]).unwrap().to_string(),
        d.str_at(&["metadata", "name"]).unwrap().to_string(),
    )
}

fn pod_networks(d: &Yaml) -> Option<&str> {
    let template: &[&str] = match d.str_at(&["kind"]) {
        Some("CronJob") => &["spec", "jobTemplate", "spec", "template"],
        _ => &["spec", "template"],
    };
    let mut path = template.to_vec();
    path.extend(["metadata", "annotations", "k8s.v1.cni.cncf.io/networks"]);
    d.str_at(&path)
}

/// Every workload of the web chart attached, one NAD for the release namespace.
fn assert_attached(input: &[Yaml], output: &[Yaml]) {
    let kinds_in: Vec<_> = input.iter().map(kind_name).collect();
    let kinds_out: Vec<_> = output.iter().map(kind_name).collect();
    let mut expected = kinds_in.clone();
    expected.push(("NetworkAttachmentDefinition".into(), "linkerd-cni".into()));
    let mut sorted_out = kinds_out.clone();
    sorted_out.sort();
    expected.sort();
    assert_eq!(sorted_out, expected);
    for d in output {
        let (kind, name) = kind_name(d);
        match kind.as_str() {
            "Deployment" | "CronJob" => {
                assert_eq!(pod_networks(d), Some("linkerd-cni"), "{kind} {name}");
            }
            "StatefulSet" => {
                assert_eq!(
                    pod_networks(d),
                    Some("macvlan-conf,linkerd-cni"),
                    "{kind} {name}"
                );
            }
            "NetworkAttachmentDefinition" => {
                assert_eq!(d.str_at(&["metadata", "namespace"]), Some("demo"));
                let config = d.str_at(&["spec", "config"]).unwrap();
                assert!(config.contains("\"iptables-mode\": \"nft\""), "{config}");
            }
            _ => {}
        }
        assert_eq!(
            d.str_at(&["metadata", "namespace"]).is_some(),
            kind == "NetworkAttachmentDefinition"
        );
    }
}

/// `helm template web functions/linkerd-multus/examples/helm/web -n demo`, rendered now by
/// Helm's own code (scripts/helm.py).
fn web_template() -> String {
    let out = common::helm::helm(&WEB_TEMPLATE, None);
    assert!(
        out.status.success(),
        "helm template: {}",
        common::output_text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

const WEB_CHART: &str = "functions/linkerd-multus/examples/helm/web";
/// scripts/helm.py's arguments for `helm template web WEB_CHART -n demo`.
const WEB_TEMPLATE: [&str; 6] = [
    "template",
    WEB_CHART,
    "--release",
    "web",
    "--namespace",
    "demo",
];

/// The recorded fixture (testdata/helm/web/template.yaml, whose README describes Helm's
/// output) is what Helm renders today.
#[test]
fn the_recorded_helm_template_fixture_is_what_helm_renders() {
    assert_eq!(web_template(), fixture("web/template.yaml"));
}

#[test]
fn helm3_post_renderer_on_helm_template_output() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = web_template();
    assert!(
        manifests.contains("# Source: web/templates/"),
        "helm template output"
    );
    // helm install --post-renderer linkerd-multus --post-renderer-args post-render ...
    let mut args = vec!["post-render".to_string()];
    args.extend(context_args(dir.path()));
    let env = [("PATH", "/usr/bin:/bin".to_string())];
    let out = run(bin(), &args, &env, &manifests);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_attached(
        &parse_yaml_stream(&manifests).unwrap(),
        &parse_yaml_stream(&out.stdout).unwrap(),
    );
    // Deterministic, and idempotent: post-rendering the output changes nothing.
    let again = run(bin(), &args, &env, &out.stdout);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stdout, out.stdout);
}

#[test]
fn helm4_plugin_as_helm_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = repo_path("functions/linkerd-multus/helm");
    let plugin =
        parse_document(&std::fs::read_to_string(plugin_dir.join("plugin.yaml")).unwrap()).unwrap();
    let get = |path: &[&str]| {
        plugin
            .get_path(path)
            .and_then(Node::as_text)
            .map(str::to_string)
    };
    assert_eq!(get(&["apiVersion"]).as_deref(), Some("v1"));
    assert_eq!(get(&["type"]).as_deref(), Some("postrenderer/v1"));
    assert_eq!(get(&["runtime"]).as_deref(), Some("subprocess"));
    only_fields_helm4_knows(&plugin);
    let command = &plugin
        .get_path(&["runtimeConfig", "platformCommand"])
        .and_then(Node::as_seq)
        .unwrap()
        .items[0];
    // Helm expands ${VAR} from the plugin's environment, then runs the command
    // with the plugin's args followed by every --post-renderer-args value.
    let bin_dir = Path::new(bin()).parent().unwrap().display().to_string();
    let env = [
        ("PATH", format!("{bin_dir}:/usr/bin:/bin")),
        ("HELM_PLUGIN_NAME", get(&["name"]).unwrap()),
        ("HELM_PLUGIN_DIR", plugin_dir.display().to_string()),
    ];
    let expand = |s: &str| {
        env.iter().fold(s.to_string(), |acc, (k, v)| {
            acc.replace(&format!("${{{k}}}"), v)
        })
    };
    let program = expand(
        command
            .get_path(&["command"])
            .and_then(Node::as_text)
            .unwrap(),
    );
    let mut args: Vec<String> = command
        .get_path(&["args"])
        .and_then(Node::as_seq)
        .map(|s| {
            s.items
                .iter()
                .map(|a| expand(a.as_text().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    args.extend(context_args(dir.path()));
    let program = if program.contains('/') {
        program
    } else {
        format!("{bin_dir}/{program}")
    };
    let manifests = fixture("web/postrender-stdin.yaml");
    let out = run(&program, &args, &env, &manifests);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Helm 4 fails on empty output and regroups documents by their filename
    // annotation: every document it sent must come back with it.
    assert!(!out.stdout.trim().is_empty());
    let input = parse_yaml_stream(&manifests).unwrap();
    let output = parse_yaml_stream(&out.stdout).unwrap();
    assert_attached(&input, &output);
    for d in &output {
        let (kind, _) = kind_name(d);
        let file = d.str_at(&["metadata", "annotations", FILENAME_ANNOTATION]);
        assert_eq!(
            file.is_some(),
            kind != "NetworkAttachmentDefinition",
            "{kind}"
        );
    }
}

/// Helm 4 itself runs the plugin (functions/linkerd-multus/helm, installed in HELM_PLUGINS as
/// `helm plugin install` does, a link in development mode) on a chart it renders:
/// `helm template web CHART -n demo --post-renderer linkerd-multus --post-renderer-args ...`.
#[test]
fn helm4_runs_the_plugin_on_its_own_render() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::os::unix::fs::symlink(
        repo_path("functions/linkerd-multus/helm"),
        plugins.join("linkerd-multus"),
    )
    .unwrap();
    let bin_dir = Path::new(bin()).parent().unwrap().display().to_string();
    let path = format!("{bin_dir}:/usr/bin:/bin");
    let mut args: Vec<String> = WEB_TEMPLATE.map(String::from).to_vec();
    args.extend(["--post-renderer".into(), "linkerd-multus".into()]);
    for arg in context_args(dir.path()) {
        args.push(format!("--post-renderer-arg={arg}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::helm::helm_with_env(
        &args,
        None,
        &[
            ("HELM_PLUGINS", plugins.as_os_str()),
            ("PATH", std::ffi::OsStr::new(&path)),
        ],
    );
    assert!(
        out.status.success(),
        "helm template --post-renderer: {}",
        common::output_text(&out)
    );
    let rendered = String::from_utf8(out.stdout).unwrap();
    assert_attached(
        &parse_yaml_stream(&web_template()).unwrap(),
        &parse_yaml_stream(&rendered).unwrap(),
    );
}

/// The plugin.yaml's top-level fields are all ones Helm 4 knows.
fn only_fields_helm4_knows(plugin: &Node) {
    // Helm 4 decodes the top level strictly: an unknown field drops the plugin.
    let top: Vec<_> = plugin
        .as_map()
        .unwrap()
        .entries
        .iter()
        .map(|(k, _)| k.as_text().unwrap().to_string())
        .collect();
    for key in &top {
        assert!(
            [
                "apiVersion",
                "type",
                "name",
                "version",
                "runtime",
                "runtimeConfig",
                "sourceURL"
            ]
            .contains(&key.as_str()),
            "unknown top-level field {key}"
        );
    }
}

#[test]
fn helm_sees_a_failure_as_a_failure() {
    // Helm 4 discards the plugin's stderr; the exit code is all it reads.
    let manifests = fixture("web/template.yaml");
    let args = vec!["post-render".to_string(), "--cni-version=2".to_string()];
    let out = run(bin(), &args, &[], &manifests);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .starts_with("error: --cni-version: setting cniVersion: \"2\"")
    );
}

#[test]
fn without_the_release_namespace_the_warning_names_the_flag() {
    // Helm keeps working (exit 0), and a user who runs the post-renderer by
    // hand, or whose release fails, reads what to pass.
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["post-render".to_string()];
    args.extend(
        context_args(dir.path())
            .into_iter()
            .filter(|a| !a.starts_with("--default-namespace")),
    );
    let out = run(bin(), &args, &[], &fixture("web/template.yaml"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let output = parse_yaml_stream(&out.stdout).unwrap();
    assert!(
        output
            .iter()
            .all(|d| pod_networks(d).is_none_or(|n| n == "macvlan-conf"))
    );
    assert_eq!(
        out.stderr.lines().last(),
        Some(
            "warning: 3 workloads have no metadata.namespace and no default namespace is set, so only their own annotations decide them: Helm does not tell a post-renderer the release namespace; pass it as --post-renderer-args=--default-namespace=NAMESPACE (the namespace of helm -n), so that the namespace's linkerd.io/multus and linkerd.io/inject annotations count and the NAD is generated in it"
        ),
        "{}",
        out.stderr
    );
    // With the flag, nothing to warn about.
    let out = run(
        bin(),
        &[&args[..], &["--default-namespace=demo".to_string()]].concat(),
        &[],
        &fixture("web/template.yaml"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("metadata.namespace"), "{}", out.stderr);
}
