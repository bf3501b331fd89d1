//! requires: flashattention/common.glsl flashattention/hooks_keys.glsl
// Flash decoding, scalar variant: no subgroup operations, for devices without them. Keys go in
// blocks of WORKGROUP_SIZE: each invocation scores one key for every head (a whole row of K), the
// block's max and weights go through shared memory, then each invocation accumulates the outputs it
// owns from V rows (consecutive invocations own consecutive dimensions, so V reads coalesce).
// Writes the same per-"subgroup" partials as the subgroup variant, with one partial for the workgroup.
// The outputs accumulate in that partial, part_o (float), rather than in registers: an invocation
// owns DECODE_HEADS * VALUE_DIM / WORKGROUP_SIZE of them, hundreds for wide heads, and each is read
// and written once per block of WORKGROUP_SIZE keys. K rows hold HEAD_DIM elements; V rows VALUE_DIM
// elements; rows come from stages/KvAccessStage.h.

const uint DECODE_OUTPUTS = DECODE_HEADS * VALUE_DIM;

// Keys [kv_begin, kv_end) lie inside `keys` (fa_keys_heads for query position q_pos of heads h0 ..).
void flash_decode_scalar(uint kv_begin, uint kv_end, uint kv_h, float qk_scale, uint b, uint h0,
                         uint q_pos, uvec4 keys) {
  const uint tid = gl_LocalInvocationIndex;
  for (uint idx = tid; idx < DECODE_OUTPUTS; idx += WORKGROUP_SIZE) part_o[idx] = 0.0;
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
        const KV_ROW k_row = kv_k_row(b, kv_h, key);
        for (uint d = 0u; d < HEAD_DIM; ++d) acc += q_shared[h * HEAD_DIM + d] * kv_load_k(k_row, d);
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
      block_s[h * WORKGROUP_SIZE + tid] = softmax_weight(s, block_m[h]);
    }
    barrier();
    if (tid < DECODE_HEADS) {
      float sum = 0.0;
      for (uint j = 0u; j < WORKGROUP_SIZE; ++j) sum += block_s[tid * WORKGROUP_SIZE + j];
      block_l[tid] = block_l[tid] * block_alpha[tid] + sum;
    }
    const uint count = min(WORKGROUP_SIZE, kv_end - base);
    for (uint idx = tid; idx < DECODE_OUTPUTS; idx += WORKGROUP_SIZE) {
      const uint h = idx / VALUE_DIM, d = idx % VALUE_DIM;
      float acc = part_o[idx] * block_alpha[h];
      for (uint j = 0u; j < count; ++j) acc += block_s[h * WORKGROUP_SIZE + j] * kv_load_v(kv_v_row(b, kv_h, base + j), d);
      part_o[idx] = acc;
    }
    barrier();
  }
  for (uint idx = tid; idx < DECODE_OUTPUTS; idx += WORKGROUP_SIZE) {
    const float l = block_l[idx / VALUE_DIM];
    part_o[idx] = part_o[idx] * softmax_inverse(l);
  }
  if (tid < DECODE_HEADS) {
    part_m[tid] = block_m[tid];
    part_l[tid] = block_l[tid];
  }
}
