// Signed dot products of four packed 8-bit values (the lowest byte first) added to an accumulator:
// SPIR-V's OpSDotAccSat with the packed 4x8-bit format, which GL_EXT_integer_dot_product names
// dotPacked4x8AccSatEXT; Debian 12's glslang does not know that extension, so the instruction is
// declared through GL_EXT_spirv_intrinsics. The sums a decode load makes (16 products of at most
// 127 x 127) never come near saturation.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4453)
int i8x4_dot_acc(uint a, uint b, int acc, spirv_literal int packed_format);

int i8x4_dot(uint a, uint b, int acc) { return i8x4_dot_acc(a, b, acc, 0); }

// Four whole numbers within -128..127 as signed bytes of one word, the first lowest.
uint pack_i8x4(vec4 v) {
  const uvec4 b = uvec4(ivec4(v)) & 0xffu;
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
