// Causal masks (stages/modifiers/CausalStage.h). Bottom-right aligned: query position q sees keys
// k <= q, so the last query of a chunk sees every key (what a KV cache needs). Top-left aligned
// (PyTorch's is_causal): query index i of the call sees keys k <= i.

bool causal_visible(uint b, uint h, uint q, uint k) { return k <= q; }

uvec4 causal_key_range(uint b, uint h, uint q_lo, uint q_hi) { return uvec4(0u, q_hi + 1u, 0u, q_lo + 1u); }

// Query positions are never below fa_kv_len(b) - q_len, so this never wraps.
uint causal_query_index(uint b, uint q) { return q + pc.q_len - fa_kv_len(b); }

bool causal_top_left_visible(uint b, uint h, uint q, uint k) { return k <= causal_query_index(b, q); }

uvec4 causal_top_left_key_range(uint b, uint h, uint q_lo, uint q_hi) {
  return uvec4(0u, causal_query_index(b, q_hi) + 1u, 0u, causal_query_index(b, q_lo) + 1u);
}
