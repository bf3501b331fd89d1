//! requires: flashattention/prefill_coopmat_staging.glsl
// Prefill attention on NV cooperative matrices (tensor cores), f16 in, f32 accumulate. A workgroup
// takes PF_BR = 16 * PF_WARPS query rows of one head; each subgroup owns 16 rows.
// Per K tile of PF_BC keys (double-buffered in shared memory as uvec4, rows skewed by 16 bytes):
//   S = Q K^T            one 16x16 accumulator per 16 keys; Q stays in registers as A fragments
//   row max              S goes to shared memory; two lanes scan each row, apply the masks and score
//                        hooks there (where every element's row and key are known) and write the
//                        result back (GL_NV_cooperative_matrix has no row reductions, and which
//                        invocation holds which element is the implementation's choice)
//   P = exp2(S - m)      on the reloaded scores in registers: each element's row is read from an
//                        "index" matrix loaded once from a shared matrix of row numbers, which has
//                        the accumulators' layout by construction
//   L += P 1, O += P V   row sums by one more MMA against a matrix of ones, so l lives in an
//                        accumulator with O's layout and O / L needs no cross-lane work
// Rescaling O and L by alpha per row uses the same row-index matrix.
//
// Where the device's accumulator layout is the quad pattern (CM_QUAD, found by a probe at start-up:
// foundry/CoopMatProbe.h), the softmax stays in registers instead: each lane knows the rows and
// columns of its elements from CM_ROW_OF / CM_COL_OF, row maxima and sums take two xor shuffles
// within a quad, and S never goes to shared memory.

#define F16MAT fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32MAT fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

const uint CM_S = 16u * PF_BC;  // a subgroup's S region in s_tile (32-bit words)

#if !CM_QUAD
// A 16x16 f32 matrix whose every element holds its row number, in the accumulators' layout.
F32MAT cm_row_index_matrix(uint sg) {
  for (uint i = gl_SubgroupInvocationID; i < 256u; i += SUBGROUP_SIZE) s_tile[sg * CM_S + i] = floatBitsToUint(float(i / 16u));
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  F32MAT m;
  coopMatLoadNV(m, s_tile, sg * CM_S, 16u, false);
  subgroupBarrier();
  return m;
}

#endif

// Q K^T for the 16 keys [16 n, 16 n + 16) of the staged tile: one 16x16 accumulator.
F32MAT cm_scores(in F16MAT q[CM_D], uint stage, uint n) {
  F32MAT s = F32MAT(0.0);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
    F16MAT kb;  // K^T slice: element (dim, key) read column-major from the key rows
    coopMatLoadNV(kb, kv_tile, stage * CM_TILE4 + n * 16u * CM_ROW4 + dd * 2u, CM_ROW4, true);
    s = coopMatMulAddNV(q[dd], kb, s);
  }
  return s;
}

#if CM_QUAD

struct CmState {
  F16MAT q[CM_D];     // this subgroup's 16 query rows as A fragments
  F32MAT o[CM_D];
  float m[CM_SLOTS];  // the running max and sum of each row this lane holds (CM_SLOT_ROW)
  float l[CM_SLOTS];
};

void cm_init(inout CmState st) {
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) st.o[dd] = F32MAT(0.0);
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    st.m[r] = NEG_BIG;
    st.l[r] = 0.0;
  }
}

