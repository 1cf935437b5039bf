#!/usr/bin/env bash
# Start-up cost of the container image against the plain binary: the median wall time of
# `kpt fn eval --image $IMAGE` (KPT_FN_RUNTIME=podman) and of `kpt fn eval --exec BINARY`
# on the same small package, the binary being the static one the image holds.
#
# Each run works on a fresh copy of the package (kpt writes the result back in place); only
# the kpt call is timed. One untimed warm-up run per mode comes first.
#
# Environment: RUNS (default 10), PKG (default functions/linkerd-multus/examples/kpt), IMAGE
# (default localhost/linkerd-multus:dev), PROFILE (cargo profile of the binary, default dist:
# the shipped settings), CARGO_TARGET_DIR, SKIP_BUILD=1 to use the image and binary as they
# are instead of running scripts/container.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

RUNS=${RUNS:-10}
PKG=${PKG:-functions/linkerd-multus/examples/kpt}
IMAGE=${IMAGE:-localhost/linkerd-multus:dev}
PROFILE=${PROFILE:-dist}
export IMAGE PROFILE
profile_dir=$PROFILE
[ "$PROFILE" = dev ] && profile_dir=debug

die() { echo "error: $*" >&2; exit 1; }
for tool in kpt podman; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (podman: scripts/install-podman.sh)"
done
[ -d "$PKG" ] || die "no package directory $PKG"
case $RUNS in '' | *[!0-9]* | 0) die "RUNS must be a positive integer" ;; esac

if [ "${SKIP_BUILD:-}" != 1 ]; then
  ./scripts/container.sh >/dev/null
fi
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case $target_dir in /*) ;; *) target_dir=$ROOT/$target_dir ;; esac
bin=$target_dir/x86_64-unknown-linux-gnu/$profile_dir/linkerd-multus
[ -x "$bin" ] || die "no static binary at $bin (run scripts/container.sh)"
podman image exists "$IMAGE" || die "no image $IMAGE (run scripts/container.sh)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Prints the wall time in milliseconds of one kpt call on a fresh copy of the package.
one_run() {
  local mode=$1 dir
  dir=$work/pkg-$RANDOM$RANDOM
  cp -r "$PKG" "$dir"
  local start end
  start=$(date +%s%N)
  if [ "$mode" = image ]; then
    KPT_FN_RUNTIME=podman kpt fn eval "$dir" --image "$IMAGE" >"$work/log" 2>&1 \
      || { cat "$work/log" >&2; die "kpt fn eval --image failed"; }
  else
    kpt fn eval "$dir" --exec "$bin" >"$work/log" 2>&1 \
      || { cat "$work/log" >&2; die "kpt fn eval --exec failed"; }
  fi
  end=$(date +%s%N)
  rm -rf "$dir"
  echo $(((end - start) / 1000))
}

# Median of microsecond figures on stdin, printed in ms with one decimal.
median_ms() {
  sort -n | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.1f", m / 1000 }'
}

declare -A median
for mode in exec image; do
  one_run "$mode" >/dev/null # warm-up
  times=()
  for _ in $(seq "$RUNS"); do times+=("$(one_run "$mode")"); done
  median[$mode]=$(printf '%s\n' "${times[@]}" | median_ms)
done

ratio=$(awk -v a="${median[image]}" -v b="${median[exec]}" 'BEGIN { printf "%.1f", a / b }')
extra=$(awk -v a="${median[image]}" -v b="${median[exec]}" 'BEGIN { printf "%.1f", a - b }')
echo "package: $PKG, $RUNS runs each, median wall time of one kpt fn eval"
printf '  %-46s %8s ms\n' "--exec $(basename "$bin")" "${median[exec]}"
printf '  %-46s %8s ms\n' "--image $IMAGE (podman)" "${median[image]}"
echo "  image/exec: ${ratio}x (+${extra} ms per call)"
