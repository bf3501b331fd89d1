#pragma once
// Finds which element of a 16x16 f32 cooperative-matrix accumulator each invocation holds, by loading
// a matrix whose elements encode their own coordinates and reading back what every invocation got.
// The prefill kernel keeps its softmax in registers only where the answer is the quad pattern of
// CoopMatLayout; anything else (or no answer) leaves the portable route in place.
#include <memory>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"

namespace foundry {

class Runtime;

/// What the probe saw: for each lane, the flat index (row * 16 + column) of each element.
struct CoopMatProbeResult {
  std::uint32_t subgroupSize = 0;
  std::uint32_t elements = 0;  ///< per lane
  std::vector<std::uint32_t> flat;  ///< lane * elements + element
};

/// The quad layout `probe` describes, or an empty layout if it is something else.
CoopMatLayout quadLayoutFrom(const CoopMatProbeResult& probe);

/// The probe kernel (one subgroup), for the device it runs on.
KernelSource coopMatProbeKernel(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

/// Runs the probe kernel on the runtime's device (which must have cooperative matrices).
CoopMatProbeResult runCoopMatProbe(Runtime& runtime);

}  // namespace foundry
