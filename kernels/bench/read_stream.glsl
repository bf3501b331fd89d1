// Reads a buffer once, 16 bytes per load, grid-strided so consecutive invocations read consecutive
// addresses. The folded value is written only where it equals a value the host passes (pc.magic), so
// the compiler cannot drop the reads and, in practice, nothing is written.
uint read_stream(uint first, uint stride, uint count) {
  uvec4 acc = uvec4(0u);
  for (uint i = first; i < count; i += stride) acc ^= data[i];
  return acc.x ^ acc.y ^ acc.z ^ acc.w;
}
