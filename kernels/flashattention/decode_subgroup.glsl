//! requires: flashattention/common.glsl flashattention/hooks_keys.glsl
// Flash decoding, subgroup variant. One workgroup serves DECODE_HEADS query heads that share one KV
// head, over keys [kv_begin, kv_end). Each subgroup takes DECODE_KEYS_PER_WARP keys per step, one
// key per cluster of DECODE_LANES_PER_KEY lanes. A lane holds DECODE_ELEMS dimensions of q and of each
// key, and DECODE_ELEMS_V of each value row and of o (VALUE_DIM may differ from HEAD_DIM), in
// DECODE_VEC-wide chunks; one load brings DECODE_PAIR adjacent chunks, and loads are interleaved across
// the cluster, so each load instruction of a cluster reads one contiguous segment of the row, and
// consecutive clusters read consecutive rows. With tail words (DECODE_TAIL_WORDS; chunks are then
// single words) a lane's share of the row is whole loads and then DECODE_TAIL words, each a load of
// its own, the cluster's words side by side after its whole loads (D80 over 8 lanes: two 8-byte loads,
// or one 16-byte load, and one 4-byte word per lane, no lane idle). Scores are reduced across the cluster with xor
// shuffles; the online softmax runs per cluster; clusters merge at the end, then subgroups merge
// through shared memory.

#if DECODE_VEC == 4
#define DVEC vec4
#elif DECODE_VEC == 2
#define DVEC vec2
#else
#define DVEC float
#endif

const uint DECODE_CHUNKS = DECODE_ELEMS / DECODE_VEC;
const uint DECODE_LOADS = DECODE_CHUNKS / DECODE_PAIR;  // whole K loads per key and lane
const uint DECODE_TAIL = DECODE_CHUNKS % DECODE_PAIR;   // K words after them (tail words only)
const uint DECODE_CHUNKS_V = DECODE_ELEMS_V / DECODE_VEC;
const uint DECODE_LOADS_V = DECODE_CHUNKS_V / DECODE_PAIR;
const uint DECODE_TAIL_V = DECODE_CHUNKS_V % DECODE_PAIR;
const uint DECODE_TAIL_SLOTS = max(max(DECODE_TAIL, DECODE_TAIL_V), 1u);  // no array is empty
const uint DECODE_LOAD_STRIDE = DECODE_LANES_PER_KEY * DECODE_VEC * DECODE_PAIR;
const uint DECODE_STEP = DECODE_KEYS_PER_WARP * DECODE_UNROLL;  // keys a subgroup takes per iteration

// K/V stay in registers in their stored form (KV_RAW: e.g. four f16 in a uvec2, half the registers of
// a vec4) until used; KV_CODES(r, p) widens chunk p of a load to f32 and KV_SCALE(r) is the scale
// every chunk of a quantized load shares, applied once per load (stages/KvAccessStage.h).

// The first of the DECODE_VEC dimensions chunk c of lane `lik` holds in a row of `dim`: a segment of
// the row the cluster's lanes take whole loads of, or the segment of tail words where the row ends
// before a whole segment (never with idle lanes, whose last segment is whole loads too).
uint decode_dim(uint c, uint lik, uint dim) {
  const uint segment = c / DECODE_PAIR, part = c % DECODE_PAIR;
  const bool tail = DECODE_IDLE_LANES == 0 && (segment + 1u) * DECODE_LOAD_STRIDE > dim;
  return segment * DECODE_LOAD_STRIDE + (tail ? part * DECODE_LANES_PER_KEY + lik : lik * DECODE_PAIR + part) * DECODE_VEC;
}

// With idle lanes (DECODE_IDLE_LANES) a lane's chunk may lie past the row: it reads the row's last
// chunk instead (sectors its neighbours read anyway), and its products are dropped.
bool decode_live(uint c, uint lik, uint dim) { return DECODE_IDLE_LANES == 0 || decode_dim(c, lik, dim) < dim; }
uint decode_dim_in(uint c, uint lik, uint dim, uint width) {
  return DECODE_IDLE_LANES == 0 ? decode_dim(c, lik, dim) : min(decode_dim(c, lik, dim), dim - width);
}

