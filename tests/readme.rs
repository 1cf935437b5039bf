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
//!   `KUBEBUILDER_ASSETS`) that has cert-manager's CRDs but no controllers and no nodes.
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

/// The name the READMEs give the image built on the user's machine.
const DOCUMENTED_DEV_IMAGE: &str = "localhost/linkerd-multus:dev";
/// The name of the published image.
const PUBLISHED_IMAGE: &str = "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0";
/// What one snippet may take at most (the cargo commands included).
const SNIPPET_TIMEOUT_SECONDS: u32 = 900;
/// The target and flags of scripts/container.sh's static build.
const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";
const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static";

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

/// Copies the repository, without `target/` and `.git`, to `to`.
fn copy_repository(to: &Path) {
    let root = repo_path(".");
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

fn git_status() -> String {
    let out = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(repo_path("."))
        .output()
        .expect(
            "git is not installed: the README test compares `git status` around the cargo snippets",
        );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds this checkout's image once (scripts/container.sh), for the snippets that run it.
fn build_image() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = without_cargo_test_env(&mut Command::new(repo_path("scripts/container.sh")))
            .env("IMAGE", dev_image())
            .current_dir(repo_path("."))
            .output()
            .expect("cannot run scripts/container.sh");
        assert!(
            out.status.success(),
            "scripts/container.sh failed to build {} (podman missing? run scripts/install-podman.sh as root):\n{}",
            dev_image(),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// What every session shares: the install root of README's `cargo install` and a folder
/// holding the binary under test.
struct Shared {
    install_root: tempfile::TempDir,
    test_bin: tempfile::TempDir,
}

impl Shared {
    fn new() -> Shared {
        let test_bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(bin(), test_bin.path().join("linkerd-multus")).unwrap();
        Shared {
            install_root: tempfile::tempdir().unwrap(),
            test_bin,
        }
    }

    fn path(&self) -> std::ffi::OsString {
        let dirs = [
            self.install_root.path().join("bin"),
            self.test_bin.path().to_path_buf(),
        ];
        std::env::join_paths(dirs.into_iter().chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap()
    }
}

/// One README's run: its copy of the repository, its home and the current directory.
struct Session<'a> {
    shared: &'a Shared,
    tmp: tempfile::TempDir,
    cwd: PathBuf,
}

impl Session<'_> {
    fn copy(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    /// Runs `script` (bash) in `dir`; returns its exit status, its output and where it ended.
    fn bash(&self, dir: &Path, script: &str, block: &Block) -> (bool, String, PathBuf) {
        let cargo_install = block.text.contains("cargo install");
        let state = self.tmp.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let cwd_file = state.join("cwd");
        let _ = std::fs::remove_file(&cwd_file);
        let script = format!(
            "trap 'pwd > {cwd}' EXIT\n{script}",
            cwd = shell_quote(&cwd_file.to_string_lossy())
        );
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut cmd = Command::new("timeout");
        without_cargo_test_env(&mut cmd)
            .arg(SNIPPET_TIMEOUT_SECONDS.to_string())
            .args(["bash", "-c", &script])
            .current_dir(dir)
            .env("HOME", self.tmp.path().join("home"))
            .env(
                "CARGO_HOME",
                std::env::var_os("CARGO_HOME").unwrap_or_else(|| home.join(".cargo").into()),
            )
            .env(
                "RUSTUP_HOME",
                std::env::var_os("RUSTUP_HOME").unwrap_or_else(|| home.join(".rustup").into()),
            )
            .env("PATH", self.shared.path())
            .env("CARGO_INSTALL_ROOT", self.shared.install_root.path())
            .env("IMAGE", dev_image())
            .env_remove("KPT_FN_RUNTIME")
            .env_remove("KUSTOMIZE_PLUGIN_HOME");
        if block.cluster {
            cmd.env("KUBECONFIG", &cluster().admin_kubeconfig);
        } else {
            cmd.env_remove("KUBECONFIG");
        }
        if cargo_install {
            // scripts/container.sh's target and flags, so `cargo install` takes the static
            // release build the image was made from instead of compiling the crate again.
            cmd.env("CARGO_BUILD_TARGET", STATIC_TARGET)
                .env("RUSTFLAGS", STATIC_RUSTFLAGS);
        }
        let out = cmd
            .output()
            .expect("cannot run bash under timeout (coreutils)");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        if out.status.code() == Some(124) {
            text.push_str(&format!("\n(stopped after {SNIPPET_TIMEOUT_SECONDS} s)"));
        }
        let ended = std::fs::read_to_string(&cwd_file)
            .map(|s| PathBuf::from(s.trim()))
            .unwrap_or_else(|_| dir.to_path_buf());
        (out.status.success(), text, ended)
    }

    /// Runs one block; `Err` says what went wrong.
    fn run(&mut self, block: &Block) -> Result<(), String> {
        let text = block.text.replace(DOCUMENTED_DEV_IMAGE, &dev_image());
        if text.contains(&dev_image()) || text.contains("scripts/container.sh") {
            build_image();
        }
        let dir = match &block.place {
            Place::NotRun(_) => return Ok(()),
            Place::Continue => self.cwd.clone(),
            Place::In(dir) => self.copy().join(dir),
            Place::EmptyDir => {
                let dir = self.tmp.path().join(format!("empty-{}", block.line));
                std::fs::create_dir_all(&dir).unwrap();
                dir
            }
            Place::Checkout => repo_path("."),
        };
        let before = (block.place == Place::Checkout).then(git_status);
        let (ok, ended) = match block.kind {
            Kind::Sh => {
                let (ok, output, ended) =
                    self.bash(&dir, &format!("set -eo pipefail\n{text}"), block);
                if !ok {
                    return Err(format!("failed:\n{output}"));
                }
                (ok, ended)
            }
            Kind::Console => {
                let commands = console_commands(&text);
                let mut dir = dir.clone();
                for (cmd, expected) in commands {
                    let (ok, output, ended) =
                        self.bash(&dir, &format!("set -o pipefail\nexec 2>&1\n{cmd}"), block);
                    if !ok {
                        return Err(format!("`{cmd}` failed:\n{output}"));
                    }
                    let actual = trimmed_lines(&output);
                    let expected = trimmed_lines(&expected.join("\n"));
                    if !matches(&expected, &actual) {
                        return Err(format!(
                            "`{cmd}` printed other lines than the README shows:\n--- README\n{}\n--- printed\n{}",
                            expected.join("\n"),
                            actual.join("\n")
                        ));
                    }
                    dir = ended;
                }
                (true, dir)
            }
        };
        debug_assert!(ok);
        if let Some(before) = before {
            let after = git_status();
            if after != before {
                return Err(format!(
                    "ran in the checkout and changed it (git status before:\n{before}after:\n{after})"
                ));
            }
        } else {
            self.cwd = ended;
        }
        Ok(())
    }
}

/// cert-manager's two kinds the webhook package uses, schemaless: the API server of the tests
/// has no cert-manager, and no registry here ships its CRDs. Enough to apply the package as a
/// cluster with cert-manager takes it (nothing issues the certificates).
const CERT_MANAGER_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Issuer, listKind: IssuerList, plural: issuers, singular: issuer}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// The cluster of the snippets marked `<!-- run: against a cluster -->`: a real kube-apiserver
/// with etcd (tests/common/kube_apiserver.rs), cert-manager's CRDs installed.
fn cluster() -> &'static kube_apiserver::ControlPlane {
    static READY: OnceLock<()> = OnceLock::new();
    let plane = kube_apiserver::ControlPlane::shared();
    READY.get_or_init(|| {
        plane.kubectl_ok(&["apply", "-f", "-"], CERT_MANAGER_CRDS);
        plane.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/certificates.cert-manager.io",
            "crd/issuers.cert-manager.io",
        ]);
    });
    plane
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn every_readme_snippet_runs_as_written() {
    let shared = Shared::new();
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    // README_SNIPPETS_ONLY=FILE runs one file's snippets (while editing it).
    let only = std::env::var("README_SNIPPETS_ONLY").ok();
    for doc in documents() {
        let name = doc.to_string_lossy().into_owned();
        if only.as_ref().is_some_and(|only| *only != name) {
            continue;
        }
        let markdown = std::fs::read_to_string(repo_path(&name)).unwrap();
        let blocks = blocks(&markdown, &name);
        if blocks.is_empty() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("home")).unwrap();
        let mut session = Session {
            shared: &shared,
            cwd: PathBuf::new(),
            tmp,
        };
        copy_repository(&session.copy());
        session.cwd = session.copy().join(doc.parent().unwrap());
        for block in &blocks {
            let at = format!("{name}:{}", block.line);
            if let Place::NotRun(reason) = &block.place {
                skipped.push(format!("{at} ({reason})"));
                continue;
            }
            let started = std::time::Instant::now();
            match session.run(block) {
                Ok(()) => ran.push(format!("{at} ({:.1} s)", started.elapsed().as_secs_f64())),
                Err(e) => {
                    failures.push(format!("{at}: the snippet\n{}\n{e}", block.text.trim_end()))
                }
            }
        }
        if name == "README.md" {
            // The Install section's `cargo install` put a binary that runs into the root.
            let installed = shared.install_root.path().join("bin/linkerd-multus");
            match Command::new(&installed).arg("--version").output() {
                Ok(out) if out.status.success() => {}
                other => failures.push(format!(
                    "README.md: `cargo install --locked --path .` left no working {}: {other:?}",
                    installed.display()
                )),
            }
        }
    }
    eprintln!("snippets run:\n  {}", ran.join("\n  "));
    eprintln!("snippets not run:\n  {}", skipped.join("\n  "));
    assert!(
        failures.is_empty(),
        "{} README snippet(s) do not run as written (fix the snippet or the code; see tests/readme.rs for the <!-- run: ... --> marks):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
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
                let end = at
                    + "linkerd-multus:".len()
                    + rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
                        .unwrap_or(rest.len());
                // `${IMAGE:-name}`: a name starts with a letter or digit.
                let name = line[start..end].trim_start_matches(['-', '.', '/']);
                if name != PUBLISHED_IMAGE && name != DOCUMENTED_DEV_IMAGE {
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

/// Every relative Markdown link of the files whose snippets run (every README.md and
/// `docs/*.md`) names a file or folder that exists and, after `#`, a heading of that file (or of
/// the linking file itself), with GitHub's anchors: lower case, punctuation dropped, spaces as
/// hyphens, `-1`, `-2` for repeated headings. Links inside code are not links.
#[test]
fn every_link_resolves() {
    let root = repo_path(".");
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let markdown = std::fs::read_to_string(root.join(&doc)).unwrap();
        for (line, target) in links(&prose(&markdown)) {
            checked += 1;
            if let Err(why) = resolve(&root, &doc, &target) {
                broken.push(format!("{}:{line}: ({target}): {why}", doc.display()));
            }
        }
    }
    eprintln!("{checked} relative links checked");
    assert!(
        checked > 0,
        "no relative links found: the link reader is broken"
    );
    assert!(
        broken.is_empty(),
        "{} Markdown link(s) point at no file or no heading:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The relative link targets of a text, each with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        // `(path "title")`: the path is the first word.
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push((text[..at].matches('\n').count() + 1, target.to_string()));
    }
    out
}

/// Whether a link of `doc` (relative to the repository `root`) names a file or folder, and
/// after `#` one of its headings: why not.
fn resolve(root: &Path, doc: &Path, target: &str) -> Result<(), String> {
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        root.join(doc)
    } else {
        root.join(doc.parent().unwrap()).join(path)
    };
    let shown = file
        .strip_prefix(root)
        .unwrap_or(&file)
        .display()
        .to_string();
    if !file.exists() {
        return Err(format!("no file or folder {shown}"));
    }
    if anchor.is_empty() {
        return Ok(());
    }
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Err("an anchor into something that is not a file".to_string());
    };
    let known = anchors(&text);
    if known.contains(anchor) {
        return Ok(());
    }
    let known: Vec<_> = known.into_iter().collect();
    Err(format!(
        "no heading #{anchor} in {shown} (it has: {})",
        known.join(", ")
    ))
}

