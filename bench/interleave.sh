#!/usr/bin/env bash
# Times the same shapes with several builds or kernel sources, interleaved, twice (ROUNDS=N: N times),
# on the device:
#   bash bench/interleave.sh SHAPE... -- NAME=BINARY[:KERNEL_DIR] ...
# BINARY is a foundry executable (e.g. .device/bin/foundry); KERNEL_DIR, if given, is passed as
# FOUNDRY_KERNEL_DIR (a copy of kernels/ to compare against the embedded one). Prints
# "rep name shape us check N%-of-C" lines (check: the bench's comparison with the CPU reference; N: the
# share of the ceiling C the bench measured in the same process) and writes
# them to $OUT/interleave.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/on_device.sh
shapes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shapes+=("$1"); shift; done
shift || { echo "usage: bench/interleave.sh SHAPE... -- NAME=BINARY[:KERNEL_DIR] ..." >&2; exit 2; }
for rep in $(seq "${ROUNDS:-2}"); do
  for spec in "$@"; do
    name=${spec%%=*} rest=${spec#*=}
    bin=${rest%%:*} dir=""
    [ "$rest" != "$bin" ] && dir=${rest#*:}
    if [ -n "$dir" ]; then export FOUNDRY_KERNEL_DIR=$dir; else unset FOUNDRY_KERNEL_DIR; fi
    rm -f /tmp/interleave.json
    # A bound per run, so that one stuck run costs minutes, not the call.
    timeout "${RUN_LIMIT_S:-240}" "$bin" bench --shape "${shapes[@]}" --json /tmp/interleave.json >/dev/null 2>&1 || true
    [ -f /tmp/interleave.json ] || { echo "$rep $name: no result" | tee -a "$out/interleave.txt"; continue; }
    python3 bench/sweep_table.py --plain "$rep" "$name" -- /tmp/interleave.json | tee -a "$out/interleave.txt"
  done
done
