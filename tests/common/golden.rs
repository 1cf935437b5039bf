//! Golden cases: every directory under a root holds an `input.yaml` (a ResourceList as kpt
//! sends it) and `expected.yaml` (the exact expected stdout), optionally `expected-exit`
//! (default 0) and `expected-stderr-first-line`. `UPDATE_GOLDEN=1` rewrites the expected
//! files from the binary's current behaviour (`GOLDEN_CASE=a,b` limits it to some cases).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{before_results, first_difference, run};

/// The case directories under `root` (those holding an `input.yaml`), sorted;
/// `GOLDEN_CASE=a,b` limits them to some cases.
pub fn case_dirs(root: &Path, at_least: usize) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    dirs.sort();
    // `GOLDEN_CASE=a,b` limits a run (and an update) to those cases.
    if let Ok(only) = std::env::var("GOLDEN_CASE") {
        let only: Vec<&str> = only.split(',').map(str::trim).collect();
        dirs.retain(|d| only.contains(&case_name(d).as_str()));
        assert!(!dirs.is_empty(), "GOLDEN_CASE matches no case");
        return dirs;
    }
    assert!(
        dirs.len() >= at_least,
        "expected at least {at_least} golden cases in {}, found {}",
        root.display(),
        dirs.len()
    );
    dirs
}

/// The name of a case: its directory name.
pub fn case_name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// A file of a case, if it exists.
pub fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

/// Runs `f` on every case of `dirs` in parallel; fails listing every problem found.
pub fn for_each_case(dirs: &[PathBuf], f: impl Fn(&Path) -> Vec<String> + Sync) {
    let problems = Mutex::new(BTreeMap::new());
    let next = Mutex::new(0usize);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(4)
        .min(8);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(dir) = dirs.get(i) else { break };
                    let found = f(dir);
                    if !found.is_empty() {
                        problems.lock().unwrap().insert(case_name(dir), found);
                    }
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    if !problems.is_empty() {
        let mut msg = format!("{} golden case(s) failed:\n", problems.len());
        for (case, found) in &problems {
            for p in found {
                msg.push_str(&format!("\n[{case}] {p}\n"));
            }
        }
        panic!("{msg}");
    }
}

/// The exact comparison of every case's output with its golden files, or
/// their update under `UPDATE_GOLDEN=1`.
pub fn outputs_match(dirs: &[PathBuf]) {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    for_each_case(dirs, |dir| {
        let input = read(dir, "input.yaml").unwrap();
        let got = run(input.as_bytes());
        let mut problems = Vec::new();
        if got.panicked() {
            problems.push(format!(
                "binary crashed (exit {}):\n{}",
                got.code, got.stderr
            ));
            return problems;
        }
        if update {
            std::fs::write(dir.join("expected.yaml"), &got.stdout).unwrap();
            let exit = dir.join("expected-exit");
            let line = dir.join("expected-stderr-first-line");
            if got.code == 0 {
                let _ = std::fs::remove_file(&exit);
                let _ = std::fs::remove_file(&line);
            } else {
                std::fs::write(&exit, format!("{}\n", got.code)).unwrap();
                std::fs::write(&line, format!("{}\n", got.stderr_first_line())).unwrap();
            }
            return problems;
        }
        let Some(expected) = read(dir, "expected.yaml") else {
            problems.push("no expected.yaml (run with UPDATE_GOLDEN=1 and review)".into());
            return problems;
        };
        if let Some(d) = first_difference("stdout vs expected.yaml", &expected, &got.stdout) {
            problems.push(d);
        }
        let want_exit: i32 = read(dir, "expected-exit")
            .map(|s| s.trim().parse().expect("expected-exit holds a number"))
            .unwrap_or(0);
        if got.code != want_exit {
            problems.push(format!(
                "exit code {} (expected {want_exit}); stderr:\n{}",
                got.code, got.stderr
            ));
        }
        if let Some(line) = read(dir, "expected-stderr-first-line") {
            let line = line.trim_end_matches('\n');
            if got.stderr_first_line() != line {
                problems.push(format!(
                    "stderr first line\n  expected: {line:?}\n  actual:   {:?}",
                    got.stderr_first_line()
                ));
            }
        }
        problems
    });
}

/// Same input twice: byte-identical output. Output fed back: byte-identical items and
/// functionConfig, and stable from then on (whole stdout identical on the third run).
pub fn deterministic_and_idempotent(dirs: &[PathBuf]) {
    for_each_case(dirs, |dir| {
        let input = read(dir, "input.yaml").unwrap();
        let first = run(input.as_bytes());
        let mut problems = Vec::new();
        if first.panicked() {
            problems.push(format!("binary crashed:\n{}", first.stderr));
            return problems;
        }
        let again = run(input.as_bytes());
        if let Some(d) = first_difference("same input, second run", &first.stdout, &again.stdout) {
            problems.push(d);
        }
        if again.code != first.code || again.stderr != first.stderr {
            problems.push("same input, second run: exit code or stderr differ".into());
        }
        if first.code != 0 {
            return problems;
        }
        let second = run(first.stdout.as_bytes());
        if second.code != 0 {
            problems.push(format!(
                "re-run on own output exited {}: {}",
                second.code,
                second.stderr_first_line()
            ));
            return problems;
        }
        if let Some(d) = first_difference(
            "re-run on own output (items and functionConfig)",
            before_results(&first.stdout),
            before_results(&second.stdout),
        ) {
            problems.push(d);
        }
        let third = run(second.stdout.as_bytes());
        if let Some(d) = first_difference("third run vs second run", &second.stdout, &third.stdout)
        {
            problems.push(d);
        }
        let fourth = run(third.stdout.as_bytes());
        if let Some(d) = first_difference("fourth run vs third run", &third.stdout, &fourth.stdout)
        {
            problems.push(d);
        }
        problems
    });
}
