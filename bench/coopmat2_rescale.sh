#!/usr/bin/env bash
# Issue 18: the subgroup-scope coopmat2 prefill (rescale only where a row maximum passed the one in use
# by its slack; weights without a test on tiles every row sees whole) against copies of kernels/ with
# one change each, run through FOUNDRY_KERNEL_DIR with the packed glslc (docs/performance.md, "The
# coopmat2 rescale only where a maximum moved").
#   bash bench/coopmat2_rescale.sh copies   here, after `bash bench/h200.sh prepare coopmat2`: the
#                                           copies into .device/kx
#   bash bench/coopmat2_rescale.sh          on the device: the prefill parity cases with the build's
#                                           kernels (TESTS=0 skips them), then the plan and each copy
#                                           over SHAPES, ROUNDS rounds in alternation;
#                                           TEST_COPIES="NAME..." runs the coopmat2 parity cases
#                                           with those copies' kernels too
# The copies (VARIANTS picks among them; default "slack12 qs"; the ones timed before the vote on 8
# columns was adopted are described in docs/performance.md):
#   slack12  a slack of 12 (weights up to 4096) instead of 8
#   qs       Q multiplied by qk_scale as it is loaded, where no score hook needs the unscaled product
#            (no multiply per score)
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
  kernel_copy "$kx" slack12 'const float CM2_SLACK = 8.0;' 'const float CM2_SLACK = 12.0;'
  # qs: Q multiplied by qk_scale as it is loaded, where no score hook needs the unscaled product.
  qs_from='  coopMatLoad(st.q, kv_tile, CM2_ROW0 * CM_ROW4, CM_ROW4, gl_CooperativeMatrixLayoutRowMajor);'
  qs_to="$qs_from
  if (CM2_Q_SCALED) st.q = st.q * float16_t(pc.qk_scale);"
  qsc_from='struct CmState {'
  qsc_to='const bool CM2_Q_SCALED = !(FA_SCORE_HOOKED || FA_DISTANCE_BIAS_HOOKED);
struct CmState {'
  qst_from='  pos0 += CM2_ROW0;'
  qst_to='  pos0 += CM2_ROW0;
  if (CM2_Q_SCALED) qk_scale = 1.0;'
  qsm_from='  } else {
    s = s * qk_scale;
  }'
  qsm_to='  } else if (!CM2_Q_SCALED) {
    s = s * qk_scale;
  }'
  qs=("$qs_from" "$qs_to" "$qsc_from" "$qsc_to" "$qst_from" "$qst_to" "$qsm_from" "$qsm_to")
  kernel_copy "$kx" qs "${qs[@]}"
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
for v in ${TEST_COPIES:-}; do  # the coopmat2 parity cases with a copy's kernels
  FOUNDRY_GLSLC=$G FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v timeout "${TESTS_LIMIT_S:-150}" .device/bin/foundry_attention_tests \
    --gtest_brief=1 --gtest_filter='*coopmat2*' >"$out/rescale-tests-$v.log" 2>&1 || { echo "FAILED: tests ($v)"; status=1; }
  grep -E "FAILED|Failure|PASSED|SKIPPED" "$out/rescale-tests-$v.log" | sed "s/^/$v: /" | head -20
done
variants="plan:FOUNDRY_GLSLC=\$GLSLC"
for v in ${VARIANTS:-slack12 qs}; do variants+=" $v:FOUNDRY_GLSLC=\$GLSLC,FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$v"; done
TESTS=0 SHAPES="${SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:2048:128 prefill:1:32:8:8192:64}" VARIANTS="$variants" \
  bash bench/coopmat2_scope.sh || status=1
exit $status
