#pragma once
// Decode Split-K, phase two: merges the per-split partials of each (batch, query head) with a
// log-sum-exp and writes the normalised output. Grid: (query heads, batch).
#include "foundry/Stage.h"

namespace foundry {

class FlashDecodeSplitKReduceStage : public Stage {
 public:
  /// `lse`: also write each row's log-sum-exp (stages/LseOutput.h).
  FlashDecodeSplitKReduceStage(std::uint32_t headDim, DType dtype, bool lse = false) : headDim_(headDim), dtype_(dtype), lse_(lse) {}
  std::string name() const override { return "FlashDecodeSplitKReduceStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  std::uint32_t headDim_;
  DType dtype_;
  bool lse_;
};

}  // namespace foundry
