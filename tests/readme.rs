//! Every shell snippet of every README (and of `docs/*.md`) runs as written.
//!
//! The fenced `sh` and `console` blocks of each file run in order, as a reader would run them:
//!
//! * Each file gets a session: a fresh copy of the repository (without `target/` and `.git`), a
//!   home directory of its own (`HOME`; cargo and rustup keep theirs), `PATH` starting with
//!   the binary the README's Install section installed (else the one under test), and none of
//!   the variables `cargo test` sets.
//! * A block starts in the directory the previous block of the file ended in; the first one
//!   in the README's own directory of the copy. A comment on the line just before the fence
//!   says otherwise, and the text around it says the same to the reader:
//!   `<!-- run: in DIR -->` (DIR relative to the repository's root), `<!-- run: in an empty
//!   directory -->`, or `<!-- run: in the checkout -->` (the real checkout: for the cargo
//!   commands, which would build the crate again anywhere else; such a block must leave `git
//!   status` as it was).
//! * `<!-- run: against a cluster -->` runs a block where the previous one ended, with
//!   `KUBECONFIG` naming the admin of a real kube-apiserver (tests/common/kube_apiserver.rs,
//!   `KUBEBUILDER_ASSETS`) that has cert-manager's CRDs, Multus's NAD CRD, the Linkerd-CNI
//!   ConfigMap and the `linkerd` namespace, but no controllers and no nodes. `linkerd` on the
//!   `PATH` is the stand-in of tests/tools/linkerd (the Linkerd CLI is not installed here).
//! * `<!-- not run: REASON -->` skips a block; the reason is required and the test prints
//!   every skipped block with it.
//! * An `sh` block must exit 0. In a `console` block, each `$ ` line (with its `\`
//!   continuation lines) is a command that must exit 0 and print (stdout and stderr together)
//!   the lines under it, trailing spaces aside; a line `...` stands for any number of lines.
//!
//! The documented local image name (`localhost/linkerd-multus:dev`) is replaced in the
//! snippets by this checkout's own tag ([`common::dev_image`]), so two checkouts running the
//! tests at once do not overwrite each other's image; `scripts/container.sh` gets it as
//! `IMAGE`.
//!
//! `README_SNIPPETS_ONLY=FILE` (e.g. `functions/linkerd-multus/README.md`) runs one file's
//! snippets only, while editing it.
//!
//! A second test holds every image reference of the repository to the two names the READMEs
//! document.
//!
//! A test binary of its own (Cargo.toml's `[[test]] readme`), not a module of tests/suite.rs:
//! its cargo snippets build the crate in this checkout (release, every core, for minutes) and
//! require `git status` unchanged around them, and its cluster snippets apply `deploy/` (a
//! webhook configuration with `failurePolicy: Fail` for every namespace) to this binary's
//! shared API server; the tests of the other files must not run beside it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

#[path = "readme/links.rs"]
mod links;
#[path = "readme/snippets.rs"]
mod snippets;

/// The name the READMEs give the image built on the user's machine.
const DOCUMENTED_DEV_IMAGE: &str = "localhost/linkerd-multus:dev";
/// The name of the published image.
const PUBLISHED_IMAGE: &str = "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0";
/// The repository of the published Helm chart (.github/workflows/release.yml pushes it).
const PUBLISHED_CHART: &str = "ghcr.io/linkerd-multus/charts/linkerd-multus";
/// What one snippet may take at most (the cargo commands included).
const SNIPPET_TIMEOUT_SECONDS: u32 = 900;
/// The target and flags of scripts/container.sh's static build.
const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";
const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static";
/// What `cargo auditable install --locked` hands its rustc wrapper (cargo-auditable 0.7's
/// `CargoArgs`, as JSON).
const AUDITABLE_INSTALL_ARGS: &str =
    r#"{"offline":false,"locked":true,"frozen":false,"config":[]}"#;

/// cargo-auditable, which scripts/container.sh builds the static binary with: from
/// target/cargo-tools (scripts/install-test-tools.sh --auditable) or PATH.
fn cargo_auditable() -> std::path::PathBuf {
    let local = common::repo_path("target/cargo-tools/bin/cargo-auditable");
    if local.is_file() {
        return local;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("cargo-auditable"))
                .find(|p| p.is_file())
        })
        .expect(
            "cargo-auditable is not installed: run scripts/install-test-tools.sh --auditable \
             (scripts/container.sh builds the static binary with it)",
        )
}

/// Where a block runs.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    /// Where the previous block ended.
    Continue,
    /// A directory relative to the root of the session's copy.
    In(String),
    EmptyDir,
    Checkout,
    NotRun(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Sh,
    Console,
}

#[derive(Debug, Clone)]
struct Block {
    /// Line of the opening fence, from 1.
    line: usize,
    kind: Kind,
    place: Place,
    /// Runs with `KUBECONFIG` naming the test cluster's admin.
    cluster: bool,
    text: String,
}

