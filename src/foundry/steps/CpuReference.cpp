#include "foundry/steps/CpuReference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "foundry/Error.h"

namespace foundry {

namespace {

std::size_t rowIndex(const AttentionProblem& p, Layout layout, std::uint32_t b, std::uint32_t h, std::uint32_t s,
                     std::size_t width) {
  if (layout == Layout::TokenMajor) return ((static_cast<std::size_t>(b) * p.qLen + s) * p.nHeads + h) * width;
  return ((static_cast<std::size_t>(b) * p.nHeads + h) * p.qLen + s) * width;
}

std::size_t cacheIndex(const AttentionProblem& p, std::uint32_t b, std::uint32_t kvh, std::uint32_t s,
                       std::size_t width) {
  return ((static_cast<std::size_t>(b) * p.nKvHeads + kvh) * p.kvCapacity + s) * width;
}

}  // namespace

std::size_t qIndex(const AttentionProblem& p, Layout layout, std::uint32_t b, std::uint32_t h, std::uint32_t s) {
  return rowIndex(p, layout, b, h, s, p.headDim);
}

std::size_t oIndex(const AttentionProblem& p, Layout layout, std::uint32_t b, std::uint32_t h, std::uint32_t s) {
  return rowIndex(p, layout, b, h, s, p.vDim());
}

std::size_t kvIndex(const AttentionProblem& p, std::uint32_t b, std::uint32_t kvh, std::uint32_t s) {
  return cacheIndex(p, b, kvh, s, p.headDim);
}

std::size_t vIndex(const AttentionProblem& p, std::uint32_t b, std::uint32_t kvh, std::uint32_t s) {
  return cacheIndex(p, b, kvh, s, p.vDim());
}

namespace {

void checkKeys(const AttentionProblem& p, std::span<const float> q, std::span<const float> k) {
  const std::size_t qCount = static_cast<std::size_t>(p.batch) * p.nHeads * p.qLen * p.headDim;
  const std::size_t kCount = static_cast<std::size_t>(p.batch) * p.nKvHeads * p.kvCapacity * p.headDim;
  if (q.size() != qCount || k.size() != kCount || p.nKvHeads == 0 || p.nHeads % p.nKvHeads != 0 ||
      p.kvLen > p.kvCapacity || (p.causal && p.qLen > p.kvLen)) {
    throw InternalError("cpuAttention: inconsistent problem " + p.describe());
  }
}

void checkProblem(const AttentionProblem& p, std::span<const float> q, std::span<const float> k,
                  std::span<const float> v) {
  checkKeys(p, q, k);
  if (v.size() != k.size() / p.headDim * p.vDim()) throw InternalError("cpuAttention: inconsistent v " + p.describe());
}

// The logit of query (b, h, i) and key j through the score modifiers, or nothing where a mask hides it.
std::optional<double> logit(const AttentionProblem& p, const ModifierChain& chain, std::span<const float> q,
                            std::span<const float> k, const HookAt& at, std::uint32_t i) {
  if (!chain.visible(at)) return std::nullopt;
  const float* qi = q.data() + qIndex(p, p.qLayout, at.b, at.h, i);
  const float* kj = k.data() + kvIndex(p, at.b, at.h / p.group(), at.k);
  double s = 0;
  for (std::size_t d = 0; d < p.headDim; ++d) s += static_cast<double>(qi[d]) * kj[d];
  return chain.score(s * p.softmaxScale(), at);
}

// Writes the attention output of one row into `o` (value_dim values), using `scores` as scratch;
// returns the row's log-sum-exp.
double attendRow(const AttentionProblem& p, const ModifierChain& chain, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::uint32_t b, std::uint32_t h, std::uint32_t i, std::vector<double>& scores,
               double* o) {
  const std::size_t D = p.vDim();
  const std::uint32_t n = chain.kvLength(b, p.kvLen), offset = n - p.qLen;
  const std::uint32_t pos = offset + i;
  const double hidden = -std::numeric_limits<double>::infinity();
  scores.assign(n, hidden);
  double m = hidden;
  // The maximum keeps a NaN logit (std::max would drop it), so NaN in q or k makes the row NaN, as
  // PyTorch's softmax does; a +Inf logit does too (exp(inf - inf)). `foundry run --check` relies on it.
  for (std::uint32_t j = 0; j < n; ++j) {
    if (auto s = logit(p, chain, q, k, {b, h, pos, j, offset}, i)) {
      scores[j] = *s;
      if (std::isnan(*s) || *s > m) m = *s;
    }
  }
  const std::optional<double> sink = chain.sink(b, h);
  if (sink) m = std::max(m, *sink);
  for (std::size_t d = 0; d < D; ++d) o[d] = 0.0;
  double lse = hidden;
  if (m != hidden) {
    double l = sink ? std::exp(*sink - m) : 0.0;
    for (std::uint32_t j = 0; j < n; ++j) l += (scores[j] = scores[j] == hidden ? 0.0 : std::exp(scores[j] - m));
    for (std::uint32_t j = 0; j < n; ++j) {
      if (scores[j] == 0.0) continue;
      const float* vj = v.data() + vIndex(p, b, h / p.group(), j);
      const double w = scores[j] / l;
      for (std::size_t d = 0; d < D; ++d) o[d] += w * vj[d];
    }
    lse = m + std::log(l);
  }
  for (std::size_t d = 0; d < D; ++d) o[d] = chain.epilogue(o[d], b, h, pos, static_cast<std::uint32_t>(d));
  return lse;
}

}  // namespace

std::vector<double> cpuAttention(const AttentionProblem& p, std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::vector<double>* lse) {
  checkProblem(p, q, k, v);
  const Modifiers mods = p.allModifiers();
  const ModifierChain chain{mods};
  std::vector<double> out(q.size() / p.headDim * p.vDim(), 0.0);
  std::vector<double> scores;
  if (lse) lse->assign(std::size_t(p.batch) * p.nHeads * p.qLen, 0.0);
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t h = 0; h < p.nHeads; ++h) {
      for (std::uint32_t i = 0; i < p.qLen; ++i) {
        const double rowLse = attendRow(p, chain, q, k, v, b, h, i, scores, out.data() + oIndex(p, p.oLayout, b, h, i));
        if (lse) (*lse)[(std::size_t(b) * p.nHeads + h) * p.qLen + i] = rowLse;
      }
    }
  }
  return out;
}

