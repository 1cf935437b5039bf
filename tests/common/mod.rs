//! Helpers shared by the integration tests: running the binary, comparing text, and a small
//! YAML tree (built on `saphyr-parser` events, independent of the crate's own YAML code) for
//! checks on meaning rather than bytes.
//!
//! Cluster-side tests (`tests/webhook.rs`, `tests/cluster.rs`, `tests/apply.rs`) and the
//! admission benchmark run against a real kube-apiserver and etcd: [`kube_apiserver`]. No test
//! uses a stand-in API server; the webhook benchmark keeps one
//! (`benches/common/fake_apiserver.rs` says why).
#![allow(dead_code)]

pub mod golden;
pub mod helm;
pub mod https;
pub mod kube_apiserver;
pub mod kubelet;
pub mod ports;
pub mod process;
pub mod setters;
pub mod shipped;
mod yaml;

pub use yaml::*;

use process::Guarded;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linkerd-multus")
}

/// A path inside the repository.
pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// What one run of the binary gave.
#[derive(Debug, Clone)]
pub struct Run {
    /// Exit code; `-1` when the process died of a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The first line of stderr (empty when stderr is empty).
    pub fn stderr_first_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or("")
    }

    /// Whether the run looks like a Rust panic or a crash.
    pub fn panicked(&self) -> bool {
        self.code == 101 || self.code == -1 || self.stderr.contains("panicked")
    }
}

/// Runs the binary with no arguments, `input` on stdin.
pub fn run(input: &[u8]) -> Run {
    run_with_args(input, &[])
}

/// Runs the binary with `args`, `input` on stdin.
pub fn run_with_args(input: &[u8], args: &[&str]) -> Run {
    let mut command = Command::new(bin());
    command.args(args);
    run_command(command, input)
}

/// Runs the binary with `args` in `cwd`, with only the variables `env`, `input` on stdin.
pub fn run_clean(args: &[&str], env: &[(&str, &str)], cwd: &Path, input: &str) -> Run {
    let mut command = Command::new(bin());
    command
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(cwd);
    run_command(command, input.as_bytes())
}

