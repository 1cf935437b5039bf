//! The KRM benchmark's `kpt fn render` row: the function against `cat`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::common::median;
use crate::generate::{GROUP, kptfile, write_package};
use crate::{Programs, Run};

/// Renders a package of `size` resources with the function and with cat,
/// `runs` times each on fresh copies, and prints both medians.
pub fn kpt_render(dir: &Path, progs: &Programs, size: usize, runs: usize) -> Result<usize> {
    let (Some(kpt), Some(cat)) = (which("kpt"), which("cat")) else {
        println!("\nkpt fn render: skipped (kpt or cat not in PATH)");
        return Ok(0);
    };
    let template = dir.join("pkg-template");
    write_package(&template, size)?;
    let null = PathBuf::from("/dev/null");
    let mut walls: [Vec<f64>; 2] = [vec![], vec![]];
    let mut failures = 0;
    let execs = [progs.function.as_path(), cat.as_path()];
    eprintln!("kpt fn render, {size} resources, {runs} runs each ...");
    for r in 0..runs * 2 {
        // Alternate function / cat.
        let which_one = r % 2;
        let pkg = dir.join(format!("pkg-render-{r}"));
        copy_dir(&template, &pkg)?;
        fs::write(pkg.join("Kptfile"), kptfile(execs[which_one]))?;
        let run = Run {
            prog: &kpt,
            args: vec![
                "fn".into(),
                "render".into(),
                "--allow-exec".into(),
                pkg.clone().into(),
            ],
            stdin: &null,
            stdout: dir.join("kpt-out.txt"),
            stderr: dir.join("kpt-err.txt"),
        };
        let s = run.measure()?;
        if s.code != 0 {
            let err = fs::read_to_string(&run.stderr).unwrap_or_default();
            let out = fs::read_to_string(&run.stdout).unwrap_or_default();
            eprintln!(
                "  FAIL kpt fn render with {} exited {}:\n{}{}",
                execs[which_one].display(),
                s.code,
                tail(&out, 10),
                tail(&err, 10)
            );
            failures += 1;
        } else if which_one == 0 && !contains_nad(&pkg)? {
            eprintln!(
                "  FAIL kpt fn render with the function wrote no NetworkAttachmentDefinition"
            );
            failures += 1;
        }
        walls[which_one].push(s.wall);
        fs::remove_dir_all(&pkg)?;
    }
    let (f, c) = (median(&walls[0]), median(&walls[1]));
    println!();
    println!(
        "kpt fn render --allow-exec, {size} resources in {} files:",
        2 * size / GROUP + 1
    );
    println!("  with linkerd-multus: {f:>7.2} s (median of {runs})");
    println!(
        "  with {:<14} {c:>7.2} s (median of {runs})",
        format!("{}:", cat.display())
    );
    println!("  ratio: {:.2}x", f / c);
    Ok(failures)
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let mut out = String::new();
    for l in &lines[lines.len().saturating_sub(n)..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Whether any file under `dir` holds a NetworkAttachmentDefinition.
fn contains_nad(dir: &Path) -> Result<bool> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let found = if entry.file_type()?.is_dir() {
            contains_nad(&entry.path())?
        } else {
            fs::read_to_string(entry.path())?.contains("kind: NetworkAttachmentDefinition")
        };
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}
