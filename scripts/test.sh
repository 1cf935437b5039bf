#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need when it is missing
# (scripts/install-test-tools.sh: apt as root, or it says what to run), makes the
# kube-apiserver folder of the cluster-side tests when KUBEBUILDER_ASSETS is unset
# (scripts/kube-assets.sh, from ../shared/kube/kube-apiserver.xz or KUBE_APISERVER_XZ), then
# runs formatting, lints, unit, golden, bad-input, kpt, container and cluster-side tests
# against a real kube-apiserver, the workflow checks, a short run of every fuzz target
# (scripts/fuzz.sh --smoke), and smoke runs of the benchmarks.
#
# On 2 cores the work is mostly compiling and the suite's API servers, so each step starts as
# soon as what it needs is there, and what no test waits on runs beside the tests at the
# lowest CPU priority, on the cores they leave idle:
#
#   1. the installs (apt, PyPI, the kube-apiserver folder) beside the first build, which needs
#      none of them; from the start too, at the lowest priority, cargo-auditable and the
#      image's static release binary built with it (which README's `cargo install` reuses),
#      and beside it the other release tools (cargo-deny, rust-audit-info, cargo-cyclonedx: a
#      minute of compiling each, which only the last step needs, each by a cargo of its own),
#      cargo-afl and the fuzzers' build;
#   2. one build for Clippy and the tests: scripts/clippy-rustc.sh compiles the workspace's
#      crates with Clippy's lints, so the dependencies are built once (not checked for Clippy,
#      then built again), with line tables only (CARGO_PROFILE_DEV_DEBUG); the benchmarks are
#      built with it and their smoke runs reuse it;
#   3. the `suite` binary, while what started in 1 finishes beside it;
#   4. the unit, doc, `container`, `release` and `readme` tests, with the fuzzers' and the
#      benchmarks' smoke runs beside them;
#   5. scripts/survivors.sh: a process the tests started that still runs, or a file left in
#      their temporary folder, fails the run with its name.
#
# Each step's start is logged with the seconds since the start; the logs of what runs beside
# are in target/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() { echo "== $* ($((SECONDS - started)) s)" >&2; }
mkdir -p target/logs
# The temporary folder of the suite and the benchmarks (TMPDIR), which step 5 checks is left
# empty: on tmpfs where there is one, as the API servers' folders are without it
# (tests/common/kube_apiserver.rs), and open to all as /tmp is (the kubelet of the tests runs
# pods as their own users). The tests that run podman keep the machine's: podman keeps state
# there on some machines.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=$PWD/target
scratch=$(mktemp -d "$shm/linkerd-multus-tests.XXXXXX")
chmod 1777 "$scratch"
# kubectl's and kpt's discovery cache, a folder per API server they reach, for the children
# whose kubeconfig common::process::Guard does not see (it puts the cache beside a kubeconfig
# given as a flag or a variable of the command, tests/common/process.rs; not one a script
# finds or the command inherits): here rather than in ~/.kube/cache, which the tests' API
# servers would fill, and removed at the end.
export KUBECACHEDIR=$PWD/target/kube-cache
rm -rf "$KUBECACHEDIR"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch" "$KUBECACHEDIR"' EXIT
# Waits for background job $1; on failure prints its log, target/logs/$3, and stops.
joined() {
  wait "$1" && return
  echo "error: $2 failed; target/logs/$3:" >&2
  cat "target/logs/$3" >&2
  exit 1
}

# --- 1. the installs ------------------------------------------------------------------------
# What a user must install as root is said at once, before anything is built.
./scripts/install-test-tools.sh --check
(
  ./scripts/install-test-tools.sh --no-afl
  if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
    # kube-assets.sh says in one line what to set when it cannot make the folder.
    ./scripts/kube-assets.sh
  fi
) >target/logs/tools.env 2>target/logs/tools.log &
tools=$!

# The release profile at opt-level 0 for the release build of this command (the image the
# container tests run, which README's `cargo install` reuses): it builds in less than half
# the time of opt-level 1, and the binary behaves the same. What ships is built with the dist
# profile (Cargo.toml) by .github/workflows/release.yml, which runs its own checks on it.
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-0}"
# The tests' build with line tables only for this workspace's crates (the dependencies have no
# debug info: Cargo.toml): a third less to compile and link, and a panic's backtrace still
# names the file and line.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
# Every cargo command of this script, and those the tests run (README's `cargo run` and
# `cargo install`), builds the workspace's crates through Clippy: the same wrapper for all, or
# cargo would build them again.
export RUSTC_WORKSPACE_WRAPPER=$PWD/scripts/clippy-rustc.sh
CLIPPY_DRIVER=$(dirname "$(rustup which rustc 2>/dev/null || command -v rustc)")/clippy-driver
export CLIPPY_DRIVER
[ -x "$CLIPPY_DRIVER" ] || { echo "error: no $CLIPPY_DRIVER: rustup component add clippy" >&2; exit 1; }

