// bf16 is the high half of an f32: widening is a shift, so every bf16 value, however large or small,
// reaches f32 arithmetic exactly. Buffers hold it as uint16_t (16-bit storage, no 16-bit arithmetic).

float bf16_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }

// Two bf16 values packed in a 32-bit word, the lower one first.
vec2 bf16x2_to_f32(uint word) { return vec2(uintBitsToFloat(word << 16), uintBitsToFloat(word & 0xffff0000u)); }

// The bf16 bits of an f32, rounded to nearest even; NaN stays a quiet NaN, infinities stay infinite.
uint bf16_bits(float x) {
  const uint u = floatBitsToUint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
