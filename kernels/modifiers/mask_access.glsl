//! requires: flashattention/common.glsl
// An explicit mask tensor [Bm, Hm, q_len, row] (foundry/stages/modifiers/MaskStage.h), Bm in {1, batch} and
// Hm in {1, query heads} (a broadcast dimension has stride 0), indexed by the query's index in the
// call. MASK_BITS 0: additive logits, where a value at or below -65504 (f16's lowest, or -inf) hides
// the key and NaN makes the row NaN. MASK_BITS 1: one bit per key in u32 words, set = visible.

uint mask_row(uint b, uint h, uint i) { return b * pc.mask_stride_b + h * pc.mask_stride_h + i * pc.mask_stride_q; }

#if MASK_BITS
bool mask_element_visible(uint row, uint k) { return ((mask_bits[row + k / 32u] >> (k % 32u)) & 1u) != 0u; }
#else
float mask_element(uint row, uint k) { return float(mask_add[row + k]); }
// A NaN element is visible (and makes the score NaN, as an additive mask does in PyTorch).
bool mask_element_visible(uint row, uint k) { return !(mask_element(row, k) <= -HALF_MAX); }
#endif
