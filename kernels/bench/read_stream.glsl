// Reads a buffer once, 16 bytes per load. The folded value is written only where it equals a value the
// host passes (pc.magic), so the compiler cannot drop the reads and, in practice, nothing is written.
// READ_LOADS loads of a lane are issued before any is folded: the loads a lane has in flight.
uint read_stream(uint first, uint stride, uint end) {
  uvec4 acc = uvec4(0u);
  uint i = first;
  for (; i + (READ_LOADS - 1u) * stride < end; i += READ_LOADS * stride) {
    uvec4 v[READ_LOADS];
    [[unroll]] for (uint k = 0u; k < READ_LOADS; ++k) v[k] = data[i + k * stride];
    [[unroll]] for (uint k = 0u; k < READ_LOADS; ++k) acc ^= v[k];
  }
  for (; i < end; i += stride) acc ^= data[i];
  return acc.x ^ acc.y ^ acc.z ^ acc.w;
}
