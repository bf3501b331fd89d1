//! requires: flashattention/common.glsl flashattention/hooks_keys.glsl
// A candidate copy of decode_coopmat.glsl, timed by `bash bench/h200.sh tensor-decode` through
// FOUNDRY_KERNEL_DIR with FOUNDRY_FA_DECODE_WARPS=2: 32-key tiles (two independent product chains a
// tile, twice the bytes in flight per subgroup), Q read from one shared copy per workgroup instead of
// held in registers, V's staging rows in an array of its own (the Selector sizes dc_tile for 16-key
// tiles of K and V: 32 rows of K a subgroup).
// Flash decoding on NV cooperative matrices (tensor cores). The DECODE_HEADS query heads of one KV
// head are rows 0 .. DECODE_HEADS - 1 of 16-row fragments (the other rows hold zeros and are never
// written). Each subgroup takes 16-key tiles [t, t + 16) of keys [kv_begin, kv_end), the tiles
// starting at multiples of 16 (keys before kv_begin masked), so an int8 tile lies in one scale block.
// Per tile, in this subgroup alone (its own staging rows for K and for V, subgroup barriers only):
//   the next tile's rows are loaded into registers first, 16 bytes a load;
//   this tile's K and V rows go to the staging rows as f16 (int8: the codes as they are, exact in
//   f16), then one barrier;
//   S = Q K^T, int8 per 32-dimension chunk, each chunk's sum scaled once by its scale;
//   the softmax in registers on the quad layout (CM_ROW_OF / CM_COL_OF: each lane knows the row and
//   key of its elements; row maxima take two xor shuffles within a quad);
//   O += P V, int8 per 16-dimension slice, scaled once; a barrier before the next tile's rows.
// The barriers order shared memory only (DC_SYNC); barriers over every storage class, which could
// have waited for the next tile's loads, measured the same on the H200 (docs/performance.md).
// int8 codes widen to f16 pairs (bytes 0 and 2, 1 and 3 of a word), stored as they widen: a staged
// row holds dimension DC_DIM(p) at position p (1 and 2 of every 4 swapped); Q is staged the same way
// and O's columns are read back through it, so no code is moved to restore the order.

#define F16MAT fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32MAT fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

const uint DC_KEYS = 32u;                                   // keys per tile
const uint DC_D = HEAD_DIM / 16u, DC_DV = VALUE_DIM / 16u;  // 16-wide slices of q/k and of v/o
const uint DC_ROW4 = (max(HEAD_DIM, VALUE_DIM) + 8u) / 8u;  // a staged row, in uvec4, skewed by 16 bytes
const uint DC_STAGE4 = DC_KEYS * DC_ROW4;                   // one subgroup's K (or V) staging rows
shared uvec4 dc_tile_v[DECODE_WARPS * DC_STAGE4];
shared uvec4 dc_q[16u * DC_ROW4];
const uint DC_SEGS_K = HEAD_DIM / KV_WIDTH, DC_SEGS_V = VALUE_DIM / KV_WIDTH;  // 16-byte loads per row
const uint DC_LOADS_K = DC_KEYS * DC_SEGS_K / SUBGROUP_SIZE, DC_LOADS_V = DC_KEYS * DC_SEGS_V / SUBGROUP_SIZE;

#if DC_INT8
const uint DC_CHUNKS_K = HEAD_DIM / KV_BLOCK_DIMS, DC_CHUNKS_V = VALUE_DIM / KV_BLOCK_DIMS;
const uint DC_SLICES_PER_CHUNK = KV_BLOCK_DIMS / 16u;
uint DC_DIM(uint p) { return (p & ~3u) | ((p & 1u) << 1u) | ((p & 2u) >> 1u); }
uvec4 dc_load_k(KV_ROW row, uint d) { return kv_load_k_codes(row, d); }
uvec4 dc_load_v(KV_ROW row, uint d) { return kv_load_v_codes(row, d); }
#else
const uint DC_CHUNKS_K = 1u, DC_CHUNKS_V = 1u;
const uint DC_SLICES_PER_CHUNK = DC_D;
uint DC_DIM(uint p) { return p; }
uvec4 dc_load_k(KV_ROW row, uint d) { return kv_load_k(row, d); }
uvec4 dc_load_v(KV_ROW row, uint d) { return kv_load_v(row, d); }
#endif

// One tile's rows as loaded: load j of a lane is segment g = lane + SUBGROUP_SIZE * j, key g / segs.
struct DcTile {
  uvec4 k[DC_LOADS_K];
  uvec4 v[DC_LOADS_V];
  float ks[DC_CHUNKS_K];  // int8: the tile's scale of each 32-dimension chunk
  float vs[DC_CHUNKS_V];
};

void dc_load(uint t, uint last, uint b, uint kv_h, out DcTile x) {
  const uint lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) {
    const uint g = lane + SUBGROUP_SIZE * j;
    x.k[j] = dc_load_k(kv_k_row(b, kv_h, min(t + g / DC_SEGS_K, last)), (g % DC_SEGS_K) * KV_WIDTH);
  }
  [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) {
    const uint g = lane + SUBGROUP_SIZE * j;
    x.v[j] = dc_load_v(kv_v_row(b, kv_h, min(t + g / DC_SEGS_V, last)), (g % DC_SEGS_V) * KV_WIDTH);
  }
