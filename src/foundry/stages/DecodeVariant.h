#pragma once
// The parameters of a decode kernel: everything that changes the emitted code.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "foundry/DType.h"
#include "foundry/stages/KvAccessStage.h"

namespace foundry {

struct DeviceInfo;

/// How decode partial results across subgroups are kept in shared memory.
enum class PartialStorage { Float, Half };
inline std::string_view partialStorageName(PartialStorage storage) {
  return storage == PartialStorage::Float ? "float" : "half";
}

struct DecodeVariant {
  /// Keys per subgroup tile of the tensor-core variant (the rows of a 16x8 S^T product).
  static constexpr std::uint32_t kTensorTileKeys = 16;
  /// Splits the batched merge loads before it folds them: one batch of kMergeBatchFew where there are at
  /// most that many, else batches of kMergeBatch (splitk_merge_batched: SPLITK_FEW, SPLITK_BATCH).
  static constexpr std::uint32_t kMergeBatchFew = 4, kMergeBatch = 16;
  std::uint32_t headDim = 128;       ///< of q and k
  std::uint32_t valueDim = 0;        ///< of v and out; 0: headDim
  DType dtype = DType::F16;          ///< of K and V; of q and out too unless set below
  std::optional<DType> queryType;    ///< of q where it differs
  std::optional<DType> outputType;   ///< of out where it differs
  /// The largest power of two (up to 8) dividing every K/V stride: no load may be wider. Not part of
  /// the code (the key); part of whether the variant can read the call's cache.
  std::uint32_t strideAlign = 8;
  std::uint32_t pageSize = 0;        ///< rows per page of a paged cache; 0: not paged
  std::uint32_t heads = 1;           ///< query heads per workgroup (all share one KV head)
  std::uint32_t warps = 4;           ///< subgroups per workgroup
  std::uint32_t keysPerWarp = 1;     ///< keys a subgroup takes per step (one per lane cluster)
  std::uint32_t unroll = 1;          ///< steps whose loads a subgroup issues together: 1, 2, 4, 8 or 16
  std::uint32_t vecWidth = 4;        ///< elements per K/V load: 1, 2, 4 or 8 (f16 only)
  PartialStorage partial = PartialStorage::Float;
  /// q read from shared memory at each use instead of held in registers: the registers go to K/V
  /// loads in flight (the subgroup variant; the scalar one always reads q from shared memory).
  bool queryShared = false;
  /// int8 and q8_0 K/V in loads of 4 or more codes: q quantized per load to two signed bytes per
  /// element, and K's codes taken through integer dot products (the device's int8Dot).
  bool int8Dot = false;
  /// A lane cluster wider than head_dim needs: each lane takes whole loads, the elements per lane
  /// rounded up to them, and lanes past the row hold nothing (D80 in 16-byte loads: 10 of 16 lanes).
  bool idleLanes = false;
  /// 16-bit float rows that lanes split evenly but not into whole loads: each lane takes whole loads
  /// and then single 4-byte words (D80 over 8 lanes: two 8-byte loads and one word each, no lane idle).
  bool tailWords = false;
  /// Each (head, step) score summed over its key's cluster once: a reduce-scatter leaves each lane the
  /// sums of some scores of one head, whose weights it takes, and every lane gathers the weights back
  /// (D80 on 8 lanes, 4 heads, 4 steps: 32 shuffles a step instead of 48, 3 exponentials instead of 20).
  bool scatter = false;
  /// Quantized K/V whose scales cover blocks of keys (int8; not q8_0, whose scale sits in each row):
  /// every key of a subgroup's step lies in one block, so each load position's scale is read once per
  /// step instead of once per key (the loop starts at a multiple of the step; keys before the range
  /// are masked).
  bool stepScales = false;
  /// int8 with step scales: codes widened to f16 pairs and multiplied in packed f16 (the sums of one
  /// load's products for K, of one step's weights for V), scaled and accumulated in f32: half the
  /// widening and half the product instructions of f32 arithmetic (the device's fp16Arithmetic).
  bool halfProducts = false;
  /// O's rescale skipped at steps where no lane's running maximum grew (a rescale by exactly 1), decided
  /// by a subgroupAny vote (the device's subgroupVote).
  bool lazyRescale = false;
  /// The keys as rows and the heads as the 8 columns of 16x8 cooperative-matrix products (tensor cores):
  /// each subgroup takes 16-key tiles through its own staging rows in shared memory, S^T = K Q^T (int8
  /// products for int8 K) and O^T += V^T P^T on the tensor cores, the softmax in registers on the
  /// device's quad accumulator layout (decode_coopmat.glsl). f16, bf16 or int8 K/V in 16-byte loads, `unroll`
  /// tiles in flight; keysPerWarp stays 1.
  bool tensorCores = false;
  /// With tensorCores and an even unroll: two tiles at a time, their K rows staged together, their
  /// scores taken and their softmax run as one (one vote and one maximum for 32 keys), their V rows
  /// one after the other.
  bool tilePairs = false;
  /// With tensorCores and int8 V rows of four 16-byte loads a lane a tile (128 dims on a subgroup of 32):
  /// a tile's V staged and multiplied in two halves of its dims, the next tile's V loaded between them
  /// (each lane's loads alternate halves); half the V staging rows.
  bool valueHalves = false;
  /// With tensorCores and int8 V rows of 128 in 16-byte loads on a subgroup of 32, where the device's 16x16
  /// f16 layout is known (DeviceInfo::coopMatLayoutF16): V never staged. Each lane loads the four keys and
  /// 16 dims its elements of V^T's fragments hold and widens its loads into them; a tile's next V rows are
  /// loaded with its next K rows. Not with valueHalves.
  bool valueRegisters = false;
  /// With tensorCores, bf16 q, K and V: the products take bf16 operands as stored (GL_KHR_cooperative_matrix
  /// with GL_EXT_bfloat16, compiled by the external glslc; DeviceInfo::coopMat2Bf16), not f16 over a power
  /// of two a tile.
  bool bf16Operands = false;
  bool scalar = false;               ///< no subgroup operations
  bool split = false;                ///< write unnormalised partials for a Split-K reduce
  /// With split: the last workgroup of each head group to finish merges the partials and writes the
  /// output (an arrival counter per head group), so no reduce kernel runs.
  bool fusedReduce = false;
  /// With fusedReduce, where the heads' output elements outnumber the workgroup's invocations: each
  /// invocation issues the loads of a batch of splits for all its elements before it folds any
  /// (splitk_merge_batched, every loop over its elements unrolled), instead of folding each element's
  /// splits in a loop (splitk_merge).
  bool batchedMerge = false;
  /// With fusedReduce (subgroup and tensor-core kernels): each split streams a shorter chunk of its own,
  /// and the keys past all the chunks (the head group's claimed end) go one step (a round of tiles) at a
  /// time to whichever subgroups of the group are done first, through a counter beside the arrivals.
  bool claims = false;
  /// Counters per head group in the merged Split-K's scratch: the arrivals, and with claims the claims'.
  std::uint32_t splitCounters() const { return claims ? 2 : 1; }
  /// Also write each head's log-sum-exp (stages/LseOutput.h) where the kernel writes the output: not
  /// for a Split-K part whose partials a reduce kernel merges.
  bool lse = false;
  /// The decode probe's build (FOUNDRY_FA_DECODE_PROBE): each subgroup records the device-clock times
  /// of its milestones (stages/PrefillProbe.h).
  bool probe = false;

