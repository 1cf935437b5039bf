//! The integration tests, one binary: each file of `tests/` is a module here, so the crate
//! and its dependencies are linked into one test binary rather than one per file
//! (`cargo test --test suite golden::` runs one file's tests). Two files are binaries of
//! their own (Cargo.toml's `[[test]]` entries, `autotests = false`), each saying why at its
//! top: `readme` (it runs cargo in this checkout, holding `git status` still around it) and
//! `container` (it builds the release binary and the image); both take every core for
//! minutes, which the timing-bound tests here (the NAD controller's leases, the soak, the
//! webhook's limits) must not run beside.
//!
//! Tests that need an API server nobody else uses (they register a webhook configuration for
//! every namespace, or act on every namespace) start one of their own
//! (`ControlPlane::own`); the others share this binary's (`ControlPlane::shared`).

mod common;

mod apply;
mod argocd;
mod bad_input;
mod cluster;
mod controller;
mod deploy;
mod extension;
mod fidelity;
mod fuzz_regressions;
mod golden;
mod guard;
mod helm;
mod helm_chart;
mod helm_chart_refusals;
mod kpt;
mod kustomize;
mod layering;
mod mistakes;
mod monitoring;
mod network_resources;
mod render;
mod shipped;
mod upgrade;
mod validate;
mod versions;
mod webhook;
mod webhook_property;
mod work_property;
mod workflows;

/// Every child process of the tests and benchmarks is started by `common::process::Guard`,
/// which kills it with its process group when its test ends, however it ends: none by
/// `Command::spawn` or `Command::output` (`Guarded::guarded_output` is the guarded one).
#[test]
fn every_child_process_is_started_by_the_guard() {
    let guard = common::repo_path("tests/common/process.rs");
    let mut unguarded = Vec::new();
    for dir in ["tests", "benches"] {
        for entry in walkdir::WalkDir::new(common::repo_path(dir)) {
            let entry = entry.unwrap();
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "rs") || path == guard {
                continue;
            }
            let text = std::fs::read_to_string(path).unwrap();
            for (n, line) in text.lines().enumerate() {
                // Spelt so that this line does not match.
                if line.contains(concat!(".spawn", "()")) || line.contains(concat!(".output", "()"))
                {
                    unguarded.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        unguarded.is_empty(),
        "started without common::process::Guard (Guard::spawn, Guard::output or Guarded::guarded_output): {unguarded:#?}"
    );
}

/// Every file of `tests/` is built: a module of this binary or a `[[test]]` of Cargo.toml
/// (with `autotests = false`, cargo would skip a new file silently).
#[test]
fn every_test_file_is_a_module_here_or_a_test_binary() {
    let suite = std::fs::read_to_string(common::repo_path("tests/suite.rs")).unwrap();
    let manifest = std::fs::read_to_string(common::repo_path("Cargo.toml")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(common::repo_path("tests")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let module = suite.lines().any(|l| l == format!("mod {stem};"));
        let binary = manifest.contains(&format!("path = \"tests/{name}\""));
        if !(module || binary) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "not built: {missing:?}: add `mod NAME;` to tests/suite.rs (or, for a test that needs a \
         process of its own, a [[test]] entry to Cargo.toml saying why)"
    );
}
