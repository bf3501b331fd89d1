#!/usr/bin/env bash
# Issue 18: causal prefill on GL_NV_cooperative_matrix2 matrices at subgroup scope (each subgroup's 16
# rows, flexible dimensions) against GL_NV_cooperative_matrix and the workgroup-scope kernel. On the
# device, after `bash bench/h200.sh prepare coopmat2` (which packs Debian 13's glslc as
# .device/compilers): the prefill variant and LSE cases with that glslc (TESTS=0 skips them; TESTS=all
# runs the whole attention suite with it instead), then each
# variant timed over SHAPES, ROUNDS rounds in alternation. A variant is NAME or NAME:ENV=VALUE,... run
# with those variables; `$GLSLC` in a value is the packed glslc, and a variant without FOUNDRY_GLSLC
# runs with none (so without coopmat2). VARIANTS overrides the list:
#   cm1   the plan without a glslc for coopmat2 (GL_NV_cooperative_matrix)
#   plan  the plan with it (the tuning table's coopmat2 rows)
#   sg    coopmat2 at subgroup scope forced, the tuning table's tiling
#   wg    coopmat2 at workgroup scope forced
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/on_device.sh
GLSLC=$PWD/.device/compilers/bin/glslc
export FOUNDRY_GLSLC=  # none (unset would take a glslc on PATH); variants name the packed one
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
printf '#!/bin/sh\nexec %s -O "$@"\n' "$GLSLC" >/tmp/glslc-O && chmod +x /tmp/glslc-O  # spirv-opt too
if [ "${TESTS:-1}" != 0 ]; then
  filter='*PrefillVariants*:*LseParity*'
  [ "${TESTS:-1}" = all ] && filter='*'
  FOUNDRY_GLSLC=$GLSLC timeout "${TESTS_LIMIT_S:-300}" .device/bin/foundry_attention_tests --gtest_brief=1 \
    --gtest_filter="$filter" >"$out/coopmat2-scope-tests.log" 2>&1 ||
    { echo "FAILED: prefill variant tests"; status=1; }
  grep -E "FAILED|Failure|PASSED|SKIPPED" "$out/coopmat2-scope-tests.log" | head -30
fi
read -r -a shapes <<<"${SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:4096:128 prefill:1:32:8:2048:128 \
  prefill:1:32:8:1024:128 prefill:1:32:8:512:128 prefill:1:32:8:8192:64 prefill:1:32:8:4096:64 prefill:1:32:8:2048:64 \
  prefill:1:32:8:512:64}"
read -r -a variants <<<"${VARIANTS:-cm1 plan:FOUNDRY_GLSLC=\$GLSLC \
  sg:FOUNDRY_GLSLC=\$GLSLC,FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE=subgroup}"
for round in $(seq "${ROUNDS:-2}"); do
  for v in "${variants[@]}"; do
    name=${v%%:*}
    envs=()
    [ "$name" = "$v" ] || IFS=, read -r -a envs <<<"${v#*:}"
    envs=("${envs[@]//\$GLSLC/$GLSLC}")
    env "${envs[@]}" timeout "${RUN_LIMIT_S:-120}" foundry bench --json "$out/scope-$name-$round.json" \
      --shape "${shapes[@]}" 2>&1 | grep -E "us$|rror|FAIL" | grep -v ceilings | sed "s/^/$name (round $round): /" ||
      status=1
  done
done
exit $status
