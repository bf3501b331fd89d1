// f16 outputs are clamped to the finite f16 range rather than overflowing to infinity.
const float HALF_MAX = 65504.0;

float clamp_to_half(float x) { return clamp(x, -HALF_MAX, HALF_MAX); }
