//! requires: flashattention/common.glsl flashattention/hooks_keys.glsl
// Flash decoding on NV cooperative matrices (tensor cores), transposed: the keys are the rows and the
// GQA group's DECODE_HEADS query heads the 8 columns of 16x8 products, so no accumulator pads the
// heads to 16 rows.
//   S^T (16 keys x 8 heads) = K Q^T: int8 K as it is stored against q quantized to two bytes, in
//     int8 products summed exactly in int32 per 32-dimension chunk and scaled once (both bytes in one
//     product's columns where the group has at most 4 heads, DC_QCOLS); f16 in f16 products; bf16
//     in bf16 products where the device and glslc have them (DC_BF16_OPS), else (DC_BF16) in f16
//     products over a power of two a tile, K's and V's apart;
//   O^T (value dims x 8 heads) += V^T P^T in f16 products, V's rows read transposed from shared memory.
// Each subgroup takes 16-key tiles [t, t + 16) of keys [kv_begin, kv_end) in rounds of DC_RING
// adjacent tiles: round r of subgroup sg starts at first + r * DECODE_WARPS * DC_RING * 16, first the
// multiple of DC_RING * 16 at or before kv_begin plus sg * DC_RING * 16 (keys before kv_begin masked),
// so a round's tiles lie in whole int8 scale blocks (two tiles in one block of 32 keys) and share their
// scale loads; adjacent tiles were 0.3-1.0 us faster than tiles a subgroup apart (docs/performance.md,
// "int8 decode with V's fragments built from its loads"). The DC_RING
// tiles are in flight in registers (16-byte loads), taken DC_PAIR at a time (2: both tiles' K staged
// at once, one softmax for their 32 keys, V a tile at a time). A subgroup's own rows of shared memory
// take DC_PAIR tiles' K as stored, then, once the scores are taken, a tile's V widened to f16, and
// after the loop the subgroup's partials (so that 8 subgroups' staging fits where an SM holds two 20 KB
// workgroups; see docs/performance.md, "Tensor-core decode: how many workgroups share an SM"); as each
// half of a tile is staged, that half of the tile DC_RING ahead is loaded in its place.
// DC_VHALVES (int8 rows of 128): a tile's V is staged and multiplied in two halves of its dims, each
// lane's loads alternating halves, and its next V rows are loaded between the halves.
// DC_VREGS (int8 rows of 128): V is never staged. Lane 4g + c loads keys 2c, 2c + 1, 2c + 8 and 2c + 9
// of a tile at dims [16g, 16g + 16), which are the keys and dims its elements of V^T's 16x16 fragments
// hold (the device's f16 layout, CMH_ROW_OF / CMH_COL_OF, from the probe) once slice j's rows g and
// g + 8 are dims 16g + 2j and 16g + 2j + 1; it widens its codes into the fragments in registers, and a
// tile's next V rows are loaded with its next K rows.
// The softmax runs in registers on the device's 16x8 accumulator layout (CM8_ROW_OF / CM8_COL_OF, from
// the probe): element e of a lane is key CM8_ROW_OF[e] + lane / 4 and head CM8_COL_OF[e] + 2 * (lane % 4),
// so a lane holds two heads (CM8_COL_OF is 0 or 1). P^T goes through shared memory to become a
// product's operand.
// int8 V codes widen to f16 pairs (bytes 0 and 2, 1 and 3 of a word), stored as they widen: a staged
// V row holds dimension DC_DIM(p) at position p (1 and 2 of every 4 swapped); O^T's rows are written
// back through it, so no code is moved to restore the order. With DC_VREGS, row p of O^T (slice p / 16,
// row p % 16 of it) is the dimension its fragments of V^T were built with.

#if DC_BF16_OPS
// bf16 q, K and V as the products' operands as stored (GL_KHR_cooperative_matrix types with
// GL_EXT_bfloat16): every product exact in f32, P^T in bf16.
#define F16A coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define F16B coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 8, gl_MatrixUseB>
#define F32C coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>
#define DC_LOAD_ROWS(m, at, stride) coopMatLoad(m, dc_tile, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define DC_LOAD_COLS(m, at, stride) coopMatLoad(m, dc_tile, at, stride, gl_CooperativeMatrixLayoutColumnMajor)
#define DC_MMA(a, b, c) coopMatMulAdd(a, b, c)
// Two values as one word of a product's operand rows, the first in the low half.
uint dc_pack2(float a, float b) { return bf16_bits(a) | (bf16_bits(b) << 16u); }
// What q's rows are divided by: a power of two (no rounding in bf16) at or below its largest magnitude.
float dc_q_unit(float top) { return uintBitsToFloat(floatBitsToUint(top) & 0x7f800000u); }
#else
#define F16A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F16B fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define F32C fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>
#define DC_LOAD_ROWS(m, at, stride) coopMatLoadNV(m, dc_tile, at, stride, false)
#define DC_LOAD_COLS(m, at, stride) coopMatLoadNV(m, dc_tile, at, stride, true)
#define DC_MMA(a, b, c) coopMatMulAddNV(a, b, c)
uint dc_pack2(float a, float b) { return packFloat2x16(f16vec2(a, b)); }
float dc_q_unit(float top) { return top; }
#endif