  /// Lanes that share one key (subgroup size / keys per warp) and elements each lane holds.
  std::uint32_t lanesPerKey(std::uint32_t subgroupSize) const { return subgroupSize / keysPerWarp; }
  std::uint32_t elemsPerLane(std::uint32_t subgroupSize) const { return laneShare(headDim, subgroupSize); }
  std::uint32_t valueElemsPerLane(std::uint32_t subgroupSize) const { return laneShare(vDim(), subgroupSize); }
  /// Elements of each key's lane cluster that hold no dimension of the K row (0 without idle lanes).
  std::uint32_t idleElements(std::uint32_t subgroupSize) const {
    return lanesPerKey(subgroupSize) * elemsPerLane(subgroupSize) - headDim;
  }
  std::uint32_t vDim() const { return valueDim ? valueDim : headDim; }
  DType qType() const { return queryType.value_or(dtype); }
  DType oType() const { return outputType.value_or(dtype); }
  /// The KvAccessStage the kernel's chain needs.
  KvAccess kvAccess() const {
    return {.format = dtype, .width = scalar ? 1u : vecWidth, .pageSize = pageSize, .words = tailWords && !scalar};
  }
  std::uint32_t workgroupSize(std::uint32_t subgroupSize) const { return warps * subgroupSize; }
  /// Keys a workgroup takes per iteration: Split-K chunks are multiples of this.
  std::uint32_t keyGranule(std::uint32_t subgroupSize) const {
    return scalar ? workgroupSize(subgroupSize) : tensorCores ? warps * kTensorTileKeys : warps * keysPerWarp * unroll;
  }
  /// Shared memory the decode stage needs, in bytes.
  std::uint32_t sharedBytes(std::uint32_t subgroupSize) const;
  /// At most how many loop passes one invocation makes over a range of `keys` keys, setup and
  /// epilogue included, as llvmpipe's loop limiter counts them (DeviceInfo::loopLimit, loopRunPasses).
  std::uint64_t loopPasses(std::uint32_t keys, std::uint32_t subgroupSize) const;
  /// Output elements each invocation stores (and, in the last workgroup with fusedReduce, merges),
  /// rounded up.
  std::uint32_t mergeElemsPerInvocation(std::uint32_t subgroupSize) const;
  /// The loop passes of the last workgroup's merge of `splits` splits (0 without fusedReduce), counted
  /// like loopPasses; its invocation makes them after its own range's.
  std::uint64_t mergePasses(std::uint32_t splits, std::uint32_t subgroupSize) const;
  /// Why this variant cannot run with this subgroup size, or empty.
  std::string unusableReason(std::uint32_t subgroupSize) const;
  std::string key() const;
  /// Keys a subgroup takes per iteration (a step of every unrolled block).
  std::uint32_t stepKeys() const { return keysPerWarp * unroll; }

