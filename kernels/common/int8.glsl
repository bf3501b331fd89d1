// Signed 8-bit values packed four to a 32-bit word, the lowest byte first (int8 and q8_0 KV caches),
// widened to f32 by sign-extending shifts: no 8-bit storage or arithmetic types needed.

vec4 i8x4_to_f32(uint w) { return vec4(ivec4(uvec4(w << 24u, w << 16u, w << 8u, w)) >> 24); }
vec2 i8x2_to_f32(uint w) { return vec2(ivec2(uvec2(w << 24u, w << 16u)) >> 24); }
float i8_to_f32(uint w) { return float(int(w << 24u) >> 24); }

// The code of x in units of one step (x already divided by the scale), rounded to nearest even and
// kept within -127..127 (-128 is never written), as the low byte of a word.
uint f32_to_i8(float x) { return uint(int(clamp(roundEven(x), -127.0, 127.0))) & 0xffu; }
