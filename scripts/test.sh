#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, golden, bad-input and kpt
# end-to-end tests, the cluster-side tests against a real kube-apiserver
# (KUBEBUILDER_ASSETS), and smoke runs of the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in cargo kpt kubectl podman shellcheck; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: $tool is not installed; the tests run the real $tool (see README.md, Requirements; scripts/install-podman.sh installs podman, apt-get install shellcheck installs shellcheck)" >&2
    exit 1
  fi
done

if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  echo "error: KUBEBUILDER_ASSETS is not set: the cluster-side tests run a real kube-apiserver; eval \"\$(scripts/kube-assets.sh)\" makes the folder from ../shared/kube and Debian's etcd-server (apt-get install etcd-server), or use setup-envtest use 1.32 -p path" >&2
  exit 1
fi

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --no-fail-fast
BENCH_QUICK=1 cargo bench --locked --bench krm
BENCH_QUICK=1 cargo bench --locked --bench webhook
BENCH_QUICK=1 cargo bench --locked --bench admission
