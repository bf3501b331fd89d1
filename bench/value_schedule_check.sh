#!/usr/bin/env bash
# On the device: int8 decode's loads and V staging moved within its loop, as kernel copies under
# .device/kx (made here, before packing, by `python3 bench/value_schedule_copies.py .device/kx [NAME...]`):
# the tensor-core parity cases on each copy of COPIES, then the plan against each copy, ROUNDS rounds,
# over SHAPES (docs/performance.md, "... its next loads moved within the loop (lost)").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source .device/env.sh
export PATH=$PWD/.device/bin:$PATH
for v in ${COPIES:-vearly vpre}; do
  FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v timeout 90 foundry_attention_tests \
    --gtest_filter='*DecodeTensorCores*:*DecodeVariants*_tc*' --gtest_brief=1 >"/tmp/tc-$v.log" 2>&1
  echo "$v parity rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests from|Failure" "/tmp/tc-$v.log" | head -8 | cut -c1-200
done
vars="plan"
for v in ${COPIES:-vearly vpre}; do vars="$vars $v:"; done
SKIP_TESTS=1 ROUNDS=${ROUNDS:-3} TC_VARIANTS="$vars" SHAPES="${SHAPES:-decode:1:32:8:65536:128+int8 \
  decode:1:32:8:65536:128+int8+pg64 decode:8:32:8:16384:128+int8 decode:32:32:8:4096:128+int8 \
  decode:8:32:8:4096:128+int8 decode:1:32:8:65536:128}" bash bench/h200.sh tensor-decode
