// Staging of Q, K and V tiles in shared memory for the prefill kernels. Rows are padded by one
// 32-bit word (PF_PAD elements) so lanes reading the same column of consecutive rows hit different
// banks. With two staging buffers the tile loop (prefill_loop.glsl) fetches the next K/V tile into
// registers while the current one is being used; with one, pf_copy_kv moves a tile in one loop.

const uint PF_ROW = HEAD_DIM + PF_PAD;
const uint PF_TILE = PF_BC * PF_ROW;
const uint PF_LOADS = PF_BC * HEAD_DIM / WORKGROUP_SIZE;  // elements of K (and of V) per invocation

void pf_load_q(uint q_base, uint q0, uint rows) {
  for (uint i = gl_LocalInvocationIndex; i < PF_BR * HEAD_DIM; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_DIM, d = i % HEAD_DIM;
    q_tile[r * PF_ROW + d] = r < rows ? TILE_T(Q_READ(q[q_base + (q0 + r) * pc.q_stride_s + d])) : TILE_T(0.0);
  }
}

// Element i of a K/V tile (row-major over [PF_BC, HEAD_DIM]) read from the cache. Keys past the end
// are read from the last valid row: finite data that the mask then weighs by 0.
TILE_T pf_tile_k(uint i, uint t, uint kv_last, uint b, uint kv_h) {
  return TILE_T(kv_load_k(kv_k_row(b, kv_h, min(t + i / HEAD_DIM, kv_last)), i % HEAD_DIM));
}
TILE_T pf_tile_v(uint i, uint t, uint kv_last, uint b, uint kv_h) {
  return TILE_T(kv_load_v(kv_v_row(b, kv_h, min(t + i / HEAD_DIM, kv_last)), i % HEAD_DIM));
}
// Where element i of a K/V tile sits in staging buffer `stage`.
uint pf_tile_slot(uint stage, uint i) { return stage * PF_TILE + (i / HEAD_DIM) * PF_ROW + i % HEAD_DIM; }

void pf_fetch_kv(uint t, uint kv_last, uint b, uint kv_h, out TILE_T kr[PF_LOADS], out TILE_T vr[PF_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_LOADS; ++j) {
    const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;
    kr[j] = pf_tile_k(i, t, kv_last, b, kv_h);
    vr[j] = pf_tile_v(i, t, kv_last, b, kv_h);
  }
}

// The tile at key t straight into staging buffer `stage`, nothing held across the tile: a loop of
// PF_LOADS / PF_COPY_UNROLL passes, each PF_COPY_UNROLL elements. lavapipe's LLVM compiled the fetch
// and store of a D256 tile unrolled whole (256 elements of K and of V per invocation) in about 40 s,
// this loop in about 1 (docs/performance.md, "Prefill tiles on lavapipe"); its passes count toward
// llvmpipe's loop limit (PrefillVariant::loopPasses).
void pf_copy_kv(uint stage, uint t, uint kv_last, uint b, uint kv_h) {
  for (uint j0 = 0u; j0 < PF_LOADS; j0 += PF_COPY_UNROLL) {
    [[unroll]] for (uint u = 0u; u < PF_COPY_UNROLL; ++u) {
      const uint i = gl_LocalInvocationIndex + (j0 + u) * WORKGROUP_SIZE;
      k_tile[pf_tile_slot(stage, i)] = pf_tile_k(i, t, kv_last, b, kv_h);
      v_tile[pf_tile_slot(stage, i)] = pf_tile_v(i, t, kv_last, b, kv_h);
    }
  }
}

void pf_store_kv(uint stage, TILE_T kr[PF_LOADS], TILE_T vr[PF_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_LOADS; ++j) {
    const uint at = pf_tile_slot(stage, gl_LocalInvocationIndex + j * WORKGROUP_SIZE);
    k_tile[at] = kr[j];
    v_tile[at] = vr[j];
  }
}
