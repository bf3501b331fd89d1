#pragma once
// What SdpaPrefillStage and SdpaPrefillSplitKPartStage share: the tile loop, differing only in the
// store (the final output, or unnormalised partials with their max and sum).
#include "foundry/GlslWriter.h"
#include "foundry/KernelInterface.h"
#include "stages/PrefillVariant.h"

namespace foundry {

class DeviceInfo;

namespace prefill_detail {

void declare(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device);
void emit(const PrefillVariant& v, GlslWriter& w);

}  // namespace prefill_detail
}  // namespace foundry
