#include "foundry/steps/RandomFill.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/RandomFillStage.h"

namespace foundry {

RandomFill::RandomFill(const Runtime& runtime, DType dtype)
    : kernel_(runtime.builder().workgroup(std::max(256u, runtime.info().subgroupSize)).emplace<RandomFillStage>(dtype)
                  .build()) {}

void RandomFill::record(Dispatcher& d, const Tensor& t, std::uint32_t seed, std::uint64_t first, std::uint64_t count,
                        float scale) const {
  if (count > std::numeric_limits<std::uint32_t>::max()) {
    throw UserError("count", fmt::format("{} elements in one random fill of '{}'; at most 2^32 - 1", count, t.name));
  }
  const std::uint32_t wg = kernel_.layout.workgroup[0];
  const auto groups = static_cast<std::uint32_t>(std::min<std::uint64_t>((count + wg - 1) / wg, 4096));
  d.dispatch(kernel_,
             Arguments().bind("x", t).set("count", static_cast<std::uint32_t>(count))
                 .set("first", static_cast<std::uint32_t>(first)).set("seed", seed).set("scale", scale),
             {groups});
}

}  // namespace foundry
