//! requires: flashattention/prefill_coopmat_staging.glsl
// Prefill attention on GL_NV_cooperative_matrix2 matrices (GL_KHR_cooperative_matrix types), f16 or bf16
// in (CM2_T: q, K and V as stored, P converted to it), f32 accumulate, each product a whole matrix of
// flexible dimensions. At workgroup scope the workgroup owns its PF_BR query rows as one matrix and the
// driver splits every product, reduction and element operation over the subgroups; at subgroup scope
// (CM2_SUBGROUP) each subgroup owns 16 of the rows as matrices of its own (CM2_RB rows from CM2_ROW0)
// and all of it stays within the subgroup. K/V tiles
// are staged as in the GL_NV_cooperative_matrix kernel (prefill_coopmat_staging.glsl,
// prefill_loop.glsl); per tile of PF_BC keys:
//   S = Q K^T                       one CM2_RB x PF_BC product, Q held as an A matrix
//   scores                          an element operation knows each element's row and key: scale,
//                                   score hooks and masks in one place (cm2_score)
//   m' = max(m, rowmax S)           a row reduction (coopMatReduceNV); at subgroup scope m' = m unless
//                                   rowmax S passes m by more than CM2_SLACK, which a vote on the row
//                                   maxima in 8 columns decides before m' is formed
//   a = exp2(m - m'), L = a L, O = a O   where m' != m only (at subgroup scope), a smeared to O's shape
//                                   by a row reduction
//   P = exp2(S - m'), L = L + P     element-wise: L keeps per-key partial sums, reduced once at the end
//   O = O + P V                     P converted to an A matrix
// With PF_STAGES 0 there is no staging: each K/V tile loads straight from the cache through a tensor
// layout whose rows end at the range's end (rows past it read as 0, never another head's data), so the
// loop needs no barrier. That takes rows kv_k_row(b, h, 0) + key * k_stride_s apart (f16 or bf16, not paged).
// m and L are CM2_RB x PF_BC accumulators whose every column holds the row's value (m) or a share of it
// (L): element-wise operations between them and S need the same shape.

#if CM2_SUBGROUP
#define CM2_SCOPE gl_ScopeSubgroup
const uint CM2_RB = 16u;
#define CM2_ROW0 (gl_SubgroupID * 16u)
#else
#define CM2_SCOPE gl_ScopeWorkgroup
const uint CM2_RB = PF_BR;
#define CM2_ROW0 0u
#endif
#define CM2_Q coopmat<CM2_T, CM2_SCOPE, CM2_RB, HEAD_DIM, gl_MatrixUseA>
#define CM2_KT coopmat<CM2_T, CM2_SCOPE, HEAD_DIM, PF_BC, gl_MatrixUseB>
#define CM2_V coopmat<CM2_T, CM2_SCOPE, PF_BC, HEAD_DIM, gl_MatrixUseB>
#define CM2_P coopmat<CM2_T, CM2_SCOPE, CM2_RB, PF_BC, gl_MatrixUseA>
#define CM2_S coopmat<float, CM2_SCOPE, CM2_RB, PF_BC, gl_MatrixUseAccumulator>
#define CM2_O coopmat<float, CM2_SCOPE, CM2_RB, HEAD_DIM, gl_MatrixUseAccumulator>
#define CM2_ROW coopmat<float, CM2_SCOPE, CM2_RB, 16, gl_MatrixUseAccumulator>
// Row values in the fewest columns an accumulator has: 4 elements a lane where S has 16.
#define CM2_ROW8 coopmat<float, CM2_SCOPE, CM2_RB, 8, gl_MatrixUseAccumulator>

float cm2_max(const in float a, const in float b) { return max(a, b); }
float cm2_add(const in float a, const in float b) { return a + b; }
float cm2_max_of(const in uint r, const in uint c, const in float a, const in float b) { return max(a, b); }
// exp2(s - m) for a visible score; 0 for a hidden one (NEG_BIG), also while m is still NEG_BIG.
float cm2_weight(const in uint r, const in uint c, const in float s, const in float m) {
  return softmax_weight(s, m);
}
// The maximum in use, m, kept unless the tile's row maximum passes it by more than CM2_SLACK.
const float CM2_SLACK = 8.0;
float cm2_lazy_max(const in uint r, const in uint c, const in float row_max, const in float m) {
  return row_max > m + CM2_SLACK ? row_max : m;
}
// The same decision on the threshold m + CM2_SLACK: the next one where the maximum moves.
float cm2_lazy_bar(const in uint r, const in uint c, const in float row_max, const in float bar) {
  return row_max > bar ? row_max + CM2_SLACK : bar;
}
// exp2(s - m) for a tile whose scores are all visible (m is finite then).
float cm2_weight_seen(const in uint r, const in uint c, const in float s, const in float m) { return exp2(s - m); }
float cm2_rescale(const in uint r, const in uint c, const in float m_old, const in float m_new) {
  return exp2(m_old - m_new);
}

