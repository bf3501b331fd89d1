#pragma once
// The host side of kernels/common/random.glsl: the same counter-based values, so synthetic tensors
// filled on the device can be checked on the host without reading them back.
#include <cstdint>
#include <vector>

namespace foundry {

std::uint32_t randomHash(std::uint32_t x);
/// Uniform in [-1, 1), exactly as random_uniform() in GLSL computes it.
float randomUniform(std::uint32_t seed, std::uint32_t index);
/// Values [first, first + count) of the stream `seed`, times `scale`.
std::vector<float> randomUniforms(std::uint32_t seed, std::uint64_t first, std::size_t count, float scale = 1.0f);

}  // namespace foundry
