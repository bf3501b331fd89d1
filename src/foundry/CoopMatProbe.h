#pragma once
// Finds which element of a 16x16 (and of a 16x8) f32 cooperative-matrix accumulator, and of a 16x16 f16 matrix, each
// invocation holds, by loading a matrix whose elements encode their own coordinates and reading back what every
// invocation got.
// The prefill kernel keeps its softmax in registers only where the answer is the quad pattern of
// CoopMatLayout; anything else (or no answer) leaves the portable route in place.
#include <memory>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"

namespace foundry {

class Runtime;

/// What the probe saw: for each lane, the flat index (row * columns + column) of each element, of a
/// 16x16 accumulator and of a 16x8 one.
struct CoopMatProbeResult {
  std::uint32_t subgroupSize = 0;
  std::uint32_t elements = 0;  ///< per lane, 16x16
  std::vector<std::uint32_t> flat;  ///< lane * elements + element
  std::uint32_t elements8 = 0;  ///< per lane, 16x8
  std::vector<std::uint32_t> flat8;
  std::uint32_t elementsF16 = 0;  ///< per lane, 16x16 f16
  std::vector<std::uint32_t> flatF16;
};

/// The quad layout `probe` describes for 16x`columns` accumulators (16 or 8), or, with `f16`, for 16x16 f16
/// matrices; an empty layout if it is something else.
CoopMatLayout quadLayoutFrom(const CoopMatProbeResult& probe, std::uint32_t columns = 16, bool f16 = false);

/// The probe kernel (one subgroup), for the device it runs on.
KernelSource coopMatProbeKernel(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

/// Runs the probe kernel on the runtime's device (which must have cooperative matrices).
CoopMatProbeResult runCoopMatProbe(Runtime& runtime);

}  // namespace foundry
