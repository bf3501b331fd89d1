//! requires: flashattention/hooks.glsl
// The key loop's side of the hook points.

// The keys query positions [q_lo, q_hi] of (b, h) may see (.xy) and surely see (.zw), within the
// sequence; an empty range is [x, x).
uvec4 fa_keys(uint b, uint h, uint q_lo, uint q_hi) {
  const uint n = fa_kv_len(b);
  uvec4 r = fa_range_meet(fa_key_range(b, h, q_lo, q_hi), uvec4(0u, n, 0u, n));
  r.y = max(r.y, r.x);
  r.w = max(r.w, r.z);
  return r;
}

// Whether logits change on their way to the softmax: score hooks, or a distance bias.
const bool FA_SCORE_CHANGED = FA_SCORE_HOOKED || FA_DISTANCE_BIAS_HOOKED;

// What the distance bias's slope multiplies: k - q, exact in f32 for positions below 2^24.
float fa_key_distance(uint q, uint k) { return float(k) - float(q); }

// A natural logit of query position q and key k through the distance bias and the score hooks.
float fa_score_natural(float s, uint b, uint h, uint q, uint k) {
  if (FA_DISTANCE_BIAS_HOOKED) s += fa_distance_bias(b, h) * fa_key_distance(q, k);
  return fa_score(s, b, h, q, k);
}

// What a raw q.k product is multiplied by, given the kernel's log2-domain scale: the log2-domain scale
// itself, or the natural one where score hooks must see natural logits first (one multiply either
// way; the product of two uniforms is hoisted).
float fa_logit_scale(float qk_scale) { return FA_SCORE_HOOKED ? qk_scale * LN2 : qk_scale; }

// The distance bias's slope in the log2 domain where a kernel may add it itself, to products scaled
// by the log2-domain scale (no score hook to see natural logits); 0 otherwise.
float fa_distance_slope_log2(uint b, uint h) {
  return FA_DISTANCE_BIAS_HOOKED && !FA_SCORE_HOOKED ? fa_distance_bias(b, h) * LOG2E : 0.0;
}

// A product scaled by fa_logit_scale, through the distance bias and the score hooks, into the
// kernel's log2 domain.
float fa_score_log2(float s, uint b, uint h, uint q, uint k) {
  if (FA_SCORE_HOOKED) return fa_score_natural(s, b, h, q, k) * LOG2E;
  return FA_DISTANCE_BIAS_HOOKED ? s + fa_distance_slope_log2(b, h) * fa_key_distance(q, k) : s;
}

// Whether key k counts for query position q of a block whose keys are `keys` (fa_keys).
bool fa_key_visible(uvec4 keys, uint b, uint h, uint q, uint k) {
  return k >= keys.x && k < keys.y && fa_visible(b, h, q, k);
}

// The keys query position q may see, cut at kv_end, as (first, count). For one query the key ranges
// are its mask wherever the mask is an interval of keys (causal, windows, lengths): those modifiers
// hook no fa_visible, and a key's test is one subtraction and one compare.
uvec2 fa_row_span(uint b, uint h, uint q, uint kv_end) {
  const uvec4 r = fa_keys(b, h, q, q);
  const uint hi = min(r.y, kv_end);
  return uvec2(r.x, hi > r.x ? hi - r.x : 0u);
}

// Whether key k counts for query position q, whose fa_row_span is `span`; masks that are not
// intervals (a mask tensor, a user's predicate) are asked inside it.
bool fa_row_sees(uvec2 span, uint b, uint h, uint q, uint k) {
  return k - span.x < span.y && (!FA_VISIBLE_HOOKED || fa_visible(b, h, q, k));
}

// Whether every key of [k_lo, k_hi) counts for every query of a block whose keys are `keys`: no
// element mask is needed there (every mask says through fa_key_range which keys it surely leaves).
bool fa_keys_all_visible(uvec4 keys, uint k_lo, uint k_hi) { return k_lo >= keys.z && k_hi <= keys.w; }

// fa_keys over heads h0 .. h0 + n - 1 (a decode workgroup's): the keys any of them may see, and the
// keys all of them surely see.
uvec4 fa_keys_heads(uint b, uint h0, uint n, uint q_lo, uint q_hi) {
  uvec4 r = fa_keys(b, h0, q_lo, q_hi);
  for (uint h = 1u; h < n; ++h) {
    const uvec4 x = fa_keys(b, h0 + h, q_lo, q_hi);
    r = uvec4(min(r.x, x.x), max(r.y, x.y), max(r.z, x.z), min(r.w, x.w));
  }
  return r;
}

// Whether every key of [k_lo, k_hi) is settled by the range alone for a single query position: the
// masks need not be asked there (causal, windows and lengths; not a mask tensor).
bool fa_keys_exact(uvec4 keys, uint k_lo, uint k_hi) { return !FA_VISIBLE_HOOKED || (k_lo >= keys.z && k_hi <= keys.w); }
