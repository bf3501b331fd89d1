#pragma once
// Synthetic tensors made on the device: RandomFillStage's counter-based uniform values, so a
// benchmark or a run never uploads GiBs from the host, and the host regenerates any slice it wants to
// check with randomUniforms (foundry/Random.h).
#include <cstdint>

#include "foundry/Dispatcher.h"
#include "foundry/KernelSource.h"
#include "foundry/Runtime.h"

namespace foundry {

class RandomFill {
 public:
  /// Builds the fill kernel for tensors of `dtype` on `runtime`'s device.
  RandomFill(const Runtime& runtime, DType dtype);

  /// Records a fill of `t`'s first `count` elements (from its offset) with values [first, first +
  /// count) of the stream `seed`, times `scale`. The stream's index is 32-bit: `first` past 2^32 wraps,
  /// and so do values of one fill longer than that (UserError for a count of 2^32 or more).
  void record(Dispatcher& d, const Tensor& t, std::uint32_t seed, std::uint64_t first, std::uint64_t count,
              float scale = 1.0f) const;

 private:
  KernelSource kernel_;
};

}  // namespace foundry
