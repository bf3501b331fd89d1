// The K/V tile loop both prefill variants run over keys [kv_begin, kv_end), for rows whose first
// sits at position pos0. The variant defines its state PF_STATE, the registers of one invocation's
// share of a K/V tile (PF_KV_LOADS of PF_KV_T), and pf_fetch_kv, pf_store_kv and pf_tile; the caller
// has staged Q (pf_begin). The bound is uniform across the workgroup, so every barrier is too.
//
// With two staging buffers the next tile's loads are issued before this tile's products, so their
// latency hides behind them, and are stored into the other buffer before the barrier. With one (a
// wide tile twice over may not fit in shared memory) the next tile is fetched once every subgroup is
// done reading this one: holding it in registers across the products instead took the H200's D128
// cooperative-matrix kernel from 203 to 255 registers and was no faster (docs/performance.md).
void pf_tile_loop(inout PF_STATE st, uint kv_begin, uint kv_end, uint k_base, uint v_base, uint pos0, bool causal,
                  float qk_scale) {
  if (kv_begin >= kv_end) return;
  const uint kv_last = kv_end - 1u;
  PF_KV_T kr[PF_KV_LOADS], vr[PF_KV_LOADS];
  pf_fetch_kv(kv_begin, kv_last, k_base, v_base, kr, vr);
  pf_store_kv(0u, kr, vr);
  barrier();
  uint stage = 0u;
  for (uint t = kv_begin; t < kv_end; t += PF_BC) {
    const bool has_next = t + PF_BC < kv_end;
#if PF_STAGES == 2
    if (has_next) pf_fetch_kv(t + PF_BC, kv_last, k_base, v_base, kr, vr);
#endif
    // Element masks only where the tile crosses the diagonal or the end of the range.
    const bool masked = t + PF_BC > kv_end || (causal && t + PF_BC - 1u > pos0);
    pf_tile(st, stage, t, kv_end, pos0, masked, causal, qk_scale);
#if PF_STAGES == 2
    if (has_next) pf_store_kv(stage ^ 1u, kr, vr);
    barrier();
    stage ^= 1u;
#else
    barrier();
    if (has_next) {
      pf_fetch_kv(t + PF_BC, kv_last, k_base, v_base, kr, vr);
      pf_store_kv(0u, kr, vr);
      barrier();
    }
#endif
  }
}
