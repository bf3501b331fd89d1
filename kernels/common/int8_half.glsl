// Signed 8-bit values packed four to a word (as common/int8.glsl widens them to f32), widened to two
// f16 pairs for packed f16 arithmetic: bytes 0 and 2, and bytes 1 and 3. A byte biased by 128 in the
// low mantissa bits of 1024.0 is 1024 + b exactly; 1152 off leaves the code. One bit operation and one
// packed subtraction per pair.
f16vec2 i8_even_f16(uint w) {
  return unpackFloat2x16(((w ^ 0x00800080u) & 0x00ff00ffu) | 0x64006400u) - f16vec2(1152.0);
}
f16vec2 i8_odd_f16(uint w) { return i8_even_f16(w >> 8u); }
