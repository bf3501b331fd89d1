#include "foundry/stages/modifiers/PerHeadValues.h"

#include <cmath>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

void PerHeadValues::check(const ModifierCall& call, const std::string& field) const {
  if (tensor.dtype != DType::F32 || tensor.numel() != call.nHeads || !tensor.packed()) {
    throw UserError(field, fmt::format("expected a packed f32 tensor of {} values (one per query head), got {}",
                                       call.nHeads, tensor.shapeString()));
  }
  if (values.size() != call.nHeads) {
    throw UserError(field, fmt::format("the host copy holds {} values; the call has {} query heads", values.size(),
                                       call.nHeads));
  }
  for (std::size_t h = 0; h < values.size(); ++h) {
    if (!std::isfinite(values[h])) {
      throw UserError(field, fmt::format("value {} (head {}) is not finite; use a large finite value instead",
                                         values[h], h));
    }
  }
}

}  // namespace foundry
