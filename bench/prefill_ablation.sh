#!/usr/bin/env bash
# shellcheck disable=SC2016  # the edits are perl expressions: their $1 and $2 are perl's
# Where the cooperative-matrix prefill spends its time: the default kernel against copies of
# kernels/ with one part changed, interleaved, twice. The ablations' outputs are wrong (only their
# time counts; the bench reports their check as failed); the candidates' are right. Run on the device
# after `bash bench/h200.sh prepare`:
#   run carry=[".device"] command="bash bench/prefill_ablation.sh [SHAPE...]"
# Edits (on kernels/flashattention/prefill_coopmat.glsl):
#   v_colmajor  ablation: V fragments loaded column-major (no transpose on the load)
#   k_rowmajor  ablation: K^T fragments loaded row-major (a transpose on the load)
#   v_once      ablation: every V fragment load reads the same fragment (the loads fold away)
#   k_once      ablation: every K^T fragment load reads the same fragment
#   no_exp      ablation: p = s - m instead of exp2(s - m)
#   k_ahead     candidate: a slice's eight K^T fragments loaded before its first product
#   k_chains2, k_chains4  candidate: a slice's Q K^T products in that many independent chains (dim dd
#               in chain dd % N), added at the end: with one 16-key slice per tile (D256, D192) the
#               products otherwise form one chain of head_dim / 16 dependent MMAs
#   k_two       k_chains2 (the name of 2026-11-23's runs, whose copy spelled the two chains out)
#   q_scaled    candidate: Q scaled by qk_scale as it is staged, so plain scores need no multiply
#   neg_inf     candidate: masked scores as -inf, so p = exp2(s - m) needs no test
#   n_inner     candidate: a tile's 16-key accumulators built together, head_dim slices outermost
#   less_math   candidate: q_scaled and neg_inf together
#   q_global    candidate: no Q fragments held in registers; each product loads its Q fragment from
#               the q buffer (rows past the end of the call are read too: shapes whose S is a
#               multiple of the query tile only)
#   lazy        candidate: O and the sums rescaled only when some row's maximum grows by more than 8
#               (a factor of 256, in the log2 domain) past the one in use; p may reach 256 meanwhile
#   lazy0       candidate: the same with no slack (rescaled whenever any row's maximum grows)
#   lazy_less   candidate: lazy and less_math together
# EDITS="name ..." picks edits (default: the seven ablations and candidates of 2026-11-23).
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(prefill:1:32:8:8192:128 prefill:1:32:8:8192:64)
file=flashattention/prefill_coopmat.glsl
# edit NAME EXPR|FILE:EXPR ...: a copy of kernels/ with each EXPR applied to its FILE (under kernels/;
# prefill_coopmat.glsl where none is named); every one must change its file.
edit() {
  local name=$1 dir=/tmp/ablate-$1 spec f
  rm -rf "$dir" && cp -r kernels "$dir"
  shift
  for spec in "$@"; do
    [[ $spec == flashattention/*:* ]] || spec="$file:$spec"
    f=${spec%%:*}
    perl -0pi -e "${spec#*:}" "$dir/$f"
    cmp -s "kernels/$f" "$dir/$f" && { echo "edit $name changed nothing in $f" >&2; exit 2; }
  done
  echo "$dir"
}
vload='coopMatLoadNV\(vb, kv_tile, PF_STAGES \* CM_TILE4 \+ stage'
kload='coopMatLoadNV\(kb, kv_tile, stage \* CM_TILE4'
mk_v_colmajor() { edit v_colmajor "s/(${vload}[^;]*CM_ROW4, )false\)/\${1}true)/g"; }
mk_k_rowmajor() { edit k_rowmajor "s/(${kload}[^;]*CM_ROW4, )true\)/\${1}false)/g"; }
mk_v_once() { edit v_once "s/${vload}[^;]*;/coopMatLoadNV(vb, kv_tile, PF_STAGES * CM_TILE4 + stage * CM_TILE4, CM_ROW4, false);/g"; }
mk_k_once() { edit k_once "s/${kload}[^;]*;/coopMatLoadNV(kb, kv_tile, stage * CM_TILE4, CM_ROW4, true);/g"; }
mk_no_exp() { edit no_exp 's/exp2\(s\[n\]\[e\] - st\.m\[CM_SLOT_OF\[e\]\]\)/(s[n][e] - st.m[CM_SLOT_OF[e]])/'; }
body='F32MAT cm_scores\(in F16MAT q\[CM_D\], uint stage, uint n\) \{.*?return s;\n\}'
at='stage * CM_TILE4 + n * 16u * CM_ROW4'
mk_k_ahead() { edit k_ahead "s/$body/F32MAT cm_scores(in F16MAT q[CM_D], uint stage, uint n) {
  F32MAT s = F32MAT(0.0);
  F16MAT kb[CM_D];
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) coopMatLoadNV(kb[dd], kv_tile, $at + dd * 2u, CM_ROW4, true);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) s = coopMatMulAddNV(q[dd], kb[dd], s);
  return s;
}/s"; }
# k_chains N: the products of cm_scores in N chains.
k_chains() {
  printf '%s' "s/$body/F32MAT cm_scores(in F16MAT q[CM_D], uint stage, uint n) {
  const uint CH = min($1u, CM_D);
  F32MAT s[CH];
  [[unroll]] for (uint c = 0u; c < CH; ++c) s[c] = F32MAT(0.0);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
    F16MAT kb;
    coopMatLoadNV(kb, kv_tile, $at + dd * 2u, CM_ROW4, true);
    s[dd % CH] = coopMatMulAddNV(q[dd], kb, s[dd % CH]);
  }
  [[unroll]] for (uint c = 1u; c < CH; ++c) s[0] += s[c];
  return s[0];
}/s"
}
# Q scaled in f32 before it is rounded to f16 (one rounding, as the unscaled Q had).
scale_q='s/(kv_tile\[r \* CM_ROW4 \+ c\] = )r0 \+ r < rows \? (q\[[^\]]*\]) : uvec4\(0u\);/${1}r0 + r < rows ? cm_scaled8($2) : uvec4(0u);/;
s/(void cm_stage_q)/uvec4 cm_scaled8(uvec4 x) {
  return uvec4(packHalf2x16(unpackHalf2x16(x.x) * pc.qk_scale), packHalf2x16(unpackHalf2x16(x.y) * pc.qk_scale),
               packHalf2x16(unpackHalf2x16(x.z) * pc.qk_scale), packHalf2x16(unpackHalf2x16(x.w) * pc.qk_scale));
}
$1/'
q_scaled=('s/: s\[n\]\[e\] \* qk_scale;/: s[n][e];/' "flashattention/prefill_coopmat_staging.glsl:$scale_q")
neg_inf='s/s\[n\]\[e\] = valid \? x : NEG_BIG;/s[n][e] = valid ? x : uintBitsToFloat(0xff800000u);/;
s/const float p = s\[n\]\[e\] > 0\.5 \* NEG_BIG \? (exp2\(s\[n\]\[e\] - st\.m\[CM_SLOT_OF\[e\]\]\)) : 0\.0;/const float p = $1;/'
n_inner='s/(  \[\[unroll\]\] for \(uint n = 0u; n < CM_N; \+\+n\) \{\n)    s\[n\] = cm_scores\(st\.q, stage, n\);\n/  [[unroll]] for (uint n = 0u; n < CM_N; ++n) s[n] = F32MAT(0.0);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
    [[unroll]] for (uint n = 0u; n < CM_N; ++n) {
      F16MAT kb;
      coopMatLoadNV(kb, kv_tile, stage * CM_TILE4 + n * 16u * CM_ROW4 + dd * 2u, CM_ROW4, true);
      s[n] = coopMatMulAddNV(st.q[dd], kb, s[n]);
    }
  }
$1/'
q_global='s/F32MAT cm_scores\(in F16MAT q\[CM_D\], uint stage, uint n\) \{\n  F32MAT s = F32MAT\(0\.0\);\n/F32MAT cm_scores(uint q_off, uint stage, uint n) {\n  F32MAT s = F32MAT(0.0);\n/;
s/s = coopMatMulAddNV\(q\[dd\], kb, s\);/F16MAT qa;\n    coopMatLoadNV(qa, q, q_off + dd * 2u, pc.q_stride_s \/ 8u, false);\n    s = coopMatMulAddNV(qa, kb, s);/;
s/cm_scores\(st\.q, stage, n\)/cm_scores(st.q_off, stage, n)/g;
s/F16MAT q\[CM_D\];( *)\/\/[^\n]*/uint q_off;/g;
s/  for \(uint r0 = 0u; r0 < PF_BR; r0 \+= CM_Q_PASS\) \{\n.*?\n  \}\n/  st.q_off = (q_base + (q0 + sg * 16u) * pc.q_stride_s) \/ 8u;\n/s'
mk_q_global() { edit q_global "$q_global"; }
# lazy SLACK: the rescale under a subgroup-uniform branch taken when a row's maximum outgrows the one
# in use by more than SLACK (register softmax).
lazy() {
  printf '%s' "s/(  float alpha\\[CM_SLOTS\\], sum\\[CM_SLOTS\\];\\n).*?(  probe_mark\\(PROBE_SOFTMAX\\);)/\\1  bool grows = false;
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 1u));
    mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 2u));
    grows = grows || mx[r] > st.m[r] + $1;
  }
  const bool rescale = subgroupAny(grows);
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    const float m_new = rescale ? max(st.m[r], mx[r]) : st.m[r];
    alpha[r] = exp2(st.m[r] - m_new);
    st.m[r] = m_new;
    sum[r] = 0.0;
  }
  if (rescale) {
    [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
      [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) st.o[dd][e] *= alpha[CM_SLOT_OF[e]];
    }
  }