const uint DC_KEYS = 16u, DC_COLS = 8u;                     // keys per tile; heads per product
const float DC_HEADROOM = 8.0;  // log2 units a score may exceed the running maximum by before it moves
const uint DC_DV = VALUE_DIM / 16u;                         // 16-row slices of O^T
const uint DC_SEGS_K = HEAD_DIM / KV_WIDTH, DC_SEGS_V = VALUE_DIM / KV_WIDTH;  // 16-byte loads per row
const uint DC_LOADS_K = DC_KEYS * DC_SEGS_K / SUBGROUP_SIZE, DC_LOADS_V = DC_KEYS * DC_SEGS_V / SUBGROUP_SIZE;
// One subgroup's staging (DC_STAGE4 uvec4, from DecodeVariant): DC_ROWS4 for DC_PAIR x 16 K rows as
// stored of DC_ROW4K uvec4 (and Q before the loop), or 16 V rows in f16 of DC_ROW4V, or the partials;
// then P^T's DC_PAIR x 16 rows of 8 f16.

#if DC_INT8
#define I8A icoopmatNV<8, gl_ScopeSubgroup, 16, 32>
#define I8B icoopmatNV<8, gl_ScopeSubgroup, 32, 8>
#define I32C icoopmatNV<32, gl_ScopeSubgroup, 16, 8>
const uint DC_CHUNKS_K = HEAD_DIM / KV_BLOCK_DIMS, DC_CHUNKS_V = VALUE_DIM / KV_BLOCK_DIMS;
const uint DC_QUNIT = 16383u;  // q's largest |q| in two-byte units: hi * 128 + lo, hi signed, lo 0..127
// With at most half the columns' heads, q's two bytes share one product: column h holds head h's high
// bytes and column h + DC_COLS / 2 its low ones, so a chunk takes one int8 product instead of two. The
// lane holding column h + 4 of a key is lane ^ 2 of the one holding column h (the layout above), and
// one shuffle joins the two halves of a score.
const bool DC_QCOLS = 2u * DECODE_HEADS <= DC_COLS;
uint DC_DIM(uint p) {
  const uint j = p / 16u, r = p % 16u;  // DC_VREGS: slice j's rows r < 8 and r + 8 are dims 16r + 2j, + 1
  if (DC_VREGS != 0) return 16u * (r % 8u) + 2u * j + r / 8u;
  return (p & ~3u) | ((p & 1u) << 1u) | ((p & 2u) >> 1u);
}
uvec4 dc_load_k(KV_ROW row, uint d) { return kv_load_k_codes(row, d); }
uvec4 dc_load_v(KV_ROW row, uint d) { return kv_load_v_codes(row, d); }
#else
const uint DC_KSLICES = HEAD_DIM / 16u;
const bool DC_QCOLS = false;  // f16 q takes one product a slice already
uint DC_DIM(uint p) { return p; }
uvec4 dc_load_k(KV_ROW row, uint d) { return kv_load_k(row, d); }
uvec4 dc_load_v(KV_ROW row, uint d) { return kv_load_v(row, d); }
#endif

// All ones for a tile's row from `skip` on, else zero: rows before (the first tile's keys before the
// range) are staged as zeros, so that what they hold neither sets bf16's power of two nor reaches a
// product (a hidden infinity times a zero weight would be NaN).
uint dc_keep(uint row, uint skip) { return row >= skip ? 0xffffffffu : 0u; }

#if DC_BF16
// bf16 rows reach the f16 products through a power of two per tile (K's and V's apart), which the
// tile's scores or its P V products are multiplied back by. The tile's largest magnitude lands in
// [2^14, 2^15), so no value overflows; every value within 2^-28 of the largest keeps its 8 bits in
// f16's normals (2^-31 with its subnormals), and smaller ones lose under 2^-28 of the largest, below
// f32's rounding of the sums they enter. Every bf16 value, however large or small, is within reach.
// Infinities and NaN (an exponent of all ones) stay out of the tile's power of two: they pass through
// any scale, where setting it would flush the tile's finite values.
uint dc_bf16_top(uvec4 r) {
  const uvec4 lo = r & 0x7fffu, hi = (r >> 16u) & 0x7fffu, none = uvec4(0u), inf = uvec4(0x7f80u);
  const uvec4 a = max(mix(lo, none, greaterThanEqual(lo, inf)), mix(hi, none, greaterThanEqual(hi, inf)));
  return max(max(a.x, a.y), max(a.z, a.w));
}
// 2^s as f32 for |s| <= 126.
float dc_pow2(int s) { return uintBitsToFloat(uint(s + 127) << 23u); }
// The shift that brings a tile whose largest magnitude has the bits `top` into [2^14, 2^15): its
// exponent field e is 127 + log2 of its power of two. All-zero and subnormal tiles take 2^126.
int dc_bf16_shift(uint top) { return clamp(141 - int(top >> 7u), -126, 126); }
uvec4 dc_bf16_f16(uvec4 r, float scale) {
  return uvec4(packHalf2x16(bf16x2_to_f32(r.x) * scale), packHalf2x16(bf16x2_to_f32(r.y) * scale),
               packHalf2x16(bf16x2_to_f32(r.z) * scale), packHalf2x16(bf16x2_to_f32(r.w) * scale));
}
// `shift` and `scale` (2^shift) of a tile's rows (x.k or x.v: n loads a lane, segs of them a row), in
// the staging function's scope (its `lane` and `skip`). A macro, not a function: one that took the tile by value left the
// tiles in flight in local memory on the H200 (docs/performance.md, "bf16 decode on the tensor cores").
#define DC_BF16_SCALE(rows, n, segs)                                                             \
  uint top = 0u;                                                                                 \
  [[unroll]] for (uint j = 0u; j < n; ++j) {                                                     \
    top = max(top, dc_bf16_top(rows[j] & dc_keep((lane + SUBGROUP_SIZE * j) / segs, skip)));     \
  }                                                                                              \
  const int shift = dc_bf16_shift(subgroupMax(top));                                             \
  const float scale = dc_pow2(shift)
