#pragma once
// Fills a tensor with counter-based uniform values in [-scale, scale): element i of the flat tensor
// gets random_uniform(seed, first + i) * scale, so a slice of a larger synthetic tensor can be made on
// its own. Synthetic workloads are made on the device this way, and the
// host regenerates any slice it wants to check (foundry/Random.h).
#include "foundry/Stage.h"

namespace foundry {

class RandomFillStage : public ElementStage {
 public:
  using ElementStage::ElementStage;
  std::string name() const override { return "RandomFillStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
};

}  // namespace foundry
