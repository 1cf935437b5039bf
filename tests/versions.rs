//! README's "Supported versions" table says what the tests prove: the versions of the tools
//! this machine runs them with. When a tool here changes, this test fails and says which row
//! of the table to update. `SUPPORTED_VERSIONS_CHECK=skip` (set by the GitHub workflow, whose
//! runners have other builds) turns it off, saying so.

use crate::common;
use crate::common::process::Guarded;

use std::path::PathBuf;
use std::process::Command;

use common::repo_path;

/// The cells of the table's row whose first cell is `name`.
fn row(readme: &str, name: &str) -> String {
    let section = readme
        .split("\n## Supported versions\n")
        .nth(1)
        .expect("README.md has no section \"## Supported versions\"");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("README.md's Supported versions table has no row {name:?}"))
        .to_string()
}

/// The first line a tool prints, panicking with what to install when it cannot run.
fn tool_output(program: impl Into<PathBuf>, args: &[&str], install: &str) -> String {
    let program = program.into();
    let out = Command::new(&program)
        .args(args)
        .guarded_output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {install}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The word of `text` after `prefix`.
fn word_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in {text:?}"));
    text[at + prefix.len()..]
        .split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .next()
        .unwrap()
}

#[test]
fn the_supported_versions_table_matches_this_machine() {
    // GitHub's runners (.github/workflows/ci.yml) have other builds of these tools than the
    // project's machines, which the table describes; the workflow says so explicitly.
    if std::env::var("SUPPORTED_VERSIONS_CHECK").as_deref() == Ok("skip") {
        eprintln!(
            "not checked: SUPPORTED_VERSIONS_CHECK=skip (README's Supported versions table \
             describes the project's own machines)"
        );
        return;
    }
    let readme = std::fs::read_to_string(repo_path("README.md")).unwrap();
    let assets = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from).expect(
        "KUBEBUILDER_ASSETS is not set: run eval \"$(scripts/kube-assets.sh)\" first (./scripts/test.sh does)",
    );

    let apiserver = tool_output(
        assets.join("kube-apiserver"),
        &["--version"],
        "KUBEBUILDER_ASSETS must name a folder holding kube-apiserver (scripts/kube-assets.sh)",
    );
    // `Kubernetes v1.32.0-beta.0+cd13ec4ae44e`: the build metadata after `+` aside.
    let kubernetes = word_after(&apiserver, "Kubernetes ")
        .split('+')
        .next()
        .unwrap();
    let etcd = tool_output(
        assets.join("etcd"),
        &["--version"],
        "install etcd-server (apt-get install etcd-server)",
    );
    let etcd = word_after(&etcd, "etcd Version: ");
    let kubectl = tool_output(
        "kubectl",
        &["version", "--client", "-o", "json"],
        "install kubectl",
    );
    // `v1.32.4-dispatcher` (a vendor's build suffix): the release it builds.
    let kubectl_version = word_after(&kubectl, "\"gitVersion\": \"")
        .split('-')
        .next()
        .unwrap();
    let kustomize = word_after(&kubectl, "\"kustomizeVersion\": \"");
    let kpt = tool_output("kpt", &["version"], "install kpt");
    let kpt = kpt.trim();
    let podman = tool_output(
        "podman",
        &["--version"],
        "install podman (scripts/install-podman.sh)",
    );
    let podman = word_after(&podman, "podman version ");
    // The Helm whose output the Helm tests run on (testdata/helm/README.md says how it was made).
    let helm_readme = std::fs::read_to_string(repo_path("testdata/helm/README.md")).unwrap();
    let helm = word_after(&helm_readme, "Helm SDK ").trim_matches('*');
    let linkerd = linkerd_generations();

    let mut stale = Vec::new();
    let mut want = |name: &str, version: &str| {
        let row = row(&readme, name);
        if !row.contains(&format!("`{version}`")) {
            stale.push(format!("row {name:?} should name `{version}`: {row}"));
        }
    };
    want("Kubernetes", kubernetes);
    want("Kubernetes", etcd);
    want("kubectl", kubectl_version);
    want("kubectl", kustomize);
    want("kpt", kpt);
    want("podman", podman);
    want("Helm", helm);
    for generation in &linkerd {
        want("Linkerd", generation);
    }
    assert!(
        stale.is_empty(),
        "README.md's Supported versions table no longer says what the tests run with: update \
         it to this machine's versions (and check the tests still prove them):\n{}",
        stale.join("\n")
    );
}

/// The Linkerd generations of the golden cases (`generation-stable-2-11` is stable-2.11),
/// sorted.
fn linkerd_generations() -> Vec<String> {
    let mut linkerd: Vec<String> = std::fs::read_dir(repo_path("testdata/golden"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let generation = name.strip_prefix("generation-")?;
            let dot = generation.rfind('-').unwrap();
            Some(format!("{}.{}", &generation[..dot], &generation[dot + 1..]))
        })
        .collect();
    linkerd.sort();
    linkerd
}