/// Runs `command` with `input` on stdin, capturing stdout and stderr.
pub fn run_command(mut command: Command, input: &[u8]) -> Run {
    let mut child = process::Guard::spawn(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("cannot start the linkerd-multus binary");
    let mut stdin = child.take_stdin().expect("stdin");
    let data = input.to_vec();
    // Write from a thread so a binary that answers before reading everything cannot deadlock us.
    let writer = std::thread::spawn(move || {
        // A broken pipe is fine: the binary may stop reading on malformed input.
        let _ = stdin.write_all(&data);
    });
    let out = child
        .wait_with_output()
        .expect("cannot wait for the binary");
    writer.join().expect("stdin writer thread");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `kubectl kustomize --enable-alpha-plugins` of `dir`, with the binary under test on PATH
/// for the exec plugin of `functions/linkerd-multus/kustomize/plugin`. kustomize leaves each
/// exec plugin's config in TMPDIR (`kust-plugin-config-*`): it gets a folder of its own,
/// removed after.
pub fn kustomize_exec(dir: &Path) -> std::process::Output {
    let tmp = tempfile::tempdir().unwrap();
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
        .env("TMPDIR", tmp.path())
        .guarded_output()
        .expect(
            "kubectl is not installed: these tests run the real kubectl kustomize (see README.md)",
        )
}

/// `None` when equal, else a message naming the first differing line of `expected` and `actual`.
pub fn first_difference(what: &str, expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let mut e = expected.split_inclusive('\n');
    let mut a = actual.split_inclusive('\n');
    let mut line: usize = 1;
    loop {
        match (e.next(), a.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => {
                let show = |s: Option<&str>| match s {
                    Some(s) => format!("{s:?}"),
                    None => "<end of text>".to_string(),
                };
                let context: Vec<&str> = actual
                    .lines()
                    .skip(line.saturating_sub(4))
                    .take(3)
                    .collect();
                return Some(format!(
                    "{what}: first difference at line {line}\n  expected: {}\n  actual:   {}\n  actual lines before it:\n    {}",
                    show(x),
                    show(y),
                    context.join("\n    ")
                ));
            }
        }
    }
}

/// The part of a ResourceList text before its top-level `results:` key (items and
/// functionConfig).
pub fn before_results(stdout: &str) -> &str {
    if stdout.starts_with("results:") {
        return "";
    }
    match stdout.find("\nresults:") {
        Some(i) => &stdout[..=i],
        None => stdout,
    }
}

/// The label that marks a NAD this function generated.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Annotation keys the function may add, change or remove on workloads.
pub const FUNCTION_KEYS: [&str; 5] = [
    "multus.linkerd.io/owned",
    "k8s.v1.cni.cncf.io/networks",
    "config.linkerd.io/proxy-uid",
    "multus.linkerd.io/config-hash",
    SKIP_SUBNETS_RECORD,
];
/// The annotation the function shares with the user: it adds entries to it, recorded in
/// [`SKIP_SUBNETS_RECORD`], and the user's own entries must pass through.
pub const SKIP_SUBNETS: &str = "config.linkerd.io/skip-subnets";
/// What the function added to [`SKIP_SUBNETS`].
pub const SKIP_SUBNETS_RECORD: &str = "multus.linkerd.io/skip-subnets";

/// Whether `item` is a NetworkAttachmentDefinition generated by this function.
pub fn is_generated_nad(item: &Yaml) -> bool {
    item.str_at(&["kind"]) == Some("NetworkAttachmentDefinition")
        && item.str_at(&["metadata", "labels", MANAGED_BY]) == Some("linkerd-multus")
}

/// `node` without the keys the function owns in any `annotations` map, and without
/// `annotations`/`metadata` maps that become empty through that.
pub fn without_function_keys(node: &Yaml) -> Yaml {
    fn strip(node: &Yaml, parent_key: Option<&str>) -> Option<Yaml> {
        match node {
            Yaml::Map(entries) => {
                let mut out = Vec::new();
                let mut removed_any = false;
                let in_annotations = parent_key == Some("annotations");
                let record: Vec<&str> = entries
                    .iter()
                    .find(|(k, _)| in_annotations && k.as_str() == Some(SKIP_SUBNETS_RECORD))
                    .and_then(|(_, v)| v.as_str())
                    .map(|r| r.split(',').collect())
                    .unwrap_or_default();
                for (k, v) in entries {
                    let key = k.as_str();
                    if in_annotations && key.is_some_and(|k| FUNCTION_KEYS.contains(&k)) {
                        removed_any = true;
                        continue;
                    }
                    // The user's own entries of the shared annotation: its value without what
                    // the function recorded adding, written the same way on both sides.
                    if in_annotations && key == Some(SKIP_SUBNETS) {
                        let own: Vec<&str> = v
                            .as_str()
                            .unwrap_or_default()
                            .split(',')
                            .filter(|e| !e.is_empty() && !record.contains(e))
                            .collect();
                        if own.is_empty() {
                            removed_any = true;
                        } else {
                            out.push((
                                k.clone(),
                                Yaml::Scalar {
                                    value: own.join(","),
                                    plain: false,
                                    style: saphyr_parser::ScalarStyle::DoubleQuoted,
                                    tag: None,
                                },
                            ));
                        }
                        continue;
                    }
                    match strip(v, key) {
                        Some(v) => out.push((k.clone(), v)),
                        None => removed_any = true,
                    }
                }
                if removed_any
                    && out.is_empty()
                    && matches!(parent_key, Some("annotations") | Some("metadata"))
                {
                    None
                } else {
                    Some(Yaml::Map(out))
                }
            }
            Yaml::Seq(items) => Some(Yaml::Seq(
                items.iter().filter_map(|i| strip(i, None)).collect(),
            )),
            s => Some(s.clone()),
        }
    }
    strip(node, None).unwrap_or(Yaml::Map(Vec::new()))
}

/// Where two trees differ in value, plainness, tag or key order (`None` when equal).
/// Single- versus double-quoted and literal versus quoted are not differences: they mean the
/// same; plain versus quoted is, as a reader may resolve a plain scalar to another type.
pub fn tree_difference(expected: &Yaml, actual: &Yaml, path: &str) -> Option<String> {
    match (expected, actual) {
        (
            Yaml::Scalar {
                value: v1,
                plain: p1,
                tag: t1,
                ..
            },
            Yaml::Scalar {
                value: v2,
                plain: p2,
                tag: t2,
                ..
            },
        ) => {
            if v1 != v2 || p1 != p2 || t1 != t2 {
                let show = |v: &str, p: bool, t: &Option<String>| {
                    format!(
                        "{}{:?} ({})",
                        t.as_deref().map(|t| format!("{t} ")).unwrap_or_default(),
                        v,
                        if p { "plain" } else { "quoted" }
                    )
                };
                Some(format!(
                    "{path}: expected {}, got {}",
                    show(v1, *p1, t1),
                    show(v2, *p2, t2)
                ))
            } else {
                None
            }
        }
        (Yaml::Seq(a), Yaml::Seq(b)) => {
            if a.len() != b.len() {
                return Some(format!(
                    "{path}: expected {} items, got {}",
                    a.len(),
                    b.len()
                ));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| tree_difference(x, y, &format!("{path}[{i}]")))
        }
        (Yaml::Map(a), Yaml::Map(b)) => {
            let ka: Vec<_> = a.iter().map(|(k, _)| k.as_str().unwrap_or("?")).collect();
            let kb: Vec<_> = b.iter().map(|(k, _)| k.as_str().unwrap_or("?")).collect();
            if ka != kb {
                return Some(format!("{path}: expected keys {ka:?}, got {kb:?}"));
            }
            a.iter().zip(b).find_map(|((k1, v1), (k2, v2))| {
                let key = k1.as_str().unwrap_or("?");
                tree_difference(k1, k2, &format!("{path}.{key}<key>"))
                    .or_else(|| tree_difference(v1, v2, &format!("{path}.{key}")))
            })
        }
        _ => Some(format!("{path}: node kinds differ")),
    }
}

/// One network selection: `(namespace, name, interface)`.
pub type Selection = (Option<String>, String, Option<String>);

/// The selections of a networks annotation value, parsed the way Multus does (comma form or
/// JSON list). `Err` when malformed.
pub fn parse_networks(value: &str) -> Result<Vec<Selection>, String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    if value.contains(['[', '{', '"']) {
        let v: serde_json::Value =
            serde_json::from_str(value).map_err(|e| format!("bad JSON: {e}"))?;
        let list = v.as_array().ok_or("JSON is not a list")?;
        return list
            .iter()
            .map(|el| {
                let name = el
                    .get("name")
                    .and_then(|n| n.as_str())
                    .ok_or("element without name")?;
                Ok((
                    el.get("namespace")
                        .and_then(|n| n.as_str())
                        .map(str::to_string),
                    name.to_string(),
                    el.get("interface")
                        .and_then(|n| n.as_str())
                        .map(str::to_string),
                ))
            })
            .collect();
    }
    trimmed
        .split(',')
        .map(|item| {
            let item = item.trim();
            let (rest, iface) = match item.split_once('@') {
                Some((r, i)) => (r, Some(i.to_string())),
                None => (item, None),
            };
            let (ns, name) = match rest.split_once('/') {
                Some((n, m)) => (Some(n.to_string()), m),
                None => (None, rest),
            };
            if name.is_empty() {
                return Err(format!("empty item in {value:?}"));
            }
            Ok((ns, name.to_string(), iface))
        })
        .collect()
}

/// Pod-template metadata locations of the built-in workload kinds, as key paths from the
/// resource root to the pod template's `metadata` (for `Pod`: the top-level metadata).
pub fn pod_metadata_path(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Pod" => &["metadata"],
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController"
        | "Job" => &["spec", "template", "metadata"],
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "metadata"],
        _ => return None,
    })
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Every file under `root` (relative paths, sorted) with its bytes.
pub fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read(&path).expect("read file")));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// The `k8s.v1.cni.cncf.io/networks` annotation of a workload's pod template
/// (`spec.template`), if any.
pub fn template_networks(doc: &Yaml) -> Option<&str> {
    doc.str_at(&[
        "spec",
        "template",
        "metadata",
        "annotations",
        "k8s.v1.cni.cncf.io/networks",
    ])
}