# What no test waits on until the suite has run starts now, at the lowest CPU priority, so it
# takes the cores the build leaves idle (its serial stretches: one large crate compiling, a
# test binary linking) and then those the suite's waiting tests leave: the image's static
# release binary (which README's `cargo install` reuses) with cargo-auditable first, and
# beside it the other release tools; cargo-afl and the fuzzers' build. Their own folders under
# target/ and their own cargo locks: nothing waits on the other. Measured from a bare machine
# of this kind, the tools built one after the other, each with its own LTO, kept the last
# step waiting for three minutes after the suite. The release tools are built at opt-level 0
# (above) and without their link-time optimisation (cargo-deny's is fat, with one codegen
# unit), as what runs them here is a test: those settings are theirs alone, or the container
# tests' scripts/container.sh, with the release profile as it is, would build the static
# binary again.
tools() {
  CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    nice -n 19 ./scripts/install-test-tools.sh "$@"
}
(
  tools --auditable >/dev/null
  PATH=$PWD/target/cargo-tools/bin:$PATH nice -n 19 ./scripts/container.sh --binary-only &
  binary=$!
  tools --release
  wait "$binary"
) >target/logs/release-tools.env 2>target/logs/static-binary.log &
static_binary=$!
# Its own workspace (fuzz/): the wrapper above is for this one's crates.
(
  unset RUSTC_WORKSPACE_WRAPPER
  nice -n 19 ./scripts/install-test-tools.sh --afl
  nice -n 19 ./scripts/fuzz.sh --smoke --build
) >target/logs/fuzz-build.log 2>&1 &
fuzz_build=$!

# --- 2. one build for Clippy and the tests --------------------------------------------------
step "rustfmt"
cargo fmt --all -- --check
step "the build, with Clippy's lints (cargo clippy --all-targets -- -D warnings)"
cargo test --locked --all-targets --no-run

step "waiting for the installs"
joined "$tools" "scripts/install-test-tools.sh --no-afl, scripts/kube-assets.sh" tools.log
# shellcheck source=/dev/null # export lines the installs printed (PATH, KUBEBUILDER_ASSETS)
. target/logs/tools.env

# --- 3. the suite ----------------------------------------------------------------------------
failed=0
step "the suite"
# Three tests at a time, not libtest's one a core: most of the suite's tests wait (on a
# controller's passes and leases, a kubelet's probes, an API server starting), so on 2 cores
# three at a time leave fewer idle: 663 s where two took 887 s, on a machine busier then.
TMPDIR=$scratch cargo test --locked --no-fail-fast --test suite -- --test-threads=3 2>&1 |
  tee target/logs/suite.log || failed=1
step "waiting for the release binary, the release tools and the fuzzers' build"
joined "$static_binary" "scripts/container.sh --binary-only or scripts/install-test-tools.sh --release" static-binary.log
joined "$fuzz_build" "cargo-afl's install or scripts/fuzz.sh --smoke --build" fuzz-build.log
# shellcheck source=/dev/null # the binary's path, then the PATH line of target/cargo-tools
. <(grep '^export ' target/logs/release-tools.env)

# --- 4. the other tests, and beside them the fuzzers' and the benchmarks' smoke runs ----------
# The benchmarks' smoke runs judge no timing, only what they count (the NAD controller's
# writes): they run beside these tests, from the build above (--all-targets). The fuzzers run
# at the lowest priority.
(unset RUSTC_WORKSPACE_WRAPPER; nice -n 19 ./scripts/fuzz.sh --smoke) >target/logs/fuzz.log 2>&1 &
fuzz=$!
TMPDIR=$scratch BENCH_QUICK=1 cargo test --locked --bench '*' >target/logs/bench.log 2>&1 &
bench=$!
step "the doc tests"
cargo test --locked --no-fail-fast --doc 2>&1 | tee target/logs/doc.log || failed=1
# The readme tests (a minute and more, mostly waiting on the commands the docs show) run
# beside the others; scripts/container.sh, which both run, builds one image at a time.
step "the unit, container and release tests, and beside them the readme tests"
cargo test --locked --no-fail-fast --test readme >target/logs/readme.log 2>&1 &
readme=$!
cargo test --locked --no-fail-fast --lib --bins --test container --test release 2>&1 |
  tee target/logs/tests.log || failed=1
wait "$readme" || failed=1
cat target/logs/readme.log
step "waiting for the fuzzers' and the benchmarks' smoke runs"
joined "$fuzz" "scripts/fuzz.sh --smoke" fuzz.log
joined "$bench" "the benchmarks' smoke runs (BENCH_QUICK=1 cargo test --bench '*')" bench.log
cat target/logs/fuzz.log target/logs/bench.log

# --- 5. what the tests left ------------------------------------------------------------------
step "what the tests left running or in their temporary folder (scripts/survivors.sh)"
./scripts/survivors.sh --since $$ "$scratch" || failed=1
if [ "$failed" != 0 ]; then
  # What each failed test said, last, where a reader of the log's tail sees it.
  grep -h -A8 'panicked at' target/logs/{suite,doc,tests,readme}.log |
    cut -c1-400 | head -n 120 >&2 || true
  echo "error: tests failed (above)" >&2
  exit 1
fi
step "done"
