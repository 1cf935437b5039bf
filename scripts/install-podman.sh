#!/usr/bin/env bash
# Installs and configures podman so that kpt (KPT_FN_RUNTIME=podman) and `kubectl kustomize
# --enable-alpha-plugins` (through a `docker` shim, see tests/container.rs) can run the
# function's container image. Idempotent: run it as often as you like.
#
# Needs root (apt-get, /etc/containers) on Debian 12 (bookworm) or a derivative. Checked on
# the CI machine kind: root without CAP_SYS_RESOURCE, open-files hard limit 20000, systemd not
# PID 1, cgroup v1 with a cgroup2 mount beside it ("hybrid"), no container registry reachable.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and writes /etc/containers)"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script targets Debian; install podman and runc by hand and copy the settings below"

# --- Packages -------------------------------------------------------------------------------
# podman  : runs and builds the image (`podman build` embeds buildah: the buildah CLI is not
#           needed, checked by building with it uninstalled).
# runc    : the OCI runtime. Named explicitly: podman depends on `crun | runc`, and apt would
#           otherwise pick crun, which fails here (see `runtime` below).
# --no-install-recommends keeps out fuse-overlayfs, slirp4netns, uidmap, buildah: they serve
# rootless podman; as root the kernel's overlayfs and `--network none` need none of them.
PACKAGES=(podman runc)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
else
  echo "podman and runc already installed"
fi
command -v podman >/dev/null 2>&1 || die "podman is still not on PATH after installing it"

# --- containers.conf drop-in ----------------------------------------------------------------
# A drop-in (read after /usr/share/containers/containers.conf and
# /etc/containers/containers.conf) so an admin's own containers.conf is left alone.
CONF_DIR=/etc/containers/containers.conf.d
CONF=$CONF_DIR/50-linkerd-multus.conf

# Podman as root asks runc for nofile=1048576 and nproc=1048576 in every container. Raising
# a hard limit needs CAP_SYS_RESOURCE, which root lacks on this machine kind, so runc fails
#   "error setting rlimits for ready process: error setting rlimit type 7 (then 6):
#    operation not permitted"
# Both must be lowered: with only nofile set, podman still asks nproc=1048576 (podman itself
# runs with nproc 32768 here). 4096 is plenty for a function (a few fds, one process), capped
# by the current hard limits in case a machine has lower ones.
cap() { local want=$1 have=$2; if [ "$have" = unlimited ] || [ "$have" -ge "$want" ]; then echo "$want"; else echo "$have"; fi; }
NOFILE=$(cap 4096 "$(ulimit -Hn)")
NPROC=$(cap 4096 "$(ulimit -Hu)")

mkdir -p "$CONF_DIR"
{
  echo "# Written by scripts/install-podman.sh (linkerd-multus); rewritten on each run."
  echo "[containers]"
  echo "# Root here has no CAP_SYS_RESOURCE: podman's default rlimits (1048576) exceed the hard"
  echo "# limits and runc fails with 'error setting rlimit type 7/6: operation not permitted'."
  echo "default_ulimits = [\"nofile=$NOFILE:$NOFILE\", \"nproc=$NPROC:$NPROC\"]"
  echo
  echo "[engine]"
  echo "# crun 1.8.1 (Debian 12) fails on this cgroup layout: 'cgroups in hybrid mode not"
  echo "# supported, drop all controllers from cgroupv2'. runc works. Pinned so that installing"
  echo "# crun later (podman's preferred runtime) does not break the function runs."
  echo "runtime = \"runc\""
  if [ ! -d /run/systemd/system ]; then
    echo "# systemd is not running: no systemd cgroup manager and no journald. Podman detects"
    echo "# both on its own; pinned so its choice does not depend on that detection."
    echo "cgroup_manager = \"cgroupfs\""
    echo "events_logger = \"file\""
  fi
} > "$CONF.tmp"
if cmp -s "$CONF.tmp" "$CONF" 2>/dev/null; then
  rm -f "$CONF.tmp"
  echo "$CONF up to date"
else
  mv "$CONF.tmp" "$CONF"
  echo "wrote $CONF"
fi

runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}') || die "podman info failed"
[ "$runtime" = runc ] || die "podman uses OCI runtime '$runtime', expected runc (see $CONF)"

# --- Check: build the image and run it the way kpt does -------------------------------------
if [ "${SKIP_IMAGE_CHECK:-}" = 1 ]; then
  echo "SKIP_IMAGE_CHECK=1: not building the image"
  exit 0
fi
IMAGE=${IMAGE:-localhost/linkerd-multus:dev}
export IMAGE
./scripts/container.sh
input='apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: Namespace
  metadata:
    name: demo
'
# The same flags kpt 1.0.0-beta.56 passes (`--pull never`: the image only exists locally).
out=$(printf '%s' "$input" | podman run --rm -i --network none --user nobody \
  --security-opt=no-new-privileges --pull never "$IMAGE") \
  || die "podman run of $IMAGE failed (see the error above)"
printf '%s\n' "$out" | grep -q '^kind: ResourceList' \
  || die "podman run of $IMAGE did not print a ResourceList; got: $out"
echo "ok: podman runs $IMAGE as nobody (runtime $runtime)"
