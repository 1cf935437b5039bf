//! kustomize's exec-plugin layout, run by the real `kubectl kustomize
//! --enable-alpha-plugins` (kubectl cannot run exec KRM functions; it runs
//! `$KUSTOMIZE_PLUGIN_HOME/<group>/<version>/<lowercase kind>/<Kind>` with the
//! transformer's config file as its argument and the resources on stdin). The
//! container form is tested in tests/container.rs.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{bin, copy_dir, parse_yaml_stream, repo_path, template_networks};

fn kustomize(dir: &Path) -> std::process::Output {
    let bin_dir = Path::new(bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("kubectl")
        .args(["kustomize", "--enable-alpha-plugins"])
        .arg(dir)
        .env("PATH", path)
        .env(
            "KUSTOMIZE_PLUGIN_HOME",
            repo_path("functions/linkerd-multus/kustomize/plugin"),
        )
        .output()
        .expect(
            "kubectl is not installed: these tests run the real kubectl kustomize (see README.md)",
        )
}

#[test]
fn exec_plugin_transforms_the_kustomization() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_path("functions/linkerd-multus/examples/kustomize-exec"),
        dir.path(),
    );
    let out = kustomize(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let docs = parse_yaml_stream(&stdout).unwrap();
    let ids: Vec<_> = docs
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d.str_at(&["kind"]).unwrap(),
                d.str_at(&["metadata", "name"]).unwrap()
            )
        })
        .collect();
    // kustomize orders by kind; the local-config ConfigMap is not output.
    assert_eq!(
        ids,
        [
            "Namespace demo",
            "Deployment web",
            "CronJob report",
            "NetworkAttachmentDefinition linkerd-cni"
        ],
        "{stdout}"
    );
    let web = &docs[1];
    assert_eq!(template_networks(web), Some("storage@net1,linkerd-cni"));
    // kustomize's own bookkeeping annotations are gone from its output, and so are ours.
    assert!(!stdout.contains("config.kubernetes.io/"), "{stdout}");
}

#[test]
fn exec_plugin_errors_fail_the_build() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_path("functions/linkerd-multus/examples/kustomize-exec"),
        dir.path(),
    );
    let settings = dir.path().join("linkerd-multus.yaml");
    let text = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(&settings, format!("{text}  nadName: Not_A_Label\n")).unwrap();
    let out = kustomize(dir.path());
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("setting nadName: \"Not_A_Label\" is not a DNS-1123 label"),
        "{stderr}"
    );
}
