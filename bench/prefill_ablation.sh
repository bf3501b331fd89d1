#!/usr/bin/env bash
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
#   k_two       candidate: a slice's products in two chains of four (even and odd dims), added
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(prefill:1:32:8:8192:128 prefill:1:32:8:8192:64)
file=flashattention/prefill_coopmat.glsl
edit() {
  local name=$1 expr=$2 dir=/tmp/ablate-$1
  rm -rf "$dir" && cp -r kernels "$dir"
  perl -0pi -e "$expr" "$dir/$file"
  cmp -s "kernels/$file" "$dir/$file" && { echo "edit $name changed nothing" >&2; exit 2; }
  echo "$dir"
}
declare -A dirs
vload='coopMatLoadNV\(vb, kv_tile, PF_STAGES \* CM_TILE4 \+ stage'
kload='coopMatLoadNV\(kb, kv_tile, stage \* CM_TILE4'
dirs[v_colmajor]=$(edit v_colmajor "s/($vload[^;]*CM_ROW4, )false\)/\${1}true)/g")
dirs[k_rowmajor]=$(edit k_rowmajor "s/($kload[^;]*CM_ROW4, )true\)/\${1}false)/g")
dirs[v_once]=$(edit v_once "s/$vload[^;]*;/coopMatLoadNV(vb, kv_tile, PF_STAGES * CM_TILE4 + stage * CM_TILE4, CM_ROW4, false);/g")
dirs[k_once]=$(edit k_once "s/$kload[^;]*;/coopMatLoadNV(kb, kv_tile, stage * CM_TILE4, CM_ROW4, true);/g")
dirs[no_exp]=$(edit no_exp 's/exp2\(s\[n\]\[e\] - st\.m\[CM_SLOT_OF\[e\]\]\)/(s[n][e] - st.m[CM_SLOT_OF[e]])/')
body='F32MAT cm_scores\(in F16MAT q\[CM_D\], uint stage, uint n\) \{.*?return s;\n\}'
at='stage * CM_TILE4 + n * 16u * CM_ROW4'
dirs[k_ahead]=$(edit k_ahead "s/$body/F32MAT cm_scores(in F16MAT q[CM_D], uint stage, uint n) {
  F32MAT s = F32MAT(0.0);
  F16MAT kb[CM_D];
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) coopMatLoadNV(kb[dd], kv_tile, $at + dd * 2u, CM_ROW4, true);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) s = coopMatMulAddNV(q[dd], kb[dd], s);
  return s;
}/s")
dirs[k_two]=$(edit k_two "s/$body/F32MAT cm_scores(in F16MAT q[CM_D], uint stage, uint n) {
  F32MAT s0 = F32MAT(0.0), s1 = F32MAT(0.0);
  [[unroll]] for (uint dd = 0u; dd < CM_D; dd += 2u) {
    F16MAT k0, k1;
    coopMatLoadNV(k0, kv_tile, $at + dd * 2u, CM_ROW4, true);
    coopMatLoadNV(k1, kv_tile, $at + dd * 2u + 2u, CM_ROW4, true);
    s0 = coopMatMulAddNV(q[dd], k0, s0);
    s1 = coopMatMulAddNV(q[dd + 1u], k1, s1);
  }
  return s0 + s1;
}/s")
runs=(base=.device/bin/foundry)
for name in v_colmajor k_rowmajor v_once k_once no_exp k_ahead k_two; do runs+=("$name=.device/bin/foundry:${dirs[$name]}"); done
exec bash bench/interleave.sh "${shapes[@]}" -- "${runs[@]}"
