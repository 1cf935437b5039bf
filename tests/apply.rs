//! Every manifest the project ships for users, applied to a real kube-apiserver
//! (tests/common/kube_apiserver.rs) with `kubectl apply --server-side`:
//! accepted, and applied a second time without any change.
//!
//! An API server of its own (`ControlPlane::own`): `deploy/` registers a
//! MutatingWebhookConfiguration with `failurePolicy: Fail` for pods in every
//! namespace, and no webhook serves it here, so no other test may create pods
//! through this API server.

use crate::common;
use crate::common::process::Guarded;

use std::path::Path;
use std::process::Command;

use common::kube_apiserver::ControlPlane;
use common::process::Guard;
use common::{bin, copy_dir, parse_yaml_stream, repo_path};

/// How a user applies the manifests, stream on stdin.
const APPLY: [&str; 5] = [
    "apply",
    "--server-side",
    "--field-manager=linkerd-multus-tests",
    "-f",
    "-",
];

/// Files that are shipped but not applied here, and why.
const NOT_APPLIED: &[(&str, &str)] = &[(
    "deploy/cert-manager/certificates.yaml",
    "cert-manager's Issuer and Certificate: no registry reachable here ships cert-manager's CRDs",
)];

/// One set of manifests, as a user applies them.
struct Source {
    name: String,
    /// The YAML documents, Namespaces and CRDs first (kubectl applies in order).
    documents: Vec<String>,
}

fn documents(stream: &str) -> Vec<String> {
    let mut docs: Vec<String> = stream
        .split("\n---")
        .map(|d| d.trim_start_matches("---").trim().to_string())
        .filter(|d| parse_yaml_stream(d).is_ok_and(|y| !y.is_empty()))
        .map(|d| format!("{d}\n"))
        .collect();
    let first = |d: &String| {
        let y = &parse_yaml_stream(d).unwrap()[0];
        !matches!(
            y.str_at(&["kind"]),
            Some("Namespace" | "CustomResourceDefinition")
        )
    };
    docs.sort_by_key(first);
    docs
}

