#include "steps/AttentionProblem.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace foundry {

std::string_view ropePairingName(RopePairing pairing) {
  return pairing == RopePairing::RotateHalf ? "rotate_half" : "interleaved";
}

std::vector<double> RopeSpec::inverseFrequencies(std::uint32_t headDim) const {
  const std::uint32_t rot = dims(headDim);
  std::vector<double> f(rot / 2);
  for (std::uint32_t i = 0; i < rot / 2; ++i) f[i] = std::pow(theta, -2.0 * i / rot);
  if (llama3) {
    const auto& s = *llama3;
    const double lowWavelen = s.originalMaxPosition / s.lowFreqFactor;
    const double highWavelen = s.originalMaxPosition / s.highFreqFactor;
    for (auto& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / x;
      if (wavelen > lowWavelen) {
        x /= s.factor;
      } else if (wavelen >= highWavelen) {
        const double smooth = (s.originalMaxPosition / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        x = (1.0 - smooth) * x / s.factor + smooth * x;
      }
    }
  }
  return f;
}

float AttentionProblem::softmaxScale() const {
  return scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
}

std::string AttentionProblem::describe() const {
  return fmt::format("B={} Hq={} Hkv={} q_len={} kv_len={} capacity={} D={} {} q:{} o:{}{}", batch, nHeads, nKvHeads,
                     qLen, kvLen, kvCapacity, headDim, dtypeName(dtype), layoutName(qLayout), layoutName(oLayout),
                     causal ? " causal" : "");
}

std::vector<std::int64_t> AttentionProblem::qDims(Layout layout) const {
  if (layout == Layout::TokenMajor) return {batch, qLen, nHeads, headDim};
  return {batch, nHeads, qLen, headDim};
}

std::vector<std::int64_t> AttentionProblem::kvDims() const { return {batch, nKvHeads, kvCapacity, headDim}; }

}  // namespace foundry
