#!/usr/bin/env bash
# The kpt packages a release attaches, with the image pinned by digest as well as tag:
# deploy/ (the webhook), deploy-nad-controller/, deploy-network-resources/ and deploy-restarts/, copied into
# OUTDIR/linkerd-multus-$TAG-packages.tar.gz, where each line that runs the project's image
# (`image: ghcr.io/linkerd-multus/linkerd-multus:v0.1.0` for 0.1.0: the setter `image`'s
# line) names IMAGE_REF instead, `REPOSITORY:TAG@sha256:DIGEST`: the kubelet pulls by the
# digest, the tag stays for people. The tarball is reproducible (sorted, owner 0, mtime
# $SOURCE_DATE_EPOCH or the last commit's). .github/workflows/release.yml runs it with the
# digest it pushed; tests/release.rs with a made-up one, comparing every file with the
# repository's.
#
#   scripts/release-manifests.sh IMAGE_REF [OUTDIR]
set -euo pipefail
die() { echo "error: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: scripts/release-manifests.sh REPOSITORY:TAG@sha256:DIGEST [OUTDIR]"
ref=$1
out=${2:-dist}
root=$(cd "$(dirname "$0")/.." && pwd)
published=ghcr.io/linkerd-multus/linkerd-multus

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
tag=v$version
[[ $ref =~ ^([a-z0-9./_:-]+):([A-Za-z0-9_.-]+)@sha256:[0-9a-f]{64}$ ]] \
  || die "$ref is not REPOSITORY:TAG@sha256:<64 hex digits>"
[ "${BASH_REMATCH[2]}" = "$tag" ] || die "$ref is tagged ${BASH_REMATCH[2]}, not this version's $tag"

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
name=linkerd-multus-$tag-packages
mkdir "$stage/$name"
for package in deploy deploy-nad-controller deploy-network-resources deploy-restarts; do
  cp -R "$root/$package" "$stage/$name/$package"
done

# Each line that runs the published image, whatever follows it (the setter's comment).
pinned=0
while IFS= read -r -d '' file; do
  count=$(grep -cE "^[[:space:]]*(- )?image: $published:$tag( |\$)" "$file" || true)
  [ "$count" -gt 0 ] || continue
  sed -E -i "s|^([[:space:]]*(- )?image: )$published:$tag( \|\$)|\1$ref\3|" "$file"
  pinned=$((pinned + count))
done < <(find "$stage/$name" -name '*.yaml' -print0)
[ "$pinned" -gt 0 ] || die "no image: line of $published:$tag found in the packages"
# Nothing left that would pull by tag alone.
if left=$(grep -rnE "image: $published(:[^@ ]*)?( |\$)" "$stage/$name" --include='*.yaml'); then
  die "left unpinned: $left"
fi

epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$stage" -cf - "$name" | gzip -n > "$out/$name.tar.gz"
echo "pinned $pinned image line(s) to $ref" >&2
echo "$out/$name.tar.gz"