#if DECODE_SCATTER
// Scores spread over a key's cluster (DECODE_SCATTER): every (head, step) score is summed over the
// cluster once, by one lane pair or group, instead of by every lane; each lane then weighs its own.
const uint DECODE_SC_SCORES = DECODE_UNROLL * DECODE_HEADS;                  // per key step
const uint DECODE_SC_HELD = DECODE_SC_SCORES / DECODE_LANES_PER_KEY;         // a lane's own
const uint DECODE_SC_LANES_PER_HEAD = DECODE_LANES_PER_KEY / DECODE_HEADS;   // lanes that share a head

// The reverse of a reduce-scatter: lane `lik` holds values [held * (lik / first) ..) of x in
// x[0 .. held); after it every lane holds all of them, in order. Every bound is a constant, so the
// arrays stay in registers.
#define DECODE_ALL_GATHER(x, held, first)                                          \
  [[unroll]] for (uint r = 0u; r < DECODE_SC_ROUNDS; ++r) {                        \
    const uint off = 1u << r, n = (held) * (off / (first));                        \
    const bool upper = (lik & off) != 0u;                                          \
    [[unroll]] for (uint i = 0u; i < DECODE_SC_SCORES / 2u; ++i) {                 \
      if (off >= (first) && i < n) {                                               \
        const float mine = x[i], theirs = subgroupShuffleXor(mine, off);          \
        x[i] = upper ? theirs : mine;                                              \
        x[i + n] = upper ? mine : theirs;                                          \
      }                                                                            \
    }                                                                              \
  }
#endif

DVEC decode_q(uint i) {
#if DECODE_VEC == 4
  return vec4(q_shared[i], q_shared[i + 1u], q_shared[i + 2u], q_shared[i + 3u]);
#elif DECODE_VEC == 2
  return vec2(q_shared[i], q_shared[i + 1u]);
#else
  return q_shared[i];
#endif
}

// Whether key `at` of a step is one of the range's (steps may start before it with step scales).
bool decode_in_range(uint at, uint kv_begin, uint kv_end) {
  return at < kv_end && (DECODE_STEP_SCALES == 0 || at >= kv_begin);
}

// Stores this subgroup's normalised partial output, its max and its sum in shared memory.
void decode_store_partial(uint sg, uint lik, uint h, DVEC acc_o[DECODE_CHUNKS_V], float m, float l) {
  const float inv = softmax_inverse(l);
  [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) {
    // Under a preprocessor test, not a constant one: with the `continue` in it, spirv-opt left the loop
    // over heads that calls this rolled and the accumulators in local arrays indexed by head (H200:
    // 0.3 us at D128 kv 65536, up to 2 us at short caches; docs/performance.md, "Local arrays").
#if DECODE_IDLE_LANES
    if (!decode_live(c, lik, VALUE_DIM)) continue;
#endif
    const uint d = decode_dim(c, lik, VALUE_DIM);
    const DVEC v = acc_o[c] * inv;
    [[unroll]] for (uint t = 0u; t < DECODE_VEC; ++t) {
#if DECODE_VEC == 1
      part_o[(sg * DECODE_HEADS + h) * VALUE_DIM + d + t] = PART_T(PART_CLAMP(v));
#else
      part_o[(sg * DECODE_HEADS + h) * VALUE_DIM + d + t] = PART_T(PART_CLAMP(v[t]));
#endif
    }
  }
  if (lik == 0u) {
    part_m[sg * DECODE_HEADS + h] = m;
    part_l[sg * DECODE_HEADS + h] = l;
  }
}

