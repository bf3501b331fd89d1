#pragma once
// The parameters of a decode kernel: everything that changes the emitted code.
#include <cstdint>
#include <string>
#include <string_view>

#include "foundry/DType.h"

namespace foundry {

/// How decode partial results across subgroups are kept in shared memory.
enum class PartialStorage { Float, Half };
inline std::string_view partialStorageName(PartialStorage storage) {
  return storage == PartialStorage::Float ? "float" : "half";
}

struct DecodeVariant {
  std::uint32_t headDim = 128;       ///< of q and k
  std::uint32_t valueDim = 0;        ///< of v and out; 0: headDim
  std::uint32_t valueRow = 0;        ///< elements between V rows; 0: packed
  DType dtype = DType::F16;          ///< q, k, v and out
  std::uint32_t heads = 1;           ///< query heads per workgroup (all share one KV head)
  std::uint32_t warps = 4;           ///< subgroups per workgroup
  std::uint32_t keysPerWarp = 1;     ///< keys a subgroup takes per step (one per lane cluster)
  std::uint32_t unroll = 1;          ///< steps whose loads a subgroup issues together
  std::uint32_t vecWidth = 4;        ///< elements per K/V load: 1, 2, 4 or 8 (f16 only)
  PartialStorage partial = PartialStorage::Float;
  bool scalar = false;               ///< no subgroup operations
  bool split = false;                ///< write unnormalised partials for a Split-K reduce
  /// With split: the last workgroup of each head group to finish merges the partials and writes the
  /// output (an arrival counter per head group), so no reduce kernel runs.
  bool fusedReduce = false;
  /// Also write each head's log-sum-exp (stages/LseOutput.h) where the kernel writes the output: not
  /// for a Split-K part whose partials a reduce kernel merges.
  bool lse = false;

  /// Lanes that share one key (subgroup size / keys per warp) and elements each lane holds.
  std::uint32_t lanesPerKey(std::uint32_t subgroupSize) const { return subgroupSize / keysPerWarp; }
  std::uint32_t elemsPerLane(std::uint32_t subgroupSize) const { return headDim / lanesPerKey(subgroupSize); }
  std::uint32_t valueElemsPerLane(std::uint32_t subgroupSize) const { return vDim() / lanesPerKey(subgroupSize); }
  std::uint32_t vDim() const { return valueDim ? valueDim : headDim; }
  std::uint32_t vRow() const { return valueRow ? valueRow : vDim(); }
  std::uint32_t workgroupSize(std::uint32_t subgroupSize) const { return warps * subgroupSize; }
  /// Keys a workgroup takes per iteration: Split-K chunks are multiples of this.
  std::uint32_t keyGranule(std::uint32_t subgroupSize) const {
    return scalar ? workgroupSize(subgroupSize) : warps * keysPerWarp * unroll;
  }
  /// Shared memory the decode stage needs, in bytes.
  std::uint32_t sharedBytes(std::uint32_t subgroupSize) const;
  /// Why this variant cannot run with this subgroup size, or empty.
  std::string unusableReason(std::uint32_t subgroupSize) const;
  std::string key() const;

 private:
  std::string splitSuffix() const {
    return std::string(split ? (fusedReduce ? "_split_merged" : "_split") : "") + (lse ? "_lse" : "");
  }
};

}  // namespace foundry
