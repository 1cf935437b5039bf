//! End-to-end tests with the real `kpt` (`kpt fn eval --exec`, `kpt fn render --allow-exec`)
//! on copies of `testdata/packages/demo/`, asserting the files kpt writes back.
//!
//! kpt is required: when it is missing these tests fail (they never skip).

use crate::common;
use crate::common::process::Guarded;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

mod pipelines;
mod rules;

const DEMO_KPTFILE: &str = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: demo\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ninfo:\n  description: Demo package for linkerd-multus end-to-end tests\n";
const NAD_FILE: &str = "namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml";
const FUNCTION_KEYS_OR_MAPS: [&str; 4] = [
    "annotations:",
    "multus.linkerd.io/owned:",
    "k8s.v1.cni.cncf.io/networks:",
    "config.linkerd.io/proxy-uid:",
];

fn kpt() -> &'static str {
    static KPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KPT.get_or_init(|| {
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("kpt"))
                .find(|p| p.is_file())
        });
        match found {
            Some(p) => p.to_string_lossy().into_owned(),
            None => panic!(
                "kpt is not on PATH: install kpt (https://kpt.dev, 1.0.0-beta or later) to run \
                 the end-to-end tests; they do not skip"
            ),
        }
    })
}

/// A fresh copy of the demo package in a temporary directory.
struct Package {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Package {
    fn demo() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("demo");
        copy_dir(&repo_path("testdata/packages/demo"), &dir);
        // The Kptfile is written here, not kept in testdata: kpt renders every
        // package under the repository's root package (.krmignore or not).
        std::fs::write(dir.join("Kptfile"), DEMO_KPTFILE).unwrap();
        Package { _tmp: tmp, dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
    }

    fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.read(rel);
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        self.write(rel, &text.replacen(from, to, 1));
    }

    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        snapshot(&self.dir)
    }

    /// Adds a Kptfile pipeline running the binary.
    fn add_pipeline(&self, exec: &str) {
        self.add_mutators(&[(exec, None)]);
    }

    /// Adds a Kptfile pipeline of mutators: each an exec and its optional `configPath`.
    fn add_mutators(&self, mutators: &[(&str, Option<&str>)]) {
        let mut kptfile = self.read("Kptfile");
        kptfile.push_str("pipeline:\n  mutators:\n");
        for (exec, config) in mutators {
            kptfile.push_str(&format!("    - exec: \"{exec}\"\n"));
            if let Some(config) = config {
                kptfile.push_str(&format!("      configPath: {config}\n"));
            }
        }
        self.write("Kptfile", &kptfile);
    }

    /// Adds validators to the Kptfile pipeline (after any mutators): each an
    /// exec and its optional `configPath`.
    fn add_validators(&self, validators: &[(&str, Option<&str>)]) {
        let mut kptfile = self.read("Kptfile");
        if !kptfile.contains("\npipeline:\n") {
            kptfile.push_str("pipeline:\n");
        }
        kptfile.push_str("  validators:\n");
        for (exec, config) in validators {
            kptfile.push_str(&format!("    - exec: \"{exec}\"\n"));
            if let Some(config) = config {
                kptfile.push_str(&format!("      configPath: {config}\n"));
            }
        }
        self.write("Kptfile", &kptfile);
    }

    fn eval(&self, extra: &[&str]) -> KptRun {
        let dir = self.dir.to_string_lossy().into_owned();
        let mut args = vec!["fn", "eval", "--exec", bin(), dir.as_str()];
        args.extend_from_slice(extra);
        kpt_run(&args, &self.dir)
    }

    fn render(&self) -> KptRun {
        let dir = self.dir.to_string_lossy().into_owned();
        kpt_run(&["fn", "render", "--allow-exec", dir.as_str()], &self.dir)
    }
}

struct KptRun {
    ok: bool,
    output: String,
}

fn kpt_run(args: &[&str], cwd: &Path) -> KptRun {
    let out = Command::new(kpt())
        .args(args)
        .current_dir(cwd.parent().unwrap())
        .guarded_output()
        .unwrap_or_else(|e| panic!("cannot run kpt: {e}; install kpt to run these tests"));
    KptRun {
        ok: out.status.success(),
        output: format!(
            "kpt {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn original(rel: &str) -> Vec<u8> {
    if rel == "Kptfile" {
        return DEMO_KPTFILE.as_bytes().to_vec();
    }
    std::fs::read(repo_path("testdata/packages/demo").join(rel)).unwrap()
}

fn assert_same_files(a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)], what: &str) {
    let names = |s: &[(String, Vec<u8>)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}: different sets of files");
    for ((name, x), (_, y)) in a.iter().zip(b) {
        if x != y {
            let msg = first_difference(
                &format!("{what}: {name}"),
                &String::from_utf8_lossy(x),
                &String::from_utf8_lossy(y),
            )
            .unwrap_or_default();
            panic!("{msg}");
        }
    }
}

