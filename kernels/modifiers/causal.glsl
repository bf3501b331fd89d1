// Causal masks (foundry/stages/modifiers/CausalStage.h), as key ranges: for one query position they are
// exactly its mask (an interval of keys), so the kernels need no per-key predicate. Bottom-right
// aligned: query position q sees keys k <= q, so the last query of a chunk sees every key (what a KV
// cache needs). Top-left aligned (PyTorch's is_causal): query index i of the call sees keys k <= i.

uvec4 causal_key_range(uint b, uint h, uint q_lo, uint q_hi) { return uvec4(0u, q_hi + 1u, 0u, q_lo + 1u); }

// Query positions are never below fa_kv_len(b) - q_len, so this never wraps.
uint causal_query_index(uint b, uint q) { return q + pc.q_len - fa_kv_len(b); }

uvec4 causal_top_left_key_range(uint b, uint h, uint q_lo, uint q_hi) {
  return uvec4(0u, causal_query_index(b, q_hi) + 1u, 0u, causal_query_index(b, q_lo) + 1u);
}
