#!/usr/bin/env bash
# Issue 18: the subgroup-scope coopmat2 prefill (rescale only where a row maximum passed the one in use
# by its slack; weights without a test on tiles every row sees whole) against copies of kernels/ with
# one change each, run through FOUNDRY_KERNEL_DIR with the packed glslc (docs/performance.md, "The
# coopmat2 rescale only where a maximum moved").
#   bash bench/coopmat2_rescale.sh copies   here, after `bash bench/h200.sh prepare coopmat2`: the
#                                           copies into .device/kx
#   bash bench/coopmat2_rescale.sh          on the device: the prefill parity cases with the build's
#                                           kernels (TESTS=0 skips them), then the plan and each copy
#                                           over SHAPES, ROUNDS rounds in alternation
# The copies (VARIANTS picks among them; default "vote slack12"):
#   vote     the vote compares each row maximum with the maximum in use plus the slack; the new maxima
#            are formed inside the rescale's branch only
#   slack12  a slack of 12 (weights up to 4096) instead of 8
#   vote12   both
#   pipe     2f8983b's kernels with bench/patches/coopmat2_pipeline.diff: the next tile's S = Q K^T
#            issued before this tile's softmax and P V (K staged two tiles ahead, V one)
#   ftz      2f8983b's kernels with bench/patches/f32_denormals_flushed.diff: the unmasked weights
#            without a test, and f32 denormals flushed (SPIR-V DenormFlushToZero) in both cooperative-
#            matrix prefill kernels and the subgroup decode kernel
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = copies ]; then
  set -e
  kx=.device/kx
  rm -rf "$kx" && mkdir -p "$kx"
  source bench/kernel_copies.sh
  export KERNEL_FILE=flashattention/prefill_coopmat2.glsl
  vote_from='  coopMatPerElementNV(m_new, row_max, cm2_lazy_max, st.m);
  bool moved = false;
  for (int i = 0; i < m_new.length(); ++i) moved = moved || m_new[i] != st.m[i];
  if (subgroupAny(moved)) cm2_rescale_to(st, m_new);'
  vote_to='  bool moved = false;
  for (int i = 0; i < row_max.length(); ++i) moved = moved || row_max[i] > st.m[i] + CM2_SLACK;
  if (subgroupAny(moved)) {
    coopMatPerElementNV(m_new, row_max, cm2_lazy_max, st.m);
    cm2_rescale_to(st, m_new);
  }'
  slack=('const float CM2_SLACK = 8.0;' 'const float CM2_SLACK = 12.0;')
  kernel_copy "$kx" vote "$vote_from" "$vote_to"
  kernel_copy "$kx" slack12 "${slack[@]}"
  kernel_copy "$kx" vote12 "$vote_from" "$vote_to" "${slack[@]}"
  for p in pipe:coopmat2_pipeline ftz:f32_denormals_flushed; do
    mkdir -p "$kx/${p%%:*}"
    git archive 2f8983b kernels | tar -x -C "$kx/${p%%:*}" --strip-components=1
    patch -s -d "$kx/${p%%:*}" -p2 <"bench/patches/${p#*:}.diff"
  done
  ls "$kx"
  exit 0
fi
source bench/on_device.sh
G=$PWD/.device/compilers/bin/glslc
status=0
if [ "${TESTS:-1}" != 0 ]; then
  FOUNDRY_GLSLC=$G timeout "${TESTS_LIMIT_S:-150}" .device/bin/foundry_attention_tests --gtest_brief=1 \
    --gtest_filter='*PrefillVariants*:*LseParity*' >"$out/rescale-tests.log" 2>&1 || { echo "FAILED: tests"; status=1; }
  grep -E "FAILED|Failure|PASSED|SKIPPED" "$out/rescale-tests.log" | head -20
fi
variants="plan:FOUNDRY_GLSLC=\$GLSLC"
for v in ${VARIANTS:-vote slack12}; do variants+=" $v:FOUNDRY_GLSLC=\$GLSLC,FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v"; done
TESTS=0 SHAPES="${SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:2048:128 prefill:1:32:8:8192:64}" VARIANTS="$variants" \
  bash bench/coopmat2_scope.sh || status=1
exit $status
