#!/usr/bin/env bash
# On the device: int8 decode's loads alone (the `stream` copy of bench/decode_part_copies.py) with two tiles
# in flight a subgroup as planned, four (FA_DECODE_UNROLL=4, copy `stream4`), and tiles one at a time
# (FA_DECODE_TILE_PAIRS=0, copy `streamsg`), against the plan; each variant a process of its own, ROUNDS
# rounds (2), with the decode probe (setup, stream, how far apart the splits end, hand-over, merge). The plan
# and `stream` also time f16 in the same process (f16 refuses the others' knobs).
# Before packing: python3 bench/decode_part_copies.py .device/kx stream, then copy .device/kx/stream to
# .device/kx/stream4 and .device/kx/streamsg.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source bench/on_device.sh
export PATH=$PWD/.device/bin:$PATH
source bench/variant_helpers.sh
I8=decode:1:32:8:65536:128+int8
F16=decode:1:32:8:65536:128
for round in $(seq "${ROUNDS:-2}"); do
  for v in plan stream: "stream4:FA_DECODE_UNROLL=4" "streamsg:FA_DECODE_TILE_PAIRS=0"; do
    variant_sets "$v"
    name=${v%%:*}
    variant_kernels "$name"
    shapes=("$I8")
    [ "$name" = plan ] || [ "$name" = stream ] && shapes+=("$F16")
    timeout 120 foundry "${sets[@]}" bench --runs 30 --probe --json "$out/sd-$round-$name.json" --shape "${shapes[@]}" \
      2>&1 | grep -E "us$|probe:|rror" | sed "s/^/round $round $name: /"
  done
done
unset FOUNDRY_KERNEL_DIR
kernel_stats "$out/sd-1-*.json"
