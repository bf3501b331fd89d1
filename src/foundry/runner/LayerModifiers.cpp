#include "foundry/runner/LayerModifiers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Random.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"

namespace foundry {

namespace {

bool sameModifiers(const std::vector<ModifierConfig>& a, const std::vector<ModifierConfig>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].left != b[i].left || a[i].right != b[i].right || a[i].cap != b[i].cap ||
        a[i].values != b[i].values) {
      return false;
    }
  }
  return true;
}

// Learned sink logits stand-in: per layer and head, uniform in [-2, 4] from the run's seed.
std::vector<double> drawnSinks(const ModelConfig& c, std::uint32_t layer) {
  const auto u = randomUniforms(randomHash(static_cast<std::uint32_t>(c.run.seed) ^ (layer * 7919u + 13u)), 0, c.nHeads);
  std::vector<double> out;
  for (float x : u) out.push_back(-2.0 + 6.0 * (x + 1.0) / 2.0);
  return out;
}

}  // namespace

Tensor describeHeadTensor(const std::string& name, const std::vector<double>& values) {
  return Tensor::describe(name, DType::F32, {static_cast<std::int64_t>(values.size())});
}

Modifiers layerModifiers(const ModelConfig& c, std::uint32_t layer, const MakeHeadTensor& tensor) {
  Modifiers out;
  for (const auto& m : c.modifiersOf(layer)) {
    switch (m.kind) {
      case ModifierConfig::Kind::SlidingWindow:
        out.push_back(std::make_shared<SlidingWindowStage>(m.left, m.right));
        break;
      case ModifierConfig::Kind::SoftCap: out.push_back(std::make_shared<SoftCapStage>(m.cap)); break;
      case ModifierConfig::Kind::Alibi: {
        PerHeadValues slopes;
        slopes.values = m.values.empty() ? AlibiStage::alibiSlopes(c.nHeads) : m.values;
        slopes.tensor = tensor(fmt::format("alibi_slopes{}", layer), slopes.values);
        out.push_back(std::make_shared<AlibiStage>(std::move(slopes)));
        break;
      }
      case ModifierConfig::Kind::Sinks: {
        PerHeadValues logits;
        logits.values = m.values.empty() ? drawnSinks(c, layer) : m.values;
        logits.tensor = tensor(fmt::format("sinks{}", layer), logits.values);
        out.push_back(std::make_shared<SinksStage>(std::move(logits)));
        break;
      }
    }
  }
  return out;
}

std::vector<LayerModifierSet> distinctLayerModifiers(const ModelConfig& c) {
  std::vector<LayerModifierSet> out;
  for (std::uint32_t l = 0; l < c.layers; ++l) {
    auto mods = c.modifiersOf(l);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return sameModifiers(s.modifiers, mods); });
    if (it == out.end()) it = out.insert(out.end(), {{}, std::move(mods)});
    it->layers.push_back(l);
  }
  return out;
}

std::string describeModifiers(const std::vector<ModifierConfig>& modifiers) {
  std::string s;
  for (const auto& m : modifiers) {
    std::string one;
    switch (m.kind) {
      case ModifierConfig::Kind::SlidingWindow:
        one = m.right == 0 ? fmt::format("sliding window {}", m.left + 1)
                           : fmt::format("sliding window (left {}, right {})", m.left, m.right);
        break;
      case ModifierConfig::Kind::SoftCap: one = fmt::format("soft-cap {}", m.cap); break;
      case ModifierConfig::Kind::Alibi: one = m.values.empty() ? "ALiBi" : "ALiBi (given slopes)"; break;
      case ModifierConfig::Kind::Sinks: one = m.values.empty() ? "sinks (drawn)" : "sinks"; break;
    }
    s += (s.empty() ? "" : " + ") + one;
  }
  return s.empty() ? "none" : s;
}

AttentionLayout attentionLayoutOf(const ModelConfig& c) {
  AttentionLayout layout{.nHeads = c.nHeads,
                         .nKvHeads = c.nKvHeads,
                         .headDim = c.headDim,
                         .valueDim = c.valueDim,
                         .latentValues = c.latentValues,
                         .dtype = c.run.dtype,
                         .cacheType = c.run.cacheType(),
                         .pageSize = c.run.pageSize,
                         .rope = c.rope,
                         .maxContext = c.maxContext,
                         .scale = static_cast<float>(c.softmaxScale),
                         .modifierSets = {}};
  for (const auto& set : distinctLayerModifiers(c)) {
    const std::string layers = fmt::format("layer{} {}", set.layers.size() > 1 ? "s" : "", fmt::join(set.layers, ","));
    layout.modifierSets.emplace_back(
        fmt::format("{}: {}", set.layers.size() == c.layers ? "all layers" : layers, describeModifiers(set.modifiers)),
        layerModifiers(c, set.layers.front(), describeHeadTensor));
  }
  return layout;
}

}  // namespace foundry
