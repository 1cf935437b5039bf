//! Benchmark of the KRM function against an identity function.
//!
//! `cargo bench --bench krm` generates kpt-shaped ResourceLists of 1,000,
//! 10,000 and 50,000 resources, runs `linkerd-multus` (the bench profile: the
//! shipped binary's settings) and `examples/identity` (same YAML code, parse
//! and re-emit only) on each, and prints wall time, throughput and peak RSS,
//! with the ratios the target is stated in (at most 1.2x the identity's time
//! and memory at 10,000). The
//! same target holds for the NetworkResources rules, on a 10,000-resource list
//! where every workload selects two resource-backed NADs of its namespace
//! (requests, limits, a node selector and the record on each). It then times
//! `kpt fn render` of a 10,000-resource package with the function against the
//! same render with `/usr/bin/cat` as the function.
//!
//! `cargo bench --bench krm -- --quick` (or `BENCH_QUICK=1`) runs only the
//! 1,000 size once for each rule set, as a smoke test. `BENCH_KEEP=1` keeps the temp directory.
//! `BENCH_ONLY=linkerd` or `BENCH_ONLY=net-res` runs only that rule set's
//! rows and skips the render and kpt rows, for profiling one of them.
//!
//! Peak RSS is exact: each measurement re-executes this binary, which spawns
//! the one program, waits for it and reports `getrusage(RUSAGE_CHILDREN)`,
//! whose `ru_maxrss` then covers that program alone.

mod common;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use common::median;
use linkerd_multus::yaml::{Node, parse_document};

/// First argument of the re-executed measuring process.
const MEASURE: &str = "__krm-bench-measure";

/// Resources per namespace group: 1 Namespace, 6 workloads, 2 Services,
/// 1 ConfigMap.
const GROUP: usize = 10;

/// Target ratio at 10,000 resources.
const TARGET: f64 = 1.2;

/// Which rules the generated ResourceList asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// No functionConfig: Linkerd-CNI attachment; half the namespaces opt in.
    Linkerd,
    /// A NetworkResources functionConfig; each namespace has two NADs with a
    /// resource name (in place of the two Services) and every workload selects both.
    NetworkResources,
}

impl Rules {
    fn tag(self) -> &'static str {
        match self {
            Rules::Linkerd => "linkerd",
            Rules::NetworkResources => "net-res",
        }
    }
}