// The K/V rows of one iteration: keys base + u * DECODE_KEYS_PER_WARP + cluster (past the end: the
// last valid row, masked later); whole loads in kr/vr, tail words in kt/vt.
void decode_load_step(uint base, uint cluster, uint lik, uint last, uint b, uint kv_h,
                      out KV_RAW kr[DECODE_UNROLL][DECODE_LOADS], out KV_RAW vr[DECODE_UNROLL][DECODE_LOADS_V],
                      out uint kt[DECODE_UNROLL][DECODE_TAIL_SLOTS], out uint vt[DECODE_UNROLL][DECODE_TAIL_SLOTS]) {
  [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
    const uint key = min(base + u * DECODE_KEYS_PER_WARP + cluster, last);
    const KV_ROW k_row = kv_k_row(b, kv_h, key), v_row = kv_v_row(b, kv_h, key);
#if DECODE_STEP_SCALES
    // The step's keys share their scale block (the loop starts at a multiple of the step, which
    // divides the block): the first key's scales serve every key of the step.
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS; ++j) {
      const uint d = decode_dim_in(j * DECODE_PAIR, lik, HEAD_DIM, DECODE_VEC * DECODE_PAIR);
      kr[u][j].q = kv_load_k_codes(k_row, d);
      kr[u][j].s = u == 0u ? kv_k_scale(k_row, d) : kr[0][j].s;
    }
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS_V; ++j) {
      const uint d = decode_dim_in(j * DECODE_PAIR, lik, VALUE_DIM, DECODE_VEC * DECODE_PAIR);
      vr[u][j].q = kv_load_v_codes(v_row, d);
      vr[u][j].s = u == 0u ? kv_v_scale(v_row, d) : vr[0][j].s;
    }
#else
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS; ++j) {
      kr[u][j] = kv_load_k(k_row, decode_dim_in(j * DECODE_PAIR, lik, HEAD_DIM, DECODE_VEC * DECODE_PAIR));
    }
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS_V; ++j) {
      vr[u][j] = kv_load_v(v_row, decode_dim_in(j * DECODE_PAIR, lik, VALUE_DIM, DECODE_VEC * DECODE_PAIR));
    }
#endif
#if DECODE_TAIL_WORDS
    [[unroll]] for (uint t = 0u; t < DECODE_TAIL; ++t) {
      kt[u][t] = kv_load_k_word(k_row, decode_dim(DECODE_LOADS * DECODE_PAIR + t, lik, HEAD_DIM));
    }
    [[unroll]] for (uint t = 0u; t < DECODE_TAIL_V; ++t) {
      vt[u][t] = kv_load_v_word(v_row, decode_dim(DECODE_LOADS_V * DECODE_PAIR + t, lik, VALUE_DIM));
    }
#endif
  }
}

// acc_o[h] += weight * the V row of step u (its whole loads, then its words).
#if DECODE_TAIL_WORDS
#define DECODE_ADD_V_WORDS(h, u, weight)                                                  \
  [[unroll]] for (uint t = 0u; t < DECODE_TAIL_V; ++t) {                                  \
    acc_o[h][DECODE_LOADS_V * DECODE_PAIR + t] += (weight) * KV_WORD_UNPACK(vt[u][t]);     \
  }
#else
#define DECODE_ADD_V_WORDS(h, u, weight)
#endif
#if DECODE_HALF_PRODUCTS
// A step's weighted codes summed as f16 pairs per head (weights at most 1, codes at most 127: at most
// 127 x DECODE_UNROLL), then scaled by the step's scale and added to o in f32.
#define DECODE_V_BEGIN                                                                    \
  f16vec2 pv_e[DECODE_CHUNKS_V], pv_o[DECODE_CHUNKS_V];                                   \
  [[unroll]] for (uint i = 0u; i < DECODE_CHUNKS_V; ++i) pv_e[i] = pv_o[i] = f16vec2(0.0);
#define DECODE_ADD_V(h, u, weight)                                                        \
  {                                                                                       \
    const f16vec2 w2 = f16vec2(float16_t(weight));                                        \
    [[unroll]] for (uint i = 0u; i < DECODE_CHUNKS_V; ++i) {                              \
      const uint word = KV_CODE_WORD(vr[u][i / DECODE_PAIR], i % DECODE_PAIR);             \
      pv_e[i] = fma(w2, i8_even_f16(word), pv_e[i]);                                      \
      pv_o[i] = fma(w2, i8_odd_f16(word), pv_o[i]);                                       \
    }                                                                                     \
  }
