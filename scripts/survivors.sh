#!/usr/bin/env bash
# What scripts/test.sh runs after the tests: fails, naming them, when processes of this
# checkout outlived the tests, or when the tests left files in their temporary folder.
#
#   scripts/survivors.sh [--since PID] [--grace SECONDS] [TMPDIR]
#
# A survivor is a process whose executable is under this checkout's target/ (the binary, the
# test and bench binaries, the kube-apiserver of target/kube-assets), or the kube-apiserver or
# etcd of KUBEBUILDER_ASSETS running in this checkout, as the tests' do (not a system etcd, nor
# another checkout's). Never counted: this script's ancestors, and with --since, processes
# started before PID (test.sh gives its own, so a webhook a developer runs beside is not
# counted). A test binary's watchdog ends what the binary kept to its end just after it exits
# (tests/common/process.rs): survivors get --grace seconds (30) to go.
#
# TMPDIR is the folder the tests ran with as theirs: what is left in it is named, then the
# folder is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  echo "usage: scripts/survivors.sh [--since PID] [--grace SECONDS] [TMPDIR]" >&2
  exit 2
}

# The start of process $1 in clock ticks since boot: /proc/PID/stat's 22nd field, the 20th
# after the command name (which may hold spaces) and its closing parenthesis.
started() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r -a fields <<<"${stat##*) }"
  echo "${fields[19]}"
}

since=0 grace=30 scratch=''
while [ $# -gt 0 ]; do
  case $1 in
    --since)
      [ $# -ge 2 ] || usage
      since=$(started "$2") || { echo "error: no process $2" >&2; exit 2; }
      shift 2 ;;
    --grace)
      [ $# -ge 2 ] || usage
      [[ $2 =~ ^[0-9]+$ ]] || usage
      grace=$2
      shift 2 ;;
    -*) usage ;;
    *)
      [ -z "$scratch" ] || usage
      scratch=$1
      shift ;;
  esac
done

# The test servers' executables, resolved: etcd is a link to the system's.
assets=${KUBEBUILDER_ASSETS:-$root/target/kube-assets}
servers=" "
for name in kube-apiserver etcd; do
  if [ -e "$assets/$name" ]; then
    servers+="$(readlink -f "$assets/$name") "
  fi
done

# This script's ancestors (whatever runs it: test.sh, or a test binary).
ancestors=" "
pid=$$
while [ "${pid:-0}" -gt 1 ]; do
  ancestors+="$pid "
  pid=$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || pid=0
done

# Each survivor as `PID COMMAND LINE`.
survivors() {
  local dir exe pid cwd start cmdline
  # find fails on the processes that end while it reads /proc.
  { find /proc -mindepth 2 -maxdepth 2 -name exe -printf '%h %l\n' 2>/dev/null || true; } |
    while read -r dir exe; do
      pid=${dir#/proc/}
      [[ $pid =~ ^[0-9]+$ ]] || continue
      case $ancestors in *" $pid "*) continue ;; esac
      exe=${exe% (deleted)}
      case $exe in
        "$root"/target/*) ;;
        *)
          case $servers in *" $exe "*) ;; *) continue ;; esac
          cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
          [ "$cwd" = "$root" ] || continue ;;
      esac
      start=$(started "$pid") || continue
      [ "$start" -ge "$since" ] || continue
      cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
      printf '%s %s\n' "$pid" "${cmdline% }"
    done
}

indent() {
  local line
  while IFS= read -r line; do printf '  %s\n' "$line"; done
}

# What is left in the tests' temporary folder.
left() {
  if [ -n "$scratch" ] && [ -d "$scratch" ]; then
    find "$scratch" -mindepth 1 -maxdepth 1 | sort
  fi
}

found='' remains='' deadline=$((SECONDS + grace))
while found=$(survivors) && remains=$(left); do
  if [ -z "$found$remains" ] || [ "$SECONDS" -ge "$deadline" ]; then
    break
  fi
  sleep 0.2
done

status=0
if [ -n "$found" ]; then
  echo "error: processes the tests started are still running (PID, command line):" >&2
  indent <<<"$found" >&2
  status=1
fi
if [ -n "$remains" ]; then
  echo "error: the tests left these in their temporary folder (now removed):" >&2
  indent <<<"$remains" >&2
  status=1
fi
if [ -n "$scratch" ]; then
  rm -rf -- "$scratch"
fi
exit "$status"
