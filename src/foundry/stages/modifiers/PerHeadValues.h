#pragma once
// What ALiBi slopes and sink logits share: one f32 value per query head, in a tensor the kernel reads
// and a host copy the CPU reference and the checks read.
#include <string>
#include <vector>

#include "foundry/Tensor.h"
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

struct PerHeadValues {
  Tensor tensor;               ///< f32 [n_heads]
  std::vector<double> values;  ///< the same values on the host

  /// The tensor and the host copy agree with each other and with the call; `field` names them.
  void check(const ModifierCall& call, const std::string& field) const;
  double at(std::uint32_t h) const { return values.at(h); }
};

}  // namespace foundry