// One K tile: keys [t, t + PF_BC) from staging buffer `stage`, rows at positions pos0 + sg*16 + r.
void pf_tile(inout CmState st, uint stage, uint t, uint kv_end, bool masked, uint b, uint h, uint pos0, uvec4 keys,
             float qk_scale) {
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint lane_row = lane >> 2u, lane_col = 2u * (lane & 3u);
  F32MAT s[CM_N];
  float mx[CM_SLOTS];
  uvec2 span[CM_SLOTS];  // the keys each of this lane's rows may see (fa_row_span)
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    mx[r] = NEG_BIG;
    span[r] = fa_row_span(b, h, pos0 + sg * 16u + CM_SLOT_ROW[r] + lane_row, kv_end);
  }
  // A distance bias without score hooks is added here, one FMA per score: element e's key - pos is
  // this lane's (t + lane_col) - (pos0 + sg * 16 + lane_row) plus a constant of n and e. Scores are
  // computed before the mask selects them: a call inside ?: is a branch per element (GLSL evaluates
  // one side only), which cost soft-cap 40% of the prefill time on the H200.
  const float slope = fa_distance_slope_log2(b, h);
  const float lane_bias = slope * float(int(t + lane_col) - int(pos0 + sg * 16u + lane_row));
  [[unroll]] for (uint n = 0u; n < CM_N; ++n) {
    s[n] = cm_scores(st.q, stage, n);
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) {
      const uint key = t + n * 16u + CM_COL_OF[e] + lane_col;
      const uint pos = pos0 + sg * 16u + CM_ROW_OF[e] + lane_row;
      const bool valid = !masked || fa_row_sees(span[CM_SLOT_OF[e]], b, h, pos, key);
      const float bias = fma(slope, float(int(n * 16u + CM_COL_OF[e]) - int(CM_ROW_OF[e])), lane_bias);
      const float x = FA_SCORE_HOOKED           ? fa_score_log2(s[n][e] * fa_logit_scale(qk_scale), b, h, pos, key)
                      : FA_DISTANCE_BIAS_HOOKED ? fma(s[n][e], qk_scale, bias)
                                                : s[n][e] * qk_scale;
      s[n][e] = valid ? x : NEG_BIG;
      mx[CM_SLOT_OF[e]] = max(mx[CM_SLOT_OF[e]], s[n][e]);
    }
  }
  probe_mark(PROBE_SCORES);
  float alpha[CM_SLOTS], sum[CM_SLOTS];
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 1u));
    mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 2u));
    const float m_new = max(st.m[r], mx[r]);
    alpha[r] = exp2(st.m[r] - m_new);
    st.m[r] = m_new;
    sum[r] = 0.0;
  }
  // Rescaling unconditionally measured faster on the H200 than skipping it when no maximum moved
  // (a subgroupAny branch): the multiplies overlap the products, the branch does not.
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) st.o[dd][e] *= alpha[CM_SLOT_OF[e]];
  }
  probe_mark(PROBE_SOFTMAX);
  [[unroll]] for (uint n = 0u; n < CM_N; ++n) {
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) {
      const float p = masked ? softmax_weight(s[n][e], st.m[CM_SLOT_OF[e]]) : exp2(s[n][e] - st.m[CM_SLOT_OF[e]]);
      s[n][e] = p;
      sum[CM_SLOT_OF[e]] += p;
    }
    const F16MAT p = F16MAT(s[n]);
    [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
      F16MAT vb;
      coopMatLoadNV(vb, kv_tile, PF_STAGES * CM_TILE4 + stage * CM_TILE4 + n * 16u * CM_ROW4 + dd * 2u, CM_ROW4, false);
      st.o[dd] = coopMatMulAddNV(p, vb, st.o[dd]);
    }
  }
  probe_mark(PROBE_VALUES);
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    sum[r] += subgroupShuffleXor(sum[r], 1u);
    sum[r] += subgroupShuffleXor(sum[r], 2u);
    st.l[r] = st.l[r] * alpha[r] + sum[r];
  }
  probe_mark(PROBE_SOFTMAX);
}

#else

struct CmState {
  F16MAT q[CM_D];  // this subgroup's 16 query rows as A fragments
  F32MAT o[CM_D];
  F32MAT l;        // every column holds the row's sum
  F32MAT row_idx;  // each element's row number
};

void cm_init(inout CmState st) {
  const uint sg = gl_SubgroupID;
  st.row_idx = cm_row_index_matrix(sg);
  [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) st.o[dd] = F32MAT(0.0);
  st.l = F32MAT(0.0);
  if (gl_SubgroupInvocationID < 16u) row_m[sg * 16u + gl_SubgroupInvocationID] = NEG_BIG;
}

