#include "foundry/steps/AttentionProblem.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/modifiers/CausalStage.h"

namespace foundry {

std::string_view ropePairingName(RopePairing pairing) {
  return pairing == RopePairing::RotateHalf ? "rotate_half" : "interleaved";
}

void RopeSpec::validate(std::uint32_t headDim) const {
  const std::uint32_t rot = dims(headDim);
  if (rot == 0 || rot % 2 != 0 || rot > headDim) {
    throw UserError("rope.rotary_dims", fmt::format("{} must be even and in 2..head_dim {}", rot, headDim));
  }
  const auto positive = [](double v, const char* field) {
    if (!std::isfinite(v) || v <= 0.0) {
      throw UserError(field, fmt::format("{} gives no finite frequencies; accepted: a finite value above 0", v));
    }
  };
  positive(theta, "rope.theta");
  if (llama3 && yarn) {
    throw UserError("rope.yarn", "given with rope.llama3: a RoPE has one frequency scaling; give one of them");
  }
  if (llama3) {
    positive(llama3->factor, "rope.llama3.factor");
    positive(llama3->lowFreqFactor, "rope.llama3.low_freq_factor");
    positive(llama3->originalMaxPosition, "rope.llama3.original_max_position");
    if (!(llama3->highFreqFactor > llama3->lowFreqFactor) || !std::isfinite(llama3->highFreqFactor)) {
      throw UserError("rope.llama3.high_freq_factor",
                      fmt::format("{} must be finite and above low_freq_factor ({}): the ramp between them divides by "
                                  "their difference", llama3->highFreqFactor, llama3->lowFreqFactor));
    }
  }
  if (yarn) {
    positive(yarn->factor, "rope.yarn.factor");
    positive(yarn->originalMaxPosition, "rope.yarn.original_max_position");
    positive(yarn->betaFast, "rope.yarn.beta_fast");
    positive(yarn->betaSlow, "rope.yarn.beta_slow");
    if (yarn->attentionFactor) positive(*yarn->attentionFactor, "rope.yarn.attention_factor");
    if (yarn->mscale) positive(*yarn->mscale, "rope.yarn.mscale");
    if (yarn->mscaleAllDim) positive(*yarn->mscaleAllDim, "rope.yarn.mscale_all_dim");
  }
}

std::vector<double> RopeSpec::inverseFrequencies(std::uint32_t headDim) const {
  validate(headDim);
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
  if (yarn) {
    // transformers' _compute_yarn_parameters, in double.
    const auto& y = *yarn;
    const double dim = rot;
    auto correctionDim = [&](double rotations) {
      return dim * std::log(y.originalMaxPosition / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
    };
    double low = correctionDim(y.betaFast), high = correctionDim(y.betaSlow);
    if (y.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    for (std::uint32_t i = 0; i < rot / 2; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;  // the share of the original frequency
      f[i] = f[i] / y.factor * (1.0 - extrapolation) + f[i] * extrapolation;
    }
  }
  return f;
}

double RopeSpec::attentionScale() const {
  if (!yarn) return 1.0;
  const auto& y = *yarn;
  if (y.attentionFactor) return *y.attentionFactor;
  auto mscaleOf = [&](double m) { return y.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(y.factor) + 1.0; };
  if (y.mscale && y.mscaleAllDim) return mscaleOf(*y.mscale) / mscaleOf(*y.mscaleAllDim);
  return mscaleOf(1.0);
}

Modifiers AttentionProblem::allModifiers() const {
  static const ModifierPtr kCausal = std::make_shared<CausalStage>(CausalStage::Align::BottomRight);
  Modifiers out;
  if (causal) out.push_back(kCausal);
  out.insert(out.end(), modifiers.begin(), modifiers.end());
  return out;
}

Modifiers AttentionProblem::activeModifiers() const {
  const ModifierCall call = modifierCall();
  Modifiers out;
  for (const auto& m : allModifiers()) {
    if (!m->isIdentityFor(call)) out.push_back(m);
  }
  return out;
}

ModifierCall AttentionProblem::modifierCall() const { return {batch, nHeads, nKvHeads, qLen, kvLen, headDim}; }

float AttentionProblem::softmaxScale() const {
  return scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
}

std::string AttentionProblem::describe() const {
  std::string mods;
  for (const auto& m : modifiers) mods += "; " + m->describe();
  const std::string values = vRow() == vDim() ? (plainValues() ? "" : fmt::format(" Dv={}", vDim()))
                                               : fmt::format(" Dv={} (rows of {})", vDim(), vRow());
  std::string types(dtypeName(dtype));
  if (qType() != dtype || oType() != dtype) {
    types = fmt::format("q {} kv {} o {}", dtypeName(qType()), dtypeName(dtype), dtypeName(oType()));
  }
  return fmt::format("B={} Hq={} Hkv={} q_len={} kv_len={} capacity={}{} D={}{} {} q:{} o:{}{}{}{}", batch, nHeads,
                     nKvHeads, qLen, kvLen, kvCapacity, pageSize ? fmt::format(" (pages of {})", pageSize) : "",
                     headDim, values, types, layoutName(qLayout), layoutName(oLayout), causal ? " causal" : "",
                     lse ? " +lse" : "", mods);
}

std::vector<std::int64_t> AttentionProblem::lseDims() const { return {batch, nHeads, qLen}; }

std::vector<std::int64_t> AttentionProblem::qDims(Layout layout) const {
  if (layout == Layout::TokenMajor) return {batch, qLen, nHeads, headDim};
  return {batch, nHeads, qLen, headDim};
}

std::vector<std::int64_t> AttentionProblem::oDims(Layout layout) const {
  auto dims = qDims(layout);
  dims.back() = vDim();
  return dims;
}

std::vector<std::int64_t> AttentionProblem::kvDims() const { return {batch, nKvHeads, kvCapacity, headDim}; }

std::vector<std::int64_t> AttentionProblem::vDims() const { return {batch, nKvHeads, kvCapacity, vDim()}; }

}  // namespace foundry