/// The text with fenced blocks and inline code blanked out, lines kept where they were.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
        match &fence {
            Some(open) if trimmed.trim_end() == open.as_str() => fence = None,
            Some(_) => {}
            None if ticks >= 3 => fence = Some("`".repeat(ticks)),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    blank_inline_code(&out)
}

/// The text with each inline code span (a run of backticks up to the next run of the same
/// length) blanked out, its line breaks kept.
fn blank_inline_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut kept = chars.clone();
    let run = |at: usize| chars[at..].iter().take_while(|&&c| c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let close = loop {
            match chars[j..].iter().position(|&c| c == '`') {
                None => break None,
                Some(k) if run(j + k) == n => break Some(j + k),
                Some(k) => j += k + run(j + k),
            }
        };
        let Some(close) = close else {
            i += n;
            continue;
        };
        for c in &mut kept[i..close + n] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = close + n;
    }
    kept.into_iter().collect()
}

/// GitHub's anchors of a file's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut fenced = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let level = trimmed.len() - trimmed.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&level) || !trimmed[level..].starts_with(' ') {
            continue;
        }
        let slug = slug(&trimmed[level..]);
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// GitHub's anchor of a heading's text, a `[text](target)` in it counted as its text.
fn slug(heading: &str) -> String {
    let mut text = heading.trim().to_string();
    while let (Some(open), Some(mid)) = (text.find('['), text.find("](")) {
        let Some(close) = text[mid..].find(')') else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..open],
            &text[open + 1..mid],
            &text[mid + close + 1..]
        );
    }
    text.chars()
        .filter_map(|c| match c {
            ' ' => Some("-".to_string()),
            '-' | '_' => Some(c.to_string()),
            c if c.is_alphanumeric() => Some(c.to_lowercase().collect()),
            _ => None,
        })
        .collect()
}
