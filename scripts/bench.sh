#!/usr/bin/env bash
# Runs the benchmark (benches/krm.rs): linkerd-multus against an identity
# function at 1,000 / 10,000 / 50,000 resources, then `kpt fn render` with the
# function against `kpt fn render` with cat at 10,000. About 4 minutes.
#   scripts/bench.sh           full run
#   scripts/bench.sh --quick   1,000 resources once (smoke test)
# BENCH_KEEP=1 keeps the generated inputs and outputs in the temp directory.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench krm -- "$@"
