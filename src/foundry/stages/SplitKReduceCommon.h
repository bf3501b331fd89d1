#pragma once
// Declarations the two Split-K reduce stages share.
#include <set>
#include <string>

#include "foundry/KernelInterface.h"

namespace foundry::splitk_detail {

/// `lse`: the kernel also writes each row's log-sum-exp.
void declareReduce(KernelInterface& k, std::uint32_t valueDim, DType dtype, bool lse);
/// The hook points a reduce kernel hosts: the output's.
std::set<std::string> hookPoints();

}  // namespace foundry::splitk_detail
