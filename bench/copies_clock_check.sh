#!/usr/bin/env bash
# On the device: kernel copies under .device/kx (made here before packing) against the plan, timed as the
# issue's targets are: the tensor-core parity cases on each copy of CHECKED (default: all of COPIES), then
# `bench/h200.sh bench-clock` with the plan and every copy of COPIES, ROUNDS rounds (2), f16 in the same
# processes (PyTorch unless SKIP_TORCH=1), and each kernel's registers and local memory from the driver.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source bench/on_device.sh
export PATH=$PWD/.device/bin:$PATH
source bench/variant_helpers.sh
vars=""
for v in ${COPIES:?name the copies under .device/kx}; do vars="$vars $v:"; done
for v in ${CHECKED-$COPIES}; do
  FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v timeout 120 foundry_attention_tests \
    --gtest_filter='*DecodeTensorCores*:*DecodeVariants*_tc*' --gtest_brief=1 >"$out/parity-$v.log" 2>&1
  echo "$v parity rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$out/parity-$v.log" | head -6 | cut -c1-200
done
ROUNDS=${ROUNDS:-2} BENCH_VARIANTS="$vars" bash bench/h200.sh bench-clock
kernel_stats "$out/bc-1-*.json"
