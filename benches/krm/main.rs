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
//! The Linkerd-CNI rules are measured again with the secondary-network rule on
//! (`skipSecondarySubnets: enabled`, two IPAM NADs per namespace selected by every
//! workload), at 10,000 resources against the same target.
//!
//! `BENCH_ONLY=linkerd`, `BENCH_ONLY=net-res` or `BENCH_ONLY=skip` runs only that rule set's
//! rows and skips the render and kpt rows, for profiling one of them.
//!
//! Peak RSS is exact: each measurement re-executes this binary, which spawns
//! the one program, waits for it and reports `getrusage(RUSAGE_CHILDREN)`,
//! whose `ru_maxrss` then covers that program alone.

#[path = "../common/mod.rs"]
mod common;
mod generate;
mod kpt;
#[path = "../../tests/common/process.rs"]
mod process;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use common::median;
use generate::{GROUP, Rules, resource_list, write_package};
use linkerd_multus::yaml::{Node, parse_document};
use process::Guard;

/// First argument of the re-executed measuring process.
const MEASURE: &str = "__krm-bench-measure";

/// Target ratio at 10,000 resources.
const TARGET: f64 = 1.2;

/// The annotation NetworkResources records on each workload it changes.
const RECORD: &str = "multus.linkerd.io/network-resources";
/// The annotation the secondary-network rule records on each workload it changes.
const SKIP_RECORD: &str = "multus.linkerd.io/skip-subnets:";

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
    // Not through a Guard, whose first child starts the watchdog inside the timing: this
    // process is itself run by one (`Run::measure`), which ends PROG with its group.
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
        let out = Guard::spawn(
            Command::new(me)
                .arg(MEASURE)
                .arg(self.prog)
                .arg(self.stdin)
                .arg(&self.stdout)
                .arg(&self.stderr)
                .args(&self.args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        )?
        .wait_with_output()?;
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
/// (`bench` for `cargo bench`, `dev` for the smoke runs of scripts/test.sh). The
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
    build
        .args(["build", "--profile", &profile, "--example", "identity"])
        .args([
            "--message-format",
            "json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(&manifest)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let out = Guard::spawn(&mut build)
        .and_then(Guard::wait_with_output)
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
    use Rules::{Linkerd, NetworkResources, SkipSubnets};
    let plan: &[(Rules, usize, usize)] = if quick {
        &[
            (Linkerd, 1_000, 1),
            (NetworkResources, 1_000, 1),
            (SkipSubnets, 1_000, 1),
        ]
    } else {
        &[
            (Linkerd, 1_000, 5),
            (Linkerd, 10_000, 5),
            (Linkerd, 50_000, 3),
            (NetworkResources, 10_000, 5),
            (SkipSubnets, 10_000, 5),
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
        failures += kpt::kpt_render(dir, progs, 10_000, 3)?;
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
    if rules == Rules::SkipSubnets {
        // Every attached workload skips its networks' subnets, and records them.
        let written = out.matches("config.linkerd.io/skip-subnets:").count();
        let recorded = out.matches(SKIP_RECORD).count();
        let attached = out
            .matches("networks: storage, backup@net2, linkerd-cni")
            .count();
        if written != attached || recorded != attached || attached == 0 {
            eprintln!(
                "  FAIL linkerd-multus wrote skip-subnets on {written} and recorded them on {recorded} of {attached} attached workloads"
            );
            return Ok(1);
        }
        eprintln!("  linkerd-multus: skip-subnets on all {attached} attached workloads");
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
