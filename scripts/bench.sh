#!/usr/bin/env bash
# Runs the benchmark (benches/krm/main.rs): linkerd-multus against an identity
# function at 1,000 / 10,000 / 50,000 resources, then `kpt fn render` with the
# function against `kpt fn render` with cat at 10,000, `linkerd-multus render` on the
# 10,000-resource package against the KRM function on the same resources, and (full
# run only) the container start-up row: `kpt fn eval --image` against `--exec`
# (scripts/bench-container.sh, needs podman); then the webhook load benchmark
# (benches/webhook/): `linkerd-multus webhook` with 10,000 namespaces cached
# against a constant-answer server on the same TLS stack, at fixed rates and at
# saturation. About 9 minutes.
#   scripts/bench.sh           full run
#   scripts/bench.sh --quick   1,000 resources once, a few seconds of webhook load (smoke test)
# BENCH_KEEP=1 keeps the generated inputs and outputs in the temp directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench krm -- "$@"
if [ "${1:-}" != --quick ]; then
  ./scripts/bench-container.sh
fi
cargo bench --bench webhook -- "$@"
