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
# the container image scripts/container.sh builds), not a third time for the benches.
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

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --no-fail-fast
./scripts/fuzz.sh --smoke
# Every benchmark built in one go (their compiles share the cores), then each smoke run.
cargo bench --locked --profile dev --no-run
for bench in krm webhook hostile admission controller check; do
  BENCH_QUICK=1 cargo bench --locked --profile dev --bench "$bench"
done
