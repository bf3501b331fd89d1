//! requires: flashattention/common.glsl
// What every attention kernel calls around its hook points (foundry/stages/AttentionHooks.h). Inside the
// kernels scores are in the log2 domain (q is pre-scaled by scale * log2(e)); modifiers see natural
// units, and the conversion lives here only.

// The intersection of two key ranges (any_lo, any_hi, all_lo, all_hi).
uvec4 fa_range_meet(uvec4 x, uvec4 y) { return uvec4(max(x.x, y.x), min(x.y, y.y), max(x.z, y.z), min(x.w, y.w)); }

// The position among the keys of query i of sequence b: the last query sits on the last key.
uint fa_query_pos(uint b, uint i) { return fa_kv_len(b) - pc.q_len + i; }
