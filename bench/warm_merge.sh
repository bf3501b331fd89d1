#!/usr/bin/env bash
# The fused Split-K decode's merge, with its code run by every workgroup (EXP_WARM_MERGE: the workgroups
# that do not merge fold their own partials through the same code and store nothing), and with the
# partials' fence before the arrival taken out (EXP_NO_FENCE; a timing probe only): whether the merge's
# 2.1 us is its loads or its instructions, fetched cold after the stream has pushed them out of L2.
# The two settings exist only with bench/patches/decode_warm_merge.diff applied before the build is packed:
#   git apply bench/patches/decode_warm_merge.diff && cmake --build --preset release &&
#   ../shared/device/pack.sh build/release/apps/foundry/foundry; then, on the device:
#   bash bench/warm_merge.sh        (SHAPES, ROUNDS: as bench/interleave.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/on_device.sh
for v in warm:EXP_WARM_MERGE nofence:EXP_NO_FENCE; do
  printf '#!/bin/sh\n%s=1 exec "%s/.device/bin/foundry" "$@"\n' "${v#*:}" "$PWD" >".device/bin/foundry-${v%%:*}"
  chmod +x ".device/bin/foundry-${v%%:*}"
done
read -r -a shapes <<<"${SHAPES:-decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 decode:1:32:8:8192:128 decode:8:32:8:16384:128+int8}"
ROUNDS=${ROUNDS:-2} bash bench/interleave.sh "${shapes[@]}" -- plan=.device/bin/foundry warm=.device/bin/foundry-warm \
  nofence=.device/bin/foundry-nofence || true
for name in plan warm; do
  bin=.device/bin/foundry; [ $name = warm ] && bin=.device/bin/foundry-warm
  timeout 150 "$bin" bench --probe --runs 30 --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 2>&1 |
    grep -E "us$|probe:|rror" | sed "s/^/$name: /" | tee -a "$out/probe.txt" || true
done
