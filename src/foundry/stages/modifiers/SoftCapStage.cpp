#include "foundry/stages/modifiers/SoftCapStage.h"

#include <cmath>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/AttentionHooks.h"

namespace foundry {

SoftCapStage::SoftCapStage(double cap) : cap_(cap) {
  if (!(cap > 0.0) || !std::isfinite(cap) || cap > 1e30) {
    throw UserError("soft_cap", fmt::format("{}: expected a finite cap greater than 0", cap));
  }
}

std::string SoftCapStage::describe() const { return fmt::format("logit soft-cap {}", cap_); }

void SoftCapStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.push("soft_cap", PushType::F32).snippet("modifiers/soft_cap.glsl");
  k.hook(hook::kScore, wide() ? "soft_cap_score_wide" : "soft_cap_score");
}

void SoftCapStage::bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const {
  args.set("soft_cap", static_cast<float>(cap_));
}

double SoftCapStage::score(double s, const HookAt&) const { return cap_ * std::tanh(s / cap_); }

}  // namespace foundry