#define DC_STAGED_UNIT dc_pow2(-shift)  // what a staged tile's products are multiplied by
#else
#define DC_STAGED_UNIT 1.0
#endif

// One tile's rows as loaded: load j of a lane is segment g = lane + SUBGROUP_SIZE * j, key g / segs;
// seq: the tile's kv_seq. A tile starts at a multiple of 16 and pages hold whole tiles (DecodeVariant
// takes pages of a multiple of 16 rows), so its rows take one block-table lookup, made as its K rows
// are loaded and kept for its V rows.
struct DcTile {
  uvec4 k[DC_LOADS_K];
  uvec4 v[DC_LOADS_V];
  uint seq;
};

// K's rows of the tile at t.
void dc_load_keys(uint t, uint last, uint b, uint kv_h, inout DcTile x) {
  const uint lane = gl_SubgroupInvocationID;
  x.seq = kv_seq(b, t);  // t < kv_end wherever a tile is loaded
  [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) {
    const uint g = lane + SUBGROUP_SIZE * j, key = min(t + g / DC_SEGS_K, last);
    x.k[j] = dc_load_k(kv_k_row_in(x.seq, kv_h, key), (g % DC_SEGS_K) * KV_WIDTH);
  }
}

#if DC_INT8
// The scales of DC_STILES of the scale blocks a subgroup visits, in one K and one V load a lane, from
// the round at t on (rounds `step` keys apart, each covering DC_RBLOCKS blocks): lane l holds chunk
// l % DC_SCHUNKS of block l / DC_SCHUNKS of the group (every key of a tile lies in the scale block of
// its first). A load a tile cost 8.6 us of 58 (H200, int8 D128 kv 65536; docs/performance.md).
const uint DC_SCHUNKS = max(DC_CHUNKS_K, DC_CHUNKS_V), DC_STILES = SUBGROUP_SIZE / DC_SCHUNKS;
const uint DC_RBLOCKS = max(1u, DC_RING * DC_KEYS / KV_BLOCK_KEYS);
vec2 dc_load_scales(uint t, uint step, uint last, uint b, uint kv_h) {
  const uint lane = gl_SubgroupInvocationID, c = lane % DC_SCHUNKS, block = lane / DC_SCHUNKS;
  const uint key = min(t + (block / DC_RBLOCKS) * step + (block % DC_RBLOCKS) * KV_BLOCK_KEYS, last);
  return vec2(kv_k_scale(kv_k_row(b, kv_h, key), min(c, DC_CHUNKS_K - 1u) * KV_BLOCK_DIMS),
              kv_v_scale(kv_v_row(b, kv_h, key), min(c, DC_CHUNKS_V - 1u) * KV_BLOCK_DIMS));
}
#endif

// V's rows of the tile at t (its K rows loaded into x before): load j of a lane is segment dc_vseg(j)
// of key dc_vkey(j). DC_VHALVES: load j is of half j % 2 of its row (dimensions [half * VALUE_DIM / 2,
// ...)), so that every lane holds loads of both halves, and a staged row holds one half.
const uint DC_HSEGS = DC_SEGS_V / 2u, DC_STAGED_SEGS = DC_VHALVES != 0 ? DC_HSEGS : DC_SEGS_V;
uint dc_vkey(uint j) {
  if (DC_VREGS != 0) return 2u * (gl_SubgroupInvocationID & 3u) + (j & 1u) + 8u * (j >> 1u);
  return DC_VHALVES != 0 ? (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) / DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) / DC_SEGS_V;
}
uint dc_vseg(uint j) {
  if (DC_VREGS != 0) return gl_SubgroupInvocationID >> 2u;
  return DC_VHALVES != 0 ? (j % 2u) * DC_HSEGS + (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) % DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) % DC_SEGS_V;
}
// Where load j of a lane is staged in the rows at vbase.
uint dc_value_at(uint vbase, uint j) {
  return vbase + dc_vkey(j) * DC_ROW4V + (dc_vseg(j) % DC_STAGED_SEGS) * (KV_WIDTH / 8u);
}
void dc_load_values(uint t, uint last, uint b, uint kv_h, inout DcTile x) {
  [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) {
    const uint key = min(t + dc_vkey(j), last);
    x.v[j] = dc_load_v(kv_v_row_in(x.seq, kv_h, key), dc_vseg(j) * KV_WIDTH);
  }
}

