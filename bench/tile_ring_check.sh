#!/usr/bin/env bash
# On the device: int8 decode's tiles taken one at a time or two (tile pairs) with two or four in flight.
# `bench/h200.sh bench-clock` with the plan against BENCH_VARIANTS (default one tile at a time), ROUNDS rounds
# (2) with f16 in the same processes (PyTorch unless SKIP_TORCH=1); then each of INT8_VARIANTS (NAME:KNOBS,
# knobs f16 cannot take; a kernel copy named NAME under .device/kx through FOUNDRY_KERNEL_DIR) on the int8
# shapes alone, ROUNDS rounds of a process each; then every kernel's registers and local memory from the driver.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source bench/on_device.sh
export PATH=$PWD/.device/bin:$PATH
source bench/variant_helpers.sh
ROUNDS=${ROUNDS:-2} BENCH_VARIANTS="${BENCH_VARIANTS-nopairs:FA_DECODE_TILE_PAIRS=0}" bash bench/h200.sh bench-clock
for round in $(seq "${ROUNDS:-2}"); do
  for v in ${INT8_VARIANTS-u4:FA_DECODE_UNROLL=4 nopu4:FA_DECODE_TILE_PAIRS=0,FA_DECODE_UNROLL=4}; do
    variant_sets "$v"
    variant_kernels "${v%%:*}"
    timeout 100 foundry "${sets[@]}" bench --runs 30 --json "$out/i8-$round-${v%%:*}.json" \
      --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+int8+pg64 2>&1 | grep -E "us$|rror|FAIL" |
      sed "s/^/round $round ${v%%:*}: /"
  done
done
kernel_stats "$out/bc-1-*.json"
kernel_stats "$out/i8-1-*.json"
