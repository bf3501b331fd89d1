#include "foundry/stages/PrefillVariant.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"

namespace foundry {

// Counted from the subgroup kernel's loops (prefill_loop.glsl, prefill_subgroup.glsl, prefill_tiles.glsl),
// each run costing loopRunPasses(trips): per tile the tile loop's pass, the step to the next visible
// tile, the score loop over head_dim and the value loop over the tile's keys (measured on llvmpipe:
// head_dim + keys + 5 without a tile-visibility hook), with one staging buffer the tile's copy; Q staged
// before and the rows stored after. The cooperative-matrix kernels run on no device with a loop limit;
// their tiles cost less than this.
std::uint64_t PrefillVariant::loopPasses(std::uint32_t keys, std::uint32_t subgroupSize) const {
  const auto ceilDiv = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  const std::uint64_t wg = workgroupSize(subgroupSize);
  const std::uint64_t fixed = loopRunPasses(ceilDiv(std::uint64_t(rowsPerWorkgroup()) * headDim, wg)) +
                              loopRunPasses(rowsPerWarp) * loopRunPasses(dimsPerLane(subgroupSize)) + 2;
  const std::uint64_t tiles = ceilDiv(keys, keysPerTile) + 1;
  const std::uint64_t copy = stages == 1 ? loopRunPasses(tileLoads(subgroupSize) / copyUnroll(subgroupSize)) : 0;
  return fixed + tiles * (1 + loopRunPasses(1) + loopRunPasses(headDim) + loopRunPasses(keysPerTile) + copy);
}

std::uint32_t PrefillVariant::copyUnroll(std::uint32_t subgroupSize) const {
  for (std::uint32_t u : {8u, 4u, 2u}) {
    if (tileLoads(subgroupSize) % u == 0) return u;
  }
  return 1;
}

std::uint32_t PrefillVariant::sharedBytes(std::uint32_t) const {
  auto pad = [](std::uint32_t b) { return (b + 15u) & ~15u; };
  const std::uint32_t esize = tileBytes();
  const std::uint32_t row = headDim + padElements();
  if (coopMat) {
    // K and V tiles in f16 with 16 bytes of skew per row, S per subgroup in f32, row max and alpha.
    const std::uint32_t kv = 2 * stages * keysPerTile * (headDim + 8) * 2;
    // The coopmat2 epilogue reuses the staging area for O in f32 and each row's m and l.
    if (coopMat2) return pad(std::max(coopMat2StagingBytes(), coopMat2OutRows() * (headDim + 32) * 4));
    if (quadSoftmax) return pad(kv);
    return pad(kv) + pad(warps * 16 * keysPerTile * 4) + 2 * pad(warps * 16 * 4);
  }
  return pad(rowsPerWorkgroup() * row * esize) + 2 * pad(stages * keysPerTile * row * esize) +
         pad(rowsPerWorkgroup() * keysPerTile * 4);
}

// Without staging (stages 0) the area holds Q alone before the loop.
std::uint32_t PrefillVariant::coopMat2StagingBytes() const {
  return stages ? 2 * stages * keysPerTile * (headDim + 8) * 2 : rowsPerWorkgroup() * (headDim + 8) * 2;
}

std::uint32_t PrefillVariant::coopMat2OutRows() const {
  if (!coopMat2Subgroup) return rowsPerWorkgroup();
  return std::clamp(coopMat2StagingBytes() / ((headDim + 32) * 4) / 16 * 16, 16u, rowsPerWorkgroup());
}

std::string PrefillVariant::workgroupScopeReason(std::uint32_t subgroupSize, bool loader, bool probe) {
  if (subgroupSize != 32) {
    return fmt::format("the coopmat2 variant is built for subgroups of 32, not {}", subgroupSize);
  }
  if (loader) {
    return "a loader subgroup (FOUNDRY_FA_PREFILL_LOADER) is part of the GL_NV_cooperative_matrix variant only";
  }
  if (probe) return "the prefill probe (FOUNDRY_FA_PREFILL_PROBE) measures the GL_NV_cooperative_matrix variant only";
  return {};
}

std::string PrefillVariant::unusableReason(std::uint32_t subgroupSize) const {
  if (stages > 2 || (stages == 0 && !(coopMat2 && tilesAsStored() && pageSize == 0))) {
    return fmt::format("{} staging buffers; 1 or 2 are supported, and 0 (tiles straight from an f16 or bf16 cache "
                       "that is not paged) on workgroup-scope matrices", stages);
  }
  if (coopMat) {
    if (dtype == DType::BF16 ? !(coopMat2 && qType() == DType::BF16)
                             : (dtype != DType::F16 && !quantized(dtype)) || qType() != DType::F16) {
      return "the cooperative-matrix variant takes f16 q with f16, int8 or q8_0 K and V, or bf16 q, K and V on "
             "coopmat2 matrices";
    }
    if (strideAlign < 8) return "the cooperative-matrix variant loads 8 elements at once: strides must be multiples of 8";
    if (rowsPerWarp != 16) return "the cooperative-matrix variant gives each subgroup 16 rows";
    if (keysPerTile % 16 != 0 || headDim % 16 != 0) return "tiles must be multiples of 16";
    if (subgroupSize < 32) return "the cooperative-matrix variant needs subgroups of at least 32";
    // Workgroup-scope matrices load Q as one matrix from the staging area; subgroup-scope ones stage it in passes.
    if (coopMat2 && stages && queryRowsStaged() < rowsPerWorkgroup()) {
      return "the workgroup-scope query tile does not fit the K/V staging area";
    }
    if (coopMat2Subgroup && !coopMat2) return "subgroup-scope coopmat2 matrices are a form of the coopmat2 variant";
    if (coopMat2) {
      if (std::string why = workgroupScopeReason(subgroupSize, loader, probe); !why.empty()) return why;
    }
    if (loader) {
      if (stages != 2) return "a loader subgroup needs two staging buffers";
      if (!quadSoftmax) return "a loader subgroup needs the softmax in registers";
      if ((keysPerTile * headDim / 8) % (kLoaderChunk * subgroupSize) != 0) {
        return fmt::format("a {}x{} tile does not split into chunks of {} 16-byte loads per lane of the loader",
                           keysPerTile, headDim, kLoaderChunk);
      }
      return {};
    }
    if ((keysPerTile * headDim / 8) % workgroupSize(subgroupSize) != 0) {
      return fmt::format("a {}x{} tile does not split evenly over {} invocations", keysPerTile, headDim,
                         workgroupSize(subgroupSize));
    }
    return {};
  }
  if (loader) return "a loader subgroup is part of the cooperative-matrix variant only";
  if (keysPerTile == 0 || (keysPerTile % subgroupSize != 0 && subgroupSize % keysPerTile != 0)) {
    return fmt::format("keys per tile {} neither is a multiple of nor divides the subgroup size {}", keysPerTile,
                       subgroupSize);
  }
  if ((keysPerTile * headDim) % workgroupSize(subgroupSize) != 0) {
    return fmt::format("a {}x{} tile does not split evenly over {} invocations", keysPerTile, headDim,
                       workgroupSize(subgroupSize));
  }
  const std::uint32_t regs = rowsPerWarp * (keysPerLane(subgroupSize) + dimsPerLane(subgroupSize));
  if (regs > 192) return fmt::format("{} rows per warp need too many registers", rowsPerWarp);
  return {};
}

std::string PrefillVariant::key() const {
  const char* kind = !coopMat        ? "subgroup"
                     : coopMat2Subgroup ? "coopmat2sg"
                     : coopMat2         ? "coopmat2"
                     : quadSoftmax      ? "coopmat_quad"
                                        : "coopmat";
  return fmt::format("D{}_{}_{}_w{}_r{}_bc{}_s{}{}{}{}{}{}{}{}{}", headDim, dtypeName(dtype), kind,
                     warps, rowsPerWarp, keysPerTile, stages, dtype == DType::F16 && !halfTiles ? "_f32tiles" : "",
                     longestFirst ? "_lf" : "", headsFirst ? "_hf" : "", loader ? "_ld" : "", probe ? "_probe" : "",
                     maskSplit ? "" : "_mflag", split ? "_split" : "", lse ? "_lse" : "") +
         (qType() != dtype ? fmt::format("_q{}", dtypeName(qType())) : "") +
         (oType() != dtype ? fmt::format("_o{}", dtypeName(oType())) : "") +
         (pageSize ? fmt::format("_pg{}", pageSize) : "");
}

}  // namespace foundry
