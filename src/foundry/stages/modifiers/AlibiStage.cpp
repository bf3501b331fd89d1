#include "foundry/stages/modifiers/AlibiStage.h"

#include <cmath>

#include <fmt/format.h>

#include "foundry/stages/AttentionHooks.h"

namespace foundry {

std::vector<double> AlibiStage::alibiSlopes(std::uint32_t n) {
  std::uint32_t p = 1;
  while (p * 2 <= n) p *= 2;
  std::vector<double> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    out.push_back(i < p ? std::exp2(-8.0 * (i + 1) / p) : std::exp2(-4.0 * (2.0 * (i - p) + 1) / p));
  }
  return out;
}

std::string AlibiStage::describe() const {
  return fmt::format("ALiBi ({} slopes, first {:.4g})", slopes_.values.size(),
                     slopes_.values.empty() ? 0.0 : slopes_.values[0]);
}

void AlibiStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("alibi_slopes", DType::F32, Access::ReadOnly).snippet("modifiers/alibi.glsl");
  k.hook(hook::kDistanceBias, "alibi_slope");
}

void AlibiStage::bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const {
  args.bind("alibi_slopes", slopes_.tensor);
}

}  // namespace foundry
