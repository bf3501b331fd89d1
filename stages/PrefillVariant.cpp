#include "stages/PrefillVariant.h"

#include <fmt/format.h>

namespace foundry {

std::uint32_t PrefillVariant::sharedBytes(std::uint32_t) const {
  auto pad = [](std::uint32_t b) { return (b + 15u) & ~15u; };
  const std::uint32_t esize = tileBytes();
  const std::uint32_t row = headDim + padElements();
  if (coopMat) {
    // K and V tiles (f16, unpadded: coopMatLoad takes a stride), S per subgroup in f32, P in f16,
    // row statistics, and the row index of each accumulator element.
    const std::uint32_t kv = 2 * stages * keysPerTile * headDim * 2;
    const std::uint32_t s = warps * 16 * keysPerTile * 4;
    const std::uint32_t p = warps * 16 * keysPerTile * 2;
    return pad(kv) + pad(s) + pad(p) + 3 * pad(warps * 16 * 4) + pad(16 * 16 * 4);
  }
  return pad(rowsPerWorkgroup() * row * esize) + 2 * pad(stages * keysPerTile * row * esize) +
         pad(rowsPerWorkgroup() * keysPerTile * 4);
}

std::string PrefillVariant::unusableReason(std::uint32_t subgroupSize) const {
  if (stages != 1 && stages != 2) return fmt::format("{} staging buffers; 1 or 2 are supported", stages);
  if (coopMat) {
    if (dtype != DType::F16) return "the cooperative-matrix variant takes f16 inputs";
    if (rowsPerWarp != 16) return "the cooperative-matrix variant gives each subgroup 16 rows";
    if (keysPerTile % 16 != 0 || headDim % 16 != 0) return "tiles must be multiples of 16";
    return {};
  }
  if (keysPerTile % subgroupSize != 0) {
    return fmt::format("keys per tile {} is not a multiple of the subgroup size {}", keysPerTile, subgroupSize);
  }
  if (headDim % subgroupSize != 0) {
    return fmt::format("head_dim {} is not a multiple of the subgroup size {}", headDim, subgroupSize);
  }
  if ((keysPerTile * headDim) % workgroupSize(subgroupSize) != 0) {
    return fmt::format("a {}x{} tile does not split evenly over {} invocations", keysPerTile, headDim,
                       workgroupSize(subgroupSize));
  }
  const std::uint32_t regs = rowsPerWarp * (keysPerTile / subgroupSize + headDim / subgroupSize);
  if (regs > 192) return fmt::format("{} rows per warp need too many registers", rowsPerWarp);
  return {};
}

std::string PrefillVariant::key() const {
  return fmt::format("D{}_{}_{}_w{}_r{}_bc{}_s{}{}{}{}", headDim, dtypeName(dtype), coopMat ? "coopmat" : "subgroup",
                     warps, rowsPerWarp, keysPerTile, stages, dtype == DType::F16 && !halfTiles ? "_f32tiles" : "",
                     causal ? "_causal" : "", split ? "_split" : "");
}

}  // namespace foundry
