#!/usr/bin/env bash
# Writes testdata/upgrade/: the layout of an earlier release, whose NAD controller and its
# restarts ran inside the webhook (`webhook --manage-nads`) with their rights bound to the
# webhook's ServiceAccount, for tests/upgrade.rs to upgrade from, with no network and no Git
# history at test time:
#
#   install.yaml   what that release's `linkerd multus install --ignore-cluster --manage-nads
#                  --restart-stale-workloads` printed, its generated certificates taken out
#                  (the Secret's data and the caBundle read CERTIFICATES-OF-THE-TEST: the test
#                  puts in its own, made as install makes them, so no key is kept here)
#   chart/         that release's Helm chart, as it was (but its README)
#
# It builds that commit's binary from `git archive` into this checkout's target/ (the
# dependencies are this checkout's, already built) and runs it.
#
#   scripts/upgrade-fixtures.sh [COMMIT]     # default e9e0ab5, the last of that layout
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:-e9e0ab5}
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git archive "$commit" | tar -x -C "$work"
(cd "$work" && cargo build --locked --quiet --bin linkerd-multus \
  --target-dir "$root/target/upgrade-fixtures")
old="$root/target/upgrade-fixtures/debug/linkerd-multus"

out=testdata/upgrade
rm -rf "$out/chart"
mkdir -p "$out"
{
  echo "# linkerd multus install --ignore-cluster --manage-nads --restart-stale-workloads, as the"
  echo "# release of commit $commit printed it (scripts/upgrade-fixtures.sh), its certificates"
  echo "# taken out: tests/upgrade.rs puts in its own."
  "$old" install --ignore-cluster --manage-nads --restart-stale-workloads 2>/dev/null \
    | sed -E -e 's/^(  (ca\.crt|tls\.crt|tls\.key): ).*/\1CERTIFICATES-OF-THE-TEST/' \
        -e 's/^( +caBundle: ).*/\1CERTIFICATES-OF-THE-TEST/'
} > "$out/install.yaml"
cp -r "$work/charts/linkerd-multus" "$out/chart"
# Its README is that release's, whose links and snippets are not this checkout's.
rm "$out/chart/README.md"
printf '%s\n' "$commit" > "$out/COMMIT"
echo "wrote $out/install.yaml and $out/chart from $commit"
