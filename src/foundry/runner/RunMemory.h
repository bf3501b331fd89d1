#pragma once
// What `foundry run` will hold in device and host memory, computed from the config and the flags
// before anything is allocated, so that a run that cannot fit fails at once (checkMemoryPlan).
#include <cstdint>
#include <optional>

#include "foundry/MemoryBudget.h"
#include "foundry/runner/Session.h"

namespace foundry {

/// Bytes of the tensors a run reads from its files (as stored: their dtype, not the run's).
struct RunFileBytes {
  std::uint64_t inputs = 0;  ///< q, k and v of --inputs
  std::uint64_t expect = 0;  ///< o of --expect
};

/// The run's device buffers (KV caches, inputs, outputs, the check's and the reference path's
/// scratch) and its larger host buffers (file tensors, their float copies, the comparisons).
/// `cacheRows`: over several ranks, the rows this rank's caches keep (RankedAttention::cacheRowsOf);
/// else every position's.
MemoryPlan runMemoryPlan(const RunRequest& request, const RunFileBytes& files, const DeviceInfo& device,
                         std::optional<std::uint32_t> cacheRows = std::nullopt);

}  // namespace foundry
