// A sliding window (stages/modifiers/SlidingWindowStage.h): query position q sees keys
// [q - window_left, q + window_right], as FlashAttention's window_size = (left, right). Extents are
// at most 2^31 - 1, so no sum here wraps.

bool window_visible(uint b, uint h, uint q, uint k) { return k + pc.window_left >= q && k <= q + pc.window_right; }

uint window_below(uint x, uint by) { return x > by ? x - by : 0u; }

uvec4 window_key_range(uint b, uint h, uint q_lo, uint q_hi) {
  return uvec4(window_below(q_lo, pc.window_left), q_hi + pc.window_right + 1u, window_below(q_hi, pc.window_left),
               q_lo + pc.window_right + 1u);
}
