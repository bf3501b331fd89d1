//! requires: modifiers/mask_access.glsl
// The mask tensor's hooks. Whole tiles without a visible key are skipped through a block map made
// by a pass before the attention kernel (MaskBlockMapStage), at the kernel's own tile shape.

// Prefill kernels compute rows past the last query (never stored): their positions run past the
// call's, so the row index is held to the last.
uint mask_query_index(uint b, uint q) { return min(q + pc.q_len - fa_kv_len(b), pc.q_len - 1u); }

bool mask_visible(uint b, uint h, uint q, uint k) { return mask_element_visible(mask_row(b, h, mask_query_index(b, q)), k); }

#if !MASK_BITS
// Kernels score hidden keys too, up to the end of a tile past the last key (the results are
// discarded): the key is held to the row.
float mask_score(float s, uint b, uint h, uint q, uint k) {
  const float m = mask_element(mask_row(b, h, mask_query_index(b, q)), min(k, fa_kv_len(b) - 1u));
  return m <= -HALF_MAX ? s : s + m;
}
#endif

// Any key may be visible and none surely is: every tile the block map keeps gets element masks.
uvec4 mask_key_range(uint b, uint h, uint q_lo, uint q_hi) { return uvec4(0u, 0xffffffffu, 0u, 0u); }

// Kernels call this with tiles aligned to the block map's (pc.mask_tile_q rows, pc.mask_tile_k keys).
bool mask_tile_visible(uint b, uint h, uint q_lo, uint q_hi, uint k_lo, uint k_hi) {
  const uint qt = mask_query_index(b, q_lo) / pc.mask_tile_q, kt = k_lo / pc.mask_tile_k;
  return mask_blocks[b * pc.mask_blocks_stride_b + h * pc.mask_blocks_stride_h + qt * pc.mask_k_tiles + kt] != 0u;
}
