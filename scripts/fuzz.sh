#!/usr/bin/env bash
# Coverage-guided fuzzing of every reader of user input with AFL++ (cargo-afl, see
# fuzz/Cargo.toml): builds fuzz/ with AFL++'s instrumentation, seeds each target's corpus
# from testdata/, runs each target in turn and reports its executions, executions per
# second, crashes and hangs. Targets run side by side, one per core.
#
#   scripts/fuzz.sh                  every target for FUZZ_SECONDS (default 600) seconds
#   scripts/fuzz.sh --smoke          every target for 10 seconds: the run of scripts/test.sh,
#                                    built at opt-level 0 (AFL_OPT_LEVEL; 3 otherwise), which
#                                    builds in a third of the time of opt-level 1 and runs
#                                    the same code (half as many executions a second)
#   scripts/fuzz.sh --build          the instrumented build alone (with --smoke, its build)
#   scripts/fuzz.sh krm networks     only these targets
#
# The targets and their invariants are in fuzz/src/targets.rs: krm, manifests, networks,
# cni-config, ipam, settings, admission, work. Findings stay in target/fuzz/out/TARGET/default/crashes/
# and hangs/. Exits 1 when a target crashed (an invariant broke or the code panicked): copy
# each crash into testdata/fuzz/TARGET/, where tests/fuzz_regressions.rs runs it, and fix the
# code. A hang (an input slower than AFL++'s timeout) is reported, not failed on: on a
# loaded machine a slow run is not a finding. cargo-afl comes from
# scripts/install-test-tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-600}
smoke=false
build_only=false
targets=()
for arg in "$@"; do
  case $arg in
    --smoke) seconds=10; smoke=true; export AFL_OPT_LEVEL="${AFL_OPT_LEVEL:-0}" ;;
    --build) build_only=true ;;
    -*) echo "error: unknown option $arg" >&2; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(krm manifests networks cni-config ipam settings admission work)

cargo afl --version >/dev/null 2>&1 \
  || { echo "error: cargo-afl is not installed: run scripts/install-test-tools.sh" >&2; exit 1; }

(cd fuzz && cargo afl build --release --locked --target-dir ../target/afl) >&2
$build_only && exit 0
bin=$PWD/target/afl/release/linkerd-multus-fuzz
work=$PWD/target/fuzz
rm -rf "$work/seeds"
"$bin" seed . "$work/seeds"

# No UI, no CPU binding (the machine is shared), no core-dump or CPU-governor checks.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1

stat() { awk -F' *: *' -v key="$1" '$1 == key { print $2 }' "$2"; }

# A seed slower than the timeout in afl-fuzz's dry run aborts the whole run. The smoke run
# shares two cores with the benchmarks' smoke runs and a kube-apiserver: a seed of 20 ms has
# taken over 1,000 ms (AFL++'s default) there. So the smoke run allows 10 s a run (a hang is
# still reported, below); the long run keeps AFL++'s calibrated timeout.
timeout=()
$smoke && timeout=(-t 10000)

# One afl-fuzz per target, as many at once as there are cores (each is single-threaded), so a
# smoke run takes the time of one target per core rather than of all in turn.
run() {
  local target=$1 out=$work/out/$1
  rm -rf "$out"
  mkdir -p "$out"
  cargo afl fuzz -V "$seconds" "${timeout[@]}" -i "$work/seeds/$target" -o "$out" -- "$bin" "$target" \
    >"$out/afl.log" 2>&1
}
jobs=$(nproc 2>/dev/null || echo 1)
pids=()
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run "$target" &
  pids+=($!)
done
failed=()
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || failed+=("${targets[$i]}")
done
for target in "${failed[@]}"; do
  echo "error: afl-fuzz failed on $target; its log:" >&2
  tail -n 20 "$work/out/$target/afl.log" >&2
done
[ "${#failed[@]}" = 0 ] || exit 1

crashed=0
printf '%-12s %8s %14s %10s %8s %6s\n' target seconds executions 'execs/s' crashes hangs
for target in "${targets[@]}"; do
  out=$work/out/$target
  stats=$out/default/fuzzer_stats
  crashes=$(stat saved_crashes "$stats")
  printf '%-12s %8s %14s %10s %8s %6s\n' "$target" "$(stat run_time "$stats")" \
    "$(stat execs_done "$stats")" "$(stat execs_per_sec "$stats")" "$crashes" \
    "$(stat saved_hangs "$stats")"
  if [ "$crashes" != 0 ]; then
    crashed=1
    for file in "$out"/default/crashes/id*; do echo "  crash: $file"; done
  fi
done
if [ "$crashed" = 1 ]; then
  echo "error: crashes found: copy each into testdata/fuzz/TARGET/ (tests/fuzz_regressions.rs) and fix the code" >&2
  exit 1
fi