/// The kind of each document.
pub fn kinds(docs: &[Yaml]) -> Vec<String> {
    docs.iter()
        .map(|d| d.str_at(&["kind"]).unwrap_or_default().to_string())
        .collect()
}

/// This checkout's tag for the image the tests build: the documented name
/// `localhost/linkerd-multus:dev`, then `-` and a hash of the checkout's path, so two checkouts
/// testing at once on one machine never replace each other's image. The READMEs document one name, `localhost/linkerd-multus:dev`
/// (scripts/container.sh's default); the tests pass theirs as `IMAGE`.
pub fn dev_image() -> String {
    // FNV-1a: stable across builds and Rust versions, unlike std's hasher.
    let hash = env!("CARGO_MANIFEST_DIR")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{}-{:08x}", "localhost/linkerd-multus:dev", hash as u32)
}

/// A finished command's status, stdout and stderr, for a failure message.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// PATH with target/cargo-tools/bin first: the release tools (cargo-auditable, which
/// scripts/container.sh builds with, rust-audit-info, cargo-cyclonedx, cargo-deny) that
/// scripts/install-test-tools.sh installs there.
pub fn path_with_cargo_tools() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(
        std::iter::once(repo_path("target/cargo-tools/bin")).chain(std::env::split_paths(&path)),
    )
    .unwrap()
}

/// Removes from `cmd`'s environment what `cargo test` adds to a test's (`CARGO_PKG_*`,
/// `CARGO_MANIFEST_*`, `CARGO_BIN_EXE_*`, ...), so a cargo run by a test sees a user's shell.
/// Build scripts that watch those variables (ring's `rerun-if-env-changed=CARGO_PKG_NAME`)
/// would otherwise make every cargo run from a test rebuild the crate and its dependents.
pub fn without_cargo_test_env(cmd: &mut Command) -> &mut Command {
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_TARGET_DIR"];
    const KEEP_PREFIXES: &[&str] = &[
        "CARGO_BUILD_",
        "CARGO_PROFILE_",
        "CARGO_NET_",
        "CARGO_REGISTRIES_",
        "CARGO_TERM_",
        "CARGO_HTTP_",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let from_cargo_test = name == "CARGO"
            || name == "OUT_DIR"
            || (name.starts_with("CARGO_")
                && !KEEP.contains(&name)
                && !KEEP_PREFIXES.iter().any(|p| name.starts_with(p)));
        if from_cargo_test {
            cmd.env_remove(name);
        }
    }
    cmd
}
