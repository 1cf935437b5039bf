//! Render fidelity on real-world-shaped manifests (`testdata/fidelity/`): Multus NAD
//! examples with quoted JSON configs indented less than their key, Linkerd install
//! output with anchors, aliases and merge keys, Kubernetes examples with block
//! scalars of every chomping indicator, a CRD, Prometheus and cert-manager manifests,
//! flow style, comments, several documents a file, a JSON file and a file without a
//! final line break.
//!
//! Every front reads them (the KRM function on a ResourceList, `render`,
//! `post-render`, `diff`, `validate`), and `tests/fidelity_compare.py` reads input
//! and output with PyYAML (YAML 1.1) and ruamel.yaml (YAML 1.2): both must find the
//! same data in every document the function does not change, and only the
//! function's own edits in the one it does.

use crate::common;
use crate::common::process::Guarded;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{copy_dir, repo_path};

const INSTALL: &str = "run scripts/install-test-tools.sh: it installs PyYAML and ruamel.yaml, pinned, into target/tools";

/// What the comparison found, as `fidelity_compare.py` prints it.
const SUMMARY: &str = r#"{"unchanged": 24, "changed": ["apps/v1 Deployment shop/web"], "generated": ["k8s.cni.cncf.io/v1 NetworkAttachmentDefinition shop/linkerd-cni"]}"#;

fn dir() -> PathBuf {
    repo_path("testdata/fidelity")
}

/// The Python of target/tools, checked to have both readers.
fn python() -> PathBuf {
    let python = repo_path("target/tools/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import yaml, ruamel.yaml"])
        .guarded_output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import PyYAML and ruamel.yaml: {INSTALL}",
        python.display()
    );
    python
}

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = common::run_clean(args, &[], Path::new("."), stdin);
    (out.code, out.stdout, out.stderr)
}

/// Compares an output with the inputs under both readers.
fn compare(front: &str, output: &str, kind: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), output).unwrap();
    let out = Command::new(python())
        .arg(repo_path("tests/fidelity_compare.py"))
        .arg(dir())
        .arg(file.path())
        .arg(kind)
        .guarded_output()
        .expect("run fidelity_compare.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{front}: {stderr}\n--- output ---\n{output}"
    );
    assert_eq!(stdout.trim(), SUMMARY, "{front}");
}

/// The input files, by name, in order.
fn files() -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The documents of a file, as written: split at `---` lines, comment-only ones left out.
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            docs.last_mut().unwrap().push_str(line);
        }
    }
    docs.retain(|d| {
        d.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

/// Every document in one stream, as Helm hands a post-renderer: the file
/// without a final line break last, so that its last line stays the stream's.
fn stream() -> String {
    let mut files = files();
    files.sort_by_key(|(_, text)| !text.ends_with('\n'));
    let docs: Vec<String> = files.iter().flat_map(|(_, t)| documents(t)).collect();
    docs.iter()
        .map(|d| d.trim_start_matches('\n'))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// A ResourceList holding every document, each indented under `items` as
/// written (the file without a final line break last, and still without one).
fn resource_list() -> String {
    let mut list =
        String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let mut files = files();
    files.sort_by_key(|(_, text)| !text.ends_with('\n'));
    for (_, text) in files {
        for doc in documents(&text) {
            for (i, line) in doc
                .trim_start_matches('\n')
                .split_inclusive('\n')
                .enumerate()
            {
                list.push_str(match (i, line == "\n") {
                    (0, _) => "- ",
                    (_, true) => "",
                    _ => "  ",
                });
                list.push_str(line);
            }
        }
    }
    list
}

fn dir_arg() -> String {
    dir().to_string_lossy().into_owned()
}

#[test]
fn render_keeps_the_data_of_every_document() {
    let (code, stdout, stderr) = run(&["render", &dir_arg()], "");
    assert_eq!(code, 0, "{stderr}");
    // Only the info results a user acts on (Linkerd's own meshed namespaces, not enabled for
    // Multus): no warning, no error.
    assert!(
        stderr.lines().all(|line| line.starts_with("info: ")),
        "render warns: {stderr}"
    );
    compare("render", &stdout, "stream");
    // Rendering the output again changes nothing, to the byte.
    let (code, again, stderr) = run(&["post-render"], &stdout);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        again == stdout,
        "a second render changed the output:\n{again}"
    );
}

#[test]
fn post_render_keeps_the_data_of_every_document() {
    let (code, stdout, stderr) = run(&["post-render"], &stream());
    assert_eq!(code, 0, "{stderr}");
    compare("post-render", &stdout, "stream");
}

#[test]
fn the_krm_function_keeps_the_data_of_every_item() {
    let (code, stdout, stderr) = run(&[], &resource_list());
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(!stdout.contains("severity: error"), "{stdout}");
    compare("KRM function", &stdout, "resourcelist");
    // Running again on the output changes no item, to the byte (the results differ).
    let (code, again, _) = run(&[], &stdout);
    assert_eq!(code, 0);
    let items = |list: &str| list.split("\nresults:\n").next().unwrap().to_string();
    assert!(
        items(&again) == items(&stdout),
        "a second run changed the items:\n{}",
        again
    );
}

#[test]
fn the_krm_function_reads_a_quoted_config_indented_less_than_its_key() {
    let list = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: k8s.cni.cncf.io/v1\n  kind: NetworkAttachmentDefinition\n  metadata:\n    name: macvlan-conf\n  spec:\n    config: '{\n\"cniVersion\": \"0.3.1\",\n\"type\": \"macvlan\"\n}'\n";
    let (code, stdout, stderr) = run(&[], list);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("    config: '{ \"cniVersion\": \"0.3.1\", \"type\": \"macvlan\" }'\n"),
        "{stdout}"
    );
}

#[test]
fn diff_names_only_the_files_rendering_changes() {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&dir(), copy.path());
    let path = copy.path().to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&["diff", &path], "");
    assert_eq!(code, 1, "{stderr}\n{stdout}");
    let files: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("+++ "))
        .collect();
    let shown = |name: &str| format!("b/{}", Path::new(&path).join(name).display());
    assert_eq!(
        files,
        [
            shown("networkattachmentdefinition_shop_linkerd-cni.yaml"),
            shown("shop.yaml")
        ],
        "{stdout}"
    );
    assert!(
        stderr.ends_with(
            "2 files are not rendered; run the render (kpt fn render) and commit the result\n"
        ),
        "{stderr}"
    );
}

#[test]
fn validate_reads_every_file() {
    let (code, stdout, stderr) = run(&["validate", &dir_arg()], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(" 0 errors, 0 warnings") || stderr.contains(" 0 errors, 0 warnings"),
        "{stdout}{stderr}"
    );
}