// Score of query position `pos` and key `key` in the log2 domain, through the score hooks.
float cm2_score_at(float s, uint b, uint h, uint pos, uint key, float qk_scale) {
  return FA_SCORE_HOOKED           ? fa_score_log2(s * fa_logit_scale(qk_scale), b, h, pos, key)
         : FA_DISTANCE_BIAS_HOOKED ? fma(s, qk_scale, fa_distance_slope_log2(b, h) * float(int(key) - int(pos)))
                                   : s * qk_scale;
}

// Element (r, c) of the tile at key t for the rows at positions pos0 + r. The score is computed before
// the mask selects it: a call inside ?: is a branch per element.
float cm2_score(const in uint r, const in uint c, const in float s, const in uint t, const in uint b, const in uint h,
                const in uint pos0, const in float qk_scale) {
  return cm2_score_at(s, b, h, pos0 + r, t + c, qk_scale);
}

float cm2_score_masked(const in uint r, const in uint c, const in float s, const in uint t, const in uint kv_end,
                       const in uint b, const in uint h, const in uint pos0, const in float qk_scale) {
  const uint pos = pos0 + r, key = t + c;
  const float x = cm2_score_at(s, b, h, pos, key, qk_scale);
  return fa_row_sees(fa_row_span(b, h, pos, kv_end), b, h, pos, key) ? x : NEG_BIG;
}

#if PF_STAGES == 0
// The element offsets (in 16-byte pieces) of key 0 of this workgroup's K and V rows.
uvec2 cm2_kv_base;

void cm2_set_kv_rows(uint b, uint kv_h) { cm2_kv_base = uvec2(kv_k_row(b, kv_h, 0u), kv_v_row(b, kv_h, 0u)) / 8u; }

// Rows [t, t + PF_BC) of a cache whose rows are `stride` elements apart. The stride is a multiple of 8
// (the variant's requirement), and saying so (& ~7) lets the driver load 16 bytes at a time: without
// it, the H200 took 5.7 times as long. Only the tile that crosses kv_end is clamped (rows past it read
// as 0); clamping every tile costs a bounds check per element.
#define CM2_ROWS(name, clamp)                                                      \
  tensorLayoutNV<2, clamp> name(uint t, uint kv_end, uint stride) {               \
    tensorLayoutNV<2, clamp> l = createTensorLayoutNV(2, clamp);                   \
    l = setTensorLayoutDimensionNV(l, kv_end, HEAD_DIM);                           \
    l = setTensorLayoutStrideNV(l, stride & ~7u, 1);                               \
    return sliceTensorLayoutNV(l, t, PF_BC, 0, HEAD_DIM);                          \
  }
CM2_ROWS(cm2_rows, gl_CooperativeMatrixClampModeUndefinedNV)
CM2_ROWS(cm2_rows_clamped, gl_CooperativeMatrixClampModeConstantNV)
#endif

struct CmState {
  CM2_Q q;
  CM2_O o;
  CM2_S m;
  CM2_S l;
  CM2_ROW8 bar;  // m + CM2_SLACK (subgroup scope)
};

// O and L rescaled from the maximum in use to m_new, which becomes the one in use.
void cm2_rescale_to(inout CmState st, const in CM2_S m_new) {
  CM2_S alpha;
  coopMatPerElementNV(alpha, st.m, cm2_rescale, m_new);
  st.m = m_new;
  st.l = st.l * alpha;
  CM2_O alpha_o;
  coopMatReduceNV(alpha_o, alpha, gl_CooperativeMatrixReduceRowNV, cm2_max);
  st.o = st.o * alpha_o;
}

// Before the tile loop (prefill_loop.glsl): Q through the staging area into one matrix.
void pf_begin(inout CmState st, uint q_base, uint q0, uint rows) {
  cm_stage_q(q_base, q0, rows, 0u, PF_BR);
  barrier();
  coopMatLoad(st.q, kv_tile, CM2_ROW0 * CM_ROW4, CM_ROW4, gl_CooperativeMatrixLayoutRowMajor);
  st.o = CM2_O(0.0);
  st.m = CM2_S(NEG_BIG);
  st.l = CM2_S(0.0);
  st.bar = CM2_ROW8(NEG_BIG + CM2_SLACK);
  barrier();  // everyone has its Q before K tiles overwrite the staging area
}