/// The YAML files of a shipped package, but its Kptfile and what is not applied.
fn package(dir: &str) -> Source {
    let mut files: Vec<_> = walkdir(&repo_path(dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| {
            let rel = p.strip_prefix(repo_path("")).unwrap().display().to_string();
            !NOT_APPLIED.iter().any(|(f, _)| *f == rel)
        })
        .collect();
    files.sort();
    let text: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    Source {
        name: dir.to_string(),
        documents: documents(&text.join("\n---\n")),
    }
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn output(what: &str, command: &mut Command) -> String {
    let out = command
        .guarded_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `linkerd-multus install` with every part (the NAD controller's Role goes into
/// linkerd-cni), its certificates made at install time.
fn installed() -> Source {
    let yaml = output(
        "install",
        Command::new(bin()).args([
            "install",
            "--ignore-cluster",
            "--manage-nads",
            "--network-resources",
        ]),
    );
    Source {
        name: "linkerd-multus install --manage-nads --network-resources".into(),
        documents: documents(&yaml),
    }
}

/// The rendered output of every example under functions/linkerd-multus/examples/.
fn rendered_examples() -> Vec<Source> {
    let examples = repo_path("functions/linkerd-multus/examples");
    let render = |dir: &str, args: &[&str]| {
        output(
            dir,
            Command::new(bin())
                .arg("render")
                .args(args)
                .arg(".")
                .current_dir(examples.join(dir)),
        )
    };
    let kustomize = kustomize_exec(&examples);
    let helm = helm_post_render();
    vec![
        Source {
            name: "examples/kpt (linkerd-multus render)".into(),
            documents: documents(&render("kpt", &[])),
        },
        Source {
            name: "examples/secondary-networks (linkerd-multus render)".into(),
            documents: documents(&render("secondary-networks", &[])),
        },
        Source {
            name: "examples/argocd/app (the plugin's generate)".into(),
            documents: documents(&render("argocd/app", &["--default-namespace=demo"])),
        },
        // kustomize-container differs from kustomize-exec only in how kustomize runs the
        // same binary (its image; tests/container.rs runs it): the same output.
        Source {
            name: "examples/kustomize-exec and kustomize-container (kubectl kustomize)".into(),
            documents: documents(&kustomize),
        },
        Source {
            name: "examples/helm (post-render of the web chart, with its cluster context)".into(),
            documents: documents(&helm),
        },
    ]
}

/// The web chart's template post-rendered with the helm example's cluster context, after the\nrelease namespace.
fn helm_post_render() -> String {
    let web = std::fs::read_to_string(repo_path("testdata/helm/web/template.yaml")).unwrap();
    let cluster = repo_path("functions/linkerd-multus/examples/helm/cluster");
    let mut child = Guard::spawn(
        Command::new(bin())
            .args(["post-render", "--default-namespace=demo"])
            .arg(format!("--context={}", cluster.display()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .unwrap();
    use std::io::Write;
    child
        .take_stdin()
        .unwrap()
        .write_all(web.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "helm post-render: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The release namespace, as the cluster has it (helm install -n demo); the
    // ConfigMap beside it is the linkerd2-cni release's, not this one's.
    let namespace = std::fs::read_to_string(cluster.join("namespace.yaml")).unwrap();
    format!(
        "{namespace}\n---\n{}",
        String::from_utf8(out.stdout).unwrap()
    )
}

/// The kustomize-exec example through `kubectl kustomize`, the binary on PATH.
fn kustomize_exec(examples: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples.join("kustomize-exec"), dir.path());
    let out = common::kustomize_exec(dir.path());
    assert!(
        out.status.success(),
        "kustomize-exec: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `kind/namespace/name=resourceVersion` of every object of `source`, as the
/// API server has them.
fn versions(plane: &ControlPlane, source: &Source) -> Vec<String> {
    let template = r#"{range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}"#;
    let text = plane.kubectl_ok(
        &["get", "-f", "-", "-o", &format!("jsonpath={template}")],
        &source.documents.join("---\n"),
    );
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn shipped_manifests_apply_server_side_and_again_without_change() {
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    // deploy-nad-controller/'s Role goes into the CNI namespace.
    plane.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n");
    let mut sources = vec![
        package("deploy"),
        package("deploy-network-resources"),
        package("deploy-restarts"),
        package("deploy-nad-controller"),
    ];
    sources.push(installed());
    sources.extend(rendered_examples());
    for source in &sources {
        assert!(
            !source.documents.is_empty(),
            "{}: no manifests",
            source.name
        );
        let stream = source.documents.join("---\n");
        let apply = || plane.kubectl_input(&APPLY, &stream);
        let first = apply();
        assert!(
            first.status.success(),
            "{}: the API server refused it:\n{}",
            source.name,
            String::from_utf8_lossy(&first.stderr)
        );
        let before = versions(plane, source);
        assert_eq!(before.len(), source.documents.len(), "{}", source.name);
        let again = apply();
        assert!(again.status.success(), "{}: second apply", source.name);
        let again = String::from_utf8_lossy(&again.stdout);
        assert_eq!(
            versions(plane, source),
            before,
            "{}: applying it again changed objects:\n{again}",
            source.name
        );
    }
    // What was left out is named, with the reason.
    for (file, why) in NOT_APPLIED {
        let text = std::fs::read_to_string(repo_path(file)).unwrap();
        let kinds: Vec<String> = parse_yaml_stream(&text)
            .unwrap()
            .iter()
            .map(|d| d.str_at(&["apiVersion"]).unwrap().to_string())
            .collect();
        assert!(
            kinds.iter().all(|k| k.starts_with("cert-manager.io/")),
            "{file} holds more than cert-manager objects: {kinds:?}"
        );
        eprintln!("not applied: {file}: {why}");
    }
}
