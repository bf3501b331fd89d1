// Staging of Q, K and V tiles in shared memory for the prefill kernels. Rows are padded by one
// 32-bit word (PF_PAD elements) so lanes reading the same column of consecutive rows hit different
// banks. The tile loop (prefill_loop.glsl) fetches the next K/V tile into registers while the current
// one is being used.

const uint PF_ROW = HEAD_DIM + PF_PAD;
const uint PF_TILE = PF_BC * PF_ROW;
const uint PF_LOADS = PF_BC * HEAD_DIM / WORKGROUP_SIZE;  // elements of K (and of V) per invocation

void pf_load_q(uint q_base, uint q0, uint rows) {
  for (uint i = gl_LocalInvocationIndex; i < PF_BR * HEAD_DIM; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_DIM, d = i % HEAD_DIM;
    q_tile[r * PF_ROW + d] = r < rows ? TILE_T(Q_READ(q[q_base + (q0 + r) * pc.q_stride_s + d])) : TILE_T(0.0);
  }
}

// Keys past the end are read from the last valid row: finite data that the mask then weighs by 0.
void pf_fetch_kv(uint t, uint kv_last, uint b, uint kv_h, out TILE_T kr[PF_LOADS], out TILE_T vr[PF_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_LOADS; ++j) {
    const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;
    const uint key = min(t + i / HEAD_DIM, kv_last), d = i % HEAD_DIM;
    kr[j] = TILE_T(kv_load_k(kv_k_row(b, kv_h, key), d));
    vr[j] = TILE_T(kv_load_v(kv_v_row(b, kv_h, key), d));
  }
}

void pf_store_kv(uint stage, TILE_T kr[PF_LOADS], TILE_T vr[PF_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_LOADS; ++j) {
    const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;
    const uint at = stage * PF_TILE + (i / HEAD_DIM) * PF_ROW + i % HEAD_DIM;
    k_tile[at] = kr[j];
    v_tile[at] = vr[j];
  }
}
