#!/usr/bin/env bash
# Builds what a release ships for this host's architecture, as .github/workflows/release.yml
# does on each of its runners, into OUTDIR (default dist/):
#
#   linkerd-multus-$TAG-$TARGET            the static binary, built by scripts/container.sh
#                                          --binary-only: `cargo auditable build`, so the
#                                          binary carries the list of crates it was built from
#   linkerd-multus-$TAG-$TARGET.cdx.json   its CycloneDX 1.5 SBOM (cargo-cyclonedx): each
#                                          crate with its version, purl, license and checksum
#
# and checks both before anything is published: the binary is static, runs, and its
# embedded list, read back with rust-audit-info, names exactly the crates the SBOM names, at
# the same versions. TAG is $GITHUB_REF_NAME in the workflow, else v<Cargo.toml's version>;
# PROFILE is the cargo profile (default dist, the shipped one; scripts/test.sh's release
# build is reused with PROFILE=release). Needs cargo-auditable, rust-audit-info and
# cargo-cyclonedx on PATH (scripts/install-test-tools.sh --release installs them, pinned) and
# python3. Makes no network call beyond what cargo does, and signs nothing.
#
#   scripts/dist.sh [OUTDIR]
set -euo pipefail
out=${1:-dist}
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "error: $*" >&2; exit 1; }
for tool in rust-audit-info cargo-cyclonedx python3; do
  command -v "$tool" >/dev/null 2>&1 \
    || die "$tool not found: scripts/install-test-tools.sh --release installs the release tools (then put target/cargo-tools/bin on PATH)"
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
tag=${GITHUB_REF_NAME:-v$version}
[ "$tag" = "v$version" ] || die "tag $tag is not Cargo.toml's version v$version"

# 1. The binary.
built=$(PROFILE=${PROFILE:-dist} ./scripts/container.sh --binary-only)
target=$(basename "$(dirname "$(dirname "$built")")")
name=linkerd-multus-$tag-$target
install -m 0755 "$built" "$out/$name"
[ "$("$out/$name" --version)" = "linkerd-multus $version" ] \
  || die "$out/$name --version does not print linkerd-multus $version"

# 2. The SBOM. cargo-cyclonedx writes it beside Cargo.toml, under a name of its own making
# (the binary's name and _bin): it is moved out at once.
sbom=linkerd-multus_bin.cdx.json
trap 'rm -f "$root/$sbom"' EXIT
cargo cyclonedx --format json --spec-version 1.5 --describe binaries --target "$target" \
  --quiet >&2 || die "cargo cyclonedx failed"
mv "$sbom" "$out/$name.cdx.json"

# 3. What the binary says it was built from, against the SBOM.
rust-audit-info "$out/$name" > "$out/$name.audit.json" \
  || die "rust-audit-info found no dependency list in $out/$name (built without cargo auditable?)"
python3 - "$out/$name.audit.json" "$out/$name.cdx.json" "$version" <<'PY' \
  || die "the SBOM and the binary's own dependency list disagree (above)"
import json, sys

audit, sbom, version = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
root = [p for p in audit["packages"] if p.get("root")]
if [(p["name"], p["version"]) for p in root] != [("linkerd-multus", version)]:
    sys.exit(f"the binary's root package is {root}, not linkerd-multus {version}")
embedded = {(p["name"], p["version"]) for p in audit["packages"] if not p.get("root")}
listed = {(c["name"], c["version"]) for c in sbom["components"]}
for what, names in (("only in the binary", embedded - listed), ("only in the SBOM", listed - embedded)):
    for n, v in sorted(names):
        print(f"{what}: {n} {v}", file=sys.stderr)
if embedded != listed:
    sys.exit(1)
print(f"{len(embedded)} crates, the same in the binary and in its SBOM", file=sys.stderr)
PY
rm "$out/$name.audit.json"
echo "$out/$name"
echo "$out/$name.cdx.json"
