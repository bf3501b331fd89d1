#pragma once
// The parameters of a prefill kernel: everything that changes the emitted code.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "foundry/DType.h"
#include "foundry/stages/KvAccessStage.h"

namespace foundry {

struct PrefillVariant {
  /// 16-byte loads of K (and of V) a loader subgroup's lane has in flight at once.
  static constexpr std::uint32_t kLoaderChunk = 8;

  std::uint32_t headDim = 128;
  DType dtype = DType::F16;       ///< of K and V; of q and out too unless set below
  std::optional<DType> queryType;
  std::optional<DType> outputType;
  /// The largest power of two (up to 8) dividing every q, K and V stride (not part of the code).
  std::uint32_t strideAlign = 8;
  std::uint32_t pageSize = 0;  ///< rows per page of a paged cache; 0: not paged
  bool halfTiles = true;          ///< f16 inputs staged as f16 (needs fp16 arithmetic); else as f32
  bool coopMat = false;           ///< GL_NV_cooperative_matrix tiles (tensor cores), f16 q, K and V
  bool quadSoftmax = false;       ///< coopMat: softmax in registers (the device's layout is the quad pattern)
  /// coopMat on GL_NV_cooperative_matrix2 matrices (prefill_coopmat2.glsl): at workgroup scope the
  /// driver splits the products, row reductions and element operations over the subgroups.
  bool coopMat2 = false;
  /// coopMat2 with each subgroup's 16 rows as subgroup-scope matrices of flexible dimensions: the
  /// products, row reductions and element operations stay within the subgroup.
  bool coopMat2Subgroup = false;
  std::uint32_t warps = 4;        ///< subgroups per workgroup
  std::uint32_t rowsPerWarp = 4;  ///< query rows each subgroup owns (16 with cooperative matrices)
  std::uint32_t keysPerTile = 32; ///< keys per K/V tile
  std::uint32_t stages = 2;       ///< 2: double-buffered K/V staging
  bool longestFirst = true;       ///< query tiles in reverse, so a causal mask's longest rows go first
  /// Heads vary fastest in the grid: one query-tile slot of every head before the next slot (with
  /// longestFirst, the longest tiles of all heads first). Otherwise each head's tiles in turn (its
  /// K/V is read by fewer heads at a time: less of it in flight in the cache).
  bool headsFirst = false;
  /// The tile code compiled twice, with the element masks and without (the copy without for tiles
  /// every row sees whole); otherwise once, the masks under a run-time flag.
  bool maskSplit = true;
  bool split = false;             ///< write unnormalised partials for a Split-K reduce
  bool lse = false;               ///< also write each row's log-sum-exp (stages/LseOutput.h); not with split
  /// Record per subgroup where and when it ran and the cycles of each phase (stages/PrefillProbe.h).
  bool probe = false;
  /// coopMat with two staging buffers: one more subgroup that only loads K/V tiles (the next tile
  /// while the others compute on this one), so the compute subgroups issue no loads.
  bool loader = false;

  std::uint32_t rowsPerWorkgroup() const { return warps * rowsPerWarp; }
  /// Cooperative-matrix variants: the query rows the K/V staging area holds at once (Q goes through
  /// it before the tile loop: in passes of this many rows on subgroup-scope matrices, all at once on
  /// workgroup-scope ones).
  std::uint32_t queryRowsStaged() const { return std::min(rowsPerWorkgroup(), 2 * stages * keysPerTile); }
  /// Subgroups per workgroup: the compute subgroups and the loader, if any.
  std::uint32_t subgroups() const { return warps + (loader ? 1 : 0); }
  std::uint32_t workgroupSize(std::uint32_t subgroupSize) const { return subgroups() * subgroupSize; }
  /// Subgroup variant: output dimensions each lane owns (lane, lane + SG, ...); the last may run
  /// past head_dim where head_dim is not a multiple of the subgroup size.
  std::uint32_t dimsPerLane(std::uint32_t subgroupSize) const { return (headDim + subgroupSize - 1) / subgroupSize; }
  /// Subgroup variant: keys each lane scores per tile (lane, lane + SG, ...). A tile narrower than
  /// the subgroup (wide f32 rows on a device with little shared memory) leaves the last lanes idle.
  std::uint32_t keysPerLane(std::uint32_t subgroupSize) const {
    return keysPerTile >= subgroupSize ? keysPerTile / subgroupSize : 1;
  }
  /// Subgroup variant: the elements of a K (and of a V) tile each invocation moves (PF_LOADS).
  std::uint32_t tileLoads(std::uint32_t subgroupSize) const {
    return keysPerTile * headDim / workgroupSize(subgroupSize);
  }
  /// Subgroup variant with one staging buffer: the elements of K (and of V) each invocation copies
  /// into a tile per pass of pf_copy_kv's loop (prefill_tiles.glsl), the largest of 8, 4, 2 and 1 that
  /// divides tileLoads; the loop's passes count toward the loop limit (loopPasses).
  std::uint32_t copyUnroll(std::uint32_t subgroupSize) const;
  DType qType() const { return queryType.value_or(dtype); }
  DType oType() const { return outputType.value_or(dtype); }
  /// Cooperative-matrix variants: K and V tiles are the cache's rows as stored (f16, or bf16 on coopmat2
  /// matrices), not dequantized.
  bool tilesAsStored() const { return dtype == DType::F16 || dtype == DType::BF16; }
  /// The KvAccessStage the kernel's chain needs: 16-byte loads for the cooperative-matrix tiles.
  KvAccess kvAccess() const { return {dtype, coopMat ? 8u : 1u, false, pageSize}; }
  /// Tiles stay f16 only where every value staged in them (q, K, V) is f16 already: bf16 and f32
  /// inputs are staged as f32, which holds every one of their values exactly.
  bool tilesAreHalf() const { return dtype == DType::F16 && qType() == DType::F16 && halfTiles; }
  std::uint32_t tileBytes() const { return tilesAreHalf() ? 2 : 4; }
  std::uint32_t padElements() const { return tilesAreHalf() ? 2 : 1; }  ///< one 32-bit word
  std::uint32_t sharedBytes(std::uint32_t subgroupSize) const;
  /// At most how many loop passes one invocation makes over a range of `keys` keys, setup and
  /// epilogue included, as llvmpipe's loop limiter counts them (DeviceInfo::loopLimit, loopRunPasses).
  std::uint64_t loopPasses(std::uint32_t keys, std::uint32_t subgroupSize) const;
  /// coopMat2: the rows the epilogue passes through the staging area at once (O in f32, m and l):
  /// all of them on workgroup-scope matrices, as many as the K/V staging holds on subgroup-scope ones.
  std::uint32_t coopMat2OutRows() const;
  /// coopMat2: the bytes of the K/V staging area (Q alone where tiles are not staged).
  std::uint32_t coopMat2StagingBytes() const;
  /// Why coopmat2 matrices (either scope) cannot take a variant with this subgroup size, loader
  /// subgroup and probe, or empty: the Selector's and unusableReason()'s one rule.
  static std::string workgroupScopeReason(std::uint32_t subgroupSize, bool loader, bool probe);
  /// Why this variant cannot run with this subgroup size, or empty.
  std::string unusableReason(std::uint32_t subgroupSize) const;
  std::string key() const;
};

}  // namespace foundry