#define DECODE_V_END(h)                                                                   \
  [[unroll]] for (uint i = 0u; i < DECODE_CHUNKS_V; ++i) {                                \
    const vec2 e = vec2(pv_e[i]), o = vec2(pv_o[i]);                                      \
    acc_o[h][i] += KV_SCALE(vr[0][i / DECODE_PAIR]) * vec4(e.x, o.x, e.y, o.y);            \
  }
#else
#define DECODE_V_BEGIN
#define DECODE_V_END(h)
#define DECODE_ADD_V(h, u, weight)                                                        \
  {                                                                                       \
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS_V; ++j) {                               \
      const float ps = (weight) * KV_SCALE(vr[u][j]);                                     \
      [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) {                                \
        acc_o[h][j * DECODE_PAIR + c] += ps * KV_CODES(vr[u][j], c);                      \
      }                                                                                   \
    }                                                                                     \
    DECODE_ADD_V_WORDS(h, u, weight)                                                      \
  }
#endif

// Keys [kv_begin, kv_end) lie inside `keys` (fa_keys_heads for query position q_pos of heads h0 ..).
// With DECODE_CLAIMS, keys [claim_begin, claim_end) are the head group's claimed end (claims.glsl).
void flash_decode_subgroup(uint kv_begin, uint kv_end, uint claim_begin, uint claim_end, uint kv_h,
                           float qk_scale, uint b, uint h0, uint q_pos, uvec4 keys) {
  const uint lane = gl_SubgroupInvocationID;
  const uint sg = gl_SubgroupID;
  const uint cluster = lane / DECODE_LANES_PER_KEY;
  const uint lik = lane % DECODE_LANES_PER_KEY;

  // q in registers, scaled once; or read from shared memory at each use (DECODE_Q_SHARED), its
  // registers left to loads in flight, and each score scaled instead.
#if DECODE_Q_SHARED
#define DECODE_QK(h, c) decode_q((h) * HEAD_DIM + decode_dim_in(c, lik, HEAD_DIM, DECODE_VEC))
  const float score_scale = fa_logit_scale(qk_scale);
#else
  DVEC q[DECODE_HEADS][DECODE_CHUNKS];
#define DECODE_QK(h, c) q[h][c]
  const float score_scale = 1.0;
#endif
#if DECODE_INT8_DOT
  // q of each head and load as s * (hi + lo / 256), hi and lo signed bytes four to a word: K's codes
  // meet both in integer dot products (exact), where widening each code to f32 for a float dot product
  // costs more instructions than the product. q_step holds s / 256.
  uint q_hi[DECODE_HEADS][DECODE_CHUNKS];
  uint q_lo[DECODE_HEADS][DECODE_CHUNKS];
  float q_step[DECODE_HEADS][DECODE_LOADS];
#endif
#if DECODE_HALF_PRODUCTS
  // q of each head as f16 pairs in the order the codes widen (elements 0 and 2, 1 and 3 of a word),
  // divided by the lane's largest |q| so products and sums stay within f16; q_unit[h] multiplies back.
  f16vec2 qh_e[DECODE_HEADS][DECODE_CHUNKS], qh_o[DECODE_HEADS][DECODE_CHUNKS];
  float q_unit[DECODE_HEADS];
#endif
  DVEC acc_o[DECODE_HEADS][DECODE_CHUNKS_V];
  float m[DECODE_HEADS];
  float l[DECODE_HEADS];
  [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
    m[h] = NEG_BIG;
    l[h] = 0.0;
#if DECODE_INT8_DOT
    [[unroll]] for (uint j = 0u; j < DECODE_LOADS; ++j) {
      vec4 x[DECODE_PAIR];
      float top = 0.0;
      [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) {
        x[c] = decode_q(h * HEAD_DIM + decode_dim_in(j * DECODE_PAIR + c, lik, HEAD_DIM, DECODE_VEC)) *
               fa_logit_scale(qk_scale);
        top = max(top, magnitude_or_inf(x[c]));
      }
      const float s = top > 0.0 ? top / 127.0 : 1.0;
      q_step[h][j] = scale_or_nan(top, s * (1.0 / 256.0));
      [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) {
        const vec4 t = clamp(x[c] / s, -127.0, 127.0);
        const vec4 hi = roundEven(t);
        q_hi[h][j * DECODE_PAIR + c] = pack_i8x4(hi);
        q_lo[h][j * DECODE_PAIR + c] = pack_i8x4(clamp(roundEven((t - hi) * 256.0), -127.0, 127.0));
      }
    }
#elif DECODE_HALF_PRODUCTS
    float top = 0.0;
    [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS; ++c) {
      top = max(top, magnitude_or_inf(decode_q(h * HEAD_DIM + decode_dim_in(c, lik, HEAD_DIM, DECODE_VEC))));
    }
    const float inv = top > 0.0 ? 1.0 / top : 0.0;
    q_unit[h] = scale_or_nan(top, top * fa_logit_scale(qk_scale));
    [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS; ++c) {
      const vec4 x = decode_q(h * HEAD_DIM + decode_dim_in(c, lik, HEAD_DIM, DECODE_VEC)) * inv;
      qh_e[h][c] = f16vec2(x.xz);
      qh_o[h][c] = f16vec2(x.yw);
    }
#elif !DECODE_Q_SHARED
    [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS; ++c) {
      q[h][c] = decode_q(h * HEAD_DIM + decode_dim_in(c, lik, HEAD_DIM, DECODE_VEC)) * fa_logit_scale(qk_scale);
    }
#endif
    [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] = DVEC(0.0);
  }

  // Each iteration a subgroup takes DECODE_UNROLL blocks of DECODE_KEYS_PER_WARP consecutive keys, and
  // the loads of the next iteration are issued before this one's arithmetic: many rows are in flight
  // per lane. The loop bound is uniform across the subgroup; keys past the end are masked, not
  // skipped, so every lane takes part in every shuffle.
  const uint last = kv_end - 1u;
  const uint stride = DECODE_WARPS * DECODE_STEP;
  // Causal masks, windows and lengths are settled by the range for one query: no key needs asking.
  const bool exact = fa_keys_exact(keys, kv_begin, kv_end) &&
                     (DECODE_CLAIMS == 0 || claim_begin >= claim_end || fa_keys_exact(keys, claim_begin, claim_end));
  KV_RAW kr[DECODE_UNROLL][DECODE_LOADS];
  KV_RAW vr[DECODE_UNROLL][DECODE_LOADS_V];
  uint kt[DECODE_UNROLL][DECODE_TAIL_SLOTS], vt[DECODE_UNROLL][DECODE_TAIL_SLOTS];
#if DECODE_SCATTER
  // The lane's own head and first step of the scattered scores, and that head's running softmax (the
  // sum: of the lane's own weights).
  const uint sc_h = lik / DECODE_SC_LANES_PER_HEAD;
  const uint sc_u = (lik % DECODE_SC_LANES_PER_HEAD) * DECODE_SC_HELD;
  float sc_m = NEG_BIG, sc_l = 0.0;
#endif
  // With step scales the steps start at multiples of the step (the keys before kv_begin are masked).
  const uint first = DECODE_STEP_SCALES != 0 ? kv_begin - kv_begin % DECODE_STEP : kv_begin;
  uint base = first + sg * DECODE_STEP;
#if DECODE_CLAIMS
  // With step scales the end's steps start at multiples of the step too.
  const uint claim_first = DECODE_STEP_SCALES != 0 ? claim_begin - claim_begin % DECODE_STEP : claim_begin;
  const ClaimSchedule cs = claim_schedule(b, claim_first, claim_end, DECODE_STEP, kv_end, stride);
  uint next, asked = 0u;
  bool claimed, next_claimed;
  claim_start(cs, base, claimed, next, next_claimed);
  if (base != CLAIM_NONE) {
    decode_load_step(base, cluster, lik, claimed ? claim_end - 1u : last, b, kv_h, kr, vr, kt, vt);
  }
  while (base != CLAIM_NONE) {
    KV_RAW next_k[DECODE_UNROLL][DECODE_LOADS];
    KV_RAW next_v[DECODE_UNROLL][DECODE_LOADS_V];
    uint next_kt[DECODE_UNROLL][DECODE_TAIL_SLOTS], next_vt[DECODE_UNROLL][DECODE_TAIL_SLOTS];
    if (next != CLAIM_NONE) {
      decode_load_step(next, cluster, lik, next_claimed ? claim_end - 1u : last, b, kv_h, next_k, next_v, next_kt,
                       next_vt);
    }
    const bool after_claimed = claim_after(cs, next, next_claimed, asked);
    const uint lo = claimed ? claim_begin : kv_begin, hi = claimed ? claim_end : kv_end, step_last = hi - 1u;
#else
  const uint lo = kv_begin, hi = kv_end, step_last = last;
  if (base < kv_end) decode_load_step(base, cluster, lik, last, b, kv_h, kr, vr, kt, vt);
  for (; base < kv_end; base += stride) {
    KV_RAW next_k[DECODE_UNROLL][DECODE_LOADS];
    KV_RAW next_v[DECODE_UNROLL][DECODE_LOADS_V];
    uint next_kt[DECODE_UNROLL][DECODE_TAIL_SLOTS], next_vt[DECODE_UNROLL][DECODE_TAIL_SLOTS];
    if (base + stride < kv_end) {
      decode_load_step(base + stride, cluster, lik, last, b, kv_h, next_k, next_v, next_kt, next_vt);
    }
#endif
    bool valid[DECODE_UNROLL];
    float s[DECODE_UNROLL][DECODE_HEADS];
    [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
      valid[u] = decode_in_range(base + u * DECODE_KEYS_PER_WARP + cluster, lo, hi);
      [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
        float acc = 0.0;
        [[unroll]] for (uint j = 0u; j < DECODE_LOADS; ++j) {
#if DECODE_INT8_DOT
          int dot_hi = 0, dot_lo = 0;
          [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) {
            dot_hi = i8x4_dot(q_hi[h][j * DECODE_PAIR + c], KV_CODE_WORD(kr[u][j], c), dot_hi);
            dot_lo = i8x4_dot(q_lo[h][j * DECODE_PAIR + c], KV_CODE_WORD(kr[u][j], c), dot_lo);
          }
          const float part = float(dot_hi * 256 + dot_lo) * (q_step[h][j] * KV_SCALE(kr[u][j]));
          acc += decode_live(j * DECODE_PAIR, lik, HEAD_DIM) ? part : 0.0;
#elif DECODE_HALF_PRODUCTS
          f16vec2 dot2 = f16vec2(0.0);
          [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) {
            const uint word = KV_CODE_WORD(kr[u][j], c);
            dot2 = fma(qh_e[h][j * DECODE_PAIR + c], i8_even_f16(word), dot2);
            dot2 = fma(qh_o[h][j * DECODE_PAIR + c], i8_odd_f16(word), dot2);
          }
          const vec2 d2 = vec2(dot2);
          acc += (d2.x + d2.y) * KV_SCALE(kr[u][j]);
#else
          float part = 0.0;
          [[unroll]] for (uint c = 0u; c < DECODE_PAIR; ++c) part += dot(DECODE_QK(h, j * DECODE_PAIR + c), KV_CODES(kr[u][j], c));
          acc += decode_live(j * DECODE_PAIR, lik, HEAD_DIM) ? part * KV_SCALE(kr[u][j]) : 0.0;
#endif
        }
#if DECODE_TAIL_WORDS
        [[unroll]] for (uint t = 0u; t < DECODE_TAIL; ++t) {
          acc += dot(DECODE_QK(h, DECODE_LOADS * DECODE_PAIR + t), KV_WORD_UNPACK(kt[u][t]));
        }
#endif
#if DECODE_HALF_PRODUCTS && !DECODE_INT8_DOT
        s[u][h] = acc * q_unit[h];
#else
        s[u][h] = acc * score_scale;
#endif
      }
    }
#if DECODE_SCATTER
    // Reduce-scatter: each round a lane sends the half of its scores its partner keeps and adds the
    // half it keeps, so after log2(lanes) rounds lane `lik` holds the sums of scores DECODE_SC_HELD *
    // lik .. + DECODE_SC_HELD - 1 of the step, ordered head-major: head sc_h, steps sc_u ...
    float sc[DECODE_SC_SCORES];
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) sc[h * DECODE_UNROLL + u] = s[u][h];
    }
    [[unroll]] for (uint r = 0u; r < DECODE_SC_ROUNDS; ++r) {
      const uint off = DECODE_LANES_PER_KEY >> (r + 1u), half_n = DECODE_SC_SCORES >> (r + 1u);
      const bool upper = (lik & off) != 0u;
      [[unroll]] for (uint i = 0u; i < DECODE_SC_SCORES / 2u; ++i) {
        if (i < half_n) {
          const float send = upper ? sc[i] : sc[i + half_n];
          sc[i] = (upper ? sc[i + half_n] : sc[i]) + subgroupShuffleXor(send, off);
        }
      }
    }
    // The softmax of the lane's own scores; the maximum over the lanes that share its head.
    float sc_max = sc_m;
    bool sc_valid[DECODE_SC_HELD];
    [[unroll]] for (uint r = 0u; r < DECODE_SC_HELD; ++r) {
      const uint at = base + (sc_u + r) * DECODE_KEYS_PER_WARP + cluster;
      sc_valid[r] = decode_in_range(at, lo, hi);
      if (FA_SCORE_CHANGED) sc[r] = fa_score_log2(sc[r], b, h0 + sc_h, q_pos, min(at, step_last));
      if (!exact && !fa_visible(b, h0 + sc_h, q_pos, min(at, step_last))) sc[r] = NEG_BIG;
      sc_max = sc_valid[r] ? max(sc_max, sc[r]) : sc_max;
    }
    [[unroll]] for (uint off = 1u; off < DECODE_SC_LANES_PER_HEAD; off <<= 1u) {
      sc_max = max(sc_max, subgroupShuffleXor(sc_max, off));
    }
    const bool grew = sc_max != sc_m;
    float alpha[DECODE_HEADS];
    float p[DECODE_SC_SCORES];
    alpha[0] = exp2(sc_m - sc_max);
    float p_sum = 0.0;
    [[unroll]] for (uint r = 0u; r < DECODE_SC_HELD; ++r) {
      p[r] = sc_valid[r] ? exp2(sc[r] - sc_max) : 0.0;
      p_sum += p[r];
    }
    sc_l = sc_l * alpha[0] + p_sum;
    sc_m = sc_max;
    // Every lane needs every weight and every head's rescale for its share of the V rows.
    DECODE_ALL_GATHER(p, DECODE_SC_HELD, 1u)
#if DECODE_LAZY_RESCALE
    // Past the first keys a maximum seldom grows: where no lane's did, every rescale is by exactly 1
    // and is skipped (a uniform branch), with the gather that spreads it.
    if (subgroupAny(grew)) {
      DECODE_ALL_GATHER(alpha, 1u, DECODE_SC_LANES_PER_HEAD)
      [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
        [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] *= alpha[h];
      }
    }
#else
    DECODE_ALL_GATHER(alpha, 1u, DECODE_SC_LANES_PER_HEAD)
#endif
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
#if !DECODE_LAZY_RESCALE
      [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] *= alpha[h];
#endif
      DECODE_V_BEGIN
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) DECODE_ADD_V(h, u, p[h * DECODE_UNROLL + u])
      DECODE_V_END(h)
    }
