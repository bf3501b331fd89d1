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

// The same over READ_SIDES runs of `part` pieces from `base`, read side by side (a lane's load k of
// side s at base + s * part + i + k * stride), as a decode subgroup reads its K and V rows.
uint read_sides(uint base, uint first, uint stride, uint part) {
  uvec4 acc = uvec4(0u);
  uint i = first;
  for (; i + (READ_LOADS - 1u) * stride < part; i += READ_LOADS * stride) {
    uvec4 v[READ_LOADS * READ_SIDES];
    [[unroll]] for (uint k = 0u; k < READ_LOADS; ++k)
      [[unroll]] for (uint s = 0u; s < READ_SIDES; ++s) v[k * READ_SIDES + s] = data[base + s * part + i + k * stride];
    [[unroll]] for (uint k = 0u; k < READ_LOADS * READ_SIDES; ++k) acc ^= v[k];
  }
  for (; i < part; i += stride)
    [[unroll]] for (uint s = 0u; s < READ_SIDES; ++s) acc ^= data[base + s * part + i];
  return acc.x ^ acc.y ^ acc.z ^ acc.w;
}

// As read_stream, but each slot is refilled as soon as its load is folded, so READ_LOADS loads of a
// lane stay in flight, as in the decode kernels' rings of tiles.
uint read_ring(uint first, uint stride, uint end) {
  uvec4 acc = uvec4(0u);
  uvec4 v[READ_LOADS];
  [[unroll]] for (uint k = 0u; k < READ_LOADS; ++k) {
    v[k] = first + k * stride < end ? data[first + k * stride] : uvec4(0u);
  }
  for (uint i = first + READ_LOADS * stride; i < end + READ_LOADS * stride; i += READ_LOADS * stride) {
    [[unroll]] for (uint k = 0u; k < READ_LOADS; ++k) {
      acc ^= v[k];
      v[k] = i + k * stride < end ? data[i + k * stride] : uvec4(0u);
    }
  }
  return acc.x ^ acc.y ^ acc.z ^ acc.w;
}