// One K tile: keys [t, t + PF_BC) from staging buffer `stage`, rows at positions pos0 + sg*16 + r.
void pf_tile(inout CmState st, uint stage, uint t, uint kv_end, bool masked, uint b, uint h, uint pos0, uvec4 keys,
             float qk_scale) {
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const F32MAT row_idx = st.row_idx;
  F32MAT s[CM_N];
  [[unroll]] for (uint n = 0u; n < CM_N; ++n) {
    s[n] = cm_scores(st.q, stage, n);
    coopMatStoreNV(s[n], s_tile, sg * CM_S + n * 16u, PF_BC, false);
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  // Row max: lanes 2r and 2r+1 scan halves of row r.
  const uint r = lane >> 1u, half_cols = PF_BC / 2u, c0 = (lane & 1u) * half_cols;
  const uint pos = pos0 + sg * 16u + r;
  float row_max = NEG_BIG;
  // The scores through the masks and score hooks, written back for the exponentials below.
  if (lane < 32u) {
    const uvec2 span = fa_row_span(b, h, pos, kv_end);
    [[unroll]] for (uint c = c0; c < c0 + half_cols; ++c) {
      const uint key = t + c;
      const bool valid = !masked || fa_row_sees(span, b, h, pos, key);
      const float x =
          fa_score_log2(uintBitsToFloat(s_tile[sg * CM_S + r * PF_BC + c]) * fa_logit_scale(qk_scale), b, h, pos, key);
      const float y = valid ? x : NEG_BIG;
      s_tile[sg * CM_S + r * PF_BC + c] = floatBitsToUint(y);
      row_max = max(row_max, y);
    }
  }
  row_max = max(row_max, subgroupShuffleXor(row_max, 1u));
  subgroupBarrier();
  if (lane < 32u && (lane & 1u) == 0u) {
    const float m_old = row_m[sg * 16u + r];
    const float m_new = max(m_old, row_max);
    row_m[sg * 16u + r] = m_new;
    row_alpha[sg * 16u + r] = exp2(m_old - m_new);
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  // Rescale O and L by alpha of each element's row.
  [[unroll]] for (uint i = 0u; i < row_idx.length(); ++i) {
    const float alpha = row_alpha[sg * 16u + uint(row_idx[i])];
    st.l[i] *= alpha;
    [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) st.o[dd][i] *= alpha;
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  const F16MAT ones = F16MAT(1.0);
  [[unroll]] for (uint n = 0u; n < CM_N; ++n) {
    coopMatLoadNV(s[n], s_tile, sg * CM_S + n * 16u, PF_BC, false);  // the masked, modified scores
    [[unroll]] for (uint i = 0u; i < s[n].length(); ++i) {
      const float x = s[n][i];
      s[n][i] = softmax_weight(x, row_m[sg * 16u + uint(row_idx[i])]);
    }
    const F16MAT p = F16MAT(s[n]);
    st.l = coopMatMulAddNV(p, ones, st.l);
    [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
      F16MAT vb;
      coopMatLoadNV(vb, kv_tile, PF_STAGES * CM_TILE4 + stage * CM_TILE4 + n * 16u * CM_ROW4 + dd * 2u, CM_ROW4, false);
      st.o[dd] = coopMatMulAddNV(p, vb, st.o[dd]);
    }
  }
  subgroupBarrier();
}

#endif  // CM_QUAD

// Before the tile loop (prefill_loop.glsl): Q through the staging area in passes of CM_Q_PASS rows
// (PrefillVariant::queryRowsStaged: with 256-wide rows fewer than 8 subgroups' rows), each subgroup
// taking its A fragments in the pass that holds its rows.
void pf_begin(inout CmState st, uint q_base, uint q0, uint rows) {
  const uint sg = gl_SubgroupID;
  for (uint r0 = 0u; r0 < PF_BR; r0 += CM_Q_PASS) {
    if (r0 != 0u) barrier();  // every subgroup has its fragments of the last pass
    cm_stage_q(q_base, q0, rows, r0, CM_Q_PASS);
    barrier();
    if (sg < PF_WARPS && sg * 16u - r0 < CM_Q_PASS) {  // not the loader; unsigned: rows before r0 wrap
      [[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) {
        coopMatLoadNV(st.q[dd], kv_tile, (sg * 16u - r0) * CM_ROW4 + dd * 2u, CM_ROW4, false);
      }
    }
  }
  cm_init(st);
  barrier();  // everyone has its Q fragments before K tiles overwrite the staging area
}

#define PF_STATE CmState
#define PF_KV_T uvec4

#if !CM_QUAD
// Stages a 16x16 slice of this subgroup's rows through shared memory so rows past the end of the
// query are never written: `slice` covers dimensions [16 * slice, 16 * slice + 16).
void cm_stage_slice(F32MAT m) {
  coopMatStoreNV(m, s_tile, gl_SubgroupID * CM_S, 16u, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}
#endif
