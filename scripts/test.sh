#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need when it is missing
# (scripts/install-test-tools.sh: apt as root, or it says what to run), makes the
# kube-apiserver folder of the cluster-side tests when KUBEBUILDER_ASSETS is unset
# (scripts/kube-assets.sh, from ../shared/kube/kube-apiserver.xz or KUBE_APISERVER_XZ), then
# runs formatting, lints, unit, golden, bad-input, kpt, container and cluster-side tests
# against a real kube-apiserver, the workflow checks, a short run of every fuzz target
# (scripts/fuzz.sh --smoke, about a minute), and smoke runs of the benchmarks.
#
# One test build serves all: the smoke runs use `cargo bench --profile dev`, the test build's
# profile, so the crate is compiled once for the tests (plus once, static and optimised, for
# the container image scripts/container.sh builds, and once instrumented for the fuzzers,
# both while the suite runs), not a third time for the benches.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=$(./scripts/install-test-tools.sh) || exit 1
eval "$tools"

if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  # kube-assets.sh says in one line what to set when it cannot make the folder.
  assets=$(./scripts/kube-assets.sh) || exit 1
  eval "$assets"
  export KUBEBUILDER_ASSETS
fi

# The release profile at opt-level 1 for the release builds of this command (the image the
# container tests run, which README's `cargo install` reuses): much less to compile, and the
# binaries behave the same. What ships is built with the dist profile (Cargo.toml) by
# .github/workflows/release.yml, which runs its own checks on it.
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}"

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --no-run

# The suite's tests mostly wait on API servers, webhooks and timers: while it runs, the builds
# of the later steps (the image's static release binary, which README's `cargo install` reuses,
# and the fuzzers' instrumented build) use the cores it leaves idle, at the lowest CPU
# priority, so its timing-bound tests keep the machine as before. Their own folders under
# target/ and their own cargo locks: nothing waits on the other.
mkdir -p target/logs
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
nice -n 19 ./scripts/container.sh --binary-only >target/logs/static-binary.log 2>&1 &
static_binary=$!
nice -n 19 ./scripts/fuzz.sh --smoke --build >target/logs/fuzz-build.log 2>&1 &
fuzz_build=$!
built() {
  wait "$1" && return
  echo "error: $2 failed; target/logs/$3:" >&2
  cat "target/logs/$3" >&2
  exit 1
}

failed=0
cargo test --locked --no-fail-fast --test suite || failed=1
built "$static_binary" "scripts/container.sh --binary-only" static-binary.log
built "$fuzz_build" "scripts/fuzz.sh --smoke --build" fuzz-build.log
cargo test --locked --no-fail-fast --doc || failed=1
cargo test --locked --no-fail-fast --lib --bins --test container --test readme || failed=1
[ "$failed" = 0 ] || { echo "error: tests failed (above)" >&2; exit 1; }

./scripts/fuzz.sh --smoke
# Every benchmark built in one go (their compiles share the cores), then each smoke run.
cargo bench --locked --profile dev --no-run
for bench in krm webhook hostile admission controller check; do
  BENCH_QUICK=1 cargo bench --locked --profile dev --bench "$bench"
done
