//! requires: flashattention/common.glsl flashattention/hooks_keys.glsl
// Flash decoding, scalar variant: no subgroup operations, for devices without them. Keys go in
// blocks of WORKGROUP_SIZE: each invocation scores one key for every head (a whole row of K), the
// block's max and weights go through shared memory, then each invocation accumulates the outputs it
// owns from V rows (consecutive invocations own consecutive dimensions, so V reads coalesce).
// Writes the same per-"subgroup" partials as the subgroup variant, with one partial for the workgroup.

const uint DECODE_OUTPUTS = DECODE_HEADS * HEAD_DIM;
const uint DECODE_OWNED = (DECODE_OUTPUTS + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;

// Keys [kv_begin, kv_end) lie inside `keys` (fa_keys_heads for query position q_pos of heads h0 ..).
void flash_decode_scalar(uint kv_begin, uint kv_end, uint k_base, uint v_base, float qk_scale, uint b, uint h0,
                         uint q_pos, uvec4 keys) {
  const uint tid = gl_LocalInvocationIndex;
  float acc_o[DECODE_OWNED];
  [[unroll]] for (uint i = 0u; i < DECODE_OWNED; ++i) acc_o[i] = 0.0;
  if (tid < DECODE_HEADS) {
    block_m[tid] = NEG_BIG;
    block_l[tid] = 0.0;
  }
  barrier();  // an empty key range reads these right away
  const bool exact = fa_keys_exact(keys, kv_begin, kv_end);
  for (uint base = kv_begin; base < kv_end; base += WORKGROUP_SIZE) {
    const uint key = base + tid;
    const bool valid = key < kv_end;
    for (uint h = 0u; h < DECODE_HEADS; ++h) {
      float acc = 0.0;
      if (valid) {
        for (uint d = 0u; d < HEAD_DIM; ++d) acc += q_shared[h * HEAD_DIM + d] * float(k_cache[k_base + key * HEAD_DIM + d]);
      }
      const bool seen = valid && (exact || fa_visible(b, h0 + h, q_pos, key));
      const float x = fa_score_log2(acc * fa_logit_scale(qk_scale), b, h0 + h, q_pos, key);
      block_s[h * WORKGROUP_SIZE + tid] = seen ? x : NEG_BIG;
    }
    barrier();
    if (tid < DECODE_HEADS) {
      float bm = block_m[tid];
      for (uint j = 0u; j < WORKGROUP_SIZE; ++j) bm = max(bm, block_s[tid * WORKGROUP_SIZE + j]);
      block_alpha[tid] = exp2(block_m[tid] - bm);
      block_m[tid] = bm;
    }
    barrier();
    for (uint h = 0u; h < DECODE_HEADS; ++h) {
      const float s = block_s[h * WORKGROUP_SIZE + tid];
      block_s[h * WORKGROUP_SIZE + tid] = s > 0.5 * NEG_BIG ? exp2(s - block_m[h]) : 0.0;
    }
    barrier();
    if (tid < DECODE_HEADS) {
      float sum = 0.0;
      for (uint j = 0u; j < WORKGROUP_SIZE; ++j) sum += block_s[tid * WORKGROUP_SIZE + j];
      block_l[tid] = block_l[tid] * block_alpha[tid] + sum;
    }
    const uint count = min(WORKGROUP_SIZE, kv_end - base);
    [[unroll]] for (uint i = 0u; i < DECODE_OWNED; ++i) {
      const uint idx = tid + i * WORKGROUP_SIZE;
      if (idx >= DECODE_OUTPUTS) break;
      const uint h = idx / HEAD_DIM, d = idx % HEAD_DIM;
      float acc = acc_o[i] * block_alpha[h];
      for (uint j = 0u; j < count; ++j) acc += block_s[h * WORKGROUP_SIZE + j] * float(v_cache[v_base + (base + j) * HEAD_DIM + d]);
      acc_o[i] = acc;
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < DECODE_OWNED; ++i) {
    const uint idx = tid + i * WORKGROUP_SIZE;
    if (idx >= DECODE_OUTPUTS) break;
    const uint h = idx / HEAD_DIM;
    const float l = block_l[h];
    part_o[idx] = PART_T(PART_CLAMP(l > 0.0 ? acc_o[i] / l : 0.0));
  }
  if (tid < DECODE_HEADS) {
    part_m[tid] = block_m[tid];
    part_l[tid] = block_l[tid];
  }
}
