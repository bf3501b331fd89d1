#!/usr/bin/env bash
# Where int8 decode's time goes, on the device: the subgroup decode kernel timed with parts of its
# arithmetic taken out, through copies of kernels/ (FOUNDRY_KERNEL_DIR), two rounds in alternation.
# The outputs of every copy but `base` are wrong on purpose (the check reads FAIL); only the times
# and the driver's statistics mean anything.
#   bash bench/int8_probe.sh [SHAPE...]     (default decode:1:32:8:65536:128+int8)
# Copies:
#   base       kernels/ as they are
#   v-raw      V's codes used as their raw bits (the unpacking gone; the four heads' FMAs kept)
#   k-raw      the same for K's codes in the scores
#   kv-raw     both
#   v-one      V's products for one head and one float per word (the FMAs of the others gone)
#   k-one      the scores from the raw words alone (no q, no products)
#   mem        both of the last two: the loads, the softmax and the merges are what is left
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/on_device.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(decode:1:32:8:65536:128+int8)

src=kernels/flashattention/decode_subgroup.glsl
raw='uintBitsToFloat(KV_CODE_WORD(%s[u][j], c) & 0x3f7fffffu)'
# The two statements the copies rewrite (checked to be present, so a changed kernel fails loudly).
v_use='acc_o[h][j * DECODE_PAIR + c] += ps * KV_CODES(vr[u][j], c);'
k_use='part += dot(DECODE_QK(h, j * DECODE_PAIR + c), KV_CODES(kr[u][j], c));'
for s in "$v_use" "$k_use"; do
  grep -qF "$s" $src || { echo "int8_probe: $src no longer has: $s" >&2; exit 1; }
done
v_raw="acc_o[h][j * DECODE_PAIR + c] += ps * $(printf "$raw" vr);"
k_raw="part += dot(DECODE_QK(h, j * DECODE_PAIR + c), vec4($(printf "$raw" kr)));"
v_one="if (h == 0u) acc_o[0][j * DECODE_PAIR + c].x += ps * $(printf "$raw" vr);"
k_one="part += $(printf "$raw" kr);"

source bench/kernel_copies.sh
copy() { kernel_copy /tmp/int8-probe "$@"; }
copy base
copy v-raw "$v_use" "$v_raw"
copy k-raw "$k_use" "$k_raw"
copy kv-raw "$v_use" "$v_raw" "$k_use" "$k_raw"
copy v-one "$v_use" "$v_one"
copy k-one "$k_use" "$k_one"
copy mem "$v_use" "$v_one" "$k_use" "$k_one"

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
for rep in 1 2; do
  for name in base v-raw k-raw kv-raw v-one k-one mem; do
    rm -f /tmp/int8-probe.json
    FOUNDRY_KERNEL_DIR=/tmp/int8-probe/$name foundry bench --runs 30 --shape "${shapes[@]}" \
      --json /tmp/int8-probe.json >/dev/null 2>&1 || true
    [ -f /tmp/int8-probe.json ] || { echo "$rep $name: no result"; continue; }
    python3 bench/sweep_table.py /tmp/int8-probe.json | tail -n +3 | sed "s/^/$rep $name /" | tee -a "$out/int8-probe.txt"
  done
done
