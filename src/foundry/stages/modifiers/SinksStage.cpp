#include "foundry/stages/modifiers/SinksStage.h"

#include <fmt/format.h>

#include "foundry/stages/AttentionHooks.h"

namespace foundry {

std::string SinksStage::describe() const { return fmt::format("attention sinks ({} heads)", logits_.values.size()); }

void SinksStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("attn_sinks", DType::F32, Access::ReadOnly).snippet("modifiers/sinks.glsl");
  k.hook(hook::kSink, "sink_logit");
}

void SinksStage::bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const {
  args.bind("attn_sinks", logits_.tensor);
}

std::optional<double> SinksStage::sink(std::uint32_t, std::uint32_t h) const { return logits_.at(h); }

}  // namespace foundry
