#pragma once
// Copies `count` elements from src[src_first + i] to dst[dst_first + i]. A replayed decode step
// moves a token's rows between the run's token arrays and fixed token tensors with it: the element
// offsets are push constants (so a replay gives them anew), where a tensor view's offset would be part
// of the recorded descriptor.
#include "foundry/Stage.h"

namespace foundry {

class TokenCopyStage : public ElementStage {
 public:
  using ElementStage::ElementStage;
  std::string name() const override { return "TokenCopyStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
};

}  // namespace foundry
