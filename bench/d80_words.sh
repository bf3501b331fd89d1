#!/usr/bin/env bash
# What D80 decode's tail words cost, on the device: the plan's kernel (tail words: two 8-byte loads
# and one 4-byte word per lane and key) timed from copies of kernels/ (FOUNDRY_KERNEL_DIR) with the
# words' loads or their arithmetic taken out, two rounds in alternation. The outputs of every copy
# but `base` are wrong on purpose (the check reads FAIL); only the times mean anything.
#   bash bench/d80_words.sh [SHAPE...]     (default decode:1:32:8:65536:80)
# Copies:
#   base       kernels/ as they are
#   no-loads   each word taken from the key's first whole load instead of a load of its own (the
#              words' arithmetic kept)
#   no-math    the words loaded, their products dropped (one add per head and word kept)
#   neither    both
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/on_device.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(decode:1:32:8:65536:80)

src=kernels/flashattention/decode_subgroup.glsl
k_load='kt[u][t] = kv_load_k_word(k_row, decode_dim(DECODE_LOADS * DECODE_PAIR + t, lik, HEAD_DIM));'
v_load='vt[u][t] = kv_load_v_word(v_row, decode_dim(DECODE_LOADS_V * DECODE_PAIR + t, lik, VALUE_DIM));'
k_use='acc += dot(DECODE_QK(h, DECODE_LOADS * DECODE_PAIR + t), KV_WORD_UNPACK(kt[u][t]));'
v_use='acc_o[h][DECODE_LOADS_V * DECODE_PAIR + t] += (weight) * KV_WORD_UNPACK(vt[u][t]);'
for s in "$k_load" "$v_load" "$k_use" "$v_use"; do
  grep -qF "$s" $src || { echo "d80_words: $src no longer has: $s" >&2; exit 1; }
done
k_noload='kt[u][t] = kr[u][0].x;'
v_noload='vt[u][t] = vr[u][0].y;'
k_nomath='acc += uintBitsToFloat(kt[u][t] & 0x3f7fffffu);'
v_nomath='acc_o[h][DECODE_LOADS_V * DECODE_PAIR + t].x += uintBitsToFloat(vt[u][t] & 0x3f7fffffu);'

source bench/kernel_copies.sh
copy() { kernel_copy /tmp/d80-words "$@"; }
copy base
copy no-loads "$k_load" "$k_noload" "$v_load" "$v_noload"
copy no-math "$k_use" "$k_nomath" "$v_use" "$v_nomath"
copy neither "$k_load" "$k_noload" "$v_load" "$v_noload" "$k_use" "$k_nomath" "$v_use" "$v_nomath"
for name in no-loads no-math neither; do
  if cmp -s $src /tmp/d80-words/$name/flashattention/decode_subgroup.glsl; then
    echo "d80_words: copy $name is unchanged" >&2
    exit 1
  fi
done

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
for rep in 1 2; do
  for name in base no-loads no-math neither; do
    rm -f /tmp/d80-words.json
    FOUNDRY_KERNEL_DIR=/tmp/d80-words/$name timeout 60 foundry bench --runs 30 --shape "${shapes[@]}" \
      --json /tmp/d80-words.json >/dev/null 2>&1 || true
    [ -f /tmp/d80-words.json ] || { echo "$rep $name: no result"; continue; }
    python3 bench/sweep_table.py /tmp/d80-words.json | tail -n +3 | sed "s/^/$rep $name /" | tee -a "$out/d80-words.txt"
  done
done
