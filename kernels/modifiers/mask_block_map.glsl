//! requires: flashattention/common.glsl modifiers/mask_access.glsl
// One block map entry per workgroup: whether any element of a (tile_q x tile_k) tile of the mask is
// visible. Grid: (key tiles, query tiles, Bm * Hm).

void mask_block_map(uint bm, uint hm, uint qt, uint kt) {
  if (gl_LocalInvocationIndex == 0u) mask_any[0] = 0u;
  barrier();
  const uint i0 = qt * pc.mask_tile_q, k0 = kt * pc.mask_tile_k;
  const uint rows = min(pc.mask_tile_q, pc.q_len - i0), keys = min(pc.mask_tile_k, pc.kv_len - k0);
  bool any_visible = false;
  for (uint e = gl_LocalInvocationIndex; e < rows * keys; e += WORKGROUP_SIZE) {
    any_visible = any_visible || mask_element_visible(mask_row(bm, hm, i0 + e / keys), k0 + e % keys);
  }
  if (any_visible) mask_any[0] = 1u;  // every writer writes the same value
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    mask_blocks[(bm * pc.mask_heads + hm) * pc.mask_q_tiles * pc.mask_k_tiles + qt * pc.mask_k_tiles + kt] = mask_any[0];
  }
}
