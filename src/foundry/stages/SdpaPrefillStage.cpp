#include "foundry/stages/SdpaPrefillStage.h"

#include "foundry/stages/SdpaPrefillCommon.h"

namespace foundry {

SdpaPrefillStage::SdpaPrefillStage(PrefillVariant variant) : v_(variant) { v_.split = false; }

void SdpaPrefillStage::declare(KernelInterface& k, const DeviceInfo& device) const {
  prefill_detail::declare(v_, k, device);
}

void SdpaPrefillStage::emit(GlslWriter& w, const DeviceInfo&) const { prefill_detail::emit(v_, w); }

}  // namespace foundry