#else
    [[unroll]] for (uint off = 1u; off < DECODE_LANES_PER_KEY; off <<= 1u) {
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
        [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) s[u][h] += subgroupShuffleXor(s[u][h], off);
      }
    }
    // Score hooks, then the masks the range does not settle, per head on the reduced scores (every lane
    // of a cluster holds its key's). A hidden key scores NEG_BIG: once any visible key is seen its
    // weight is 0, and a row that sees none ends with its maximum at NEG_BIG (fa_norm_scale gives 0).
    if (FA_SCORE_CHANGED) {
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
        const uint key = min(base + u * DECODE_KEYS_PER_WARP + cluster, step_last);
        [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) s[u][h] = fa_score_log2(s[u][h], b, h0 + h, q_pos, key);
      }
    }
    if (!exact) {
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
        const uint key = min(base + u * DECODE_KEYS_PER_WARP + cluster, step_last);
        [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
          if (!fa_visible(b, h0 + h, q_pos, key)) s[u][h] = NEG_BIG;
        }
      }
    }
#if DECODE_LAZY_RESCALE
    // A rescale by exactly 1 (no lane's maximum grew for any head: most steps past the first keys) is
    // skipped, on one vote for all heads (a vote per head cost D256 7%).
    float m_next[DECODE_HEADS];
    bool grew = false;
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
      m_next[h] = m[h];
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) m_next[h] = valid[u] ? max(m_next[h], s[u][h]) : m_next[h];
      grew = grew || m_next[h] != m[h];
    }
    if (subgroupAny(grew)) {
      [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
        const float alpha = exp2(m[h] - m_next[h]);
        [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] *= alpha;
      }
    }
