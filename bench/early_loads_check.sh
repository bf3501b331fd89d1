#!/usr/bin/env bash
# On the device: the tensor-core decode's first K/V tiles issued before q is read from memory, as a second
# build (.device/bin/foundry-NAME and foundry_attention_tests-NAME, NAME=$EARLY, `early` unless set) against
# the plan's (.device/bin/foundry).
# The early build's tensor-core parity cases first, then both builds interleaved (bench/interleave.sh, ROUNDS
# rounds, 3 by default), then each build's decode probe on the int8 and f16 shapes.
set -uo pipefail
name=${EARLY:-early}
cd "$(dirname "$0")/.." || exit 2
source bench/on_device.sh
export PATH=$PWD/.device/bin:$PATH
shapes="decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8+pg64 \
decode:8:32:8:16384:128+int8 decode:8:32:8:16384:128"
if [ -z "${SKIP_PARITY:-}" ]; then
  timeout 300 foundry_attention_tests-$name --gtest_filter='*DecodeTensorCores*:*DecodeVariants*_tc*' \
    --gtest_brief=1 2>&1 | tail -8
fi
# shellcheck disable=SC2086
ROUNDS=${ROUNDS:-3} bash bench/interleave.sh $shapes -- plan=.device/bin/foundry $name=.device/bin/foundry-$name
for b in foundry "foundry-$name"; do
  echo "== probe: $b"
  timeout 120 "$b" bench --probe --runs 30 --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 2>&1 |
    grep -Ev "^progress" | tail -30
done
