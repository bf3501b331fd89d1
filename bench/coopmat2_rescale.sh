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
#   fold     on whole tiles without score hooks S stays unscaled: the scale multiplies the vote's
#            8-column row maxima and enters the weights' exponent as an fma (no multiply per score)
#   ones     the sums L as P times a matrix of ones on the tensor cores (8 columns) instead of an add
#            per score
#   foldones both
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
  # fold: on whole tiles without score hooks S stays unscaled; the scale multiplies the 8-column row
  # maxima of the vote and goes into the weights' exponent as an fma.
  f1_from='  } else {
    s = s * qk_scale;
  }'
  f1_to='  }
  const float s_scale = !masked && !(FA_SCORE_HOOKED || FA_DISTANCE_BIAS_HOOKED) ? qk_scale : 1.0;'
  f2_from='moved = moved || row_max8[i] > st.bar[i];'
  f2_to='moved = moved || row_max8[i] * s_scale > st.bar[i];'
  f3_from='    coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
    coopMatPerElementNV(m_new, row_max, cm2_lazy_max, st.m);'
  f3_to='    coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
    row_max = row_max * s_scale;
    row_max8 = row_max8 * s_scale;
    coopMatPerElementNV(m_new, row_max, cm2_lazy_max, st.m);'
  f4_from='  coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
  coopMatPerElementNV(m_new, row_max, cm2_max_of, st.m);'
  f4_to='  coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
  row_max = row_max * s_scale;
  coopMatPerElementNV(m_new, row_max, cm2_max_of, st.m);'
  f5_from='  else coopMatPerElementNV(s, s, cm2_weight_seen, st.m);'
  f5_to='  else coopMatPerElementNV(s, s, cm2_weight_seen, st.m, s_scale);'
  f6_from='float cm2_weight_seen(const in uint r, const in uint c, const in float s, const in float m) { return exp2(s - m); }'
  f6_to='float cm2_weight_seen(const in uint r, const in uint c, const in float s, const in float m, const in float scale) {
  return exp2(fma(s, scale, -m));
}'
  fold=("$f1_from" "$f1_to" "$f2_from" "$f2_to" "$f3_from" "$f3_to" "$f4_from" "$f4_to" "$f5_from" "$f5_to" "$f6_from" "$f6_to")
  # ones: the sums L as P times a PF_BC x 8 matrix of ones, on the tensor cores, in 8 columns
  o1_from='  CM2_S l;
  CM2_ROW8 bar;'
  o1_to='  CM2_ROW8 l;  // every column the row'"'"'s sum
  CM2_ROW8 bar;'
  o2_from='  st.l = st.l * alpha;'
  o2_to='  CM2_ROW8 alpha8;
  coopMatReduceNV(alpha8, alpha, gl_CooperativeMatrixReduceRowNV, cm2_max);
  st.l = st.l * alpha8;'
  o3_from='  st.l = CM2_S(0.0);'
  o3_to='  st.l = CM2_ROW8(0.0);'
  o4_from='  st.l = st.l + s;
'
  o4_to='  CM2_P p = CM2_P(s);
  st.l = coopMatMulAdd(p, coopmat<float16_t, CM2_SCOPE, PF_BC, 8, gl_MatrixUseB>(1.0), st.l);
'
  o5_from='  st.o = coopMatMulAdd(CM2_P(s), v, st.o);'
  o5_to='  st.o = coopMatMulAdd(p, v, st.o);'
  o6_from='    coopMatReduceNV(l, st.l, gl_CooperativeMatrixReduceRowNV, cm2_add);'
  o6_to='    coopMatReduceNV(l, st.l, gl_CooperativeMatrixReduceRowNV, cm2_max);'
  ones=("$o1_from" "$o1_to" "$o2_from" "$o2_to" "$o3_from" "$o3_to" "$o4_from" "$o4_to" "$o5_from" "$o5_to" "$o6_from" "$o6_to")
  kernel_copy "$kx" fold "${fold[@]}"
  kernel_copy "$kx" ones "${ones[@]}"
  kernel_copy "$kx" foldones "${fold[@]}" "${ones[@]}"
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