#endif
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
#if DECODE_LAZY_RESCALE
      const float m_new = m_next[h];
#else
      float m_new = m[h];
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) m_new = valid[u] ? max(m_new, s[u][h]) : m_new;
#endif
      const float alpha = exp2(m[h] - m_new);
      float p_sum = 0.0;
#if !DECODE_LAZY_RESCALE
      [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] *= alpha;
#endif
      DECODE_V_BEGIN
      [[unroll]] for (uint u = 0u; u < DECODE_UNROLL; ++u) {
        const float p = valid[u] ? exp2(s[u][h] - m_new) : 0.0;
        p_sum += p;
        DECODE_ADD_V(h, u, p)
      }
      DECODE_V_END(h)
      l[h] = l[h] * alpha + p_sum;
      m[h] = m_new;
    }
#endif
    kr = next_k;
    vr = next_v;
    kt = next_kt;
    vt = next_vt;
#if DECODE_CLAIMS
    claim_advance(cs, base, claimed, next, next_claimed, after_claimed, asked);
#endif
  }

#if DECODE_SCATTER
  [[unroll]] for (uint off = 1u; off < DECODE_SC_LANES_PER_HEAD; off <<= 1u) sc_l += subgroupShuffleXor(sc_l, off);
  m[0] = sc_m;
  l[0] = sc_l;
  DECODE_ALL_GATHER(m, 1u, DECODE_SC_LANES_PER_HEAD)
  DECODE_ALL_GATHER(l, 1u, DECODE_SC_LANES_PER_HEAD)
#endif
  // Clusters of one subgroup hold the same dimensions for different keys: merge them.
  [[unroll]] for (uint off = DECODE_LANES_PER_KEY; off < SUBGROUP_SIZE; off <<= 1u) {
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) {
      const float m_other = subgroupShuffleXor(m[h], off);
      const float l_other = subgroupShuffleXor(l[h], off);
      float m_new, w_self, w_other;
      merge_weights(m[h], m_other, m_new, w_self, w_other);
      l[h] = l[h] * w_self + l_other * w_other;
      [[unroll]] for (uint c = 0u; c < DECODE_CHUNKS_V; ++c) acc_o[h][c] = acc_o[h][c] * w_self + subgroupShuffleXor(acc_o[h][c], off) * w_other;
      m[h] = m_new;
    }
  }
  if (cluster == 0u) {
    [[unroll]] for (uint h = 0u; h < DECODE_HEADS; ++h) decode_store_partial(sg, lik, h, acc_o[h], m[h], l[h]);
  }
}
