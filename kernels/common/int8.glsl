// Signed 8-bit values packed four to a 32-bit word, the lowest byte first (int8 and q8_0 KV caches),
// widened to f32 without 8-bit storage or arithmetic types. A byte b biased by 128 (the xor with
// 0x80) and placed in the low mantissa bits of 1.5 * 2^23 is the float 12582912 + b exactly; taking
// 12583040 off leaves the code. A bit operation and an add per value, where a conversion instruction
// runs at a quarter of the arithmetic rate on GPUs.

const uint I8_MAGIC = 0x4B400000u;     // 1.5 * 2^23
const float I8_MAGIC_BIASED = 12583040.0;  // 1.5 * 2^23 + 128

vec4 i8x4_to_f32(uint w) {
  const uint u = w ^ 0x80808080u;
  return uintBitsToFloat((uvec4(u, u >> 8u, u >> 16u, u >> 24u) & 0xffu) | I8_MAGIC) - I8_MAGIC_BIASED;
}
vec2 i8x2_to_f32(uint w) {
  const uint u = w ^ 0x8080u;
  return uintBitsToFloat((uvec2(u, u >> 8u) & 0xffu) | I8_MAGIC) - I8_MAGIC_BIASED;
}
float i8_to_f32(uint w) { return uintBitsToFloat(((w ^ 0x80u) & 0xffu) | I8_MAGIC) - I8_MAGIC_BIASED; }

// The code of x in units of one step (x already divided by the scale), rounded to nearest even and
// kept within -127..127 (-128 is never written), as the low byte of a word.
uint f32_to_i8(float x) { return uint(int(clamp(roundEven(x), -127.0, 127.0))) & 0xffu; }
