#!/usr/bin/env bash
# On the device: int8 decode with V's fragments built in registers (FOUNDRY_FA_DECODE_VALUE_REGISTERS):
# the device string with the probe's layouts, the tensor-core parity cases on the build and on each copy
# of COPIES (made here by bench/value_register_copies.py), then `bench/h200.sh bench-clock`: the plan
# against V staged in halves and the copies, ROUNDS rounds, with f16 and PyTorch in the same call
# (docs/performance.md, "int8 decode with V's fragments built from its loads").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source .device/env.sh
export PATH=$PWD/.device/bin:$PATH
foundry devices 2>&1 | grep -oE "layout=[^,]*,layout8=[^,]*,layouth=[^,]*"
filter='*DecodeTensorCores*:*DecodeVariants*_tc*'
for v in plan ${COPIES-vfirst}; do
  dir=(); [ "$v" != plan ] && dir=(env FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v)
  "${dir[@]}" timeout 120 foundry_attention_tests --gtest_filter="$filter" --gtest_brief=1 >"/tmp/tc-$v.log" 2>&1
  echo "$v parity rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests from|Failure" "/tmp/tc-$v.log" | head -8 | cut -c1-200
done
vars="halves:FA_DECODE_VALUE_REGISTERS=0"
for v in ${COPIES-vfirst}; do vars="$vars $v:"; done
ROUNDS=${ROUNDS:-2} BENCH_VARIANTS="$vars" bash bench/h200.sh bench-clock
