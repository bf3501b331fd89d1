// NaN and infinities through the maxima that scale values into narrower codes (int8 caches and q
// quantized for int8 or f16 products): codes cannot hold them, so a non-finite value makes its block's
// largest magnitude +Inf, and the factor that scales the codes back becomes NaN.
float f32_inf() { return uintBitsToFloat(0x7f800000u); }
float f32_nan() { return uintBitsToFloat(0x7fc00000u); }
// |x|, and +Inf for a NaN or an infinity (a NaN compared is false).
float magnitude_or_inf(float x) {
  const float a = abs(x);
  return a < f32_inf() ? a : f32_inf();
}
float magnitude_or_inf(vec4 x) {
  const vec4 a = abs(x);
  const float m = max(max(a.x, a.y), max(a.z, a.w));
  return all(lessThan(a, vec4(f32_inf()))) ? m : f32_inf();
}
// The factor codes scaled by the largest magnitude `top` are multiplied back by: NaN where top is +Inf.
float scale_or_nan(float top, float factor) { return isinf(top) ? f32_nan() : factor; }
