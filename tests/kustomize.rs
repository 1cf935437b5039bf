//! kustomize's exec-plugin layout, run by the real `kubectl kustomize
//! --enable-alpha-plugins` (kubectl cannot run exec KRM functions; it runs
//! `$KUSTOMIZE_PLUGIN_HOME/<group>/<version>/<lowercase kind>/<Kind>` with the
//! transformer's config file as its argument and the resources on stdin). The
//! container form is tested in tests/container.rs.

use crate::common;
use crate::common::process::Guarded;

use std::path::Path;
use std::process::Command;

use common::kustomize_exec as kustomize;
use common::{bin, copy_dir, parse_yaml_stream, repo_path, run_with_args, template_networks};

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

/// The example with its kustomization's lists rewritten to `lists`.
fn example_listing(lists: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_path("functions/linkerd-multus/examples/kustomize-exec"),
        dir.path(),
    );
    std::fs::write(dir.path().join("kustomization.yaml"), lists).unwrap();
    dir
}

/// The function's settings listed under `generators:`: kustomize runs the exec plugin with no
/// resources. The build fails, saying so and naming the fix (it said to pass `--allow-empty`,
/// as for Argo CD).
#[test]
fn exec_plugin_under_generators_names_the_fix() {
    let dir = example_listing(
        "resources:\n- namespaces/demo.yaml\n- apps/web.yaml\n- linkerd-cni/configmap.yaml\ngenerators:\n- linkerd-multus.yaml\n",
    );
    let out = kustomize(dir.path());
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "error: no Kubernetes objects in <stdin>: kustomize gave the exec plugin no resources, as it gives a generator: list the settings file (kind LinkerdMultus) under transformers: in the kustomization of {}, not under generators:; a transformer renders the resources listed under resources:",
        dir.path().display()
    );
    assert!(stderr.contains(&want), "{stderr}");
}

/// The function's settings listed under `resources:`: kustomize never runs the function and
/// copies the settings object into its output (the function cannot see it). `validate` of
/// the output names it, and what to do.
#[test]
fn settings_under_resources_are_named_by_validate() {
    let dir = example_listing(
        "resources:\n- namespaces/demo.yaml\n- apps/web.yaml\n- linkerd-cni/configmap.yaml\n- linkerd-multus.yaml\n",
    );
    let out = kustomize(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    // Nothing rendered: no NAD, the web app not attached, the settings object in the output.
    assert!(!stdout.contains("NetworkAttachmentDefinition"), "{stdout}");
    assert!(!stdout.contains("linkerd-cni"), "{stdout}");
    assert!(stdout.contains("kind: LinkerdMultus"), "{stdout}");
    let validated = run_with_args(stdout.as_bytes(), &["validate", "-"]);
    assert_eq!(validated.code, 1, "{}", validated.stdout);
    assert_eq!(
        validated.stdout,
        "<stdin> (document 3): error: LinkerdMultus linkerd-multus: linkerd-multus settings, not an object to apply: no API server serves multus.linkerd.io/v1alpha1, so an apply fails on it; list its file under transformers: in a kustomization, not under resources: (there kustomize copies it to the output and never runs the function), or mark it config.kubernetes.io/local-config: \"true\"\nlinkerd-multus validate: 0 NetworkAttachmentDefinitions and 1 workload checked; 1 error, 0 warnings\n"
    );
}

/// kustomize's container form, with a `docker` on `PATH` that runs the binary under test in
/// place of the image (kustomize runs `docker run ... IMAGE` and pipes the ResourceList).
fn kustomize_container(dir: &Path) -> std::process::Output {
    let fake = dir.join(".bin");
    std::fs::create_dir_all(&fake).unwrap();
    let docker = fake.join("docker");
    std::fs::write(&docker, format!("#!/bin/sh\nexec '{}'\n", bin())).unwrap();
    std::fs::set_permissions(&docker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("kubectl")
        .args(["kustomize", "--enable-alpha-plugins"])
        .arg(dir)
        .env("PATH", path)
        .guarded_output()
        .expect("kubectl is not installed: these tests run the real kubectl kustomize")
}

/// The container form's misuses: under `generators:` kustomize gives the function its own
/// settings as the only item (the build succeeded, unrendered); under `resources:` as well as
/// `transformers:`, the settings object reaches the function among the resources and would
/// be applied. Both fail the build, naming the fix.
#[test]
fn container_form_misuses_fail_the_build() {
    let resources =
        "resources:\n- namespaces/demo.yaml\n- apps/web.yaml\n- linkerd-cni/configmap.yaml\n";
    for (lists, want) in [
        (
            format!("{resources}transformers:\n- linkerd-multus.yaml\n"),
            None,
        ),
        (
            format!("{resources}generators:\n- linkerd-multus.yaml\n"),
            Some(
                "error: kustomize gave the function no resources, as it gives a generator: list its settings file (annotated config.kubernetes.io/function) under transformers: in the kustomization, not under generators:; a transformer renders the resources listed under resources:",
            ),
        ),
        (
            format!("{resources}- linkerd-multus.yaml\ntransformers:\n- linkerd-multus.yaml\n"),
            Some(
                "error: LinkerdMultus linkerd-multus: linkerd-multus settings, not an object to apply: no API server serves multus.linkerd.io/v1alpha1, so an apply fails on it; list its file under transformers: in a kustomization, not under resources: (there kustomize copies it to the output and never runs the function), or mark it config.kubernetes.io/local-config: \"true\"",
            ),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &repo_path("functions/linkerd-multus/examples/kustomize-container"),
            dir.path(),
        );
        std::fs::write(dir.path().join("kustomization.yaml"), &lists).unwrap();
        let out = kustomize_container(dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        match want {
            None => {
                assert!(out.status.success(), "{lists}\n{stderr}");
                let stdout = String::from_utf8(out.stdout).unwrap();
                assert!(stdout.contains("storage@net1,linkerd-cni"), "{stdout}");
            }
            Some(want) => {
                assert!(!out.status.success(), "{lists}");
                assert!(out.stdout.is_empty(), "{lists}");
                assert!(stderr.contains(want), "{lists}\n{stderr}");
            }
        }
    }
}
