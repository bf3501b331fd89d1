// Counter-based random numbers: the value at `index` depends only on (seed, index), so any slice of
// a synthetic tensor can be regenerated on the host bit for bit (see foundry/Random.h).
uint random_hash(uint x) {
  // The "lowbias32" integer hash: good avalanche, two multiplies.
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Uniform in [-1, 1): the top 24 bits of the hash as a fraction.
float random_uniform(uint seed, uint index) {
  const uint h = random_hash(index ^ random_hash(seed));
  return float(h >> 8) * (2.0 / 16777216.0) - 1.0;
}
