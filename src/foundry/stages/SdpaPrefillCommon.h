#pragma once
// What SdpaPrefillStage and SdpaPrefillSplitKPartStage share: the tile loop, differing only in the
// store (the final output, or unnormalised partials with their max and sum).
#include <set>
#include <string>

#include "foundry/GlslWriter.h"
#include "foundry/KernelInterface.h"
#include "foundry/stages/PrefillVariant.h"

namespace foundry {

struct DeviceInfo;

namespace prefill_detail {

/// The hook points a prefill kernel of this variant hosts: all, or the key loop's only for a Split-K
/// part (the reduce kernel hosts the output's).
std::set<std::string> hookPoints(const PrefillVariant& v);
void declare(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device);
void emit(const PrefillVariant& v, GlslWriter& w);

}  // namespace prefill_detail
}  // namespace foundry
