#!/usr/bin/env bash
# The long soak (tests/cluster/soak.rs, whose short form of 75 s runs in the test command):
# two replicas of `linkerd-multus webhook` and of `linkerd-multus controller`, the webhook
# called by a real kube-apiserver for a pod every 200 ms, for SECONDS (default 600), while the
# API server is restarted twice, etcd is compacted and the leader is killed. Built with the
# release profile; prints the figures (pods created, failures and their causes, NAD
# convergence, the resident memory of the replica that ran throughout) and fails if a pod was
# admitted wrongly, the NADs did not converge or the memory grew.
#
#   scripts/soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
case $seconds in
  ''|*[!0-9]*) echo "error: SECONDS must be a whole number of seconds, not '$seconds'" >&2; exit 2 ;;
esac
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  assets=$(./scripts/kube-assets.sh) || exit 1
  eval "$assets"
  export KUBEBUILDER_ASSETS
fi
SOAK_SECONDS=$seconds exec cargo test --locked --release --test suite \
  cluster::soak::soak_admissions_and_nads_hold_through_restarts_compaction_and_a_leader_killed \
  -- --exact --nocapture
