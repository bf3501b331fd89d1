#pragma once
// Prefill Split-K, phase one: like SdpaPrefillStage over one slice of the keys (grid x is
// query tile * n_splits + split), writing the unnormalised output rows with their running max and
// sum in f32 for SdpaPrefillSplitKReduceStage.
#include "foundry/Stage.h"
#include "foundry/stages/PrefillVariant.h"

namespace foundry {

class SdpaPrefillSplitKPartStage : public Stage {
 public:
  explicit SdpaPrefillSplitKPartStage(PrefillVariant variant);
  std::string name() const override { return "SdpaPrefillSplitKPartStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return v_.key(); }

 private:
  PrefillVariant v_;
};

}  // namespace foundry
