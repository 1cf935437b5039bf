#!/usr/bin/env bash
# Builds the function's container image from a binary built on this host, without pulling
# anything (the `runtime-prebuilt` target of the Dockerfile, FROM scratch):
#
#   1. `cargo auditable build` builds a static binary (glibc, crt-static) for this host's
#      architecture (x86_64- or aarch64-unknown-linux-gnu), with the cargo profile $PROFILE
#      (default release; `dist` is the shipped binary's, with thin LTO), its dependency list
#      inside as in the released binaries (cargo-auditable: scripts/install-test-tools.sh
#      --auditable installs it, pinned);
#   2. podman builds $IMAGE (default localhost/linkerd-multus:dev) from it.
#
# Installs nothing (scripts/install-podman.sh does). Respects CARGO_TARGET_DIR. Idempotent:
# each run rebuilds $IMAGE from the current binary (about a second) and removes the image it
# replaces once nothing else uses it.
#
# Environment: IMAGE (image name), PROFILE (cargo profile), CARGO_TARGET_DIR, CARGO (cargo
# command, default cargo).
#
#   scripts/container.sh --binary-only   step 1 alone, without podman, printing the binary's
#                                        path (scripts/test.sh builds the binary while other
#                                        tests run; scripts/dist.sh builds the released
#                                        binaries with it)
set -euo pipefail
binary_only=false
case "${1:-}" in
  --binary-only) binary_only=true ;;
  "") ;;
  *) echo "error: unknown argument $1 (only --binary-only)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD

IMAGE=${IMAGE:-localhost/linkerd-multus:dev}
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-release}
# cargo's output folder for a profile: dev builds go to debug/, the others to their name.
profile_dir=$PROFILE
[ "$PROFILE" = dev ] && profile_dir=debug
die() { echo "error: $*" >&2; exit 1; }

case $(uname -m) in
  x86_64) TARGET=x86_64-unknown-linux-gnu ;;
  aarch64) TARGET=aarch64-unknown-linux-gnu ;;
  *) die "the binary is built for x86_64 or aarch64 Linux; this host is $(uname -m)" ;;
esac

command -v "$CARGO" >/dev/null 2>&1 || die "$CARGO not found: install Rust (https://rustup.rs)"
"$CARGO" auditable --version >/dev/null 2>&1 \
  || die "cargo-auditable not found: scripts/install-test-tools.sh --auditable installs it (then put target/cargo-tools/bin on PATH), or: cargo install --locked cargo-auditable@0.7.7"
$binary_only || command -v podman >/dev/null 2>&1 \
  || die "podman not found: run scripts/install-podman.sh (as root) or install podman and runc"

# 1. The static binary. `--target` keeps RUSTFLAGS off build scripts and proc macros, which
# cannot be built with crt-static. A glibc static binary is fine here: it does no DNS/NSS.
echo "building the static binary ($TARGET, profile $PROFILE)" >&2
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" \
  "$CARGO" auditable build --profile "$PROFILE" --locked --target "$TARGET" --bin linkerd-multus >&2 \
  || die "cargo auditable build failed"
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case $target_dir in /*) ;; *) target_dir=$ROOT/$target_dir ;; esac
bin=$target_dir/$TARGET/$profile_dir/linkerd-multus
[ -x "$bin" ] || die "cargo did not produce $bin"
if command -v file >/dev/null 2>&1; then
  file -L "$bin" | grep -q 'statically linked\|static-pie linked' \
    || die "$bin is not statically linked: $(file -L "$bin")"
fi

if $binary_only; then
  echo "$bin"
  exit 0
fi

# 2. The image. The build context is a small staging directory (the binary and the
# container/ files), so CARGO_TARGET_DIR may be anywhere and nothing else is sent.
# Two builds of the image at once (scripts/test.sh runs the container and readme tests side by
# side) take turns: each reads the image it replaces, builds, tags, then removes that one.
exec 9>"$target_dir/.container-image.lock"
flock 9
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/container"
cp container/passwd container/group "$stage/container/"
cp "$bin" "$stage/linkerd-multus"

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
# The source label defaults to the project's URL (Dockerfile); a clone's origin overrides it.
source_args=()
if source_url=$(git remote get-url origin 2>/dev/null) && [ -n "$source_url" ]; then
  source_args=(--build-arg SOURCE_URL="$source_url")
fi
old_id=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)

echo "building $IMAGE" >&2
# --pull=never: FROM scratch needs no pull, and the `build` stage (FROM rust) is skipped
# (--skip-unused-stages, podman's default, spelled out here).
# --layers=false: podman 4.3 (buildah 1.28) reuses cached layers when only a --build-arg or
# --label value changed (VERSION=9.9.9 gave an image labelled 0.1.0: ARG values are not in
# the cache key since buildah PR #3609, see buildah issue #5501), so no layer cache. The
# build has no RUN step; without the cache it takes about a second.
podman build --quiet --pull=never --skip-unused-stages=true --layers=false \
  --target runtime-prebuilt \
  --build-arg BINARY=linkerd-multus \
  --build-arg VERSION="$version" \
  "${source_args[@]}" \
  -f "$ROOT/Dockerfile" -t "$IMAGE" "$stage" >/dev/null \
  || die "podman build of $IMAGE failed"

new_id=$(podman image inspect --format '{{.Id}}' "$IMAGE") || die "podman built no $IMAGE"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  # The previous build of $IMAGE, now untagged: drop it unless a tag or container keeps it.
  if [ -z "$(podman image inspect --format '{{join .RepoTags " "}}' "$old_id" 2>/dev/null)" ]; then
    podman rmi "$old_id" >/dev/null 2>&1 || true
  fi
fi
echo "$IMAGE ${new_id:0:12}"