// One K tile: keys [t, t + PF_BC) from staging buffer `stage`, rows at positions pos0 + r.
void pf_tile(inout CmState st, uint stage, uint t, uint kv_end, bool masked, uint b, uint h, uint pos0, uvec4 keys,
             float qk_scale) {
  pos0 += CM2_ROW0;
  CM2_KT kt;
#if PF_STAGES == 0
  const bool inside = t + PF_BC <= kv_end;
  if (inside) {
    coopMatLoadTensorNV(kt, k_cache, cm2_kv_base.x, cm2_rows(t, kv_end, pc.k_stride_s), createTensorViewNV(2, false, 1, 0));
  } else {
    coopMatLoadTensorNV(kt, k_cache, cm2_kv_base.x, cm2_rows_clamped(t, kv_end, pc.k_stride_s),
                        createTensorViewNV(2, false, 1, 0));
  }
#else
  coopMatLoad(kt, kv_tile, stage * CM_TILE4, CM_ROW4, gl_CooperativeMatrixLayoutColumnMajor);
#endif
  CM2_S s = coopMatMulAdd(st.q, kt, CM2_S(0.0));
  if (masked) {
    coopMatPerElementNV(s, s, cm2_score_masked, t, kv_end, b, h, pos0, qk_scale);
  } else if (FA_SCORE_HOOKED || FA_DISTANCE_BIAS_HOOKED) {
    coopMatPerElementNV(s, s, cm2_score, t, b, h, pos0, qk_scale);
  } else {
    s = s * qk_scale;
  }
  probe_mark(PROBE_SCORES);
  CM2_S row_max, m_new;
#if CM2_SUBGROUP
  // The maximum in use moves only where a row's scores pass it by more than CM2_SLACK, and O and L
  // are rescaled only at tiles where some row's did (a subgroup-uniform branch): past a row's first
  // tiles that is seldom, and the weights exp2(s - m) stay below 2^CM2_SLACK meanwhile. The vote
  // reads the row maxima in 8 columns against the stored threshold; m' in S's shape, and the
  // threshold's update, are formed in the branch.
  CM2_ROW8 row_max8;
  coopMatReduceNV(row_max8, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
  bool moved = false;
  for (int i = 0; i < row_max8.length(); ++i) moved = moved || row_max8[i] > st.bar[i];
  if (subgroupAny(moved)) {
    coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
    coopMatPerElementNV(m_new, row_max, cm2_lazy_max, st.m);
    cm2_rescale_to(st, m_new);
    coopMatPerElementNV(st.bar, row_max8, cm2_lazy_bar, st.bar);
  }
#else
  coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, cm2_max);
  coopMatPerElementNV(m_new, row_max, cm2_max_of, st.m);
  cm2_rescale_to(st, m_new);
#endif
  // Where every score of the tile is visible m is finite: no test for hidden ones.
  if (masked) coopMatPerElementNV(s, s, cm2_weight, st.m);
  else coopMatPerElementNV(s, s, cm2_weight_seen, st.m);
  st.l = st.l + s;
  probe_mark(PROBE_SOFTMAX);
  CM2_V v;
#if PF_STAGES == 0
  if (inside) coopMatLoadTensorNV(v, v_cache, cm2_kv_base.y, cm2_rows(t, kv_end, pc.v_stride_s));
  else coopMatLoadTensorNV(v, v_cache, cm2_kv_base.y, cm2_rows_clamped(t, kv_end, pc.v_stride_s));
#else
  coopMatLoad(v, kv_tile, PF_STAGES * CM_TILE4 + stage * CM_TILE4, CM_ROW4, gl_CooperativeMatrixLayoutRowMajor);
#endif
  st.o = coopMatMulAdd(CM2_P(s), v, st.o);
  probe_mark(PROBE_VALUES);
}

#define PF_STATE CmState
#define PF_KV_T uvec4

// The epilogue's view of the staging area (once every subgroup is done with it), in passes of
// CM2_OUT_ROWS rows: the accumulator O as rows of HEAD_DIM floats, then each row's m and l (16 copies a
// row). A pass's rows are local: row r of pass r0 is the tile's row r0 + r.
const uint CM2_OUT4 = CM2_OUT_ROWS * HEAD_DIM / 4u;
float cm2_word(uint i) { return uintBitsToFloat(kv_tile[i >> 2u][i & 3u]); }
float cm2_out(uint row, uint d) { return cm2_word(row * HEAD_DIM + d); }
float cm2_row_m(uint row) { return cm2_word(4u * CM2_OUT4 + row * 16u); }
float cm2_row_l(uint row) { return cm2_word(4u * CM2_OUT4 + 16u * CM2_OUT_ROWS + row * 16u); }

// The rows [r0, r0 + CM2_OUT_ROWS) of the tile into the staging area.
void cm2_stage_out(in CmState st, uint r0) {
  barrier();  // the last tile's reads of the staging area, or the last pass's, are done
  const uint r = CM2_ROW0 - r0;  // unsigned: a subgroup whose rows come before r0 wraps
  if (r < CM2_OUT_ROWS) {
    CM2_ROW m, l;
    coopMatReduceNV(m, st.m, gl_CooperativeMatrixReduceRowNV, cm2_max);
    coopMatReduceNV(l, st.l, gl_CooperativeMatrixReduceRowNV, cm2_add);
    coopMatStore(st.o, kv_tile, r * HEAD_DIM / 4u, HEAD_DIM / 4u, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(m, kv_tile, CM2_OUT4 + r * 4u, 4u, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(l, kv_tile, CM2_OUT4 + 4u * CM2_OUT_ROWS + r * 4u, 4u, gl_CooperativeMatrixLayoutRowMajor);
  }
  barrier();
}
