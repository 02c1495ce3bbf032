#!/usr/bin/env bash
# Rough overhead and log-size figures of the tracer against KDE heaptrack (README "Measured").
#   packages/heaptrack/scripts/measure.sh [pairs]      (after `npx nx build heaptrack`)
# For each configuration: the median wall time of 3 runs of a malloc/free churn loop
# (2,000,000 pairs = 4,000,000 calls), and the log's bytes per recorded call.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rel=$here/build/Release
pairs=${1:-2000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
prog=("$rel/hh_test_workload" churn "$pairs")
calls=$((pairs * 2))

median() { sort -n | sed -n 2p; }
timed() { # prints wall seconds of "$@"
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
run() { # label, then the command
  local label=$1
  shift
  rm -f heaplog.* heaptrack.*
  local t
  t=$(for _ in 1 2 3; do rm -f heaplog.* heaptrack.*; timed "$@"; done | median)
  local bytes=0
  for f in heaplog.* heaptrack.*; do [ -e "$f" ] && bytes=$(stat -c %s "$f"); done
  printf '%-34s %8.2f s  %10d bytes  %6.3f bytes/call\n' "$label" "$t" "$bytes" \
    "$(echo "scale=3; $bytes / $calls" | bc)"
}
echo "churn: $pairs malloc/free pairs ($calls calls)"
run "no tracer" "${prog[@]}"
run "heaphook, HEAPHOOK_STACKS=0" env HEAPHOOK_STACKS=0 LD_PRELOAD="$rel/libheaphook_heaptrack.so" "${prog[@]}"
run "heaphook, stacks (default)" env LD_PRELOAD="$rel/libheaphook_heaptrack.so" "${prog[@]}"
run "heaphook, stacks, HEAPHOOK_UNWIND=libgcc" env HEAPHOOK_UNWIND=libgcc LD_PRELOAD="$rel/libheaphook_heaptrack.so" "${prog[@]}"
if command -v heaptrack >/dev/null; then
  run "KDE heaptrack $(heaptrack --version 2>/dev/null | awk '{print $2}')" heaptrack "${prog[@]}"
else
  echo "KDE heaptrack: skipped (install the Debian package heaptrack)"
fi