\\2/s;
s/(#define F16MAT)/#extension GL_KHR_shader_subgroup_vote : require\\n\\1/"
}
mk_q_scaled() { edit q_scaled "${q_scaled[@]}"; }
mk_neg_inf() { edit neg_inf "$neg_inf"; }
mk_n_inner() { edit n_inner "$n_inner"; }
mk_less_math() { edit less_math "${q_scaled[0]}; $neg_inf" "${q_scaled[1]}"; }
mk_k_chains2() { edit k_chains2 "$(k_chains 2)"; }
mk_k_two() { edit k_two "$(k_chains 2)"; }
mk_k_chains4() { edit k_chains4 "$(k_chains 4)"; }
mk_lazy() { edit lazy "$(lazy 8.0)"; }
mk_lazy0() { edit lazy0 "$(lazy 0.0)"; }
mk_lazy_less() { edit lazy_less "$(lazy 8.0); ${q_scaled[0]}; $neg_inf" "${q_scaled[1]}"; }
runs=(base=.device/bin/foundry)
for name in ${EDITS:-v_colmajor k_rowmajor v_once k_once no_exp k_ahead k_two}; do
  dir=$("mk_$name")
  runs+=("$name=.device/bin/foundry:$dir")
done
exec bash bench/interleave.sh "${shapes[@]}" -- "${runs[@]}"