// Stages a tile's K rows as loaded (bf16: in f16 and scaled, or as loaded for bf16 operands, its `skip`
// rows before the range zero);
// returns what its scores are multiplied by.
float dc_stage_keys(DcTile x, uint kbase, uint skip) {
  const uint lane = gl_SubgroupInvocationID;
#if DC_BF16
  DC_BF16_SCALE(x.k, DC_LOADS_K, DC_SEGS_K);
#endif
  [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) {
    const uint g = lane + SUBGROUP_SIZE * j;
#if DC_BF16
    dc_tile[kbase + (g / DC_SEGS_K) * DC_ROW4K + g % DC_SEGS_K] = dc_bf16_f16(x.k[j] & dc_keep(g / DC_SEGS_K, skip), scale);
#elif DC_BF16_OPS
    dc_tile[kbase + (g / DC_SEGS_K) * DC_ROW4K + g % DC_SEGS_K] = x.k[j] & dc_keep(g / DC_SEGS_K, skip);
#else
    dc_tile[kbase + (g / DC_SEGS_K) * DC_ROW4K + g % DC_SEGS_K] = x.k[j];
#endif
  }
  return DC_STAGED_UNIT;
}

#if DC_INT8
// 16 int8 codes widened to f16 at dc_tile[at], [at + 1]: each word's even and odd pairs, in the order
// they widen.
void dc_stage_widened(uint at, uvec4 r) {
  dc_tile[at] = uvec4(packFloat2x16(i8_even_f16(r.x)), packFloat2x16(i8_odd_f16(r.x)),
                      packFloat2x16(i8_even_f16(r.y)), packFloat2x16(i8_odd_f16(r.y)));
  dc_tile[at + 1u] = uvec4(packFloat2x16(i8_even_f16(r.z)), packFloat2x16(i8_odd_f16(r.z)),
                           packFloat2x16(i8_even_f16(r.w)), packFloat2x16(i8_odd_f16(r.w)));
}
#endif

// Stages a tile's V rows, widened to f16 (int8), in f16 and scaled (bf16, as K's) or as loaded (f16);
// returns what its P V products are multiplied by (bf16), else 1.
float dc_stage_values(DcTile x, uint vbase, uint skip) {
  const uint lane = gl_SubgroupInvocationID;
#if DC_BF16
  DC_BF16_SCALE(x.v, DC_LOADS_V, DC_SEGS_V);
#endif
  [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) {
    const uint at = dc_value_at(vbase, j), row = dc_vkey(j);
#if DC_INT8
    dc_stage_widened(at, x.v[j]);
#elif DC_BF16
    dc_tile[at] = dc_bf16_f16(x.v[j] & dc_keep(row, skip), scale);
#elif DC_BF16_OPS
    dc_tile[at] = x.v[j] & dc_keep(row, skip);
#else
    dc_tile[at] = x.v[j];
#endif
  }
  return DC_STAGED_UNIT;
}

#if DC_INT8 && DC_VHALVES
// Half h of a tile's V rows (the Selector plans the halves where a lane has four loads a tile: loads h
// and h + 2), passed as values so that the tiles in flight stay in registers.
void dc_stage_value_half(uvec4 v0, uvec4 v1, uint vbase, uint h) {
  dc_stage_widened(dc_value_at(vbase, h), v0);
  dc_stage_widened(dc_value_at(vbase, h + 2u), v1);
}
#endif

#if DC_VREGS
// Slice j of V^T (dims 16g + 2j, row g, and 16g + 2j + 1, row g + 8, of keys 2c, 2c + 1, 2c + 8, 2c + 9)
// from a tile's four loads: word j / 2 of each, bytes 2(j % 2) and 2(j % 2) + 1. Two keys' bytes of one
// word merge into one word whose even and odd pairs widen to a row's two keys (int8_half.glsl).
F16A dc_value_slice(uvec4 v0, uvec4 v1, uvec4 v2, uvec4 v3, uint j) {
  const uint w = j / 2u;
  const uint lo = j % 2u == 0u ? (v0[w] & 0xffffu) | (v1[w] << 16u) : (v0[w] >> 16u) | (v1[w] & 0xffff0000u);
  const uint hi = j % 2u == 0u ? (v2[w] & 0xffffu) | (v3[w] << 16u) : (v2[w] >> 16u) | (v3[w] & 0xffff0000u);
  const f16vec2 row_lo = i8_even_f16(lo), row8_lo = i8_odd_f16(lo), row_hi = i8_even_f16(hi), row8_hi = i8_odd_f16(hi);
  F16A vt;
  [[unroll]] for (uint e = 0u; e < 8u; ++e) {
    const bool left = CMH_COL_OF[e] < 8u;
    const f16vec2 two = CMH_ROW_OF[e] == 0u ? (left ? row_lo : row_hi) : (left ? row8_lo : row8_hi);
    vt[e] = (CMH_COL_OF[e] & 1u) == 0u ? two.x : two.y;
  }
  return vt;
}
#endif

