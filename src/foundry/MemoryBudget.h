#pragma once
// What a piece of work will hold, checked against what the device and the host can give before
// anything is allocated: a run that cannot fit fails at once with the numbers, instead of allocating
// until the driver refuses or the kernel kills the process.
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/DeviceInfo.h"

namespace foundry {

/// "32.00 GiB", "1.50 MiB", "512 B".
std::string humanBytes(std::uint64_t bytes);

/// Throws DeviceError when one buffer of `bytes` called `name` exceeds the device's largest
/// allocation or its memory. Buffer checks every allocation with it; checkMemoryPlan every planned one.
void checkAllocationFits(const DeviceInfo& device, std::uint64_t bytes, const std::string& name);

/// Memory this process can still take from the host: the least of MemAvailable (/proc/meminfo) and
/// the room left under RLIMIT_AS and RLIMIT_DATA where they are set.
struct HostMemory {
  std::uint64_t availableBytes = 0;
  std::string limitedBy;  ///< which of them it is, with its numbers, for messages
};
HostMemory hostMemory();

/// What a piece of work will allocate, by part.
struct MemoryPlan {
  struct Part {
    std::string name;  ///< "k_cache0", or a group: "KV caches"
    std::uint64_t bytes = 0;
    bool buffer = false;  ///< one device allocation (checked against the largest allocation)
  };
  std::vector<Part> device;  ///< device buffers
  std::vector<Part> host;    ///< host memory beyond the device's (file contents, comparisons)
  std::string remedy;        ///< what to change, e.g. "lower --batch (/run/batch) or ..."

  std::uint64_t deviceBytes() const;
  std::uint64_t hostBytes() const;
};

/// Throws DeviceError, one line with the numbers and `plan.remedy`, when a planned buffer does not fit
/// one allocation, the device's buffers exceed its largest heap, or the host's part (plus the
/// device's, on a CPU device whose heap is host memory) exceeds `host`.
void checkMemoryPlan(const MemoryPlan& plan, const DeviceInfo& device, const HostMemory& host);

}  // namespace foundry
