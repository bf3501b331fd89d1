#include "foundry/stages/DecodeVariant.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/HeadLayoutStage.h"

namespace foundry {

namespace {

std::uint64_t ceilDiv(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

std::uint32_t DecodeVariant::sharedBytes(std::uint32_t subgroupSize) const {
  auto pad = [](std::uint32_t b) { return (b + 15u) & ~15u; };
  const std::uint32_t parts = scalar ? 1 : warps;
  std::uint32_t bytes = pad(heads * headDim * 4);                                         // q_shared
  // The tensor-core kernel writes its partials over its staging rows (dc_tile).
  if (!tensorCores) bytes += pad(parts * heads * vDim() * (partial == PartialStorage::Float ? 4 : 2));  // part_o
  bytes += 2 * pad(parts * heads * 4);                                                    // part_m, part_l
  if (scalar) bytes += pad(heads * workgroupSize(subgroupSize) * 4) + 3 * pad(heads * 4);  // block_*
  if (split && fusedReduce) bytes += pad(4);                                              // merge_here
  if (tensorCores) bytes += warps * tensorStageBytes();                                   // dc_tile
  return bytes;
}

// Counted from the kernels' loops (decode_scalar.glsl, decode_subgroup.glsl, decode_combine.glsl and the
// stage's setup and merge), each run of one costing loopRunPasses(trips). Loops marked [[unroll]] with
// constant bounds are unrolled before the limiter sees them; the shuffle loops that step by shifts are
// not, and are counted. A range need not start on a granule: one more block or step is counted.
std::uint64_t DecodeVariant::loopPasses(std::uint32_t keys, std::uint32_t subgroupSize) const {
  const std::uint64_t wg = workgroupSize(subgroupSize);
  const std::uint64_t outputs = mergeElemsPerInvocation(subgroupSize);
  const std::uint64_t shifts = loopRunPasses(std::countr_zero(subgroupSize));
  // q staged; partials zeroed, combined over the subgroups and stored; the lanes' reductions.
  const std::uint64_t fixed = loopRunPasses(ceilDiv(std::uint64_t(heads) * headDim, wg)) + 3 * loopRunPasses(outputs) +
                              2 * loopRunPasses(warps) + 4 * shifts;
  const std::uint64_t blocks = ceilDiv(keys, keyGranule(subgroupSize)) + 1;
  if (scalar) {
    // A block of a key per invocation: its scores over head_dim, the block's maximum and sum over the
    // workgroup, and each owned output's pass over the block's V rows.
    const std::uint64_t block = 1 + 2 * loopRunPasses(heads) + heads * loopRunPasses(headDim) + 2 * loopRunPasses(wg) +
                                loopRunPasses(outputs) + outputs * loopRunPasses(wg);
    return fixed + blocks * block;
  }
  // A step: the key loop's pass and a shuffle loop (the score's reduction, or the scattered maxima).
  return fixed + blocks * (1 + shifts);
}

std::uint32_t DecodeVariant::mergeElemsPerInvocation(std::uint32_t subgroupSize) const {
  return static_cast<std::uint32_t>(ceilDiv(std::uint64_t(heads) * vDim(), workgroupSize(subgroupSize)));
}

std::uint64_t DecodeVariant::mergePasses(std::uint32_t splits, std::uint32_t subgroupSize) const {
  if (!split || !fusedReduce) return 0;
  // Batched: one loop over the batches (splitk_reduce.glsl), the rest unrolled.
  if (batchedMerge) return loopRunPasses(ceilDiv(splits, splits <= kMergeBatchFew ? kMergeBatchFew : kMergeBatch));
  const std::uint64_t elems = mergeElemsPerInvocation(subgroupSize);
  return loopRunPasses(elems) + elems * loopRunPasses(splits);
}

std::uint32_t DecodeVariant::laneShare(std::uint32_t dim, std::uint32_t subgroupSize) const {
  const std::uint32_t lanes = lanesPerKey(subgroupSize);
  if (!idleLanes) return dim / lanes;
  const std::uint32_t each = (dim + lanes - 1) / lanes;
  return (each + vecWidth - 1) / vecWidth * vecWidth;
}

std::string DecodeVariant::unusableReason(std::uint32_t subgroupSize) const {
  if (vecWidth != 1 && vecWidth != 2 && vecWidth != 4 && vecWidth != 8 && vecWidth != 16) {
    return fmt::format("vector width {} is not 1, 2, 4, 8 or 16", vecWidth);
  }
  if (batchedMerge && (!split || !fusedReduce || mergeElemsPerInvocation(subgroupSize) < 2)) {
    return fmt::format("the batched merge is the last workgroup's merge of the splits where its {} invocations "
                       "each merge several of its heads' {} output elements; this variant {}",
                       workgroupSize(subgroupSize), heads * vDim(),
                       !split || !fusedReduce ? "merges no splits in its last workgroup"
                                              : "leaves each invocation at most one");
  }
  if (scalar) {  // loads one element at a time whatever the width
    return partial == PartialStorage::Float ? "" : "the scalar variant accumulates its outputs in float partials";
  }
  if (vecWidth > storageFormat(dtype).maxLoadWidth) {
    return fmt::format("{}-element loads of {} K/V exceed 16 bytes (8 need f16 or bf16, 16 int8 or q8_0)", vecWidth,
                       dtypeName(dtype));
  }
  if (vecWidth > strideAlign) {
    return fmt::format("{}-element loads need K/V strides that are multiples of {}; this cache's are multiples of {}",
                       vecWidth, vecWidth, strideAlign);
  }
  if (keysPerWarp == 0 || subgroupSize % keysPerWarp != 0) {
    return fmt::format("keys per warp {} does not divide the subgroup size {}", keysPerWarp, subgroupSize);
  }
  if (tensorCores) return tensorCoresUnusableReason(subgroupSize);
  const std::uint32_t lanes = lanesPerKey(subgroupSize);
  // 16-bit formats are f16 and bf16 only (the quantized ones, which integer dot products need, are 8-bit).
  if (tailWords) {
    if (storageFormat(dtype).bytes != 2 || vecWidth < 4 || idleLanes) {
      return fmt::format("tail words take 16-bit float K/V (f16, bf16) in loads of 4 or 8 without idle lanes, not {} "
                         "in loads of {}{}", dtypeName(dtype), vecWidth, idleLanes ? " with idle lanes" : "");
    }
  }
  if (idleLanes) {
    if (headDim % vecWidth != 0 || vDim() % vecWidth != 0) {
      return fmt::format("idle lanes take whole loads: head_dim {} and value_dim {} must be multiples of the vector "
                         "width {}", headDim, vDim(), vecWidth);
    }
    // Such a cluster is the plain variant's.
    if (idleElements(subgroupSize) == 0) {
      return fmt::format("{} lanes of {} elements leave no lane idle in a row of {}", lanes, elemsPerLane(subgroupSize),
                         headDim);
    }
  } else {
    if (headDim % lanes != 0) return fmt::format("{} lanes per key do not divide head_dim {}", lanes, headDim);
    if (vDim() % lanes != 0) return fmt::format("{} lanes per key do not divide value_dim {}", lanes, vDim());
  }
  const std::uint32_t elems = elemsPerLane(subgroupSize), valueElems = valueElemsPerLane(subgroupSize);
  if (tailWords) {
    // Whole loads first, then words: a lane needs one whole load, and a row of whole loads only is
    // the plain variant's.
    if (elems % 2 != 0 || valueElems % 2 != 0 || elems < vecWidth || valueElems < vecWidth) {
      return fmt::format("tail words need at least {} elements per lane, in whole words; {} lanes per key give {}",
                         vecWidth, lanes, elems % 2 != 0 || elems < vecWidth ? elems : valueElems);
    }
    if (elems % vecWidth == 0 && valueElems % vecWidth == 0) {
      return fmt::format("{} lanes of {} elements take whole loads of {}: no tail words", lanes, elems, vecWidth);
    }
  } else if (elems % vecWidth != 0 || valueElems % vecWidth != 0) {
    return fmt::format("{} elements per lane are not a multiple of the vector width {}",
                       elems % vecWidth != 0 ? elems : valueElems, vecWidth);
  }
  if (unroll != 1 && unroll != 2 && unroll != 4 && unroll != 8 && unroll != 16) {
    return fmt::format("unroll {} is not 1, 2, 4, 8 or 16", unroll);
  }
  // Each lane keeps scores of one head: as many lanes per key as heads at least, and no more than
  // there are scores per step.
  if (scatter && (lanes < 2 || lanes < heads || lanes > heads * unroll || lanes % heads != 0)) {
    return fmt::format("scattered scores need 2 or more lanes per key, at least one per head and at most one per "
                       "score of a step: {} lanes for {} heads x {} steps", lanes, heads, unroll);
  }
  // q (unless read from shared memory) and o for every head, and K and V rows for every unrolled
  // step twice over (the next step's loads are in flight while this one's are used), all in
  // registers. Counting them once let D80 take 4 steps of 20-element rows on the H200, which spilled:
  // 118 us at kv 65536 against 69 us with 2 steps (docs/performance.md, "Head dims").
  // Quantized rows stay in registers as codes, four to a word, and one scale per load; counted in the
  // units the 16-bit rows are (two per register), which the budget was measured in. Counted once,
  // 16 codes per lane with 8 steps passed and spilled on the H100 (216 us against 92 us with 4 steps).
  // With step scales a load position's scale is held once per step, not once per unrolled key.
  const std::uint32_t scaleRegisters = quantized(dtype) ? 2 * 2 * (elems / vecWidth) : 0;
  const std::uint32_t rowRegisters = quantized(dtype) ? 2 * ((elems + valueElems) / 4) : elems + valueElems;
  const std::uint32_t stepRegisters = unroll * rowRegisters + (stepScales ? 1 : unroll) * scaleRegisters;
  if (stepScales) {
    const QuantBlocks& q = storageFormat(dtype).blocks;
    if (!q.version || q.inlineScales || vecWidth < 4 || q.keys % stepKeys() != 0 ||
        (pageSize && pageSize % stepKeys() != 0)) {
      return fmt::format("step scales take int8 K/V (scales per block of keys) in loads of 4 or more codes, with the "
                         "{} keys of a step dividing the {}-key scale block{}; not {} in loads of {}",
                         stepKeys(), q.keys, pageSize ? fmt::format(" and the {}-row page", pageSize) : "",
                         dtypeName(dtype), vecWidth);
    }
  }
  if (halfProducts && (!stepScales || queryShared || idleLanes)) {
    return "half products take int8 K/V with step scales, q in registers and no idle lanes";
  }
  if (int8Dot && (!quantized(dtype) || vecWidth < 4 || queryShared)) {
    return fmt::format("integer dot products take quantized K/V in loads of 4 or more codes with q in registers, "
                       "not {} in loads of {}{}", dtypeName(dtype), vecWidth, queryShared ? " with q shared" : "");
  }
  // q quantized for integer dot products: two bytes per element, four to a word, and a scale per load.
  // Half products: q as f16 pairs and a scale, and each step's V sums as f16 pairs beside o.
  const std::uint32_t queryRegisters = queryShared ? 0
                                       : int8Dot   ? elems / 2 + elems / vecWidth
                                       : halfProducts ? elems / 2 + 1
                                                      : elems;
  const std::uint32_t outputRegisters = halfProducts ? valueElems + valueElems / 2 : valueElems;
  if (heads * (queryRegisters + outputRegisters) + 2 * stepRegisters > 384) {
    return fmt::format("{} heads x {} elements per lane with unroll {} need too many registers", heads, elems, unroll);
  }
  return {};
}

namespace {
std::string tensorCoreFormatUnsupported(DType kv) {
  if (kv == DType::F16 || kv == DType::BF16 || kv == DType::I8) return {};
  return fmt::format("tensor-core decode takes f16, bf16 or int8 K/V, not {}", dtypeName(kv));
}
}  // namespace

std::string DecodeVariant::tensorCoresUnusableReason(std::uint32_t subgroupSize) const {
  if (std::string why = tensorCoreFormatUnsupported(dtype); !why.empty()) return why;
  if (vecWidth != 16 / storageFormat(dtype).bytes) {
    return fmt::format("tensor-core decode loads 16 bytes at a time: {} elements of {}, not {}",
                       16 / storageFormat(dtype).bytes, dtypeName(dtype), vecWidth);
  }
  // int8: whole 32-dimension scale chunks, each chunk's products scaled once.
  const std::uint32_t dims = dtype == DType::I8 ? storageFormat(dtype).blocks.dims : 16;
  if (headDim % dims != 0 || vDim() % dims != 0) {
    return fmt::format("tensor-core decode of {} takes head and value dims that are multiples of {}, not {} and {}",
                       dtypeName(dtype), dims, headDim, vDim());
  }
  if ((kTensorTileKeys * headDim / vecWidth) % subgroupSize != 0 || (kTensorTileKeys * vDim() / vecWidth) % subgroupSize != 0) {
    return fmt::format("a tile of {} rows of {} and {} does not split into whole loads over a subgroup of {}",
                       kTensorTileKeys, headDim, vDim(), subgroupSize);
  }
  if (heads > 8) return fmt::format("tensor-core decode holds up to 8 heads as columns, not {}", heads);
  if (partial != PartialStorage::Float || heads * vDim() * 4 > tensorRowsBytes()) {
    return fmt::format("tensor-core decode keeps its partials in float over its staging rows ({} bytes), not {} of {} "
                       "heads x {}", tensorRowsBytes(), partialStorageName(partial), heads, vDim());
  }
  if (pageSize % kTensorTileKeys != 0) {
    return fmt::format("tensor-core decode takes pages of a multiple of {} rows, not {}", kTensorTileKeys, pageSize);
  }
  if (bf16Operands && (dtype != DType::BF16 || qType() != DType::BF16)) {
    return fmt::format("bf16 operands take bf16 q, K and V, not q {} and K/V {}", dtypeName(qType()), dtypeName(dtype));
  }
  if (tilePairs && unroll % 2 != 0) {
    return fmt::format("tile pairs take an even number of tiles in flight, not {}", unroll);
  }
  if (valueHalves && (dtype != DType::I8 || kTensorTileKeys * vDim() / vecWidth != 4 * subgroupSize)) {
    return fmt::format("value halves take int8 V rows of four 16-byte loads a lane a tile ({} dims on a subgroup "
                       "of {}), not {} rows of {}",
                       4 * subgroupSize * vecWidth / kTensorTileKeys, subgroupSize, dtypeName(dtype), vDim());
  }
  if (valueRegisters && (valueHalves || dtype != DType::I8 || vDim() != 128 || subgroupSize != 32 || vecWidth != 16)) {
    return fmt::format("value registers take int8 V rows of 128 in 16-byte loads on a subgroup of 32, without value "
                       "halves; not {} rows of {} on a subgroup of {}{}",
                       dtypeName(dtype), vDim(), subgroupSize, valueHalves ? " with value halves" : "");
  }
  if (keysPerWarp != 1 || queryShared || int8Dot || idleLanes || tailWords || scatter || stepScales || halfProducts ||
      lazyRescale) {
    return "tensor-core decode has its own tiles: no keys per warp, q shared, integer dot products, idle lanes, tail "
           "words, scattered scores, step scales, half products or lazy rescale";
  }
  // unroll: tiles in flight, each lane holding its loads of K's and V's rows; more would spill beside
  // O^T's and Q's fragments.
  const std::uint32_t tileRegisters = kTensorTileKeys * (headDim + vDim()) * storageFormat(dtype).bytes / 4 / subgroupSize;
  if (unroll < 1 || unroll > 4 || unroll * tileRegisters > 128) {
    return fmt::format("tensor-core decode holds 1 to 4 tiles in flight of {} registers each, at most 128 registers; "
                       "not {}", tileRegisters, unroll);
  }
  return {};
}

std::uint32_t DecodeVariant::tensorRow4K() const { return headDim * storageFormat(dtype).bytes / 16 + 1; }
std::uint32_t DecodeVariant::tensorRow4V() const { return vDim() * 2 / 16 / (valueHalves ? 2 : 1) + 1; }
std::uint32_t DecodeVariant::tensorRowsBytes() const {
  return kTensorTileKeys * std::max(tensorTilesAtOnce() * tensorRow4K(), valueRegisters ? 0 : tensorRow4V()) * 16;
}
std::uint32_t DecodeVariant::tensorStageBytes() const {
  return tensorRowsBytes() + tensorTilesAtOnce() * kTensorTileKeys * 16;
}

std::string DecodeVariant::tensorCoresUnavailable(const DeviceInfo& device, DType kv) {
  if (std::string why = tensorCoreFormatUnsupported(kv); !why.empty()) return why;
  if (!device.hasCoopMat({16, 8, 16, DType::F16, DType::F32})) {
    return fmt::format("device '{}' has no 16x8x16 f16 cooperative matrices (GL_NV_cooperative_matrix)", device.name);
  }
  if (kv == DType::I8 && !device.hasCoopMat({16, 8, 32, DType::I8, DType::I32})) {
    return fmt::format("device '{}' has no 16x8x32 int8 cooperative matrices (GL_NV_cooperative_matrix)", device.name);
  }
  if (!device.coopMatLayout8.quad() || device.coopMatLayout8.rowOf.size() != 4) {
    return fmt::format("device '{}' has no known 16x8 accumulator layout for a softmax in registers", device.name);
  }
  if (!device.fp16Arithmetic) return fmt::format("device '{}' has no f16 arithmetic", device.name);
  return {};
}

std::string DecodeVariant::valueRegistersUnavailable(const DeviceInfo& device) {
  const CoopMatLayout& l = device.coopMatLayoutF16;
  bool known = l.quad() && l.rowOf.size() == 8;
  for (std::size_t e = 0; known && e < 8; ++e) {
    known = (l.rowOf[e] == 0 || l.rowOf[e] == 8) && l.colOf[e] % 8 <= 1;
    for (std::size_t f = 0; known && f < e; ++f) known = l.rowOf[f] != l.rowOf[e] || l.colOf[f] != l.colOf[e];
  }
  return known ? "" : fmt::format("device '{}' has no known 16x16 f16 layout (the probe's)", device.name);
}

std::string DecodeVariant::splitSuffix() const {
  std::string s = split ? (fusedReduce ? (batchedMerge ? "_split_merged_bm" : "_split_merged") : "_split") : "";
  if (claims) s += "_claims";
  if (lse) s += "_lse";
  if (probe) s += "_probe";
  if (qType() != dtype) s += fmt::format("_q{}", dtypeName(qType()));
  if (oType() != dtype) s += fmt::format("_o{}", dtypeName(oType()));
  if (pageSize) s += fmt::format("_pg{}", pageSize);
  return s;
}

std::string DecodeVariant::key() const {
  const std::string dims = HeadLayoutStage::rowsKey(headDim, vDim());
  if (scalar) {
    return fmt::format("{}_{}_h{}_w{}_scalar_{}{}", dims, dtypeName(dtype), heads, warps, partialStorageName(partial),
                       splitSuffix());
  }
  return fmt::format("{}_{}_h{}_w{}_k{}_u{}_v{}{}{}{}{}{}{}_{}{}", dims, dtypeName(dtype), heads, warps, keysPerWarp,
                     unroll, vecWidth, idleLanes ? "_il" : tailWords ? "_tw" : "",
                     queryShared ? "_qs" : int8Dot ? "_idot" : "", scatter ? "_sc" : "", stepScales ? "_ss" : "",
                     halfProducts ? "_hp" : "", lazyRescale ? "_lr" : tilePairs ? "_tcp" : tensorCores ? "_tc" : "",
                     partialStorageName(partial), splitSuffix()) +
         (bf16Operands ? "_bf16ops" : "") + (valueHalves ? "_vh" : "") + (valueRegisters ? "_vr" : "");
}

}  // namespace foundry
