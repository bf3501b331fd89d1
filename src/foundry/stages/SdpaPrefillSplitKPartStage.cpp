#include "foundry/stages/SdpaPrefillSplitKPartStage.h"

#include "foundry/stages/SdpaPrefillCommon.h"

namespace foundry {

SdpaPrefillSplitKPartStage::SdpaPrefillSplitKPartStage(PrefillVariant variant) : v_(variant) { v_.split = true; }

void SdpaPrefillSplitKPartStage::declare(KernelInterface& k, const DeviceInfo& device) const {
  prefill_detail::declare(v_, k, device);
}

void SdpaPrefillSplitKPartStage::emit(GlslWriter& w, const DeviceInfo&) const { prefill_detail::emit(v_, w); }

}  // namespace foundry