std::vector<double> cpuAttentionRow(const AttentionProblem& p, std::span<const float> q, std::span<const float> k,
                                    std::span<const float> v, std::uint32_t b, std::uint32_t h, std::uint32_t i) {
  checkProblem(p, q, k, v);
  const Modifiers mods = p.allModifiers();
  const ModifierChain chain{mods};
  std::vector<double> out(p.vDim()), scores;
  attendRow(p, chain, q, k, v, b, h, i, scores, out.data());
  return out;
}

double maxAbsLogit(const AttentionProblem& p, std::span<const float> q, std::span<const float> k) {
  checkKeys(p, q, k);
  const Modifiers mods = p.allModifiers();
  const ModifierChain chain{mods};
  double best = 0;
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    const std::uint32_t n = chain.kvLength(b, p.kvLen), offset = n - p.qLen;
    for (std::uint32_t h = 0; h < p.nHeads; ++h) {
      for (std::uint32_t i = 0; i < p.qLen; ++i) {
        for (std::uint32_t j = 0; j < n; ++j) {
          if (auto s = logit(p, chain, q, k, {b, h, offset + i, j, offset}, i)) best = std::max(best, std::abs(*s));
        }
      }
    }
  }
  return best;
}

void cpuRope(const RopeSpec& spec, std::uint32_t headDim, std::span<float> x,
             const std::vector<std::uint32_t>& positionOfVector) {
  const auto inv = spec.inverseFrequencies(headDim);
  const double scale = spec.attentionScale();
  const std::uint32_t rot = spec.dims(headDim);
  const std::uint32_t half = rot / 2;
  for (std::size_t vec = 0; vec < positionOfVector.size(); ++vec) {
    float* e = x.data() + vec * headDim;
    for (std::uint32_t f = 0; f < half; ++f) {
      const double angle = static_cast<double>(positionOfVector[vec]) * inv[f];
      const double c = std::cos(angle) * scale, s = std::sin(angle) * scale;
      const std::uint32_t i = spec.pairing == RopePairing::RotateHalf ? f : 2 * f;
      const std::uint32_t j = spec.pairing == RopePairing::RotateHalf ? f + half : 2 * f + 1;
      const double a = e[i], b = e[j];
      e[i] = static_cast<float>(a * c - b * s);
      e[j] = static_cast<float>(b * c + a * s);
    }
  }
}

}  // namespace foundry