// O^T's slices [first, end) += V^T P^T, V^T's columns from the staged rows at rbase (slice first at
// column 0); in flash_decode_coopmat's scope (o, pt, rbase, and int8's scales, sbase and p, bf16's vunit).
#if DC_INT8
#define DC_VALUE_PRODUCT(j, vt) \
  o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * subgroupShuffle(DC_SCALES.y, sbase[p] + (j) * 16u / KV_BLOCK_DIMS)
#elif DC_BF16
#define DC_VALUE_PRODUCT(j, vt) o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * vunit
#else
#define DC_VALUE_PRODUCT(j, vt) o[j] = DC_MMA(vt, pt, o[j])
#endif
#define DC_VALUE_PRODUCTS(first, end)                                                   \
  [[unroll]] for (uint j = first; j < end; ++j) {                                       \
    F16A vt; /* V^T slice: element (dim, key) read column-major from the key rows */    \
    DC_LOAD_COLS(vt, rbase + (j - (first)) * 2u, DC_ROW4V);                             \
    DC_VALUE_PRODUCT(j, vt);                                                            \
  }

#define DC_SYNC() controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease)

// Element i of the partials as decode_combine indexes them ((subgroup * DECODE_HEADS + head) *
// VALUE_DIM + dimension): each subgroup's lie in its own staging rows.
float dc_part_read(uint i) {
  const uint w = i / (DECODE_HEADS * VALUE_DIM), at = i % (DECODE_HEADS * VALUE_DIM);
  return uintBitsToFloat(dc_tile[w * DC_STAGE4 + at / 4u][at % 4u]);
}

// DC_CLAIMS: keys [claim_begin, claim_end) are the head group's claimed end, taken a round at a time
// (claims.glsl).
void flash_decode_coopmat(uint kv_begin, uint kv_end, uint claim_begin, uint claim_end, uint kv_h, float qk_scale,
                          uint b, uint h0, uint q_pos, uvec4 keys) {
  const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
  const uint rbase = sg * DC_STAGE4, pbase = rbase + DC_ROWS4;  // the rows (K, V, partials), P^T
  const uint lane_row = lane >> 2u, lane_col = 2u * (lane & 3u);

  // Q^T as the B operand, staged as rows [head][dim] in K's rows and read column-major; each head's
  // row divided by its largest |q| (so f32 q and large values stay within f16, and int8's two bytes
  // span the row); unit[c] multiplies the scores of this lane's column c back, with the logit scale.
  float top[DECODE_HEADS];
  [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
    float x = 0.0;
    for (uint d = lane; d < HEAD_DIM; d += SUBGROUP_SIZE) x = max(x, magnitude_or_inf(q_shared[h * HEAD_DIM + d]));
    top[h] = dc_q_unit(subgroupMax(x));
  }
  float unit[2];
  [[unroll]] for (uint c = 0u; c < 2u; ++c) {
    float t = 0.0;
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) t = lane_col + c == h ? top[h] : t;
#if DC_INT8
    unit[c] = scale_or_nan(t, t / float(DC_QUNIT) * fa_logit_scale(qk_scale));
#else
    unit[c] = scale_or_nan(t, t * fa_logit_scale(qk_scale));
#endif
  }
  for (uint i = lane; i < DC_COLS * (HEAD_DIM / 4u); i += SUBGROUP_SIZE) {
    const uint h = i / (HEAD_DIM / 4u), d = 4u * (i % (HEAD_DIM / 4u));
    const uint head = DC_QCOLS ? h % (DC_COLS / 2u) : h;  // whose q row h holds
    vec4 x = vec4(0.0);
    if (head < DECODE_HEADS && top[min(head, DECODE_HEADS - 1u)] > 0.0) {
      const uint at = head * HEAD_DIM + d;
      x = vec4(q_shared[at], q_shared[at + 1u], q_shared[at + 2u], q_shared[at + 3u]) / top[min(head, DECODE_HEADS - 1u)];
    }
#if DC_INT8
    // q = (hi * 128 + lo) / DC_QUNIT. DC_QCOLS: row h < DC_COLS / 2 holds head h's high bytes, row
    // DC_COLS / 2 + h its low ones; else row h the high bytes and row DC_COLS + h the low ones.
    const ivec4 qi = ivec4(round(x * float(DC_QUNIT)));
    const ivec4 hi = qi >> 7, lo = qi & 127;
    if (DC_QCOLS) {
      dc_tile[rbase + h * DC_ROW4K + d / 16u][(d / 4u) % 4u] = uint(pack32(i8vec4(h < DC_COLS / 2u ? hi : lo)));
    } else {
      dc_tile[rbase + h * DC_ROW4K + d / 16u][(d / 4u) % 4u] = uint(pack32(i8vec4(hi)));
      dc_tile[rbase + (DC_COLS + h) * DC_ROW4K + d / 16u][(d / 4u) % 4u] = uint(pack32(i8vec4(lo)));
    }
#else
    dc_tile[rbase + h * DC_ROW4K + d / 8u][(d / 2u) % 4u] = dc_pack2(x.x, x.y);
    dc_tile[rbase + h * DC_ROW4K + d / 8u][(d / 2u) % 4u + 1u] = dc_pack2(x.z, x.w);
#endif
  }
  DC_SYNC();