/// The `sh` and `console` blocks of a Markdown text, with the directive before each.
fn blocks(markdown: &str, file: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let indent = lines[i].len() - trimmed.len();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            let line = lines[i];
            let cut = line.len() - line.trim_start().len();
            body.push(&line[cut.min(indent)..]);
            i += 1;
        }
        assert!(
            i < lines.len(),
            "{file}:{}: code block not closed",
            start + 1
        );
        i += 1;
        let kind = match info.trim() {
            "sh" | "bash" | "shell" => Kind::Sh,
            "console" => Kind::Console,
            _ => continue,
        };
        let directive = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim())
            .filter(|l| l.starts_with("<!--") && l.ends_with("-->"))
            .map(|l| l[4..l.len() - 3].trim());
        let cluster = directive == Some("run: against a cluster");
        let place = match directive {
            None => Place::Continue,
            Some(_) if cluster => Place::Continue,
            Some(d) => {
                if let Some(reason) = d.strip_prefix("not run:") {
                    let reason = reason.trim();
                    assert!(
                        !reason.is_empty(),
                        "{file}:{}: `not run:` needs a reason",
                        start + 1
                    );
                    Place::NotRun(reason.to_string())
                } else if let Some(dir) = d.strip_prefix("run: in ") {
                    match dir.trim() {
                        "an empty directory" => Place::EmptyDir,
                        "the checkout" => Place::Checkout,
                        dir => Place::In(dir.to_string()),
                    }
                } else {
                    Place::Continue
                }
            }
        };
        out.push(Block {
            line: start + 1,
            kind,
            place,
            cluster,
            text: body.join("\n") + "\n",
        });
    }
    out
}

/// A console block's commands, each with the output shown under it.
fn console_commands(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        if continued {
            let (cmd, _) = out.last_mut().unwrap();
            cmd.push('\n');
            cmd.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.to_string(), Vec::new()));
            continued = line.ends_with('\\');
        } else {
            let Some((_, expected)) = out.last_mut() else {
                panic!("console block: output before the first `$ ` line: {line:?}");
            };
            expected.push(line.trim_end().to_string());
        }
    }
    out
}

/// Whether `actual` matches `expected`, where a line `...` stands for any lines.
fn matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| a == first && matches(rest, more)),
    }
}

fn trimmed_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// The files whose snippets run: every README.md of the repository and docs/*.md.
fn documents() -> Vec<PathBuf> {
    let root = repo_path(".");
    let mut out = BTreeSet::new();
    for entry in walkdir::WalkDir::new(&root).into_iter().filter_entry(|e| {
        let name = e.file_name().to_string_lossy();
        !(e.depth() == 1 && (name == "target" || name == ".git"))
    }) {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy();
        let rel = entry.path().strip_prefix(&root).unwrap().to_path_buf();
        if name == "README.md" || (rel.starts_with("docs") && name.ends_with(".md")) {
            out.insert(rel);
        }
    }
    // README.md first: its Install section installs the binary the others use.
    let mut out: Vec<PathBuf> = out.into_iter().collect();
    out.sort_by_key(|p| p != Path::new("README.md"));
    out
}

/// Every image name in the repository is the published one or the documented local one.
#[test]
fn every_image_reference_names_the_documented_image() {
    let root = repo_path(".");
    let mut wrong = Vec::new();
    for entry in walkdir::WalkDir::new(&root).into_iter().filter_entry(|e| {
        let name = e.file_name().to_string_lossy();
        !(e.depth() == 1 && (name == "target" || name == ".git"))
    }) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let rel = entry
            .path()
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("linkerd-multus:") {
                let rest = &line[at + "linkerd-multus:".len()..];
                // `linkerd-multus: message` is prose; a tag follows the colon directly.
                if !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '$') {
                    continue;
                }
                let start = line[..at]
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || "./-_".contains(c)))
                    .map_or(0, |i| i + 1);
                // A ServiceAccount's user name, `system:serviceaccount:NAMESPACE:NAME`.
                if line[..start].ends_with("system:serviceaccount:") {
                    continue;
                }
                let end = at
                    + "linkerd-multus:".len()
                    + rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
                        .unwrap_or(rest.len());
                // `${IMAGE:-name}`: a name starts with a letter or digit.
                let name = line[start..end].trim_start_matches(['-', '.', '/']);
                // The Helm chart beside the image is an OCI artifact of its own, at the
                // release's version.
                let chart = name
                    .strip_prefix(PUBLISHED_CHART)
                    .is_some_and(|tag| tag.starts_with(':'));
                if name != PUBLISHED_IMAGE && name != DOCUMENTED_DEV_IMAGE && !chart {
                    wrong.push(format!("{rel}:{}: {name}", n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "image references other than {PUBLISHED_IMAGE} (published) and {DOCUMENTED_DEV_IMAGE} (built here by scripts/container.sh):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn console_blocks_are_read_as_commands_and_output() {
    let cmds = console_commands("$ a \\\n  b\nout 1\n...\n$ c\n");
    assert_eq!(
        cmds,
        [
            (
                "a \\\n  b".to_string(),
                vec!["out 1".to_string(), "...".to_string()]
            ),
            ("c".to_string(), vec![])
        ]
    );
    let lines = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(matches(
        &lines(&["a", "...", "d"]),
        &lines(&["a", "b", "c", "d"])
    ));
    assert!(matches(&lines(&["a", "..."]), &lines(&["a"])));
    assert!(!matches(&lines(&["a", "d"]), &lines(&["a", "b", "d"])));
    let md = "x\n<!-- not run: needs a cluster -->\n```sh\nkubectl get pods\n```\n\n<!-- run: in deploy -->\n  ```console\n  $ ls\n  ```\n```yaml\na: b\n```\n";
    let b = blocks(md, "t.md");
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].place, Place::NotRun("needs a cluster".into()));
    assert_eq!(b[1].place, Place::In("deploy".into()));
    assert_eq!(b[1].text, "$ ls\n");
}