#if DC_INT8
  // Every key of the tile lies in the scale block of its first.
  const KV_ROW k0 = kv_k_row(b, kv_h, t), v0 = kv_v_row(b, kv_h, t);
  [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) x.ks[c] = kv_k_scale(k0, c * KV_BLOCK_DIMS);
  [[unroll]] for (uint c = 0u; c < DC_CHUNKS_V; ++c) x.vs[c] = kv_v_scale(v0, c * KV_BLOCK_DIMS);
#else
  x.ks[0] = x.vs[0] = 1.0;
#endif
}

// Writes loads `rows` of one tile (segs loads per row) to the staging rows at `base` as f16.
#define DC_STAGE(rows, loads, segs, base, area)                                            \
  [[unroll]] for (uint j = 0u; j < (loads); ++j) {                                        \
    const uint g = gl_SubgroupInvocationID + SUBGROUP_SIZE * j;                            \
    const uint at = (base) + (g / (segs)) * DC_ROW4 + (g % (segs)) * (KV_WIDTH / 8u);       \
    const uvec4 r = rows[j];                                                               \
    DC_STAGE_LOAD(r, at, area)                                                             \
  }

#if DC_INT8
// 16 codes: each word's even and odd pairs, in the order they widen.
#define DC_STAGE_LOAD(r, at, area)                                                         \
  {                                                                                        \
    area[at] = uvec4(packFloat2x16(i8_even_f16(r.x)), packFloat2x16(i8_odd_f16(r.x)),     \
                     packFloat2x16(i8_even_f16(r.y)), packFloat2x16(i8_odd_f16(r.y)));    \
    area[at + 1u] = uvec4(packFloat2x16(i8_even_f16(r.z)), packFloat2x16(i8_odd_f16(r.z)), \
                          packFloat2x16(i8_even_f16(r.w)), packFloat2x16(i8_odd_f16(r.w)));\
  }
#else
#define DC_STAGE_LOAD(r, at, area) area[at] = r;
#endif

#define DC_SYNC() controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease)

