//! requires: flashattention/common.glsl
// The materialised baseline, one thread per output: scores, a row softmax, then P·V. Simple on
// purpose: it is what the fused kernels are checked against on the device. The scores go through the
// same hook points as in the fused kernels (foundry/stages/AttentionHooks.h), in natural units.
// scores is [batch, n_heads, q_len, kv_len] in f32; masked entries hold NEG_BIG and end up as 0.

uint ref_row(uint batch, uint head, uint token) { return (batch * pc.n_heads + head) * pc.q_len + token; }