#if DC_INT8
  I8B q_hi[DC_CHUNKS_K], q_lo[DC_CHUNKS_K];
  [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) {
    DC_LOAD_COLS(q_hi[c], rbase + c * 2u, DC_ROW4K);
    if (!DC_QCOLS) DC_LOAD_COLS(q_lo[c], rbase + DC_COLS * DC_ROW4K + c * 2u, DC_ROW4K);
  }
#else
  F16B q[DC_KSLICES];
  [[unroll]] for (uint dd = 0u; dd < DC_KSLICES; ++dd) DC_LOAD_COLS(q[dd], rbase + dd * 2u, DC_ROW4K);
#endif
  DC_SYNC();

  F32C o[DC_DV];
  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) o[j] = F32C(0.0);
  float m[2], l[2];  // this lane's columns; l: its share of their sums
  [[unroll]] for (uint c = 0u; c < 2u; ++c) {
    m[c] = NEG_BIG;
    l[c] = 0.0;
  }

  const uint last = kv_end - 1u;
  const bool exact = fa_keys_exact(keys, kv_begin, kv_end) &&
                     (DC_CLAIMS == 0 || claim_begin >= claim_end || fa_keys_exact(keys, claim_begin, claim_end));
  const uint first = kv_begin - kv_begin % (DC_RING * DC_KEYS) + sg * DC_RING * DC_KEYS;
  const uint round_step = DECODE_WARPS * DC_RING * DC_KEYS;  // a subgroup's next round of adjacent tiles
  DcTile ring[DC_RING];
#if DC_INT8
  // This group's scales, and the next group's, loaded a group ahead.
  vec2 scales = dc_load_scales(first, round_step, last, b, kv_h);
  vec2 scales_next = dc_load_scales(first + DC_STILES / DC_RBLOCKS * round_step, round_step, last, b, kv_h);
#endif
  uint t0 = first;
#if DC_CLAIMS
  const uint round_keys = DC_RING * DC_KEYS;  // the end's rounds start at multiples of a round, as the splits' do
  const ClaimSchedule cs = claim_schedule(b, claim_begin - claim_begin % round_keys, claim_end, round_keys, kv_end,
                                          round_step);
  uint next, asked = 0u;
  bool claimed, next_claimed;
  claim_start(cs, t0, claimed, next, next_claimed);
  const uint first_hi = claimed ? claim_end : kv_end;
#if DC_INT8
  // A claimed round's scales, loaded with its tiles (a round ahead): every lane loads that round's
  // block, so a round's tile i takes slot i * 16 / KV_BLOCK_KEYS.
  vec2 claim_scales = claimed && t0 != CLAIM_NONE ? dc_load_scales(t0, 0u, claim_end - 1u, b, kv_h) : vec2(0.0);
  vec2 claim_scales_next = vec2(0.0);
#define DC_SCALES (claimed ? claim_scales : scales)
#endif
#else
  const uint first_hi = kv_end;
#define DC_SCALES scales
#endif
  [[unroll]] for (uint r = 0u; r < DC_RING; ++r) {
    if (t0 + r * DC_KEYS < first_hi) {
      dc_load_keys(t0 + r * DC_KEYS, first_hi - 1u, b, kv_h, ring[r]);
      dc_load_values(t0 + r * DC_KEYS, first_hi - 1u, b, kv_h, ring[r]);
    }
  }
