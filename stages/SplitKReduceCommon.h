#pragma once
// Declarations the two Split-K reduce stages share.
#include "foundry/KernelInterface.h"

namespace foundry::splitk_detail {

void declareReduce(KernelInterface& k, std::uint32_t headDim, DType dtype);

}  // namespace foundry::splitk_detail
