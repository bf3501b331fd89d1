//! requires: flashattention/common.glsl flashattention/prefill_range.glsl flashattention/prefill_tiles.glsl
// Prefill attention, subgroup variant (every device). A workgroup takes PF_BR = PF_WARPS * PF_ROWS
// query rows of one head; each subgroup owns PF_ROWS rows. For each K tile of PF_BC keys:
//   S = Q K^T: lane c scores keys c, c + SG, ... (PF_KPL of them) for each of its subgroup's rows
//   (a tile narrower than the subgroup, PF_BC < SG, leaves lanes PF_BC.. idle here);
//   online softmax: row max and sum with subgroup reductions; P goes to shared memory;
//   O += P V: lane owns dimensions lane, lane + SG, ... (PF_DPL of them), so V reads are conflict-free.
// Masks (the hook points): tiles outside the block's key range are never visited, and element masks
// are applied only on tiles that are not surely visible to every row (prefill_loop.glsl).

// Output dimension e of this lane. Where HEAD_DIM is not a multiple of the subgroup size the last
// one runs past it: the lane reads the row's padding or the next row (held within v_tile) and its
// result is never stored.
uint pf_lane_dim(uint e) { return gl_SubgroupInvocationID + e * SUBGROUP_SIZE; }
const bool PF_DIM_TAIL = HEAD_DIM % SUBGROUP_SIZE != 0u;
uint pf_v_at(uint i) { return PF_DIM_TAIL ? min(i, PF_STAGES * PF_TILE - 1u) : i; }
// Key column j of this lane within the tile; lanes past a narrow tile read its last key and score
// nothing.
const bool PF_KEY_TAIL = PF_BC < SUBGROUP_SIZE;
uint pf_lane_key(uint j) { return PF_KEY_TAIL ? min(gl_SubgroupInvocationID, PF_BC - 1u) : gl_SubgroupInvocationID + j * SUBGROUP_SIZE; }
bool pf_lane_scores() { return !PF_KEY_TAIL || gl_SubgroupInvocationID < PF_BC; }

struct PfState {
  float o[PF_ROWS][PF_DPL];
  float m[PF_ROWS];
  float l[PF_ROWS];
};

void pf_tile(inout PfState st, uint stage, uint t, uint kv_end, bool masked, uint b, uint h, uint pos0, uvec4 keys,
             float qk_scale) {
  const uint sg = gl_SubgroupID;
  float s[PF_ROWS][PF_KPL];
  [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
    [[unroll]] for (uint j = 0u; j < PF_KPL; ++j) s[r][j] = 0.0;
  }
  for (uint d = 0u; d < HEAD_DIM; ++d) {
    float kd[PF_KPL];
    [[unroll]] for (uint j = 0u; j < PF_KPL; ++j) kd[j] = float(k_tile[stage * PF_TILE + pf_lane_key(j) * PF_ROW + d]);
    [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
      const float qd = float(q_tile[(sg * PF_ROWS + r) * PF_ROW + d]);
      [[unroll]] for (uint j = 0u; j < PF_KPL; ++j) s[r][j] += qd * kd[j];
    }
  }
  float alpha[PF_ROWS];
  [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
    const uint pos = pos0 + sg * PF_ROWS + r;  // this row's position among the keys
    const uvec2 span = fa_row_span(b, h, pos, kv_end);
    float row_max = NEG_BIG;
    [[unroll]] for (uint j = 0u; j < PF_KPL; ++j) {
      const uint key = t + pf_lane_key(j);
      const bool valid = pf_lane_scores() && (!masked || fa_row_sees(span, b, h, pos, key));
      const float x = fa_score_log2(s[r][j] * fa_logit_scale(qk_scale), b, h, pos, key);
      s[r][j] = valid ? x : NEG_BIG;
      row_max = max(row_max, s[r][j]);
    }
    const float m_new = max(st.m[r], subgroupMax(row_max));
    alpha[r] = exp2(st.m[r] - m_new);
    float row_sum = 0.0;
    [[unroll]] for (uint j = 0u; j < PF_KPL; ++j) {
      const float p = softmax_weight(s[r][j], m_new);
      row_sum += p;
      if (pf_lane_scores()) p_tile[(sg * PF_ROWS + r) * PF_BC + pf_lane_key(j)] = p;
    }
    st.l[r] = st.l[r] * alpha[r] + subgroupAdd(row_sum);
    st.m[r] = m_new;
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
    [[unroll]] for (uint e = 0u; e < PF_DPL; ++e) st.o[r][e] *= alpha[r];
  }
  for (uint c = 0u; c < PF_BC; ++c) {
    float vd[PF_DPL];
    [[unroll]] for (uint e = 0u; e < PF_DPL; ++e) vd[e] = float(v_tile[pf_v_at(stage * PF_TILE + c * PF_ROW + pf_lane_dim(e))]);
    [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
      const float p = p_tile[(sg * PF_ROWS + r) * PF_BC + c];
      [[unroll]] for (uint e = 0u; e < PF_DPL; ++e) st.o[r][e] += p * vd[e];
    }
  }
  subgroupBarrier();
}

// Before the tile loop (prefill_loop.glsl); the caller has loaded q_tile.
void pf_begin(inout PfState st) {
  [[unroll]] for (uint r = 0u; r < PF_ROWS; ++r) {
    st.m[r] = NEG_BIG;
    st.l[r] = 0.0;
    [[unroll]] for (uint e = 0u; e < PF_DPL; ++e) st.o[r][e] = 0.0;
  }
}

#define PF_STATE PfState
#define PF_KV_T TILE_T
const uint PF_KV_LOADS = PF_LOADS;
