//! requires: flashattention/common.glsl flashattention/prefill_range.glsl flashattention/probe.glsl
// The K/V staging of both cooperative-matrix prefill kernels (prefill_coopmat.glsl on subgroup-scope
// matrices, prefill_coopmat2.glsl on workgroup-scope ones): Q and each K/V tile go to shared memory as
// 16-byte pieces (8 halves) through the KV access stage, rows skewed by 16 bytes, double-buffered or not.

const uint CM_D = HEAD_DIM / 16;                    // 16-wide slices of head_dim
const uint CM_N = PF_BC / 16;                       // 16-key slices of a tile
const uint CM_ROW4 = (HEAD_DIM + 8u) / 8u;          // a staged row in uvec4 (8 halves), 16 bytes of skew
const uint CM_TILE4 = PF_BC * CM_ROW4;              // one staged K or V tile in uvec4
const uint CM_LOADS = PF_BC * HEAD_DIM / 8u / WORKGROUP_SIZE;  // uvec4 of K (and of V) per invocation

// The workgroup's query rows r0 .. r0 + count - 1 (of rows [q0, q0 + rows) of this head) into kv_tile,
// which is free before the K loop; zeros past the end.
void cm_stage_q(uint q_base, uint q0, uint rows, uint r0, uint count) {
  for (uint i = gl_LocalInvocationIndex; i < count * (HEAD_DIM / 8u); i += WORKGROUP_SIZE) {
    const uint r = i / (HEAD_DIM / 8u), c = i % (HEAD_DIM / 8u);
    kv_tile[r * CM_ROW4 + c] = r0 + r < rows ? q[(q_base + (q0 + r0 + r) * pc.q_stride_s) / 8u + c] : uvec4(0u);
  }
}

// A loader subgroup moves a tile in chunks of LD_CHUNK loads per lane; otherwise every invocation
// moves CM_LOADS of it at once.
const uint PF_KV_LOADS = PF_LOADER != 0 ? LD_CHUNK : CM_LOADS;
const uint LD_CHUNKS = PF_BC * HEAD_DIM / 8u / (SUBGROUP_SIZE * LD_CHUNK);

// The 16-byte pieces first, first + step, ... of the tile at key t (piece i: key i / (HEAD_DIM / 8),
// column i % (HEAD_DIM / 8)).
void cm_fetch_kv(uint t, uint kv_last, uint b, uint kv_h, uint first, uint step, out uvec4 kr[PF_KV_LOADS],
                 out uvec4 vr[PF_KV_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_KV_LOADS; ++j) {
    const uint i = first + j * step;
    const uint key = min(t + i / (HEAD_DIM / 8u), kv_last), c = i % (HEAD_DIM / 8u);
    kr[j] = KV_TILE8(kv_load_k(kv_k_row(b, kv_h, key), c * 8u));
    vr[j] = KV_TILE8(kv_load_v(kv_v_row(b, kv_h, key), c * 8u));
  }
}

void cm_store_kv(uint stage, uint first, uint step, uvec4 kr[PF_KV_LOADS], uvec4 vr[PF_KV_LOADS]) {
  [[unroll]] for (uint j = 0u; j < PF_KV_LOADS; ++j) {
    const uint i = first + j * step;
    const uint at = stage * CM_TILE4 + (i / (HEAD_DIM / 8u)) * CM_ROW4 + i % (HEAD_DIM / 8u);
    kv_tile[at] = kr[j];
    kv_tile[PF_STAGES * CM_TILE4 + at] = vr[j];
  }
}

void pf_fetch_kv(uint t, uint kv_last, uint b, uint kv_h, out uvec4 kr[PF_KV_LOADS], out uvec4 vr[PF_KV_LOADS]) {
  cm_fetch_kv(t, kv_last, b, kv_h, gl_LocalInvocationIndex, WORKGROUP_SIZE, kr, vr);
}

void pf_store_kv(uint stage, uvec4 kr[PF_KV_LOADS], uvec4 vr[PF_KV_LOADS]) {
  cm_store_kv(stage, gl_LocalInvocationIndex, WORKGROUP_SIZE, kr, vr);
}

// One staging buffer: every load of the tile issued before any store.
void pf_copy_kv(uint stage, uint t, uint kv_last, uint b, uint kv_h) {
  uvec4 kr[PF_KV_LOADS], vr[PF_KV_LOADS];
  pf_fetch_kv(t, kv_last, b, kv_h, kr, vr);
  pf_store_kv(stage, kr, vr);
}

// The loader subgroup's share of a tile: all of it, chunk by chunk.
void pf_load_tile(uint t, uint kv_last, uint b, uint kv_h, uint stage) {
  for (uint c = 0u; c < LD_CHUNKS; ++c) {
    const uint first = gl_SubgroupInvocationID + c * LD_CHUNK * SUBGROUP_SIZE;
    uvec4 kr[PF_KV_LOADS], vr[PF_KV_LOADS];
    cm_fetch_kv(t, kv_last, b, kv_h, first, SUBGROUP_SIZE, kr, vr);
    cm_store_kv(stage, first, SUBGROUP_SIZE, kr, vr);
  }
}
