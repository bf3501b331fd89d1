//! requires: flashattention/probe.glsl
// The K/V tile loop both prefill variants run over keys [kv_begin, kv_end), for rows whose first
// sits at position pos0. The variant defines its state PF_STATE, the registers of one invocation's
// share of a K/V tile (PF_KV_LOADS of PF_KV_T), and pf_fetch_kv, pf_store_kv, pf_copy_kv and
// pf_tile; the caller has staged Q (pf_begin). The bound is uniform across the workgroup, so every
// barrier is too.
//
// With two staging buffers the next tile's loads are issued before this tile's products, so their
// latency hides behind them, and are stored into the other buffer before the barrier. With one (a
// wide tile twice over may not fit in shared memory) the next tile is fetched once every subgroup is
// done reading this one: holding it in registers across the products instead took the H200's D128
// cooperative-matrix kernel from 203 to 255 registers and was no faster (docs/performance.md).
//
// The block's rows sit at positions pos0 .. pos_hi of sequence b, query head h; `keys` is their
// fa_keys, and [kv_begin, kv_end) lies inside it. Tiles that a tile-visibility hook rules out are
// stepped over before any of their K/V is loaded. Rows past the end of the call (in the last query
// tile) are computed at positions past pos_hi and never stored.
//
// The first tile at or after t that may hold a visible key (kv_end if none).
uint pf_next_tile(uint t, uint kv_end, uint b, uint h, uint pos0, uint pos_hi) {
  if (FA_TILE_VISIBLE_HOOKED) {
    while (t < kv_end && !fa_tile_visible(b, h, pos0, pos_hi, t, min(t + PF_BC, kv_end))) t += PF_BC;
  }
  return t;
}

// Element masks only where the tile is not surely visible to every row (it crosses the diagonal, a
// window's edge, the end of the range, or a mask without a range).
bool pf_tile_masked(uvec4 keys, uint t, uint kv_end) {
  return t + PF_BC > kv_end || !fa_keys_all_visible(keys, t, t + PF_BC);
}

// One tile through pf_tile. With PF_MASK_SPLIT the mask flag is a constant at each of two calls, so
// that the driver compiles the element masks away where a tile needs none (the H200's causal prefill:
// 1-3% faster than one call taking the flag as a value); otherwise one call takes it as a value (D256
// on the H200, whose two copies of the tile code did not fit its registers: 4% slower).
void pf_tile_at(inout PF_STATE st, uint stage, uint t, uint kv_end, uvec4 keys, uint b, uint h, uint pos0,
                float qk_scale) {
#if PF_MASK_SPLIT
  if (pf_tile_masked(keys, t, kv_end)) {
    pf_tile(st, stage, t, kv_end, true, b, h, pos0, keys, qk_scale);
  } else {
    pf_tile(st, stage, t, kv_end, false, b, h, pos0, keys, qk_scale);
  }
#else
  pf_tile(st, stage, t, kv_end, pf_tile_masked(keys, t, kv_end), b, h, pos0, keys, qk_scale);
#endif
}

// With a loader subgroup (PF_LOADER: the one past the PF_WARPS compute subgroups), it fills the other
// staging buffer with the next tile while the compute subgroups use this one, and one barrier per
// tile hands the buffers over: the compute subgroups hold no staging registers and issue no loads.
void pf_tile_loop(inout PF_STATE st, uint kv_begin, uint kv_end, uint kv_h, uint b, uint h, uint pos0,
                  uint pos_hi, uvec4 keys, float qk_scale) {
  uint t = pf_next_tile(kv_begin, kv_end, b, h, pos0, pos_hi);
  probe_mark(PROBE_SETUP);
  if (t >= kv_end) return;
#if PF_STAGES == 0
  // Tiles load straight from the cache (workgroup-scope tensor loads): nothing to stage, no barrier.
  while (t < kv_end) {
    const uint next = pf_next_tile(t + PF_BC, kv_end, b, h, pos0, pos_hi);
    pf_tile_at(st, 0u, t, kv_end, keys, b, h, pos0, qk_scale);
    probe_mark(PROBE_TILE);
    t = next;
  }
  return;
#endif
  const uint kv_last = kv_end - 1u;
#if PF_LOADER
  const bool loads = gl_SubgroupID == PF_WARPS;
  if (loads) pf_load_tile(t, kv_last, b, kv_h, 0u);
#else
#if PF_STAGES == 2
  PF_KV_T kr[PF_KV_LOADS], vr[PF_KV_LOADS];
  pf_fetch_kv(t, kv_last, b, kv_h, kr, vr);
  pf_store_kv(0u, kr, vr);
#else
  pf_copy_kv(0u, t, kv_last, b, kv_h);
#endif
#endif
  probe_mark(PROBE_LOADS);
  barrier();
  probe_mark(PROBE_BARRIER);
  uint stage = 0u;
  while (t < kv_end) {
    const uint next = pf_next_tile(t + PF_BC, kv_end, b, h, pos0, pos_hi);
    const bool has_next = next < kv_end;
#if PF_LOADER
    if (loads) {
      if (has_next) pf_load_tile(next, kv_last, b, kv_h, stage ^ 1u);
      probe_mark(PROBE_LOADS);
    } else {
      pf_tile_at(st, stage, t, kv_end, keys, b, h, pos0, qk_scale);
      probe_mark(PROBE_TILE);
    }
    barrier();
    probe_mark(PROBE_BARRIER);
    stage ^= 1u;
#else
#if PF_STAGES == 2
    if (has_next) pf_fetch_kv(next, kv_last, b, kv_h, kr, vr);
    probe_mark(PROBE_LOADS);
#endif
    pf_tile_at(st, stage, t, kv_end, keys, b, h, pos0, qk_scale);
    probe_mark(PROBE_TILE);
#if PF_STAGES == 2
    if (has_next) pf_store_kv(stage ^ 1u, kr, vr);
    probe_mark(PROBE_LOADS);
    barrier();
    probe_mark(PROBE_BARRIER);
    stage ^= 1u;
#else
    barrier();
    probe_mark(PROBE_BARRIER);
    if (has_next) {
      pf_copy_kv(0u, next, kv_last, b, kv_h);
      probe_mark(PROBE_LOADS);
      barrier();
      probe_mark(PROBE_BARRIER);
    }
#endif
#endif  // PF_LOADER
    t = next;
  }
}