#if DC_CLAIMS
  while (t0 != CLAIM_NONE) {
    const uint t_next = next;
    const bool after_claimed = claim_after(cs, next, next_claimed, asked);
#else
  for (; t0 < kv_end; t0 += round_step) {
    const uint t_next = t0 + round_step;
    const bool claimed = false, next_claimed = false;
#endif
    // This round's keys and the next round's: a subgroup's own range, or the claimed end.
    const uint lo = claimed ? claim_begin : kv_begin, hi = claimed ? claim_end : kv_end, here_last = hi - 1u;
    const uint next_hi = next_claimed ? claim_end : kv_end, next_last = next_hi - 1u;
    // DC_PAIR tiles at a time: their K rows staged together (tile p in rows [16p, 16p + 16)), their
    // scores taken and their softmax run as one, then their V rows one tile after the other.
    [[unroll]] for (uint r0 = 0u; r0 < DC_RING; r0 += DC_PAIR) {
      if (t0 + r0 * DC_KEYS >= hi) break;
#if DC_INT8
      uint sbase[DC_PAIR];
#endif
      bool more[DC_PAIR];
#if DC_VREGS
      uvec4 values[DC_PAIR][DC_LOADS_V];  // the pair's V rows, their ring slots taking the next ones
#endif
      float kunit[DC_PAIR];  // what a tile's scores are multiplied by (bf16's power of two, else 1)
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint t = t0 + (r0 + p) * DC_KEYS;
        const uint t_after = t_next + (r0 + p) * DC_KEYS;  // the tile that takes this one's ring slot
        more[p] = t_after < next_hi;
        kunit[p] = dc_stage_keys(ring[r0 + p], rbase + p * DC_KEYS * DC_ROW4K, lo > t ? lo - t : 0u);
#if DC_INT8
        // Round ri's tile i takes block ri * DC_RBLOCKS + i * 16 / KV_BLOCK_KEYS of the groups.
        const uint ri = claimed ? 0u : (t0 - first) / round_step, group = max(1u, DC_STILES / DC_RBLOCKS);
        const uint slot = (ri * DC_RBLOCKS + (r0 + p) * DC_KEYS / KV_BLOCK_KEYS) % DC_STILES;
        if (ri % group == 0u && ri != 0u && r0 + p == 0u) {
          scales = scales_next;
          const uint next = t0 + group * round_step;
          if (next < kv_end) scales_next = dc_load_scales(next, round_step, last, b, kv_h);
        }
        sbase[p] = slot * DC_SCHUNKS;
#if DC_CLAIMS
        if (r0 + p == 0u && next_claimed && t_next != CLAIM_NONE) {
          claim_scales_next = dc_load_scales(t_next, 0u, next_last, b, kv_h);
        }
#endif
#endif
        if (more[p]) dc_load_keys(t_after, next_last, b, kv_h, ring[r0 + p]);
#if DC_VREGS
        values[p] = ring[r0 + p].v;
        if (more[p]) dc_load_values(t_next + (r0 + p) * DC_KEYS, next_last, b, kv_h, ring[r0 + p]);
#endif
      }
      DC_SYNC();

      F32C s[DC_PAIR];
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint kbase = rbase + p * DC_KEYS * DC_ROW4K;
        s[p] = F32C(0.0);
#if DC_INT8
        [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) {
          I8A kc;
          DC_LOAD_ROWS(kc, kbase + c * 2u, DC_ROW4K);
          const float scale = subgroupShuffle(DC_SCALES.x, sbase[p] + c);
          if (DC_QCOLS) {
            const I32C both = DC_MMA(kc, q_hi[c], I32C(0));
            s[p] = s[p] + F32C(both) * scale;
          } else {
            // Two independent products, not one accumulating into the other: no product waits on another.
            const I32C hi = DC_MMA(kc, q_hi[c], I32C(0)), lo = DC_MMA(kc, q_lo[c], I32C(0));
            s[p] = s[p] + F32C(hi * 128 + lo) * scale;
          }
        }
#else
        [[unroll]] for (uint dd = 0u; dd < DC_KSLICES; ++dd) {
          F16A kc;
          DC_LOAD_ROWS(kc, kbase + dd * 2u, DC_ROW4K);
          s[p] = DC_MMA(kc, q[dd], s[p]);
        }
#endif
      }

      // The softmax on this lane's elements of the DC_PAIR tiles (element p * CM8_ELEMS + e): columns
      // past the heads, keys outside the range and keys the masks hide score NEG_BIG.
      float x[DC_PAIR * CM8_ELEMS];
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {
          const uint key = t0 + (r0 + p) * DC_KEYS + CM8_ROW_OF[e] + lane_row, col = CM8_COL_OF[e] + lane_col;
          const uint h = h0 + min(col, DECODE_HEADS - 1u), at = min(key, here_last);
          // DC_QCOLS: the high bytes' sum here, the low bytes' in lane ^ 2 (what the lanes of the low
          // bytes' columns make of it is no head's score, and those columns are not valid).
          const float raw = DC_QCOLS ? s[p][e] * 128.0 + subgroupShuffleXor(s[p][e], 2u) : s[p][e];
          float v = raw * (unit[CM8_COL_OF[e]] * kunit[p]);
          if (FA_SCORE_CHANGED) v = fa_score_log2(v, b, h, q_pos, at);
          const bool valid = col < DECODE_HEADS && key >= lo && key < hi && (exact || fa_visible(b, h, q_pos, at));
          x[p * CM8_ELEMS + e] = valid ? v : NEG_BIG;
        }
      }
      // The running maximum moves only where a score passes it by more than DC_HEADROOM: below that
      // P stays under 2^DC_HEADROOM, which f16 holds, and the tiles skip the reduction across lanes
      // and the rescale (past the first keys, nearly every tile).
      bool passed = false;
      [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) passed = passed || x[i] > m[CM8_COL_OF[i % CM8_ELEMS]] + DC_HEADROOM;
      if (subgroupAny(passed)) {
        float alpha[2];
        [[unroll]] for (uint c = 0u; c < 2u; ++c) {
          float mx = NEG_BIG;
          [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) mx = CM8_COL_OF[i % CM8_ELEMS] == c ? max(mx, x[i]) : mx;
          mx = max(mx, subgroupShuffleXor(mx, 4u));
          mx = max(mx, subgroupShuffleXor(mx, 8u));
          mx = max(mx, subgroupShuffleXor(mx, 16u));
          const float m_new = max(m[c], mx);
          alpha[c] = exp2(m[c] - m_new);
          m[c] = m_new;
          l[c] *= alpha[c];
        }
        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
          [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) o[j][e] *= alpha[CM8_COL_OF[e]];
        }
      }
      [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) {
        x[i] = softmax_weight(x[i], m[CM8_COL_OF[i % CM8_ELEMS]]);
        l[CM8_COL_OF[i % CM8_ELEMS]] += x[i];
      }
      // P^T's rows, tile p's in rows [16p, 16p + 16): a lane's two heads of one key are one word.
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {
          if (CM8_COL_OF[e] == 0u) {
            float next = 0.0;
            [[unroll]] for (uint f = 0u; f < CM8_ELEMS; ++f) {
              next = CM8_ROW_OF[f] == CM8_ROW_OF[e] && CM8_COL_OF[f] == 1u ? x[p * CM8_ELEMS + f] : next;
            }
            dc_tile[pbase + p * DC_KEYS + CM8_ROW_OF[e] + lane_row][lane & 3u] = dc_pack2(x[p * CM8_ELEMS + e], next);
          }
        }
      }
      DC_SYNC();  // every lane has read K's rows before V's take their place, and P^T is written
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint t = t0 + (r0 + p) * DC_KEYS;
        if (t >= hi) break;
