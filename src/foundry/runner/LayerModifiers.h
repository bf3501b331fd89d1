#pragma once
// The attention modifiers of one layer of a model config, as the stages a FlashAttentionStep call
// takes. Per-head values (ALiBi slopes, sink logits) become tensors through a callback, so a run
// uploads them and `foundry kernels` only describes them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "foundry/Tensor.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/stages/AttentionModifier.h"
#include "foundry/steps/KernelCatalog.h"

namespace foundry {

/// Makes the f32 tensor `name` holding `values` (one per query head).
using MakeHeadTensor = std::function<Tensor(const std::string& name, const std::vector<double>& values)>;

/// The modifiers of `layer` (after the causal mask the run always applies), in the config's order.
/// Sinks a config does not give are drawn per layer from the run's seed.
Modifiers layerModifiers(const ModelConfig& config, std::uint32_t layer, const MakeHeadTensor& tensor);

/// Shape-only tensors: for planning and building kernels without a device.
Tensor describeHeadTensor(const std::string& name, const std::vector<double>& values);

/// The distinct modifier lists of a config's layers, each with the layers that use it.
struct LayerModifierSet {
  std::vector<std::uint32_t> layers;
  std::vector<ModifierConfig> modifiers;
};
std::vector<LayerModifierSet> distinctLayerModifiers(const ModelConfig& config);

/// "sliding_window 4096 + sinks" for reports.
std::string describeModifiers(const std::vector<ModifierConfig>& modifiers);

/// The attention layout a run of `config` builds its kernels for (`foundry kernels --config`): its heads,
/// dims, dtype, cache type and pages, RoPE, context, scale, and one modifier set per distinct list of
/// layer modifiers, named by the layers that use it.
AttentionLayout attentionLayoutOf(const ModelConfig& config);

}  // namespace foundry
