#pragma once
// The constants a kernel needs to do a softmax in registers on cooperative-matrix accumulators whose
// layout is the quad pattern (DeviceInfo::coopMatLayout, found by the probe at start-up): which row
// and column each of a lane's elements holds, relative to (lane / 4, 2 * (lane % 4)).
#include <string_view>

#include "foundry/KernelInterface.h"

namespace foundry {

struct CoopMatLayout;

/// Declares CM_ELEMS, CM_SLOTS (the distinct rows a lane's elements hold), CM_ROW_OF, CM_COL_OF,
/// CM_SLOT_OF (each element's slot) and CM_SLOT_ROW (each slot's row offset); with another prefix
/// (e.g. "CM8" for DeviceInfo::coopMatLayout8) the same names under it.
void declareQuadLayout(KernelInterface& k, const CoopMatLayout& layout, std::string_view prefix = "CM");

}  // namespace foundry