#if DC_VREGS
        F16B pt;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        const float sv = subgroupShuffle(DC_SCALES.y, sbase[p] + (lane >> 2u) * 16u / KV_BLOCK_DIMS);
        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
          const F16A vt = dc_value_slice(values[p][0], values[p][1], values[p][2], values[p][3], j);
          o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * sv;
        }
#elif DC_INT8 && DC_VHALVES
        // V in two halves of its dimensions, written out (not a loop over the halves, which left o[] out
        // of registers on the H200: docs/performance.md), the next tile's V loaded between them.
        F16B pt;
        dc_stage_value_half(ring[r0 + p].v[0], ring[r0 + p].v[2], rbase, 0u);
        DC_SYNC();
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        DC_VALUE_PRODUCTS(0u, DC_DV / 2u);
        DC_SYNC();
        dc_stage_value_half(ring[r0 + p].v[1], ring[r0 + p].v[3], rbase, 1u);
        if (more[p]) dc_load_values(t_next + (r0 + p) * DC_KEYS, next_last, b, kv_h, ring[r0 + p]);
        DC_SYNC();
        DC_VALUE_PRODUCTS(DC_DV / 2u, DC_DV);
#else
        const float vunit = dc_stage_values(ring[r0 + p], rbase, lo > t ? lo - t : 0u);
        if (more[p]) dc_load_values(t_next + (r0 + p) * DC_KEYS, next_last, b, kv_h, ring[r0 + p]);
        DC_SYNC();
        F16B pt;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        DC_VALUE_PRODUCTS(0u, DC_DV);
#endif
#if !DC_VREGS
        DC_SYNC();  // every lane has read V and P^T before the next tile's rows take their places
#endif
      }
    }
#if DC_CLAIMS
#if DC_INT8
    claim_scales = claim_scales_next;
#endif
    claim_advance(cs, t0, claimed, next, next_claimed, after_claimed, asked);
#endif
  }

  // The subgroup's normalised partial of each real head, through the staged order of O^T's rows, in its
  // own rows (read back by dc_part_read).
  float inv[2];
  [[unroll]] for (uint c = 0u; c < 2u; ++c) {
    l[c] += subgroupShuffleXor(l[c], 4u);
    l[c] += subgroupShuffleXor(l[c], 8u);
    l[c] += subgroupShuffleXor(l[c], 16u);
    inv[c] = softmax_inverse(l[c]);
    const uint h = lane_col + c;
    if (h < DECODE_HEADS && lane_row == 0u) {
      part_m[sg * DECODE_HEADS + h] = m[c];
      part_l[sg * DECODE_HEADS + h] = l[c];
    }
  }
  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
    [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {
      const uint h = CM8_COL_OF[e] + lane_col;
      if (h < DECODE_HEADS) {
        const uint d = DC_DIM(j * 16u + CM8_ROW_OF[e] + lane_row);
        const uint at = h * VALUE_DIM + d;
        dc_tile[rbase + at / 4u][at % 4u] = floatBitsToUint(o[j][e] * inv[CM8_COL_OF[e]]);
      }
    }
  }
}
