#include "foundry/Random.h"

namespace foundry {

std::uint32_t randomHash(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

float randomUniform(std::uint32_t seed, std::uint32_t index) {
  const std::uint32_t h = randomHash(index ^ randomHash(seed));
  return static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

std::vector<float> randomUniforms(std::uint32_t seed, std::uint64_t first, std::size_t count, float scale) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = scale * randomUniform(seed, static_cast<std::uint32_t>(first + i));
  return out;
}

}  // namespace foundry