/// `changed` is `original` plus inserted lines, all of them the function's keys or the
/// `annotations:` maps that hold them, and at most a changed networks annotation value (so
/// comments, key order and everything else is kept).
fn assert_only_insertions(rel: &str, original: &str, changed: &str) {
    const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks:";
    let orig: Vec<&str> = original.lines().collect();
    let mut i = 0;
    let mut inserted = Vec::new();
    let indent = |l: &str| l.len() - l.trim_start().len();
    for line in changed.lines() {
        if i < orig.len() && orig[i] == line {
            i += 1;
        } else if i < orig.len()
            && orig[i].trim_start().starts_with(NETWORKS)
            && line.trim_start().starts_with(NETWORKS)
            && indent(orig[i]) == indent(line)
        {
            // The user's networks annotation, with the function's entry appended.
            i += 1;
            inserted.push(line);
        } else {
            inserted.push(line);
        }
    }
    assert_eq!(
        i,
        orig.len(),
        "{rel}: original line {} ({:?}) is missing or moved in:\n{changed}",
        i + 1,
        orig.get(i)
    );
    for line in &inserted {
        let t = line.trim_start();
        assert!(
            FUNCTION_KEYS_OR_MAPS.iter().any(|k| t.starts_with(k)),
            "{rel}: unexpected inserted line {line:?} in:\n{changed}"
        );
    }
    assert!(!inserted.is_empty(), "{rel}: not changed");
}

/// Checks the package after the first successful render of the demo package.
fn assert_rendered(pkg: &Package, nad_name: &str) {
    let nad_file = assert_nad_rendered(pkg, nad_name);

    assert_workloads_attached(pkg, nad_name);

    // Everything else byte-identical.
    for rel in [
        "Kptfile",
        "apps/db.yaml",
        "linkerd-cni/config.yaml",
        "misc/tricky.yaml",
        "namespaces/demo.yaml",
        "namespaces/plain.yaml",
    ] {
        if rel == "Kptfile" && pkg.read(rel).contains("pipeline:") {
            continue;
        }
        assert!(
            pkg.read(rel).as_bytes() == original(rel).as_slice(),
            "{rel} changed:\n{}",
            first_difference(
                rel,
                &String::from_utf8_lossy(&original(rel)),
                &pkg.read(rel)
            )
            .unwrap_or_default()
        );
    }
    let files: Vec<String> = pkg.snapshot().into_iter().map(|(n, _)| n).collect();
    let mut want: Vec<String> = snapshot(&repo_path("testdata/packages/demo"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    want.push(nad_file);
    want.push("Kptfile".into());
    want.sort();
    assert_eq!(files, want, "files in the package after the render");
}

/// The NAD, at the documented place, with the generated config and no host annotations; its
/// file.
fn assert_nad_rendered(pkg: &Package, nad_name: &str) -> String {
    // The NAD, at the documented place, with the generated config and no host annotations.
    let nad_file = format!("namespaces/networkattachmentdefinition_demo_{nad_name}.yaml");
    let nad_text = pkg.read(&nad_file);
    assert!(
        !nad_text.contains("config.kubernetes.io/"),
        "kpt left host annotations in {nad_file}:\n{nad_text}"
    );
    let nad = parse_yaml(&nad_text).expect("NAD file parses");
    assert_eq!(
        nad.id(),
        (
            "NetworkAttachmentDefinition".into(),
            "demo".into(),
            nad_name.into()
        )
    );
    assert_eq!(nad.str_at(&["apiVersion"]), Some("k8s.cni.cncf.io/v1"));
    assert_eq!(
        nad.str_at(&["metadata", "labels", MANAGED_BY]),
        Some("linkerd-multus")
    );
    let config: serde_json::Value =
        serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
    assert_eq!(config["cniVersion"], "0.3.0");
    assert_eq!(
        config["kubernetes"]["kubeconfig"],
        "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
    );
    assert_eq!(config["linkerd"]["iptables-mode"], "nft");
    assert!(config.get("policy").is_none());
    nad_file
}

/// Workloads changed by insertions only: comments and key order kept.
fn assert_workloads_attached(pkg: &Package, nad_name: &str) {
    // Workloads changed by insertions only: comments and key order kept.
    for rel in ["apps/web.yaml", "apps/worker.yaml"] {
        let orig = String::from_utf8(original(rel)).unwrap();
        assert_only_insertions(rel, &orig, &pkg.read(rel));
    }
    let web = parse_yaml(&pkg.read("apps/web.yaml")).unwrap();
    assert_eq!(
        web.keys(),
        vec!["kind", "metadata", "apiVersion", "spec"],
        "key order of web.yaml"
    );
    assert_eq!(
        web.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some(nad_name)
    );
    assert_eq!(
        web.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "config.linkerd.io/proxy-uid"
        ]),
        Some("1000002102")
    );
    let worker = parse_yaml(&pkg.read("apps/worker.yaml")).unwrap();
    assert_eq!(
        worker.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some(format!("storage/backend@net1,{nad_name}").as_str())
    );
}

#[test]
fn kpt_is_installed() {
    let out = Command::new(kpt())
        .arg("version")
        .guarded_output()
        .expect("kpt runs");
    assert!(out.status.success(), "`kpt version` failed");
}
