// A sliding window (foundry/stages/modifiers/SlidingWindowStage.h): query position q sees keys
// [q - window_left, q + window_right], as FlashAttention's window_size = (left, right). A key range:
// for one query it is exactly the window, so the kernels need no per-key predicate. Extents are at
// most 2^31 - 1, so no sum here wraps.

uint window_below(uint x, uint by) { return x > by ? x - by : 0u; }

uvec4 window_key_range(uint b, uint h, uint q_lo, uint q_hi) {
  return uvec4(window_below(q_lo, pc.window_left), q_hi + pc.window_right + 1u, window_below(q_hi, pc.window_left),
               q_lo + pc.window_right + 1u);
}
