#!/usr/bin/env bash
# The RUSTC_WORKSPACE_WRAPPER of scripts/test.sh: compiles this workspace's crates with
# clippy-driver (rustc with Clippy's lints, what `cargo clippy` runs) and denies warnings.
# Cargo runs it for the workspace's crates only, so one build is both
# `cargo clippy --all-targets -- -D warnings` and the test build: the dependencies are built
# once, not checked for Clippy and then built again for the tests.
#
#   RUSTC_WORKSPACE_WRAPPER=$PWD/scripts/clippy-rustc.sh cargo test --all-targets --no-run
#
# Cargo calls it as `clippy-rustc.sh RUSTC ARGS...`, as it calls any wrapper; clippy-driver
# takes that form too. CLIPPY_DRIVER names the driver (default: the toolchain's, beside
# rustc).
set -euo pipefail
driver=${CLIPPY_DRIVER:-$(dirname "$(rustup which rustc 2>/dev/null || command -v rustc)")/clippy-driver}
exec "$driver" "$@" -D warnings