void flash_decode_coopmat(uint kv_begin, uint kv_end, uint kv_h, float qk_scale, uint b, uint h0, uint q_pos,
                          uvec4 keys) {
  const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
  const uint base4 = sg * DC_STAGE4, vbase4 = sg * DC_STAGE4;
  const uint lane_row = lane >> 2u, lane_col = 2u * (lane & 3u);

  // q through the staging rows as A fragments, each head's row divided by its largest |q| (so f32 q
  // and large values stay within f16); row_unit multiplies the scores back, with the logit scale.
  float top[DECODE_HEADS];
  [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
    float x = 0.0;
    for (uint d = lane; d < HEAD_DIM; d += SUBGROUP_SIZE) x = max(x, abs(q_shared[h * HEAD_DIM + d]));
    top[h] = subgroupMax(x);
  }
  float row_unit[CM_SLOTS];
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    const uint row = CM_SLOT_ROW[r] + lane_row;
    float t = 0.0;
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) t = row == h ? top[h] : t;
    row_unit[r] = t * fa_logit_scale(qk_scale);
  }
  for (uint i = gl_LocalInvocationIndex; i < 16u * (HEAD_DIM / 2u); i += DECODE_WARPS * SUBGROUP_SIZE) {
    const uint row = i / (HEAD_DIM / 2u), p = 2u * (i % (HEAD_DIM / 2u));
    vec2 x = vec2(0.0);
    if (row < DECODE_HEADS && top[min(row, DECODE_HEADS - 1u)] > 0.0) {
      const float inv = 1.0 / top[min(row, DECODE_HEADS - 1u)];
      x = vec2(q_shared[row * HEAD_DIM + DC_DIM(p)], q_shared[row * HEAD_DIM + DC_DIM(p + 1u)]) * inv;
    }
    dc_q[row * DC_ROW4 + p / 8u][(p / 2u) % 4u] = packFloat2x16(f16vec2(x));
  }
  barrier();

  F32MAT o[DC_DV];
  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) o[j] = F32MAT(0.0);
  float m[CM_SLOTS], l[CM_SLOTS];  // l: this lane's share of its rows' sums
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    m[r] = NEG_BIG;
    l[r] = 0.0;
  }

  const uint last = kv_end - 1u;
  const uint stride = DECODE_WARPS * DC_KEYS;
  const bool exact = fa_keys_exact(keys, kv_begin, kv_end);
  uint t = kv_begin - kv_begin % DC_KEYS + sg * DC_KEYS;
  DcTile cur;
  if (t < kv_end) dc_load(t, last, b, kv_h, cur);
  for (; t < kv_end; t += stride) {
    DcTile next;
    if (t + stride < kv_end) dc_load(t + stride, last, b, kv_h, next);

    DC_STAGE(cur.k, DC_LOADS_K, DC_SEGS_K, base4, dc_tile)
    DC_STAGE(cur.v, DC_LOADS_V, DC_SEGS_V, vbase4, dc_tile_v)
    DC_SYNC();
    F32MAT s2[2];
    s2[0] = F32MAT(0.0);
    s2[1] = F32MAT(0.0);
    [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) {
      F32MAT sc[2];
      sc[0] = F32MAT(0.0);
      sc[1] = F32MAT(0.0);
      const uint slices = DC_INT8 != 0 ? DC_SLICES_PER_CHUNK : DC_D;
      [[unroll]] for (uint i = 0u; i < slices; ++i) {
        const uint dd = c * slices + i;
        F16MAT qf;
        coopMatLoadNV(qf, dc_q, dd * 2u, DC_ROW4, false);
        [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {
          F16MAT kb;  // K^T slice: element (dim, key) read column-major from the key rows
          coopMatLoadNV(kb, dc_tile, base4 + half_ * 16u * DC_ROW4 + dd * 2u, DC_ROW4, true);
          sc[half_] = coopMatMulAddNV(qf, kb, sc[half_]);
        }
      }
      [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) s2[half_] = s2[half_] + sc[half_] * cur.ks[c];
    }

    // The softmax on this lane's elements: rows past the heads, keys outside the range and keys the
    // masks hide score NEG_BIG.
    float mx[CM_SLOTS];
    [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) mx[r] = NEG_BIG;
    [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {
    F32MAT s = s2[half_];
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) {
      const uint row = CM_ROW_OF[e] + lane_row, key = t + half_ * 16u + CM_COL_OF[e] + lane_col;
      const uint h = h0 + min(row, DECODE_HEADS - 1u), at = min(key, last);
      float x = s[e] * row_unit[CM_SLOT_OF[e]];
      if (FA_SCORE_CHANGED) x = fa_score_log2(x, b, h, q_pos, at);
      const bool valid = row < DECODE_HEADS && key >= kv_begin && key < kv_end && (exact || fa_visible(b, h, q_pos, at));
      s[e] = valid ? x : NEG_BIG;
      mx[CM_SLOT_OF[e]] = max(mx[CM_SLOT_OF[e]], s[e]);
    }
    s2[half_] = s;
    }
    float alpha[CM_SLOTS];
    [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
      mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 1u));
      mx[r] = max(mx[r], subgroupShuffleXor(mx[r], 2u));
      const float m_new = max(m[r], mx[r]);
      alpha[r] = exp2(m[r] - m_new);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
      [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) o[j][e] *= alpha[CM_SLOT_OF[e]];
    }
    F16MAT pm[2];
    [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {
      F32MAT s = s2[half_];
      [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) {
        const float p = s[e] > 0.5 * NEG_BIG ? exp2(s[e] - m[CM_SLOT_OF[e]]) : 0.0;
        s[e] = p;
        l[CM_SLOT_OF[e]] += p;
      }
      pm[half_] = F16MAT(s);
    }
    [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
      F16MAT vb0, vb1;
      coopMatLoadNV(vb0, dc_tile_v, vbase4 + j * 2u, DC_ROW4, false);
      coopMatLoadNV(vb1, dc_tile_v, vbase4 + 16u * DC_ROW4 + j * 2u, DC_ROW4, false);
#if DC_INT8
      o[j] = o[j] + coopMatMulAddNV(pm[1], vb1, coopMatMulAddNV(pm[0], vb0, F32MAT(0.0))) * cur.vs[j / DC_SLICES_PER_CHUNK];
#else
      o[j] = coopMatMulAddNV(pm[1], vb1, coopMatMulAddNV(pm[0], vb0, o[j]));
#endif
    }
    DC_SYNC();  // every lane has read K and V before the next tile's rows take their places
    cur = next;
  }

  // The subgroup's normalised partial of each real row, through the staged order of O's columns.
  float inv[CM_SLOTS];
  [[unroll]] for (uint r = 0u; r < CM_SLOTS; ++r) {
    l[r] += subgroupShuffleXor(l[r], 1u);
    l[r] += subgroupShuffleXor(l[r], 2u);
    inv[r] = l[r] > 0.0 ? 1.0 / l[r] : 0.0;
    const uint row = CM_SLOT_ROW[r] + lane_row;
    if (row < DECODE_HEADS && (lane & 3u) == 0u) {
      part_m[sg * DECODE_HEADS + row] = m[r];
      part_l[sg * DECODE_HEADS + row] = l[r];
    }
  }
  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e) {
      const uint row = CM_ROW_OF[e] + lane_row;
      if (row < DECODE_HEADS) {
        const uint d = DC_DIM(j * 16u + CM_COL_OF[e] + lane_col);
        part_o[(sg * DECODE_HEADS + row) * VALUE_DIM + d] = PART_T(PART_CLAMP(o[j][e] * inv[CM_SLOT_OF[e]]));
      }
    }
  }
}