  /// The tensor-core variant's staging rows, in 16-byte units: K's as stored and V's in f16, each
  /// skewed by 16 bytes so that 8 rows read together hit distinct banks. A subgroup's rows hold the K of
  /// the tiles it takes at once, then a tile's V, then the subgroup's partials (tensorRowsBytes); its
  /// staging is those rows and P^T's rows of 8 f16, 16 a tile (tensorStageBytes), in bytes.
  std::uint32_t tensorTilesAtOnce() const { return tilePairs ? 2 : 1; }
  std::uint32_t tensorRow4K() const;
  std::uint32_t tensorRow4V() const;
  std::uint32_t tensorRowsBytes() const;
  std::uint32_t tensorStageBytes() const;
  /// Why this device cannot run the tensor-core variant for K/V of `kv`, or empty: it takes f16, bf16 or
  /// int8 K/V, and needs 16x8x16 f16 cooperative matrices (and 16x8x32 int8 ones for int8), the quad 16x8
  /// accumulator layout and f16 arithmetic.
  static std::string tensorCoresUnavailable(const DeviceInfo& device, DType kv);
  /// Why this device cannot build V's fragments from its loads (valueRegisters), or empty: it needs a 16x16 f16
  /// layout from the probe with a lane's eight elements in rows r and r + 8 and columns c, c + 1, c + 8 and c + 9.
  static std::string valueRegistersUnavailable(const DeviceInfo& device);

 private:
  std::string tensorCoresUnusableReason(std::uint32_t subgroupSize) const;
  std::uint32_t laneShare(std::uint32_t dim, std::uint32_t subgroupSize) const;
  std::string splitSuffix() const;
};

}  // namespace foundry