/// The annotation NetworkResources records on each workload it changes.
const RECORD: &str = "multus.linkerd.io/network-resources";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == MEASURE) {
        return match measure_child(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("krm bench measure: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    match run(quick) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("krm bench: {n} check(s) failed, see above");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("krm bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Measuring

/// In the re-executed process: `PROG STDIN STDOUT STDERR [ARGS...]`. Runs
/// PROG once and prints `wall_seconds max_rss_kib exit_code`.
fn measure_child(args: &[OsString]) -> Result<()> {
    let [prog, stdin, stdout, stderr, rest @ ..] = args else {
        bail!("usage: {MEASURE} PROG STDIN STDOUT STDERR [ARGS...]");
    };
    let stdin = fs::File::open(stdin).with_context(|| format!("open {stdin:?}"))?;
    let stdout = fs::File::create(stdout).with_context(|| format!("create {stdout:?}"))?;
    let stderr = fs::File::create(stderr).with_context(|| format!("create {stderr:?}"))?;
    let mut cmd = Command::new(prog);
    cmd.args(rest).stdin(stdin).stdout(stdout).stderr(stderr);
    let start = Instant::now();
    let status = cmd.status().with_context(|| format!("run {prog:?}"))?;
    let wall = start.elapsed().as_secs_f64();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    // Linux reports ru_maxrss in KiB.
    println!("{wall} {} {}", usage.max_rss(), status.code().unwrap_or(-1));
    Ok(())
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    wall: f64,
    rss_kib: u64,
    code: i32,
}

/// One program run, measured from a fresh intermediate process.
struct Run<'a> {
    prog: &'a Path,
    args: Vec<OsString>,
    stdin: &'a Path,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Run<'_> {
    fn measure(&self) -> Result<Sample> {
        let me = std::env::current_exe()?;
        let out = Command::new(me)
            .arg(MEASURE)
            .arg(self.prog)
            .arg(self.stdin)
            .arg(&self.stdout)
            .arg(&self.stderr)
            .args(&self.args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()?;
        if !out.status.success() {
            bail!("measuring {} failed", self.prog.display());
        }
        let text = String::from_utf8(out.stdout)?;
        let mut f = text.split_whitespace();
        let mut next = || {
            f.next()
                .ok_or_else(|| anyhow!("bad measure output {text:?}"))
        };
        Ok(Sample {
            wall: next()?.parse()?,
            rss_kib: next()?.parse()?,
            code: next()?.parse()?,
        })
    }

    fn first_stderr_line(&self) -> String {
        fs::read_to_string(&self.stderr)
            .ok()
            .and_then(|s| s.lines().next().map(str::to_owned))
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------
// Driver

struct Programs {
    function: PathBuf,
    identity: PathBuf,
}

/// The function is the binary cargo built beside this bench, with the same profile
/// (`bench` for `cargo bench`, `dev` for the smoke runs' `cargo bench --profile dev`). The
/// identity example is built with that profile too, by the cargo that runs this bench
/// (cargo releases its lock before running benches); its path comes from cargo's JSON
/// messages. So a smoke run compiles nothing the test build has not.
fn build_programs() -> Result<Programs> {
    let function = PathBuf::from(env!("CARGO_BIN_EXE_linkerd-multus"));
    let profile = bench_profile()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    eprintln!("building examples/identity (profile {profile}) ...");
    let mut build = Command::new(cargo);
    // The variables cargo sets for running this bench (CARGO_PKG_NAME=linkerd-multus, ...)
    // must not reach the inner cargo: build scripts that watch them (ring's
    // `rerun-if-env-changed=CARGO_PKG_NAME`) would see them changed and ring, rustls and kube
    // would be compiled again, and again by the next `cargo test`.
    for (key, _) in std::env::vars_os() {
        let key_str = key.to_string_lossy();
        if key_str.starts_with("CARGO_PKG_")
            || key_str.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "OUT_DIR",
            ]
            .contains(&key_str.as_ref())
        {
            build.env_remove(&key);
        }
    }
    let out = build
        .args(["build", "--profile", &profile, "--example", "identity"])
        .args([
            "--message-format",
            "json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(&manifest)
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo build")?;
    if !out.status.success() {
        bail!("cargo build --profile {profile} --example identity failed");
    }
    let mut identity = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg.pointer("/target/name").and_then(|v| v.as_str()) == Some("identity")
            && let Some(exe) = msg.get("executable").and_then(|v| v.as_str())
        {
            identity = Some(PathBuf::from(exe));
        }
    }
    Ok(Programs {
        function,
        identity: identity.ok_or_else(|| anyhow!("cargo did not report examples/identity"))?,
    })
}

/// The cargo profile this bench was built with, read from where cargo put it
/// (`<target>/<folder>/deps/krm-<hash>`): `debug` is the `dev` profile's folder,
/// `release` the `bench` profile's (plain `cargo bench`), any other folder a custom
/// profile of that name.
fn bench_profile() -> Result<String> {
    let exe = std::env::current_exe().context("current_exe")?;
    let folder = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|f| f.to_str())
        .ok_or_else(|| anyhow!("no profile folder in {}", exe.display()))?;
    Ok(match folder {
        "debug" => "dev",
        "release" => "bench",
        other => other,
    }
    .to_string())
}

struct Row {
    rules: Rules,
    size: usize,
    input_bytes: u64,
    fn_wall: f64,
    id_wall: f64,
    fn_rss: f64,
    id_rss: f64,
    /// The function's output passed its check.
    fn_ok: bool,
}

fn run(quick: bool) -> Result<usize> {
    let progs = build_programs()?;
    let dir = std::env::temp_dir().join(format!("linkerd-multus-bench-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let result = run_in(&dir, &progs, quick);
    if std::env::var_os("BENCH_KEEP").is_some() {
        eprintln!("kept {}", dir.display());
    } else {
        let _ = fs::remove_dir_all(&dir);
    }
    result
}

fn run_in(dir: &Path, progs: &Programs, quick: bool) -> Result<usize> {
    use Rules::{Linkerd, NetworkResources};
    let plan: &[(Rules, usize, usize)] = if quick {
        &[(Linkerd, 1_000, 1), (NetworkResources, 1_000, 1)]
    } else {
        &[
            (Linkerd, 1_000, 5),
            (Linkerd, 10_000, 5),
            (Linkerd, 50_000, 3),
            (NetworkResources, 10_000, 5),
        ]
    };
    let only = std::env::var("BENCH_ONLY").ok();
    let mut failures = 0;
    let mut rows = Vec::new();
    for &(rules, size, runs) in plan {
        let tag = rules.tag();
        if only.as_deref().is_some_and(|o| o != tag) {
            continue;
        }
        let input = dir.join(format!("input-{tag}-{size}.yaml"));
        let text = resource_list(size, &progs.function, rules);
        fs::write(&input, &text)?;
        let input_bytes = text.len() as u64;
        eprintln!(
            "{size} resources, {tag} rules: {:.1} MB input, {:.0} bytes per resource",
            input_bytes as f64 / 1e6,
            input_bytes as f64 / size as f64
        );
        let mk = |prog: &'static str| Run {
            prog: if prog == "fn" {
                &progs.function
            } else {
                &progs.identity
            },
            args: Vec::new(),
            stdin: &input,
            stdout: dir.join(format!("out-{prog}-{tag}-{size}.yaml")),
            stderr: dir.join(format!("err-{prog}-{tag}-{size}.txt")),
        };
        let (func, ident) = (mk("fn"), mk("identity"));

        // The first run of each is a warm-up and a check of its output.
        failures += check_identity(&ident, &text)?;
        let fn_failed = check_function(&func, size, rules)?;
        failures += fn_failed;
        drop(text);

        let [f, i] = alternate(&func, &ident, runs)?;
        rows.push(Row {
            rules,
            size,
            input_bytes,
            fn_wall: f.wall,
            id_wall: i.wall,
            fn_rss: f.rss_mib,
            id_rss: i.rss_mib,
            fn_ok: fn_failed == 0,
        });
    }
    print_table(&rows, progs);

    if only.is_some() {
        return Ok(failures);
    }
    if quick {
        failures += render_row(dir, progs, 1_000, 1)?;
    } else {
        failures += render_row(dir, progs, 10_000, 5)?;
        failures += kpt_render(dir, progs, 10_000, 3)?;
    }
    Ok(failures)
}

// linkerd-multus render

/// Times `linkerd-multus render` on a package of `size` resources against the
/// KRM function on the same resources as a ResourceList, alternating, `runs`
/// times each, and prints both medians: the cost of reading the files.
fn render_row(dir: &Path, progs: &Programs, size: usize, runs: usize) -> Result<usize> {
    let pkg = dir.join(format!("pkg-plain-{size}"));
    write_package(&pkg, size)?;
    let list = dir.join(format!("input-linkerd-{size}.yaml"));
    if !list.exists() {
        fs::write(&list, resource_list(size, &progs.function, Rules::Linkerd))?;
    }
    let null = PathBuf::from("/dev/null");
    let render = Run {
        prog: &progs.function,
        args: vec!["render".into(), pkg.clone().into()],
        stdin: &null,
        stdout: dir.join("render-out.yaml"),
        stderr: dir.join("render-err.txt"),
    };
    let function = Run {
        prog: &progs.function,
        args: Vec::new(),
        stdin: &list,
        stdout: dir.join("render-fn-out.yaml"),
        stderr: dir.join("render-fn-err.txt"),
    };
    eprintln!("render, {size} resources, {runs} runs each ...");
    let [r, f] = alternate(&render, &function, runs)?;
    let mut failures = r.failures + f.failures;
    let out = fs::read_to_string(&render.stdout)?;
    let nads = out.matches("kind: NetworkAttachmentDefinition").count();
    if nads == 0 {
        eprintln!("  FAIL render printed no NetworkAttachmentDefinition");
        failures += 1;
    }
    let (w, m, fw, fm) = (r.wall, r.rss_mib, f.wall, f.rss_mib);
    println!();
    println!(
        "linkerd-multus render, {size} resources in {} files:",
        2 * size / GROUP
    );
    println!("  render:               {w:>7.3} s {m:>7.1} MiB (median of {runs})");
    println!(
        "  KRM function (stdin): {fw:>7.3} s {fm:>7.1} MiB (same resources as a ResourceList)"
    );
    println!("  ratio: {:.2}x time, {:.2}x memory", w / fw, m / fm);
    fs::remove_dir_all(&pkg)?;
    Ok(failures)
}

/// Medians of one program's runs.
struct Medians {
    wall: f64,
    rss_mib: f64,
    /// Runs that exited non-zero.
    failures: usize,
}

/// Measures two programs `runs` times each, alternating which goes first so
/// both share the machine's drift.
fn alternate(a: &Run, b: &Run, runs: usize) -> Result<[Medians; 2]> {
    let (mut walls, mut rss, mut failures) = ([vec![], vec![]], [vec![], vec![]], [0, 0]);
    for r in 0..runs {
        let order = if r.is_multiple_of(2) { [0, 1] } else { [1, 0] };
        for i in order {
            let run = [a, b][i];
            let s = run.measure()?;
            if s.code != 0 {
                eprintln!(
                    "  {} exited {}: {}",
                    run.prog.display(),
                    s.code,
                    run.first_stderr_line()
                );
                failures[i] += 1;
            }
            walls[i].push(s.wall);
            rss[i].push(s.rss_kib as f64 / 1024.0);
        }
    }
    Ok([0, 1].map(|i| Medians {
        wall: median(&walls[i]),
        rss_mib: median(&rss[i]),
        failures: failures[i],
    }))
}

/// The identity's output must parse back to the input's tree.
fn check_identity(run: &Run, input: &str) -> Result<usize> {
    let s = run.measure()?;
    if s.code != 0 {
        eprintln!(
            "  FAIL identity exited {}: {}",
            s.code,
            run.first_stderr_line()
        );
        return Ok(1);
    }
    let want = parse_document(input).context("the generated input does not parse")?;
    let got = parse_document(&fs::read_to_string(&run.stdout)?)
        .context("the identity's output does not parse")?;
    if want != got {
        eprintln!("  FAIL identity output is not the input's tree");
        return Ok(1);
    }
    eprintln!("  identity: output parses back to the input's tree");
    Ok(0)
}

/// The function must exit 0 and write a ResourceList with at least the input's
/// items.
fn check_function(run: &Run, size: usize, rules: Rules) -> Result<usize> {
    let s = run.measure()?;
    if s.code != 0 {
        eprintln!(
            "  FAIL linkerd-multus exited {}: {}",
            s.code,
            run.first_stderr_line()
        );
        return Ok(1);
    }
    let out = fs::read_to_string(&run.stdout)?;
    let items = match parse_document(&out) {
        Ok(doc) => get(&doc, "items").map(|n| match n {
            Node::Seq(s) => s.items.len(),
            _ => 0,
        }),
        Err(e) => {
            eprintln!("  FAIL linkerd-multus output does not parse: {e}");
            return Ok(1);
        }
    };
    if rules == Rules::NetworkResources {
        // Every workload gets its record; the annotation appears nowhere else.
        let (records, workloads) = (out.matches(RECORD).count(), size / GROUP * 6);
        if records != workloads {
            eprintln!(
                "  FAIL linkerd-multus recorded network resources on {records} of {workloads} workloads"
            );
            return Ok(1);
        }
        eprintln!("  linkerd-multus: network resources on all {workloads} workloads");
    }
    match items {
        // +1: the Kptfile.
        Some(n) if n > size => {
            eprintln!("  linkerd-multus: {n} items out of {} in", size + 1);
            Ok(0)
        }
        _ => {
            eprintln!("  FAIL linkerd-multus output has {items:?} items, want > {size}");
            Ok(1)
        }
    }
}

fn get<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    let Node::Map(m) = node else { return None };
    m.entries
        .iter()
        .find(|(k, _)| matches!(k, Node::Scalar(s) if s.value == key))
        .map(|(_, v)| v)
}

fn print_table(rows: &[Row], progs: &Programs) {
    println!();
    println!("function: {}", progs.function.display());
    println!("identity: {}", progs.identity.display());
    println!(
        "{:>7} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>7} {:>7}",
        "rules",
        "resources",
        "input MB",
        "fn s",
        "ident s",
        "MB/s",
        "fn MiB",
        "id MiB",
        "time x",
        "mem x"
    );
    for r in rows {
        let mb = r.input_bytes as f64 / 1e6;
        let (tx, mx) = (r.fn_wall / r.id_wall, r.fn_rss / r.id_rss);
        let mut line = format!(
            "{:>7} {:>9} {:>8.2} {:>8.3} {:>8.3} {:>7.1} {:>8.1} {:>8.1} {:>7.3} {:>7.3}",
            r.rules.tag(),
            r.size,
            mb,
            r.fn_wall,
            r.id_wall,
            mb / r.fn_wall,
            r.fn_rss,
            r.id_rss,
            tx,
            mx
        );
        if r.size == 10_000 {
            let verdict = match (r.fn_ok, tx <= TARGET && mx <= TARGET) {
                (false, _) => "n/a, the function failed its check",
                (true, true) => "met",
                (true, false) => "MISSED",
            };
            let _ = write!(line, "  <- target <= {TARGET}x time and memory: {verdict}");
        } else if !r.fn_ok {
            line.push_str("  (the function failed its check)");
        }
        println!("{line}");
    }
    println!("(medians; MB = 10^6 bytes; x = function / identity)");
}

// ---------------------------------------------------------------------------
// kpt fn render

/// Renders a package of `size` resources with the function and with cat,
/// `runs` times each on fresh copies, and prints both medians.
fn kpt_render(dir: &Path, progs: &Programs, size: usize, runs: usize) -> Result<usize> {
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

fn kptfile(exec: &Path) -> String {
    format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n\
         pipeline:\n  mutators:\n  - exec: \"{}\"\n",
        exec.display()
    )
}

/// Writes the package: per namespace a directory with `namespace.yaml` and
/// `resources.yaml` (workloads, services, config map).
fn write_package(root: &Path, size: usize) -> Result<()> {
    fs::create_dir_all(root)?;
    fs::write(root.join("Kptfile"), kptfile(Path::new("/bin/true")))?;
    for g in 0..size / GROUP {
        let ns = namespace_name(g);
        let d = root.join(&ns);
        fs::create_dir_all(&d)?;
        let mut docs = Vec::with_capacity(GROUP);
        for slot in 0..GROUP {
            let mut s = String::new();
            resource(&mut s, g, slot, None, Rules::Linkerd);
            docs.push(s);
        }
        fs::write(d.join("namespace.yaml"), &docs[0])?;
        fs::write(d.join("resources.yaml"), docs[1..].join("---\n"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Generator

/// kpt's annotations on an item, in the order kpt writes them.
struct Kpt<'a> {
    path: &'a str,
    index: usize,
    id: usize,
}

const PACKAGE_PATH: &str = "/tmp/linkerd-multus-bench/pkg";

/// A ResourceList as `kpt fn render` sends it: the Kptfile, then every
/// resource of the package with kpt's annotations, `size` resources in all.
fn resource_list(size: usize, exec: &Path, rules: Rules) -> String {
    let mut out = String::with_capacity(size * 1600 + 4096);
    out.push_str("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let mut item = String::new();
    let kptfile = Kpt {
        path: "Kptfile",
        index: 0,
        id: 1,
    };
    item.push_str("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n");
    annotations(&mut item, 2, &[], Some(&kptfile));
    let _ = writeln!(
        item,
        "pipeline:\n  mutators:\n  - exec: \"{}\"",
        exec.display()
    );
    push_item(&mut out, &item);
    let mut id = 2;
    for g in 0..size / GROUP {
        let ns = namespace_name(g);
        let (ns_path, res_path) = (
            format!("{ns}/namespace.yaml"),
            format!("{ns}/resources.yaml"),
        );
        for slot in 0..GROUP {
            let kpt = Kpt {
                path: if slot == 0 { &ns_path } else { &res_path },
                index: slot.saturating_sub(1),
                id,
            };
            item.clear();
            resource(&mut item, g, slot, Some(&kpt), rules);
            push_item(&mut out, &item);
            id += 1;
        }
    }
    if rules == Rules::NetworkResources {
        out.push_str(
            "functionConfig:\n  apiVersion: multus.linkerd.io/v1alpha1\n  kind: NetworkResources\n  \
             metadata:\n    name: network-resources\n  spec:\n    downwardAPI: false\n",
        );
    }
    out
}

/// Appends a top-level document as an item of `items:` (compact sequence).
fn push_item(out: &mut String, doc: &str) {
    for (i, line) in doc.lines().enumerate() {
        if line.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
}

fn namespace_name(g: usize) -> String {
    match g {
        0 => "linkerd-cni".into(),
        1 => "linkerd".into(),
        _ => format!("team-{g:05}"),
    }
}

const APPS: [&str; 20] = [
    "checkout",
    "payments",
    "catalog",
    "cart",
    "search",
    "orders",
    "shipping",
    "billing",
    "inventory",
    "auth",
    "profile",
    "reviews",
    "recommendations",
    "notifications",
    "gateway",
    "frontend",
    "email",
    "ledger",
    "pricing",
    "quotes",
];

fn app(g: usize, slot: usize) -> &'static str {
    APPS[(g * 7 + slot) % APPS.len()]
}

/// Writes `metadata.annotations` at `indent` (the key's own indent), user
/// annotations first, then kpt's. Writes nothing when both are empty.
fn annotations(out: &mut String, indent: usize, user: &[(&str, &str)], kpt: Option<&Kpt>) {
    if user.is_empty() && kpt.is_none() {
        return;
    }
    let p = " ".repeat(indent);
    let _ = writeln!(out, "{p}annotations:");
    for (k, v) in user {
        let _ = writeln!(out, "{p}  {k}: {v}");
    }
    if let Some(k) = kpt {
        let _ = write!(
            out,
            "{p}  config.kubernetes.io/index: '{index}'\n\
             {p}  config.kubernetes.io/path: '{path}'\n\
             {p}  internal.config.kubernetes.io/index: '{index}'\n\
             {p}  internal.config.kubernetes.io/package-path: '{PACKAGE_PATH}'\n\
             {p}  internal.config.kubernetes.io/path: '{path}'\n\
             {p}  internal.config.kubernetes.io/seqindent: 'compact'\n\
             {p}  internal.config.kubernetes.io/annotations-migration-resource-id: '{mid}'\n\
             {p}  internal.config.kubernetes.io/id: '{id}'\n\
             {p}  config.k8s.io/id: '{id}'\n",
            index = k.index,
            path = k.path,
            mid = k.id - 1,
            id = k.id,
        );
    }
}

/// Writes resource `slot` of namespace group `g` as a top-level document.
fn resource(out: &mut String, g: usize, slot: usize, kpt: Option<&Kpt>, rules: Rules) {
    let ns = namespace_name(g);
    match slot {
        0 => namespace(out, g, &ns, kpt),
        1..=6 => {
            let kind = [
                "Deployment",
                "Deployment",
                "StatefulSet",
                "Deployment",
                "CronJob",
                "StatefulSet",
            ][slot - 1];
            workload(out, g, slot, kind, &ns, kpt, rules);
        }
        7 | 8 if rules == Rules::NetworkResources => nad(out, slot, &ns, kpt),
        7 | 8 => service(out, g, slot, &ns, kpt),
        _ if g == 0 => cni_config_map(out, kpt),
        _ => config_map(out, g, &ns, kpt),
    }
}

fn namespace(out: &mut String, g: usize, ns: &str, kpt: Option<&Kpt>) {
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    \
         kubernetes.io/metadata.name: {ns}\n    team: {ns}\n    \
         pod-security.kubernetes.io/enforce: baseline\n"
    );
    let mut user: Vec<(&str, &str)> = vec![("owner", "platform-team@example.com")];
    // Half the namespaces opt in (not linkerd-cni itself), a third carry
    // OpenShift's uid range.
    if g.is_multiple_of(2) && g != 0 {
        user.push(("linkerd.io/multus", "enabled"));
        user.push(("linkerd.io/inject", "enabled"));
    }
    if g.is_multiple_of(3) {
        user.push(("openshift.io/sa.scc.uid-range", "1000000000/10000"));
        user.push((
            "openshift.io/sa.scc.supplemental-groups",
            "1000000000/10000",
        ));
    }
    annotations(out, 2, &user, kpt);
    out.push_str("spec:\n  finalizers:\n  - kubernetes\n");
}

/// A Deployment, StatefulSet or CronJob with a realistic pod template.
fn workload(
    out: &mut String,
    g: usize,
    slot: usize,
    kind: &str,
    ns: &str,
    kpt: Option<&Kpt>,
    rules: Rules,
) {
    let name = app(g, slot);
    let api = if kind == "CronJob" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    let _ = write!(
        out,
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/part-of: shop\n"
    );
    annotations(out, 2, &[], kpt);
    out.push_str("spec:\n");
    // Where the pod template's `metadata:` goes.
    let indent = match kind {
        "CronJob" => {
            let _ = write!(
                out,
                "  schedule: \"*/15 * * * *\"\n  concurrencyPolicy: Forbid\n  \
                 successfulJobsHistoryLimit: 3\n  jobTemplate:\n    spec:\n      \
                 backoffLimit: 2\n      template:\n"
            );
            8
        }
        _ => {
            let _ = write!(
                out,
                "  replicas: {}\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n",
                1 + (g + slot) % 3
            );
            if kind == "StatefulSet" {
                let _ = writeln!(out, "  serviceName: {name}");
            }
            out.push_str("  template:\n");
            4
        }
    };
    pod_template(out, indent, g, slot, name, kind == "CronJob", rules);
    if kind == "StatefulSet" {
        out.push_str(
            "  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      \
             accessModes: [\"ReadWriteOnce\"]\n      resources:\n        requests:\n          \
             storage: 10Gi\n",
        );
    }
}

/// Writes `metadata:` and `spec:` of a pod template at `indent`.
fn pod_template(
    out: &mut String,
    indent: usize,
    g: usize,
    slot: usize,
    name: &str,
    job: bool,
    rules: Rules,
) {
    let p = " ".repeat(indent);
    let k = g + slot;
    let port = 8080 + slot;
    let _ = writeln!(
        out,
        "{p}metadata:\n{p}  labels:\n{p}    app.kubernetes.io/name: {name}"
    );
    let _ = writeln!(
        out,
        "{p}  annotations:\n{p}    prometheus.io/scrape: \"true\""
    );
    if k.is_multiple_of(4) {
        let _ = writeln!(out, "{p}    linkerd.io/inject: enabled");
    }
    if rules == Rules::NetworkResources {
        let _ = writeln!(
            out,
            "{p}    k8s.v1.cni.cncf.io/networks: sriov-a, sriov-b@net2"
        );
    } else if k.is_multiple_of(9) {
        let _ = writeln!(out, "{p}    k8s.v1.cni.cncf.io/networks: macvlan-conf@net1");
    }
    if k.is_multiple_of(11) {
        let _ = writeln!(out, "{p}    linkerd.io/multus: disabled");
    }
    let _ = writeln!(out, "{p}spec:");
    if job {
        let _ = writeln!(out, "{p}  restartPolicy: OnFailure");
    }
    let _ = write!(
        out,
        "{p}  serviceAccountName: {name}\n\
         {p}  securityContext:\n\
         {p}    runAsNonRoot: true\n\
         {p}    fsGroup: 2000\n\
         {p}  containers:\n\
         {p}  - name: {name}\n\
         {p}    image: registry.example.com/shop/{name}:1.{minor}.{slot}\n\
         {p}    ports:\n\
         {p}    - name: http\n\
         {p}      containerPort: {port}\n\
         {p}      protocol: TCP\n\
         {p}    env:\n\
         {p}    - name: FEATURE_CACHE\n\
         {p}      value: \"yes\"\n\
         {p}    - name: POD_NAMESPACE\n\
         {p}      valueFrom:\n\
         {p}        fieldRef:\n\
         {p}          fieldPath: metadata.namespace\n\
         {p}    resources:\n\
         {p}      requests:\n\
         {p}        cpu: 100m\n\
         {p}        memory: 128Mi\n\
         {p}      limits:\n\
         {p}        memory: 256Mi\n",
        minor = g % 10,
    );
    if !job {
        let _ = write!(
            out,
            "{p}    readinessProbe:\n\
             {p}      httpGet:\n\
             {p}        path: /ready\n\
             {p}        port: http\n\
             {p}      periodSeconds: 10\n"
        );
    }
    let _ = write!(
        out,
        "{p}    volumeMounts:\n\
         {p}    - name: config\n\
         {p}      mountPath: /etc/{name}\n\
         {p}      readOnly: true\n\
         {p}  volumes:\n\
         {p}  - name: config\n\
         {p}    configMap:\n\
         {p}      name: {name}-settings\n\
         {p}      defaultMode: 0644\n"
    );
}

/// A NAD with a device-plugin resource (`sriov-a` also with a node selector).
fn nad(out: &mut String, slot: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = if slot == 7 { "sriov-a" } else { "sriov-b" };
    let _ = write!(
        out,
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  \
         name: {name}\n  namespace: {ns}\n"
    );
    let resource = format!("intel.com/{}", name.replace('-', "_"));
    let mut user = vec![("k8s.v1.cni.cncf.io/resourceName", resource.as_str())];
    if slot == 7 {
        user.push((
            "k8s.v1.cni.cncf.io/nodeSelector",
            "feature.node.kubernetes.io/sriov=true",
        ));
    }
    annotations(out, 2, &user, kpt);
    let _ = write!(
        out,
        "spec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"{name}\", \"type\": \"sriov\", \
         \"ipam\": {{\"type\": \"whereabouts\", \"range\": \"10.56.0.0/16\"}}}}'\n"
    );
}

fn service(out: &mut String, g: usize, slot: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = app(g, slot - 6);
    let port = 8080 + slot - 6;
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/part-of: shop\n"
    );
    annotations(out, 2, &[], kpt);
    let _ = write!(
        out,
        "spec:\n  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: {name}\n  \
         ports:\n  - name: http\n    port: 80\n    targetPort: {port}\n    protocol: TCP\n"
    );
}

fn config_map(out: &mut String, g: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = app(g, 1);
    let _ = write!(
        out,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-settings\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n"
    );
    annotations(out, 2, &[], kpt);
    let _ = write!(
        out,
        "data:\n  LOG_LEVEL: info\n  ENABLE_TRACING: \"on\"\n  MAX_CONNECTIONS: \"512\"\n  \
         application.yaml: |\n    server:\n      port: 8081\n      shutdown: graceful\n    \
         database:\n      host: postgres.{ns}.svc.cluster.local\n      pool: 10\n    \
         cache:\n      ttl: 30s\n      enabled: yes\n"
    );
}

/// The Linkerd-CNI ConfigMap (fixtures/linkerd-cni/version-2.19.yaml).
fn cni_config_map(out: &mut String, kpt: Option<&Kpt>) {
    out.push_str(
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: linkerd-cni-config\n  \
         namespace: linkerd-cni\n  labels:\n    linkerd.io/cni-resource: \"true\"\n",
    );
    annotations(out, 2, &[], kpt);
    out.push_str(CNI_DATA);
}

const CNI_DATA: &str = r#"data:
  dest_cni_net_dir: "/etc/cni/net.d"
  dest_cni_bin_dir: "/opt/cni/bin"
  cni_network_config: |-
    {
      "name": "linkerd-cni",
      "type": "linkerd-cni",
      "log_level": "info",
      "kubernetes": {
          "kubeconfig": "__KUBECONFIG_FILEPATH__"
      },
      "linkerd": {
        "incoming-proxy-port": 4143,
        "outgoing-proxy-port": 4140,
        "proxy-uid": 2102,
        "ports-to-redirect": [],
        "inbound-ports-to-ignore": ["4191","4190"],
        "simulate": false,
        "use-wait-flag": false,
        "iptables-mode": "nft",
        "ipv6": false
      }
    }
"#;
