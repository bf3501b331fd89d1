// Finite values beyond f16's range are clamped to it rather than rounded to infinity; NaN and
// infinities pass as they are (clamp's result for NaN is undefined, and a non-finite input must show).
const float HALF_MAX = 65504.0;

float clamp_to_half(float x) { return isnan(x) || isinf(x) ? x : clamp(x, -HALF_MAX, HALF_MAX); }
