#!/usr/bin/env bash
# Makes the folder of binaries the cluster-side tests run (envtest's KUBEBUILDER_ASSETS layout:
# kube-apiserver, etcd, kubectl) and prints the line that exports it:
#
#   eval "$(scripts/kube-assets.sh)"        # then: cargo test
#
# kube-apiserver comes from ../shared/kube/kube-apiserver.xz beside this checkout (or the file
# named by KUBE_APISERVER_XZ), etcd from Debian's etcd-server package, kubectl from PATH. The
# folder defaults to target/kube-assets; give another as the first argument. Idempotent: the
# binary is unpacked again only when its checksum differs.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "error: $*" >&2; exit 1; }

dir=${1:-$PWD/target/kube-assets}
xz_file=${KUBE_APISERVER_XZ:-$PWD/../shared/kube/kube-apiserver.xz}
[ -f "$xz_file" ] || die "no $xz_file: set KUBE_APISERVER_XZ to a kube-apiserver.xz, or KUBEBUILDER_ASSETS to a folder from 'setup-envtest use 1.32 -p path'"
etcd=$(command -v etcd) || die "etcd is not installed: apt-get install etcd-server (scripts/install-test-tools.sh does)"
kubectl=$(command -v kubectl) || die "kubectl is not on PATH"
command -v xz >/dev/null 2>&1 || die "xz is not installed: apt-get install xz-utils"

mkdir -p "$dir"
stamp=$dir/.kube-apiserver.source
want="$(stat -c '%s %Y' "$xz_file") $xz_file"
if [ ! -x "$dir/kube-apiserver" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  xz -dc "$xz_file" > "$dir/kube-apiserver.tmp"
  chmod +x "$dir/kube-apiserver.tmp"
  mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
  echo "$want" > "$stamp"
fi
ln -sfn "$etcd" "$dir/etcd"
ln -sfn "$kubectl" "$dir/kubectl"
"$dir/kube-apiserver" --version >/dev/null || die "$dir/kube-apiserver does not run"
printf 'export KUBEBUILDER_ASSETS=%q\n' "$dir"
