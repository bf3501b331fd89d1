#pragma once
// Prefill Split-K, phase two: merges the per-split partials of each (batch, query head, token) with a
// log-sum-exp and writes the normalised output. Grid: (q_len, query heads, batch).
#include "foundry/Stage.h"

namespace foundry {

class SdpaPrefillSplitKReduceStage : public Stage {
 public:
  /// `lse`: also write each row's log-sum-exp (stages/LseOutput.h).
  SdpaPrefillSplitKReduceStage(std::uint32_t headDim, DType dtype, bool lse = false) : headDim_(headDim), dtype_(dtype), lse_(lse) {}
  std::string name() const override { return "SdpaPrefillSplitKReduceStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  std::uint32_t headDim_;
  DType dtype_;
  bool lse_;
};

}  // namespace foundry
