// Selector decisions against devices stated as values (a preset with fields overridden): variants,
// Split-K factors and grids follow the documented rules, knobs beat heuristics, knob values a device
// cannot honour are rejected by name, and every decision carries a reason. The expected numbers are
// derived here from the rules as documented in Selector.cpp, never by asking the Selector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/Selector.h"
#include "foundry/testing/ShapeCall.h"

namespace foundry {
namespace {

using test::CallShape;
using test::decodeShape;
using test::prefillShape;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::uint32_t ceilDiv(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

struct Split {
  std::uint32_t splits = 1, chunk = 0;
};

/// Keys cut into chunks of a multiple of `granule`, at most `wanted` of them, none empty.
Split chunked(std::uint32_t kvLen, std::uint32_t wanted, std::uint32_t granule) {
  wanted = std::clamp<std::uint32_t>(wanted, 1, kvLen);
  const std::uint32_t chunk = ceilDiv(ceilDiv(kvLen, wanted), granule) * granule;
  return {ceilDiv(kvLen, chunk), chunk};
}

/// Decode: one wave, one workgroup per compute unit, at least max(256, granule) keys per split.
Split decodeRule(std::uint32_t kvLen, std::uint32_t computeUnits, std::uint32_t workgroupsWithoutSplit,
                 std::uint32_t granule, std::uint32_t wideGranule = 0) {
  const std::uint32_t fill = std::max<std::uint32_t>(1, computeUnits / workgroupsWithoutSplit);
  const std::uint32_t longest = kvLen / std::max<std::uint32_t>(256, granule);
  const std::uint32_t wanted = std::max<std::uint32_t>(1, std::min(fill, longest));
  const Split split = chunked(kvLen, wanted, granule);
  // At least 4096 keys per workgroup: the wide variant's granule, the same number of splits wanted.
  return wideGranule && split.chunk >= 4096 ? chunked(kvLen, wanted, wideGranule) : split;
}

/// Prefill: split only when the query tiles leave compute units idle; at least 4 tiles per split.
Split prefillRule(std::uint32_t kvLen, std::uint32_t computeUnits, std::uint32_t workgroupsWithoutSplit,
                  std::uint32_t keysPerTile) {
  if (workgroupsWithoutSplit >= computeUnits) return chunked(kvLen, 1, keysPerTile);
  const std::uint32_t fill = ceilDiv(2ull * computeUnits, workgroupsWithoutSplit);
  return chunked(kvLen, std::max<std::uint32_t>(1, std::min(fill, kvLen / (4 * keysPerTile))), keysPerTile);
}

/// Prefill grids: heads vary fastest while one sequence's K/V (every KV head, K and V rows) is at
/// most 48 MiB; beyond, each head's query-tile slots go in turn.
Grid prefillGrid(const CallShape& s, std::uint32_t slots) {
  const std::uint64_t kv = std::uint64_t(s.nKvHeads) * s.kvLen * 2 * s.headDim * dtypeBytes(s.dtype);
  return kv <= (48ull << 20) ? Grid{s.nHeads, slots, s.batch} : Grid{slots, s.nHeads, s.batch};
}

AttentionPlan planFor(const DeviceInfo& device, const CallShape& shape, const AttentionOptions& options = {}) {
  return Selector::plan(describeCall(test::shapeCall(shape)), device, options);
}

/// Knobs with the tensor-core decode off, for the subgroup kernel's rules where a device's table plans
/// the tensor cores (the H200's f16 rows of 64 and 128 from 2048 keys per workgroup).
AttentionOptions subgroupDecode(std::map<std::string, std::string> env = {}) {
  env["FOUNDRY_FA_DECODE_TENSOR_CORES"] = "0";
  return AttentionOptions::fromEnvironment(env);
}

const Decision* findDecision(const AttentionPlan& plan, const std::string& what) {
  for (const auto& d : plan.decisions) {
    if (d.what == what) return &d;
  }
  return nullptr;
}

MATCHER_P2(HasDecision, what, reasonMatcher, std::string("has a '") + what + "' decision") {
  const Decision* d = findDecision(arg, what);
  if (!d) {
    *result_listener << "no such decision in: " << arg.describe();
    return false;
  }
  *result_listener << "reason: " << d->reason;
  return ::testing::Matches(reasonMatcher)(d->reason);
}

// ---- decode ---------------------------------------------------------------------------------------

struct DecodeCase {
  CallShape shape;
  std::uint32_t heads;        ///< query heads per workgroup: largest divisor of the group up to 8
  std::uint32_t keysPerWarp;  ///< about 8 elements of each key per lane at subgroup size 32
};

void PrintTo(const DecodeCase& c, std::ostream* os) {
  *os << c.shape.str();
}

class H200DecodeSplit : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(H200DecodeSplit, FollowsTheDocumentedRule) {
  const DecodeCase& c = GetParam();
  const DeviceInfo device = parseDevicePreset("h200");
  const AttentionPlan plan = planFor(device, c.shape, subgroupDecode());
  ASSERT_TRUE(plan.decode);
  const DecodeVariant& v = plan.decodeVariant;
  EXPECT_FALSE(v.scalar);
  EXPECT_EQ(v.heads, c.heads);
  EXPECT_EQ(v.keysPerWarp, c.keysPerWarp);
  EXPECT_EQ(v.warps, 8u);
  EXPECT_EQ(v.partial, PartialStorage::Float);

  const std::uint32_t base = c.shape.batch * c.shape.nHeads / c.heads;
  // Long ranges per workgroup take the wide variant: 16-byte loads, 8 steps in flight.
  const bool wide = decodeRule(c.shape.kvLen, 132, base, 8 * c.keysPerWarp * 4).chunk >= 4096;
  EXPECT_EQ(v.vecWidth, wide ? 8u : 4u);
  EXPECT_EQ(v.unroll, wide ? 8u : 4u);
  const Split want = decodeRule(c.shape.kvLen, 132, base, 8 * c.keysPerWarp * 4, 8 * c.keysPerWarp * 8);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_EQ(v.split, want.splits > 1);
  EXPECT_EQ(plan.grid, (Grid{want.splits, c.shape.nHeads / c.heads, c.shape.batch}));
  EXPECT_EQ(plan.reduceGrid, (Grid{c.shape.nHeads, 1, c.shape.batch}));
  EXPECT_EQ(plan.reduceWorkgroup, 64u);
  // Every split has keys and together they cover the cache.
  EXPECT_LT(std::uint64_t(plan.splits - 1) * plan.kvChunk, c.shape.kvLen);
  EXPECT_GE(std::uint64_t(plan.splits) * plan.kvChunk, c.shape.kvLen);
  const std::uint64_t rows = std::uint64_t(c.shape.batch) * c.shape.nHeads * plan.splits;
  // Split into one wave: the last workgroup of each head group merges, counting arrivals in one word
  // per group.
  if (v.split) {
    EXPECT_LE(plan.splits * base, 132u);
  }
  EXPECT_EQ(v.fusedReduce, v.split);
  EXPECT_EQ(plan.reduceKernel(), false);
  EXPECT_EQ(plan.scratchBytes, plan.splits > 1 ? rows * (c.shape.headDim * 4 + 8) + base * 4 : 0u);
}

INSTANTIATE_TEST_SUITE_P(Selector, H200DecodeSplit,
                         ::testing::Values(DecodeCase{decodeShape(1, 32, 8, 8192, 128), 4, 2},
                                           DecodeCase{decodeShape(1, 32, 8, 5000, 128), 4, 2},
                                           DecodeCase{decodeShape(1, 32, 32, 100000, 128), 1, 2},  // MHA
                                           DecodeCase{decodeShape(4, 64, 8, 32768, 128), 8, 2},    // GQA 8, batch 4
                                           DecodeCase{decodeShape(1, 8, 1, 300, 64), 8, 4},        // too short to split
                                           DecodeCase{decodeShape(1, 8, 1, 1000, 64), 8, 4},
                                           DecodeCase{decodeShape(64, 32, 8, 4096, 128), 4,
                                                      2},  // enough workgroups already
                                           DecodeCase{decodeShape(1, 24, 8, 65536, 128), 3, 2},   // group 3
                                           // The bench's shapes: wide from 4096 keys per workgroup.
                                           DecodeCase{decodeShape(1, 32, 8, 16384, 128), 4, 2},
                                           DecodeCase{decodeShape(1, 32, 8, 65536, 128), 4, 2},
                                           DecodeCase{decodeShape(1, 32, 8, 65536, 64), 4, 4},
                                           DecodeCase{decodeShape(8, 32, 8, 4096, 128), 4, 2},
                                           DecodeCase{decodeShape(8, 32, 8, 16384, 128), 4, 2}),
                         [](const auto& tp) { return tp.param.shape.str(); });

TEST(Selector, H200LongDecodeSplitsIntoOneWaveOf16Chunks) {
  // The worked example: 8 workgroups without a split on 132 compute units want 132 / 8 = 16 splits
  // (one whole wave, at least 8 splits); 8192 / 16 = 512 keys is a multiple of the granule of
  // 8 warps x 2 keys x unroll 4 = 64.
  const DeviceInfo device = parseDevicePreset("h200");
  const AttentionPlan plan = planFor(device, decodeShape(1, 32, 8, 8192, 128));
  EXPECT_EQ(plan.splits, 16u);
  EXPECT_EQ(plan.kvChunk, 512u);
  EXPECT_EQ(plan.grid, (Grid{16, 8, 1}));
  EXPECT_EQ(plan.reduceGrid, (Grid{32, 1, 1}));
  EXPECT_THAT(plan, HasDecision("split-k", AllOf(HasSubstr("132 compute units"), HasSubstr("256 keys"))));
}

TEST(Selector, FewerComputeUnitsMeanFewerSplits) {
  DeviceInfo device = parseDevicePreset("h200");
  device.computeUnits = 16u;
  const AttentionPlan plan = planFor(device, decodeShape(1, 32, 8, 8192, 128));
  // 16 / 8 = 2 splits: one wave.
  EXPECT_EQ(plan.splits, 2u);
  EXPECT_EQ(plan.kvChunk, 4096u);
  EXPECT_TRUE(plan.decodeVariant.fusedReduce);
  device.computeUnits = 4u;
  EXPECT_EQ(planFor(device, decodeShape(1, 32, 8, 8192, 128)).splits, 1u);  // 8 workgroups already fill 4
}

TEST(Selector, SplitKScratchStaysWithinOneStorageBuffer) {
  DeviceInfo device = parseDevicePreset("h200");
  // 32 query heads x (128 x 4 + 8) bytes per split: 12 splits are 199,680 bytes, 13 would not fit.
  device.maxStorageBufferRange = 200000u;
  const AttentionPlan plan = planFor(device, decodeShape(1, 32, 8, 8192, 128));
  const Split want = chunked(8192, 12, 8 * 2 * 4);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_LE(plan.scratchBytes, 200000u);
}

TEST(Selector, LavapipeDecodeUsesTheSubgroupVariantSizedForSubgroupsOf8) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const AttentionPlan plan = planFor(device, decodeShape(1, 4, 1, 2048, 128));
  const DecodeVariant& v = plan.decodeVariant;
  EXPECT_FALSE(v.scalar);
  EXPECT_EQ(v.heads, 4u);
  EXPECT_EQ(v.keysPerWarp, 1u);  // 8 x 8 / 128 rounds to one key per subgroup: 16 elements per lane
  EXPECT_EQ(v.elemsPerLane(8), 16u);
  EXPECT_EQ(v.workgroupSize(8), 32u);
  EXPECT_THAT(plan, HasDecision("variant", HasSubstr("subgroup shuffles")));
  // One workgroup on two compute units: one wave is 2 splits (2048 keys allow 8); granule 4 x 1.
  EXPECT_EQ(plan.splits, 2u);
  EXPECT_EQ(plan.kvChunk, 1024u);
  EXPECT_EQ(plan.grid, (Grid{2, 1, 1}));
  EXPECT_TRUE(plan.decodeVariant.fusedReduce);
}

TEST(Selector, NoSubgroupShufflesMeansTheScalarVariant) {
  DeviceInfo device = parseDevicePreset("lavapipe");
  device.subgroupShuffle = false;
  const AttentionPlan plan = planFor(device, decodeShape(1, 4, 1, 2048, 128));
  EXPECT_TRUE(plan.decodeVariant.scalar);
  EXPECT_EQ(plan.decodeVariant.vecWidth, 1u);
  EXPECT_THAT(plan, HasDecision("variant", HasSubstr("no subgroup shuffles")));
  // The scalar variant's keys move a workgroup (4 x 8 invocations) at a time.
  const Split want = decodeRule(2048, 2, 1, 32);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
}

// ---- prefill --------------------------------------------------------------------------------------

TEST(Selector, H200PrefillChoosesCooperativeMatrices) {
  const DeviceInfo device = parseDevicePreset("h200");
  for (const std::uint32_t d : {64u, 128u}) {
    const CallShape shape = prefillShape(32, 8, 2048, 2048, d);
    const AttentionPlan plan = planFor(device, shape);
    ASSERT_FALSE(plan.decode);
    const PrefillVariant& v = plan.prefillVariant;
    EXPECT_TRUE(v.coopMat) << d;
    EXPECT_EQ(v.rowsPerWarp, 16u);
    // The preset has the quad accumulator layout: softmax in registers. The tuning table's Hopper
    // rows: D128 takes 8 subgroups (128 query rows) and 32-key tiles double-buffered (64 keys would
    // fit only once, in 34,816 bytes); D64 4 subgroups and one 32-key buffer (four workgroups an SM).
    EXPECT_TRUE(v.quadSoftmax) << d;
    EXPECT_EQ(v.warps, d > 64 ? 8u : 4u);
    EXPECT_EQ(v.keysPerTile, 32u);
    EXPECT_EQ(v.stages, d > 64 ? 2u : 1u);
    EXPECT_LE(v.sharedBytes(32), 49152u);
    EXPECT_THAT(plan, HasDecision("softmax", HasSubstr("quad pattern")));
    EXPECT_EQ(v.unusableReason(32), "");
    EXPECT_THAT(plan, HasDecision("variant", HasSubstr("cooperative matrices")));
    // 16 query tiles of 128 rows (32 of 64 at D64) x 32 heads already fill 132 compute units.
    EXPECT_EQ(plan.splits, 1u);
    EXPECT_EQ(plan.grid, prefillGrid(shape, d > 64 ? 16 : 32));
  }
}

TEST(Selector, PrefillSoftmaxGoesThroughSharedMemoryWithoutTheQuadLayout) {
  const DeviceInfo device = parseDevicePreset("h200,quad=0");
  const AttentionPlan plan = planFor(device, prefillShape(32, 8, 2048, 2048, 128));
  EXPECT_TRUE(plan.prefillVariant.coopMat);
  EXPECT_FALSE(plan.prefillVariant.quadSoftmax);
  EXPECT_THAT(plan, HasDecision("softmax", HasSubstr("layout is unknown")));
  const auto force = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX", "1"}});
  EXPECT_THROW(planFor(device, prefillShape(32, 8, 2048, 2048, 128), force), UserError);
  const DeviceInfo quad = parseDevicePreset("h200");
  const auto off = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX", "0"}});
  EXPECT_FALSE(planFor(quad, prefillShape(32, 8, 2048, 2048, 128), off).prefillVariant.quadSoftmax);
}

TEST(Selector, PrefillPutsHeadsFirstWhileOneSequencesKvStaysWithinTheBound) {
  const DeviceInfo device = parseDevicePreset("h200");
  // 8 KV heads x 8192 keys x (128 + 128) x 2 bytes = 32 MiB: the longest tiles of every head first.
  const CallShape fits = prefillShape(32, 8, 8192, 8192, 128);
  const AttentionPlan first = planFor(device, fits);
  EXPECT_TRUE(first.prefillVariant.headsFirst);
  EXPECT_EQ(first.grid, (Grid{32, ceilDiv(8192, first.prefillVariant.rowsPerWorkgroup()), 1}));
  EXPECT_THAT(first, HasDecision("grid order", HasSubstr("32768 KiB of K/V per sequence within 49152 KiB")));
  EXPECT_THAT(first.prefillVariant.key(), HasSubstr("_lf_hf"));
  // Twice the keys hold 64 MiB: each head's tiles in turn.
  const CallShape longer = prefillShape(32, 8, 16384, 16384, 128);
  const AttentionPlan turn = planFor(device, longer);
  EXPECT_FALSE(turn.prefillVariant.headsFirst);
  EXPECT_EQ(turn.grid, (Grid{ceilDiv(16384, turn.prefillVariant.rowsPerWorkgroup()), 32, 1}));
  EXPECT_THAT(turn, HasDecision("grid order", HasSubstr("beyond 49152 KiB")));
  // Hopper's 16-key tiles of 256-wide rows keep heads first up to 64 MiB (the tuning table's D256 row).
  const AttentionPlan wide = planFor(device, prefillShape(32, 8, 8192, 8192, 256));
  EXPECT_TRUE(wide.prefillVariant.headsFirst);
  EXPECT_THAT(wide, HasDecision("grid order", HasSubstr("65536 KiB of K/V per sequence within 65536 KiB")));
  EXPECT_FALSE(planFor(device, prefillShape(32, 8, 16384, 16384, 256)).prefillVariant.headsFirst);
}

TEST(Selector, PrefillCompilesAMaskFreeTileCopyExceptWhereTheTuningTableSaysNot) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  // Everywhere a mask-free copy of the tile code for the tiles every row sees whole; not for Hopper's
  // D256, whose two copies the driver could not hold in registers.
  const AttentionPlan d128 = planFor(h200, prefillShape(32, 8, 8192, 8192, 128));
  EXPECT_TRUE(d128.prefillVariant.maskSplit);
  EXPECT_THAT(d128, HasDecision("tile masks", HasSubstr("every device")));
  const AttentionPlan d256 = planFor(h200, prefillShape(32, 8, 8192, 8192, 256));
  EXPECT_FALSE(d256.prefillVariant.maskSplit);
  EXPECT_THAT(d256.prefillVariant.key(), HasSubstr("_mflag"));
  EXPECT_THAT(d256, HasDecision("tile masks", HasSubstr("Hopper, head_dim 256")));
  EXPECT_TRUE(planFor(parseDevicePreset("lavapipe"), prefillShape(8, 2, 512, 512, 256)).prefillVariant.maskSplit);
  // The knob beats the table both ways.
  const auto on = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_MASK_SPLIT", "1"}});
  EXPECT_TRUE(planFor(h200, prefillShape(32, 8, 8192, 8192, 256), on).prefillVariant.maskSplit);
  const auto off = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_MASK_SPLIT", "0"}});
  const AttentionPlan flag = planFor(h200, prefillShape(32, 8, 8192, 8192, 128), off);
  EXPECT_FALSE(flag.prefillVariant.maskSplit);
  EXPECT_THAT(flag, HasDecision("tile masks", HasSubstr("FOUNDRY_FA_PREFILL_MASK_SPLIT")));
}

TEST(Selector, H200PrefillTilesRowsOf256WithEightSubgroupsAndQStagedInPasses) {
  const DeviceInfo device = parseDevicePreset("h200");
  // Two 16-key staging buffers of 256-wide rows (33 KiB) hold 64 query rows: the 128 rows of 8 subgroups
  // go through them in two passes.
  const PrefillVariant v = planFor(device, prefillShape(32, 8, 8192, 8192, 256)).prefillVariant;
  EXPECT_TRUE(v.coopMat);
  EXPECT_EQ(v.warps, 8u);
  EXPECT_EQ(v.keysPerTile, 16u);
  EXPECT_EQ(v.stages, 2u);
  EXPECT_LE(v.sharedBytes(32), device.maxSharedMemoryBytes);
  // Rows of 192: 4 subgroups, one 16-key buffer.
  const PrefillVariant n = planFor(device, prefillShape(32, 8, 8192, 8192, 192)).prefillVariant;
  EXPECT_EQ(n.warps, 4u);
  EXPECT_EQ(n.keysPerTile, 16u);
  EXPECT_EQ(n.stages, 1u);
  // Workgroup-scope matrices load Q as one matrix: their query tile must fit the staging area at once.
  PrefillVariant cm2 = v;
  cm2.coopMat2 = true;
  EXPECT_THAT(cm2.unusableReason(32), HasSubstr("does not fit the K/V staging area"));
}

TEST(Selector, H200PrefillWithoutF16CooperativeMatricesUsesSubgroups) {
  DeviceInfo device = parseDevicePreset("h200");
  EXPECT_FALSE(planFor(device, prefillShape(32, 8, 256, 256, 128, DType::F32)).prefillVariant.coopMat);
  device.coopMatShapes = {{16, 8, 16, DType::F16, DType::F32}};
  const AttentionPlan plan = planFor(device, prefillShape(32, 8, 256, 256, 128));
  EXPECT_FALSE(plan.prefillVariant.coopMat);
  EXPECT_THAT(plan, HasDecision("variant", HasSubstr("has no 16x16x16 f16 cooperative matrices")));
}

TEST(Selector, H200PrefillSplitsKeysWhenFewQueryTilesMeetALongCache) {
  const DeviceInfo device = parseDevicePreset("h200");
  // 1 tile of 128 rows x 8 heads = 8 workgroups for 132 compute units: the tile halves to 64 rows
  // (the tuning table's coopMinWarps stops it there), 16 workgroups, and the keys are split.
  const CallShape shape = prefillShape(8, 8, 128, 16384, 128);
  const AttentionPlan plan = planFor(device, shape);
  ASSERT_TRUE(plan.prefillVariant.coopMat);
  ASSERT_EQ(plan.prefillVariant.rowsPerWorkgroup(), 64u);
  EXPECT_THAT(plan, HasDecision("query tile", HasSubstr("8 query tiles of 128 rows would not fill 132 compute units")));
  ASSERT_EQ(plan.prefillVariant.keysPerTile, 32u);
  const Split want = prefillRule(16384, 132, 16, 32);
  // min(ceil(264 / 16), 16384 / 128) = 17 wanted; chunks of ceil(16384 / 17) rounded up to 32 keys
  // are 992 keys, so 17 splits.
  EXPECT_EQ(want.splits, 17u);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_TRUE(plan.prefillVariant.split);
  EXPECT_EQ(plan.grid, prefillGrid(shape, 2 * want.splits));
  EXPECT_EQ(plan.reduceGrid, (Grid{128, 8, 1}));
  EXPECT_THAT(plan, HasDecision("split-k", HasSubstr("16 workgroups for 132 compute units")));
}

TEST(Selector, LavapipePrefillIsTheSubgroupVariantWithATileThatFits) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const CallShape shape = prefillShape(1, 1, 8, 4096, 128);
  const AttentionPlan plan = planFor(device, shape);
  const PrefillVariant& v = plan.prefillVariant;
  EXPECT_FALSE(v.coopMat);
  EXPECT_EQ(v.warps, 2u);
  EXPECT_EQ(v.rowsPerWorkgroup(), 8u);
  // 32 keys of f16 staged twice would need 36,384 bytes of 32,768: the tile halves to 16 keys.
  EXPECT_EQ(v.keysPerTile, 16u);
  // One staging buffer (the tuning table's lavapipe row): each tile copied in one loop.
  EXPECT_EQ(v.stages, 1u);
  EXPECT_LE(v.sharedBytes(8), 32768u);
  EXPECT_THAT(plan, HasDecision("variant", HasSubstr("has no 16x16x16 f16 cooperative matrices")));
  const Split want = prefillRule(4096, 2, 1, 16);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.splits, 4u);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_EQ(plan.grid, prefillGrid(shape, want.splits));
}

// ---- llvmpipe's loop limit -----------------------------------------------------------------------
// A lavapipe invocation's loops end, silently, once they have made 65535 passes in all. The Selector
// splits keys so that no workgroup's range reaches 7/8 of that by the kernel's count of its loops, each
// run of a loop of n trips costing n + 2 passes (docs/reliability.md, "Lavapipe's loop limit").

TEST(Selector, LavapipeLongDecodeSplitsBelowTheLoopLimit) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  EXPECT_EQ(device.loopLimit, 65535u);
  const AttentionPlan plan = planFor(device, decodeShape(1, 4, 1, 200000, 128));
  ASSERT_FALSE(plan.decodeVariant.scalar);
  ASSERT_EQ(plan.decodeVariant.keyGranule(8), 4u);  // 4 subgroups of one key a step
  // Per step: the key loop's pass and a shuffle loop over the subgroup's 8 lanes (3 + 2). Fixed: q
  // staged (16 elements an invocation), the partials zeroed, combined and stored (16 each), the
  // combine over the 4 subgroups twice, four shuffle loops.
  const std::uint32_t fixed = 18 + 3 * 18 + 2 * 6 + 4 * 5;
  const std::uint32_t budget = 65535 - 65535 / 8;
  const std::uint32_t most = ((budget - fixed) / 6 - 1) * 4;
  EXPECT_EQ(most, 38156u);
  EXPECT_EQ(Selector::mostKeysPerWorkgroup(plan, device), most);
  const Split want = chunked(200000, ceilDiv(200000, most), 4);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_LE(plan.kvChunk, most);
  EXPECT_THAT(plan, HasDecision("split-k", HasSubstr("loop limit")));
  // Without the limit: the one wave of the rule, 2 splits.
  DeviceInfo unlimited = device;
  unlimited.loopLimit = 0;
  EXPECT_EQ(planFor(unlimited, decodeShape(1, 4, 1, 200000, 128)).splits, 2u);
  EXPECT_EQ(Selector::mostKeysPerWorkgroup(plan, unlimited), 0u);
}

// A modifier whose hooks loop (AttentionModifier::loopPassesPerCall): its passes per key of the range
// (Selector::hookLoopPassesPerKey) join the kernel's own, one granule more than the keys.
TEST(Selector, HookLoopPassesShrinkTheKeysPerWorkgroup) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const AttentionPlan plan = planFor(device, decodeShape(1, 4, 1, 200000, 128));
  ASSERT_EQ(plan.decodeVariant.keyGranule(8), 4u);
  const std::uint32_t fixed = 18 + 3 * 18 + 2 * 6 + 4 * 5;  // as in the test above
  const std::uint32_t budget = 65535 - 65535 / 8;
  const std::uint32_t hooks = 100;
  // keys / 4 + 1 steps of 6 passes and (keys + 4) * 100 passes of hooks within the budget.
  std::uint32_t most = 0;
  for (std::uint32_t k = 4; fixed + (k / 4 + 1) * 6 + (k + 4) * hooks <= budget; k += 4) most = k;
  EXPECT_EQ(most, 556u);
  EXPECT_EQ(Selector::mostKeysPerWorkgroup(plan, device, hooks), most);
  DeviceInfo unlimited = device;
  unlimited.loopLimit = 0;
  EXPECT_EQ(Selector::mostKeysPerWorkgroup(plan, unlimited, hooks), 0u);
}

TEST(Selector, LavapipeLongPrefillSplitsBelowTheLoopLimit) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const AttentionPlan plan = planFor(device, prefillShape(1, 1, 8, 100000, 128));
  const PrefillVariant& v = plan.prefillVariant;
  ASSERT_EQ(v.keysPerTile, 16u);
  ASSERT_EQ(v.rowsPerWorkgroup(), 8u);
  ASSERT_EQ(v.stages, 1u);
  // Per tile: the tile loop's pass, the step to the next tile (1 + 2), head_dim + 2, keys + 2 and the
  // tile's copy (16 x 128 elements over 16 invocations, 8 a pass: 16 + 2).
  // Fixed: Q staged (8 x 128 over 16 invocations), 4 rows of 16 dimensions stored, 2.
  const std::uint32_t perTile = 1 + 3 + 130 + 18 + 18;
  const std::uint32_t fixed = 66 + 6 * 18 + 2;
  const std::uint32_t most = ((65535 - 65535 / 8 - fixed) / perTile - 1) * 16;
  EXPECT_EQ(most, 5360u);
  EXPECT_EQ(Selector::mostKeysPerWorkgroup(plan, device), most);
  const Split want = chunked(100000, ceilDiv(100000, most), 16);  // the rule alone wants 4
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_THAT(plan, HasDecision("split-k", HasSubstr("loop limit")));
}

TEST(Selector, ASplitKnobThatLeavesARangePastTheLoopLimitIsRefused) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto refused = [&](std::map<std::string, std::string> env, const CallShape& shape, const char* knob) {
    EXPECT_THAT([&] { planFor(device, shape, AttentionOptions::fromEnvironment(env)); },
                ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr(knob), HasSubstr("loop limit"),
                                                          HasSubstr("or more splits"))));
  };
  refused({{"FOUNDRY_FA_DECODE_SPLIT_K", "2"}}, decodeShape(1, 4, 1, 200000, 128), "FOUNDRY_FA_DECODE_SPLIT_K");
  refused({{"FOUNDRY_FA_PREFILL_SPLIT_K", "1"}}, prefillShape(1, 1, 8, 100000, 128), "FOUNDRY_FA_PREFILL_SPLIT_K");
  refused({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}, prefillShape(1, 1, 8, 100000, 128),
          "FOUNDRY_DISABLE_FA_PREFILL_SPLITK");
  // Enough splits are taken as forced.
  EXPECT_EQ(planFor(device, decodeShape(1, 4, 1, 200000, 128),
                    AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "6"}}))
                .splits,
            6u);
}

TEST(Selector, AForcedSplitCountACallCannotTakeSaysWhatItMadeInstead) {
  // A forced count holds for every call of a run; a call of too few keys takes fewer splits, and the
  // reason names both counts rather than the knob alone.
  const DeviceInfo device = parseDevicePreset("h200");
  const AttentionPlan decode = planFor(device, decodeShape(1, 32, 8, 16, 128),
                                       AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "256"}}));
  EXPECT_LT(decode.splits, 256u);
  EXPECT_THAT(decode, HasDecision("split-k", AllOf(HasSubstr("FOUNDRY_FA_DECODE_SPLIT_K=256 asked"),
                                                   HasSubstr(fmt::format("{} made", decode.splits)))));
  const AttentionPlan prefill = planFor(device, prefillShape(32, 8, 16, 16, 128),
                                        AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}));
  EXPECT_EQ(prefill.splits, 1u);
  EXPECT_THAT(prefill, HasDecision("split-k", HasSubstr("FOUNDRY_FA_PREFILL_SPLIT_K=2 asked, 1 made")));
  // A count that is made as asked says only the knob.
  const AttentionPlan exact = planFor(device, decodeShape(1, 32, 8, 4096, 128),
                                      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}}));
  EXPECT_EQ(exact.splits, 4u);
  EXPECT_THAT(exact, HasDecision("split-k", ::testing::StrEq("FOUNDRY_FA_DECODE_SPLIT_K")));
}

TEST(Selector, PrefillWithoutSubgroupArithmeticIsUnsupportedNotAKernelThatCannotRun) {
  // The subgroup prefill kernel reduces rows with subgroupMax and subgroupAdd; there is no scalar one.
  DeviceInfo device = parseDevicePreset("lavapipe");
  device.subgroupArithmetic = false;
  EXPECT_THAT([&] { planFor(device, prefillShape(8, 8, 64, 64, 128)); },
              ::testing::ThrowsMessage<UnsupportedError>(
                  AllOf(HasSubstr("subgroup arithmetic"), HasSubstr("SdpaReferenceStep"))));
  // Decode needs only shuffles.
  EXPECT_NO_THROW(planFor(device, decodeShape(1, 8, 8, 64, 128)));
}

TEST(Selector, DisablePrefillSplitKKeepsOneSplitEvenOverTheSplitKnob) {
  const DeviceInfo device = parseDevicePreset("h200");
  const auto options = AttentionOptions::fromEnvironment(
      {{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}, {"FOUNDRY_FA_PREFILL_SPLIT_K", "8"}});
  const CallShape shape = prefillShape(8, 8, 128, 16384, 128);
  const AttentionPlan plan = planFor(device, shape, options);
  EXPECT_EQ(plan.splits, 1u);
  EXPECT_FALSE(plan.prefillVariant.split);
  EXPECT_EQ(plan.kvChunk, 16384u);
  // Two query tiles of 64 rows: one of 128 fills less of the device (coopMinWarps).
  EXPECT_EQ(plan.grid, prefillGrid(shape, 2));
  EXPECT_EQ(plan.scratchBytes, 0u);
  EXPECT_THAT(plan, HasDecision("split-k", HasSubstr("FOUNDRY_DISABLE_FA_PREFILL_SPLITK")));
}

// ---- knobs ----------------------------------------------------------------------------------------

TEST(Selector, DecodeKnobsBeatTheHeuristics) {
  const DeviceInfo device = parseDevicePreset("h200");
  const CallShape shape = decodeShape(1, 32, 8, 8192, 128);
  const auto options = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                        {"FOUNDRY_FA_DECODE_WARPS", "2"},
                                                        {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "4"},
                                                        {"FOUNDRY_FA_DECODE_VEC", "2"},
                                                        {"FOUNDRY_FA_DECODE_TG_OUT", "half"}});
  const AttentionPlan plan = planFor(device, shape, options);
  const DecodeVariant& v = plan.decodeVariant;
  EXPECT_EQ(v.warps, 2u);
  EXPECT_EQ(v.keysPerWarp, 4u);
  EXPECT_EQ(v.vecWidth, 2u);
  EXPECT_EQ(v.partial, PartialStorage::Half);
  const Split want = chunked(8192, 3, 2 * 4 * 4);
  EXPECT_EQ(plan.splits, 3u);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  EXPECT_EQ(plan.grid, (Grid{3, 8, 1}));
  for (const char* what : {"split-k", "warps", "keys per warp", "vector width", "partial storage"}) {
    EXPECT_THAT(plan, HasDecision(what, HasSubstr("FOUNDRY_FA_DECODE_"))) << what;
  }
  // Forcing the scalar variant works on a device that has shuffles.
  const AttentionPlan scalar =
      planFor(device, shape, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}));
  EXPECT_TRUE(scalar.decodeVariant.scalar);
  EXPECT_THAT(scalar, HasDecision("variant", HasSubstr("FOUNDRY_FA_DECODE_SCALAR")));
  // A split of 1 turns Split-K off even where the heuristic wants 32.
  const AttentionPlan one =
      planFor(device, shape, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "1"}}));
  EXPECT_EQ(one.splits, 1u);
  EXPECT_FALSE(one.decodeVariant.split);
}

TEST(Selector, HopperD80DecodeTakesWholeLoadsThenAWordPerLane) {
  // The tuning table's Hopper row for 16-bit rows of 80: 8 lanes of 10 elements, each two 8-byte loads
  // and one 4-byte word, q in registers, 4 steps in flight, scores scattered, at every length.
  const DeviceInfo h200 = parseDevicePreset("h200");
  for (const std::uint32_t kv : {65536u, 16384u, 4096u}) {
    const AttentionPlan plan = planFor(h200, decodeShape(1, 32, 8, kv, 80));
    const DecodeVariant& d80 = plan.decodeVariant;
    EXPECT_TRUE(d80.tailWords) << d80.key();
    EXPECT_FALSE(d80.idleLanes) << d80.key();
    EXPECT_EQ(d80.lanesPerKey(h200.subgroupSize), 8u) << kv;
    EXPECT_EQ(d80.elemsPerLane(h200.subgroupSize), 10u) << kv;
    EXPECT_EQ(d80.vecWidth, 4u) << kv;
    EXPECT_EQ(d80.unroll, 4u) << kv;
    EXPECT_FALSE(d80.queryShared) << kv;
    EXPECT_THAT(d80.key(), HasSubstr("_v4_tw_sc_")) << kv;
    EXPECT_EQ(d80.kvAccess().key(), "f16_w4_words");
    EXPECT_THAT(plan, HasDecision("tail words", HasSubstr("tuning table")));
    // Each score of a step summed once per key, a lane pair weighing each head's.
    EXPECT_TRUE(d80.scatter) << kv;
    EXPECT_THAT(plan, HasDecision("scores", HasSubstr("tuning table")));
  }
  EXPECT_TRUE(planFor(h200, decodeShape(8, 32, 8, 16384, 80)).decodeVariant.tailWords);
  CallShape bf16 = decodeShape(1, 32, 8, 65536, 80);
  bf16.dtype = DType::BF16;
  EXPECT_TRUE(planFor(h200, bf16).decodeVariant.tailWords);
  // Knobs keep their side: q forced into shared memory stays there; tail words turned off, or idle
  // lanes asked for, leave a layout of whole loads.
  auto with = [&](const char* knob, const char* value) {
    return planFor(h200, decodeShape(1, 32, 8, 65536, 80), AttentionOptions::fromEnvironment({{knob, value}}))
        .decodeVariant;
  };
  EXPECT_TRUE(with("FOUNDRY_FA_DECODE_Q_SHARED", "1").queryShared);
  EXPECT_TRUE(with("FOUNDRY_FA_DECODE_Q_SHARED", "1").tailWords);
  const DecodeVariant off = with("FOUNDRY_FA_DECODE_TAIL_WORDS", "0");
  EXPECT_FALSE(off.tailWords) << off.key();
  EXPECT_EQ(off.elemsPerLane(h200.subgroupSize) % off.vecWidth, 0u) << off.key();
  const DecodeVariant idle = with("FOUNDRY_FA_DECODE_IDLE_LANES", "1");
  EXPECT_TRUE(idle.idleLanes) << idle.key();
  EXPECT_FALSE(idle.tailWords) << idle.key();
  for (const std::uint32_t d : {64u, 96u, 128u}) {
    const DecodeVariant other = planFor(h200, decodeShape(1, 32, 8, 65536, d)).decodeVariant;
    EXPECT_FALSE(other.tailWords) << d;
    EXPECT_FALSE(other.idleLanes) << d;
    EXPECT_EQ(other.queryShared, d == 96u) << d;
  }
  CallShape f32 = decodeShape(1, 32, 8, 65536, 80);
  f32.dtype = DType::F32;
  EXPECT_FALSE(planFor(h200, f32).decodeVariant.tailWords);
  EXPECT_FALSE(planFor(parseDevicePreset("lavapipe"), decodeShape(1, 32, 8, 65536, 80)).decodeVariant.tailWords);
}

TEST(Selector, TailWordsKnobIsRefusedWhereNoSplitLeavesWholeLoadsAndWords) {
  // f32 rows, and two layouts asked for at once, are refused by name.
  const DeviceInfo h200 = parseDevicePreset("h200");
  CallShape f32 = decodeShape(1, 32, 8, 4096, 80);
  f32.dtype = DType::F32;
  EXPECT_THROW(
      {
        try {
          planFor(h200, f32, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TAIL_WORDS", "1"}}));
        } catch (const UserError& e) {
          EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_TAIL_WORDS"));
          EXPECT_THAT(e.what(), HasSubstr("f32 K/V"));
          throw;
        }
      },
      UserError);
  EXPECT_THROW(planFor(h200, decodeShape(1, 32, 8, 4096, 80),
                       AttentionOptions::fromEnvironment(
                           {{"FOUNDRY_FA_DECODE_TAIL_WORDS", "1"}, {"FOUNDRY_FA_DECODE_IDLE_LANES", "1"}})),
               UserError);
}

TEST(Selector, ScoresAreScatteredOnlyWhereTheTuningTableOrTheKnobAsks) {
  // The Hopper rows for 16-bit rows of 80 (above) and 8-bit rows of 128 (SelectorFormats) sum each
  // score of a step once per key; other rows and other devices keep every lane summing every score.
  const DeviceInfo h200 = parseDevicePreset("h200");
  for (const std::uint32_t d : {64u, 96u, 128u}) {
    EXPECT_FALSE(planFor(h200, decodeShape(1, 32, 8, 65536, d)).decodeVariant.scatter) << d;
  }
  EXPECT_FALSE(planFor(parseDevicePreset("lavapipe"), decodeShape(1, 32, 8, 65536, 80)).decodeVariant.scatter);
  // The knob turns it off, or on where the tuning table does not.
  const auto with = [&](std::uint32_t d, const char* value) {
    const AttentionOptions o = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCATTER", value}});
    return planFor(h200, decodeShape(1, 32, 8, 65536, d), o).decodeVariant;
  };
  EXPECT_FALSE(with(80, "0").scatter);
  EXPECT_TRUE(with(80, "0").tailWords);
  EXPECT_TRUE(with(64, "1").scatter);
}

TEST(Selector, ScatterKnobIsRefusedWhereALaneCannotKeepScoresOfOneHead) {
  // MHA (one head per workgroup) over 16 lanes with 4 steps: more lanes than scores per step; and the
  // scalar variant, whose lanes share no scores.
  const DeviceInfo h200 = parseDevicePreset("h200");
  const auto refused = [&](const CallShape& shape, std::map<std::string, std::string> env, const char* why) {
    env["FOUNDRY_FA_DECODE_SCATTER"] = "1";
    try {
      planFor(h200, shape, AttentionOptions::fromEnvironment(env));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_SCATTER"));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused(decodeShape(1, 32, 32, 4096, 128), {{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "2"}},
          "16 lanes for 1 heads x 4 steps");
  refused(decodeShape(1, 32, 8, 4096, 128), {{"FOUNDRY_FA_DECODE_SCALAR", "1"}}, "scalar");
}

TEST(Selector, DecodeTakesSixteenByteLoadsOnlyForLongRangesOfF16OnAGpu) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  // Batch 8, kv 16384: 2 splits of 8192 keys per workgroup.
  const CallShape longRanges = decodeShape(8, 32, 8, 16384, 128);
  // The subgroup kernel's rule (the H200 plans these f16 rows on the tensor cores).
  const AttentionPlan wide = planFor(h200, longRanges, subgroupDecode());
  EXPECT_EQ(wide.decodeVariant.vecWidth, 8u);
  EXPECT_EQ(wide.decodeVariant.unroll, 8u);
  EXPECT_EQ(wide.kvChunk, 8192u);
  EXPECT_EQ(wide.grid, (Grid{2, 8, 8}));
  EXPECT_THAT(wide, HasDecision("vector width", HasSubstr("4096 keys per workgroup")));
  EXPECT_THAT(wide, HasDecision("unroll", HasSubstr("4096 keys per workgroup")));
  // Batch 1, kv 16384: 16 splits of 1024 keys keep 8-byte loads and unroll 4.
  const AttentionPlan shortRanges = planFor(h200, decodeShape(1, 32, 8, 16384, 128), subgroupDecode());
  EXPECT_EQ(shortRanges.kvChunk, 1024u);
  EXPECT_EQ(shortRanges.decodeVariant.vecWidth, 4u);
  EXPECT_EQ(shortRanges.decodeVariant.unroll, 4u);
  // A knob on either keeps the other at its default.
  const AttentionPlan unroll4 =
      planFor(h200, longRanges, subgroupDecode({{"FOUNDRY_FA_DECODE_UNROLL", "4"}}));
  EXPECT_EQ(unroll4.decodeVariant.vecWidth, 4u);
  EXPECT_EQ(unroll4.decodeVariant.unroll, 4u);
  const AttentionPlan vec8 =
      planFor(h200, decodeShape(1, 32, 8, 16384, 128), subgroupDecode({{"FOUNDRY_FA_DECODE_VEC", "8"}}));
  EXPECT_EQ(vec8.decodeVariant.vecWidth, 8u);
  EXPECT_EQ(vec8.decodeVariant.unroll, 4u);
  // f32 K/V: 8 elements are 32 bytes; the knob is refused by name.
  CallShape f32 = longRanges;
  f32.dtype = DType::F32;
  EXPECT_EQ(planFor(h200, f32).decodeVariant.vecWidth, 4u);
  EXPECT_THAT([&] { planFor(h200, f32, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_VEC", "8"}})); },
              ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_VEC"), HasSubstr("f16"),
                                             HasSubstr("accepted on this device: 1, 2, 4"))));
  // bf16 K/V load like f16: 16-byte loads over long ranges.
  CallShape bf16 = longRanges;
  bf16.dtype = DType::BF16;
  EXPECT_EQ(planFor(h200, bf16).decodeVariant.vecWidth, 8u);
  EXPECT_EQ(planFor(h200, bf16).decodeVariant.unroll, wide.decodeVariant.unroll);
  // A CPU driver keeps one step in flight whatever the length.
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  const DecodeVariant cpu = planFor(lavapipe, longRanges).decodeVariant;
  EXPECT_EQ(cpu.unroll, 1u);
  EXPECT_NE(cpu.vecWidth, 8u);
}

TEST(Selector, ASplitKnobNeverLeavesAnEmptyTrailingSplit) {
  const DeviceInfo device = parseDevicePreset("h200");
  // 7 splits of 20 keys would be 3 keys each, but chunks are whole granules of 4 warps x 2 keys
  // (unroll 1): chunks of 8 keys give 3 splits, the last one holding 4 keys.
  const AttentionPlan plan = planFor(device, decodeShape(1, 32, 8, 20, 128),
                                     AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "7"},
                                                                      {"FOUNDRY_FA_DECODE_WARPS", "4"},
                                                                      {"FOUNDRY_FA_DECODE_UNROLL", "1"}}));
  EXPECT_EQ(plan.kvChunk, 8u);
  EXPECT_EQ(plan.splits, 3u);
  EXPECT_EQ(plan.grid.x, 3u);
}

TEST(Selector, PrefillKnobsBeatTheHeuristics) {
  const DeviceInfo device = parseDevicePreset("h200");
  const CallShape shape = prefillShape(8, 8, 128, 16384, 128);
  const auto options = AttentionOptions::fromEnvironment(
      {{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}, {"FOUNDRY_FA_PREFILL_WARPS", "2"}, {"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}});
  const AttentionPlan plan = planFor(device, shape, options);
  const PrefillVariant& v = plan.prefillVariant;
  EXPECT_FALSE(v.coopMat);
  EXPECT_EQ(v.warps, 2u);
  EXPECT_EQ(plan.splits, 3u);
  EXPECT_EQ(plan.kvChunk, chunked(16384, 3, v.keysPerTile).chunk);
  EXPECT_EQ(plan.grid, prefillGrid(shape, ceilDiv(128, v.rowsPerWorkgroup()) * 3));
  EXPECT_THAT(plan, HasDecision("variant", HasSubstr("FOUNDRY_FA_PREFILL_COOPMAT")));
  EXPECT_THAT(plan, HasDecision("warps", HasSubstr("FOUNDRY_FA_PREFILL_WARPS")));
  EXPECT_THAT(plan, HasDecision("split-k", HasSubstr("FOUNDRY_FA_PREFILL_SPLIT_K")));
}

TEST(Selector, PrefillKeysPerTileKnobSetsTheTileOrIsRefusedByName) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const CallShape shape = prefillShape(32, 8, 8192, 8192, 128);
  // The default on the H200 at D128: 32 keys in two staging buffers (the tuning table's Hopper row);
  // 64 keys fit only once in 48 KiB.
  const AttentionPlan automatic = planFor(h200, shape);
  EXPECT_EQ(automatic.prefillVariant.keysPerTile, 32u);
  EXPECT_EQ(automatic.prefillVariant.stages, 2u);
  const AttentionPlan wide = planFor(h200, shape, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "64"}}));
  EXPECT_EQ(wide.prefillVariant.keysPerTile, 64u);
  EXPECT_EQ(wide.prefillVariant.stages, 1u);
  EXPECT_THAT(wide, HasDecision("tile", HasSubstr("FOUNDRY_FA_PREFILL_KEYS_PER_TILE")));
  // Elsewhere (an Ada card, D96 on the H200) 64 keys stay the first choice.
  EXPECT_EQ(planFor(parseDevicePreset("ada"), shape).prefillVariant.keysPerTile, 64u);
  EXPECT_EQ(planFor(h200, prefillShape(32, 8, 8192, 8192, 96)).prefillVariant.keysPerTile, 64u);
  // 128 keys of D128 f32 tiles do not fit lavapipe's 32 KiB even once: the knob is named, not shrunk.
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  CallShape f32 = prefillShape(4, 4, 256, 256, 128);
  f32.dtype = DType::F32;
  EXPECT_THAT([&] {
    planFor(lavapipe, f32, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "128"}}));
  }, ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_PREFILL_KEYS_PER_TILE"), HasSubstr("128"))));
}

TEST(Selector, PrefillStagesKnobSetsTheStagingOrIsRefusedByName) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const CallShape shape = prefillShape(32, 8, 8192, 8192, 128);
  const auto knobs = [](std::map<std::string, std::string> env) { return AttentionOptions::fromEnvironment(env); };
  // 4 subgroups of D128 with 32-key tiles: two staging buffers by default, one when asked.
  const AttentionPlan one = planFor(h200, shape, knobs({{"FOUNDRY_FA_PREFILL_WARPS", "4"},
                                                        {"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "32"},
                                                        {"FOUNDRY_FA_PREFILL_STAGES", "1"}}));
  EXPECT_EQ(one.prefillVariant.stages, 1u);
  EXPECT_EQ(one.prefillVariant.keysPerTile, 32u);
  EXPECT_THAT(one, HasDecision("tile", HasSubstr("FOUNDRY_FA_PREFILL_STAGES")));
  // Two buffers of 64 keys do not fit in 48 KiB: forced, the tile narrows to 32 keys.
  EXPECT_EQ(planFor(h200, shape, knobs({{"FOUNDRY_FA_PREFILL_STAGES", "2"}})).prefillVariant.keysPerTile, 32u);
  // ... and with the width forced too, the knob is named.
  EXPECT_THAT([&] {
    planFor(h200, shape, knobs({{"FOUNDRY_FA_PREFILL_STAGES", "2"}, {"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "128"},
                                {"FOUNDRY_FA_PREFILL_WARPS", "8"}}));
  }, ::testing::ThrowsMessage<UserError>(HasSubstr("FOUNDRY_FA_PREFILL_STAGES")));
  EXPECT_THROW(knobs({{"FOUNDRY_FA_PREFILL_STAGES", "3"}}), UserError);
}

TEST(Selector, PrefillLoaderKnobAddsALoaderSubgroupOrIsRefusedByName) {
  const CallShape shape = prefillShape(32, 8, 8192, 8192, 128);
  const AttentionOptions loader = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_LOADER", "1"}});
  const AttentionPlan plan = planFor(parseDevicePreset("h200"), shape, loader);
  const PrefillVariant& v = plan.prefillVariant;
  EXPECT_TRUE(v.loader);
  EXPECT_EQ(v.stages, 2u);
  EXPECT_EQ(v.subgroups(), v.warps + 1);
  EXPECT_EQ(v.workgroupSize(32), (v.warps + 1) * 32);
  EXPECT_EQ(v.unusableReason(32), "");
  EXPECT_THAT(plan, HasDecision("loader", HasSubstr("FOUNDRY_FA_PREFILL_LOADER")));
  EXPECT_FALSE(planFor(parseDevicePreset("h200"), shape).prefillVariant.loader);  // off unless asked
  // Lavapipe runs the subgroup variant, which has no loader: the knob is named.
  EXPECT_THAT([&] { planFor(parseDevicePreset("lavapipe"), shape, loader); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("FOUNDRY_FA_PREFILL_LOADER")));
  // ... as it is with the softmax through shared memory.
  AttentionOptions shared = loader;
  shared.faPrefillRegisterSoftmax = Force::Off;
  EXPECT_THAT([&] { planFor(parseDevicePreset("h200"), shape, shared); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("softmax in registers")));
}

TEST(Selector, DecodeSplitKMergesInTheLastWorkgroupUnlessTheKnobAsksForTheReduceKernel) {
  const DeviceInfo device = parseDevicePreset("h200");
  const CallShape shape = decodeShape(1, 32, 8, 16384, 128);
  const AttentionPlan merged = planFor(device, shape);
  ASSERT_GT(merged.splits, 1u);
  EXPECT_TRUE(merged.decodeVariant.fusedReduce);
  EXPECT_FALSE(merged.reduceKernel());
  EXPECT_THAT(merged, HasDecision("split-k merge", HasSubstr("one dispatch")));
  const AttentionPlan separate =
      planFor(device, shape, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  EXPECT_EQ(separate.splits, merged.splits);
  EXPECT_FALSE(separate.decodeVariant.fusedReduce);
  EXPECT_TRUE(separate.reduceKernel());
  EXPECT_THAT(separate, HasDecision("split-k merge", HasSubstr("FOUNDRY_FA_DECODE_FUSED_REDUCE")));
  EXPECT_EQ(merged.scratchBytes, separate.scratchBytes + 8 * 4);  // one arrival counter per head group
  // Forced splits beyond one wave: each workgroup's hand-over would hold a compute unit that a later
  // workgroup waits for, so a reduce kernel merges unless the knob says otherwise.
  const AttentionPlan waves = planFor(device, shape, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "32"}}));
  EXPECT_EQ(waves.splits, 32u);
  EXPECT_TRUE(waves.reduceKernel());
  EXPECT_THAT(waves, HasDecision("split-k merge", HasSubstr("more than one wave")));
  const AttentionPlan forced = planFor(device, shape, AttentionOptions::fromEnvironment(
      {{"FOUNDRY_FA_DECODE_SPLIT_K", "32"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}}));
  EXPECT_FALSE(forced.reduceKernel());
  // Without a split there is nothing to merge, whatever the knob says.
  const AttentionPlan short_ = planFor(device, decodeShape(1, 32, 8, 200, 128),
                                       AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}}));
  EXPECT_EQ(short_.splits, 1u);
  EXPECT_FALSE(short_.decodeVariant.fusedReduce);
  EXPECT_FALSE(short_.reduceKernel());
}

TEST(Selector, TheLastWorkgroupBatchesItsMergesLoadsOnGpusAndFoldsEachElementInALoopOnLavapipe) {
  const CallShape shape = decodeShape(1, 32, 8, 16384, 128);  // GQA 4: 512 output elements a head group
  const auto knobs = [](std::initializer_list<std::pair<const char*, const char*>> set) {
    std::map<std::string, std::string> env{{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "4"}};
    for (const auto& [k, value] : set) env[k] = value;
    return AttentionOptions::fromEnvironment(env);
  };
  const DeviceInfo h200 = parseDevicePreset("h200");
  const AttentionPlan gpu = planFor(h200, shape);
  ASSERT_TRUE(gpu.decodeVariant.fusedReduce) << gpu.describe();
  EXPECT_TRUE(gpu.decodeVariant.batchedMerge);
  EXPECT_THAT(gpu.decodeVariant.key(), HasSubstr("_split_merged_bm"));
  ASSERT_NE(findDecision(gpu, "split-k merge loads"), nullptr);
  EXPECT_THAT(findDecision(gpu, "split-k merge loads")->value, HasSubstr("batched: 2 elements an invocation"));
  EXPECT_FALSE(planFor(h200, shape, knobs({{"FOUNDRY_FA_DECODE_BATCHED_MERGE", "0"}})).decodeVariant.batchedMerge);

  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  const AttentionPlan cpu = planFor(lavapipe, shape, knobs({}));
  ASSERT_TRUE(cpu.decodeVariant.fusedReduce);
  EXPECT_FALSE(cpu.decodeVariant.batchedMerge);
  EXPECT_THAT(cpu.decodeVariant.key(), ::testing::EndsWith("_split_merged"));
  ASSERT_NE(findDecision(cpu, "split-k merge loads"), nullptr);
  EXPECT_THAT(findDecision(cpu, "split-k merge loads")->value, HasSubstr("folds its splits in a loop"));
  EXPECT_THAT(cpu, HasDecision("split-k merge loads", HasSubstr("lavapipe")));  // the tuning row
  const AttentionPlan forced = planFor(lavapipe, shape, knobs({{"FOUNDRY_FA_DECODE_BATCHED_MERGE", "1"}}));
  EXPECT_TRUE(forced.decodeVariant.batchedMerge);
  EXPECT_THAT(forced, HasDecision("split-k merge loads", HasSubstr("FOUNDRY_FA_DECODE_BATCHED_MERGE")));

  // MHA at D64 on 256 invocations: one element an invocation, nothing to batch; the knob is refused.
  const CallShape mha = decodeShape(1, 32, 32, 16384, 64);
  const AttentionPlan one = planFor(h200, mha, knobs({}));
  ASSERT_TRUE(one.decodeVariant.fusedReduce);
  EXPECT_FALSE(one.decodeVariant.batchedMerge);
  EXPECT_THAT(one, HasDecision("split-k merge loads", HasSubstr("nothing to batch")));
  EXPECT_THAT([&] { planFor(h200, mha, knobs({{"FOUNDRY_FA_DECODE_BATCHED_MERGE", "1"}})); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_BATCHED_MERGE"),
                                                        HasSubstr("leaves each invocation at most one"))));
}

TEST(Selector, AClaimedEndShortensEachSplitsOwnChunkInWholeGranules) {
  // H200, f16 D128 kv 65536: 16 splits of 4096 keys on the tensor cores (granules of 8 x 16 keys). 300
  // claimed keys leave each split 3712 of its own (4096 - 300 rounded down to 128) and the head group
  // 65536 - 16 x 3712 = 6144 claimed a round of 32 keys at a time.
  const DeviceInfo h200 = parseDevicePreset("h200");
  const CallShape shape = decodeShape(1, 32, 8, 65536, 128);
  const auto knobs = [](const char* keys) {
    return AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", keys}});
  };
  const AttentionPlan plan = planFor(h200, shape);
  ASSERT_TRUE(plan.decodeVariant.tensorCores && plan.decodeVariant.fusedReduce) << plan.describe();
  EXPECT_FALSE(plan.decodeVariant.claims);  // the tuning table claims nothing
  const AttentionPlan claimed = planFor(h200, shape, knobs("300"));
  EXPECT_EQ(claimed.splits, plan.splits);
  EXPECT_EQ(plan.kvChunk, 4096u);
  EXPECT_EQ(claimed.kvChunk, 3712u);
  EXPECT_TRUE(claimed.decodeVariant.claims);
  EXPECT_THAT(claimed.decodeVariant.key(), ::testing::EndsWith("_split_merged_bm_claims"));
  ASSERT_NE(findDecision(claimed, "claimed end"), nullptr);
  EXPECT_THAT(findDecision(claimed, "claimed end")->value, HasSubstr("3712 keys a split of its own, then 6144 keys"));
  EXPECT_THAT(claimed, HasDecision("claimed end", HasSubstr("FOUNDRY_FA_DECODE_CLAIMED_KEYS")));
  EXPECT_EQ(claimed.scratchBytes, plan.scratchBytes + 8u * 4u);  // a claims counter beside each arrival counter
  EXPECT_FALSE(planFor(h200, shape, knobs("0")).decodeVariant.claims);

  // Refused by name where nothing would be claimed right: no merging workgroup, no split, more keys
  // than a split holds, the scalar kernel.
  const auto refused = [&](const CallShape& s, std::map<std::string, std::string> env, const char* why) {
    EXPECT_THAT([&] { planFor(h200, s, AttentionOptions::fromEnvironment(env)); },
                ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_CLAIMED_KEYS"), HasSubstr(why))))
        << why;
  };
  refused(shape, {{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "300"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}},
          "where the last workgroup merges the splits");
  refused(shape, {{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "300"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "1"}},
          "where the last workgroup merges the splits");
  refused(shape, {{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "4096"}}, "leave none of its own");
  refused(shape, {{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "8"}, {"FOUNDRY_FA_DECODE_SCALAR", "1"}}, "scalar");

  // The subgroup kernel on lavapipe: its steps are the granules; a subgroup that claimed the whole end
  // must stay within llvmpipe's loop limit, or the knob is refused.
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  const CallShape small = decodeShape(1, 8, 2, 3001, 128);
  const AttentionPlan sub = planFor(lavapipe, small,
                                    AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"},
                                                                       {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"},
                                                                       {"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "100"}}));
  EXPECT_TRUE(sub.decodeVariant.claims && !sub.decodeVariant.tensorCores) << sub.describe();
  EXPECT_EQ(sub.kvChunk % sub.decodeVariant.keyGranule(8), 0u);
  EXPECT_LE(sub.kvChunk, 752u - 100u);
}

TEST(Selector, TheLastWorkgroupsMergeStaysWithinTheLoopLimitsEighthOrAReduceKernelMerges) {
  // Lavapipe, GQA 8 at D128: 32 elements an invocation of 32, each folding 256 splits in a loop:
  // 32 + 2 + 32 x 258 = 8290 passes, over the 8191 that llvmpipe's 65535 leave after the ranges' 7/8.
  const CallShape shape = decodeShape(1, 8, 1, 16384, 128);
  const std::map<std::string, std::string> splits{{"FOUNDRY_FA_DECODE_SPLIT_K", "256"}};
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  DecodeVariant v = planFor(lavapipe, shape, AttentionOptions::fromEnvironment(splits)).decodeVariant;
  ASSERT_EQ(v.heads, 8u);
  v.split = v.fusedReduce = true;
  EXPECT_EQ(v.mergePasses(256, 8), 8290u);
  EXPECT_EQ(v.mergePasses(250, 8), 8098u);
  v.batchedMerge = true;
  EXPECT_EQ(v.mergePasses(256, 8), 18u);  // 16 batches of 16
  EXPECT_EQ(v.mergePasses(3, 8), 3u);     // one batch of 4

  // Where the grid is one wave (a device of many compute units), the merge would be the last
  // workgroup's: too many passes, so the reduce kernel merges.
  const AttentionPlan wide = planFor(parseDevicePreset("lavapipe,cus=4096"), shape, AttentionOptions::fromEnvironment(splits));
  EXPECT_EQ(wide.splits, 256u);
  EXPECT_TRUE(wide.reduceKernel());
  EXPECT_THAT(wide, HasDecision("split-k merge", HasSubstr("8290 loop passes, over the 8191")));
  auto merged = splits;
  merged["FOUNDRY_FA_DECODE_FUSED_REDUCE"] = "1";
  EXPECT_THAT([&] { planFor(lavapipe, shape, AttentionOptions::fromEnvironment(merged)); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_FUSED_REDUCE"),
                                                        HasSubstr("fewer splits"))));
  // Batched, the same merge makes 18 passes.
  merged["FOUNDRY_FA_DECODE_BATCHED_MERGE"] = "1";
  const AttentionPlan batched = planFor(lavapipe, shape, AttentionOptions::fromEnvironment(merged));
  EXPECT_FALSE(batched.reduceKernel());
  EXPECT_TRUE(batched.decodeVariant.batchedMerge);
  merged.erase("FOUNDRY_FA_DECODE_BATCHED_MERGE");
  merged["FOUNDRY_FA_DECODE_SPLIT_K"] = "250";  // 8098 passes in a loop: within the eighth
  EXPECT_FALSE(planFor(lavapipe, shape, AttentionOptions::fromEnvironment(merged)).reduceKernel());
}

TEST(Selector, InvalidKnobValuesAreUserErrorsNamingTheVariableAndTheAcceptedValues) {
  struct Bad {
    const char* knob;
    const char* value;
    const char* accepted;
  };
  for (const Bad& b :
       {Bad{"FOUNDRY_FA_DECODE_WARPS", "3", "auto, 1, 2, 4, 8, 16"},
        Bad{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "0", "auto, 1, 2, 4, ..., 256"},
        Bad{"FOUNDRY_FA_DECODE_VEC", "32", "auto, 1, 2, 4, 8, 16"}, Bad{"FOUNDRY_FA_DECODE_SPLIT_K", "300", "auto or 1..256"},
        Bad{"FOUNDRY_FA_DECODE_TG_OUT", "double", "auto, float, half"},
        Bad{"FOUNDRY_FA_PREFILL_WARPS", "16", "auto, 1, 2, 4, 8"},
        Bad{"FOUNDRY_FA_PREFILL_SPLIT_K", "-1", "auto or 1..256"}, Bad{"FOUNDRY_FA_PREFILL_COOPMAT", "maybe", "0, 1"},
        Bad{"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "48", "auto, 4, 8, 16, 32, 64, 128"},
        Bad{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "sometimes", "0, 1"},
        Bad{"FOUNDRY_DISABLE_FA", "2", "0, 1, true, false"}}) {
    try {
      AttentionOptions::fromEnvironment({{b.knob, b.value}});
      ADD_FAILURE() << b.knob << "=" << b.value << " was accepted";
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr(b.knob));
      EXPECT_THAT(e.what(), AllOf(HasSubstr(std::string("'") + b.value + "'"), HasSubstr(b.accepted)));
    }
  }
}

TEST(Selector, KeysPerWarpBeyondLavapipesSubgroupIsRejectedByName) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto options = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "16"}});
  try {
    planFor(device, decodeShape(1, 32, 8, 1024, 128), options);
    FAIL() << "16 keys per subgroup of 8 was accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "FOUNDRY_FA_DECODE_KEYS_PER_WARP");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("16"), HasSubstr("subgroup size 8"), HasSubstr("powers of two up to 8")));
  }
  // 8 is fine where subgroups have 32 lanes (16 would need 64 elements of q and o per head per lane).
  const DeviceInfo h200 = parseDevicePreset("h200");
  const auto eight = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "8"}});
  EXPECT_EQ(planFor(h200, decodeShape(1, 32, 8, 1024, 128), eight).decodeVariant.keysPerWarp, 8u);
}

TEST(Selector, KeysPerWarpThatNeedTooManyRegistersAreRejectedByName) {
  const DeviceInfo device = parseDevicePreset("h200");
  // 32 keys per subgroup of 32 leave 64 elements of each D64 key per lane, for 8 heads: 512 > 256.
  const auto options = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "32"}});
  EXPECT_THAT([&] { planFor(device, decodeShape(1, 8, 1, 1024, 64), options); },
              ::testing::ThrowsMessage<UserError>(
                  AllOf(HasSubstr("FOUNDRY_FA_DECODE_KEYS_PER_WARP"), HasSubstr("too many registers"))));
  // One key per subgroup leaves 2 elements per lane: not a whole vector of 4.
  const auto narrow =
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "1"}, {"FOUNDRY_FA_DECODE_VEC", "4"}});
  EXPECT_THAT([&] { planFor(device, decodeShape(1, 8, 8, 1024, 64), narrow); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_KEYS_PER_WARP"),
                                                        HasSubstr("not a multiple of the vector width 4"))));
}

TEST(Selector, CooperativeMatricesForcedOnWhereThereAreNoneIsUnsupported) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto options = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}});
  EXPECT_THAT([&] { planFor(device, prefillShape(8, 8, 64, 64, 128), options); },
              ::testing::ThrowsMessage<UnsupportedError>(AllOf(
                  HasSubstr("FOUNDRY_FA_PREFILL_COOPMAT=1"), HasSubstr("llvmpipe (preset)"), HasSubstr("auto or 0"))));
  // On the H200 it is honoured for f16 and refused for f32, naming the dtype.
  const DeviceInfo h200 = parseDevicePreset("h200");
  EXPECT_TRUE(planFor(h200, prefillShape(8, 8, 64, 64, 128), options).prefillVariant.coopMat);
  EXPECT_THAT([&] { planFor(h200, prefillShape(8, 8, 64, 64, 128, DType::F32), options); },
              ::testing::ThrowsMessage<UnsupportedError>(HasSubstr("f32")));
}

TEST(Selector, WarpKnobsBeyondTheWorkgroupLimitAreRejectedByName) {
  DeviceInfo device = parseDevicePreset("small");
  device.maxWorkgroupInvocations = 64u;
  EXPECT_THAT(
      [&] {
        planFor(device, decodeShape(1, 8, 8, 1024, 64),
                AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "8"}}));
      },
      ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_WARPS"), HasSubstr("1..4"))));
  EXPECT_THAT(
      [&] {
        planFor(device, prefillShape(8, 8, 64, 64, 64),
                AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_WARPS", "8"}}));
      },
      ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_PREFILL_WARPS"), HasSubstr("1..4"))));
  // Without knobs the heuristics stay inside the limit.
  EXPECT_LE(planFor(device, decodeShape(1, 8, 8, 1024, 64)).decodeVariant.workgroupSize(16), 64u);
}

// ---- a small GPU without fp16 arithmetic ----------------------------------------------------------

TEST(Selector, SmallGpuWithoutFp16KeepsFloatPartialsAndFloatTiles) {
  const DeviceInfo device = parseDevicePreset("small");
  ASSERT_FALSE(device.fp16Arithmetic);
  const AttentionPlan decode = planFor(device, decodeShape(1, 32, 8, 4096, 128));
  EXPECT_EQ(decode.decodeVariant.partial, PartialStorage::Float);
  EXPECT_LE(decode.decodeVariant.sharedBytes(16), 16384u);
  const AttentionPlan prefill = planFor(device, prefillShape(8, 8, 256, 256, 64));
  EXPECT_FALSE(prefill.prefillVariant.coopMat);
  EXPECT_FALSE(prefill.prefillVariant.halfTiles);
  EXPECT_FALSE(prefill.prefillVariant.tilesAreHalf());
  EXPECT_LE(prefill.prefillVariant.sharedBytes(16), 16384u);
  EXPECT_THAT(prefill.prefillVariant.key(), HasSubstr("_f32tiles"));
  EXPECT_THAT(
      [&] {
        planFor(device, decodeShape(1, 32, 8, 4096, 128),
                AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TG_OUT", "half"}}));
      },
      ::testing::ThrowsMessage<UserError>(
          AllOf(HasSubstr("FOUNDRY_FA_DECODE_TG_OUT"), HasSubstr("no fp16"), HasSubstr("auto, float"))));
}

TEST(Selector, SmallGpuServesAGroupOf8WithFewerWarpsInsteadOfFailing) {
  // Llama-3-70B-like GQA (8 query heads per KV head), D128: 4 subgroups of float partials for 8 heads
  // need 20,736 bytes; the device has 16,384 and cannot keep half partials. Fewer subgroups fit.
  const DeviceInfo device = parseDevicePreset("small");
  const AttentionPlan plan = planFor(device, decodeShape(1, 64, 8, 4096, 128));
  const DecodeVariant& v = plan.decodeVariant;
  EXPECT_EQ(v.heads, 8u);
  EXPECT_EQ(v.partial, PartialStorage::Float);
  EXPECT_EQ(v.warps, 2u);
  EXPECT_LE(v.sharedBytes(16), 16384u);
  EXPECT_THAT(plan, HasDecision("warps", HasSubstr("shared memory")));
  // The split follows the smaller granule of 2 warps x 1 key.
  const Split want = decodeRule(4096, 8, 8, 2);
  EXPECT_EQ(plan.splits, want.splits);
  EXPECT_EQ(plan.kvChunk, want.chunk);
  // Asking for 4 warps explicitly is refused, without suggesting half partials the device lacks.
  try {
    planFor(device, decodeShape(1, 64, 8, 4096, 128),
            AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "4"}}));
    FAIL() << "4 warps of float partials for 8 heads were accepted in 16 KiB";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "FOUNDRY_FA_DECODE_WARPS");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("20736"), HasSubstr("16384"), ::testing::Not(HasSubstr("TG_OUT=half"))));
  }
}

TEST(Selector, APrefillTileNoDeviceSharedMemoryHoldsIsUnsupportedNotAKnobError) {
  // Four keys (the narrowest tile) of 1024 f32 values for K and V are 32,800 bytes: no tile fits 16 KiB.
  const DeviceInfo device = parseDevicePreset("small");
  try {
    planFor(device, prefillShape(8, 8, 256, 256, 1024));
    FAIL() << "a D1024 prefill tile was planned in 16 KiB";
  } catch (const UnsupportedError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("head_dim 1024"), HasSubstr("16384"), HasSubstr("SdpaReferenceStep")));
    EXPECT_THAT(std::string(e.what()), ::testing::Not(::testing::EndsWith(": ")));
  }
  // With the warps knob set the same failure names the knob.
  EXPECT_THAT(
      [&] {
        planFor(device, prefillShape(8, 8, 256, 256, 1024),
                AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_WARPS", "1"}}));
      },
      ::testing::ThrowsMessage<UserError>(HasSubstr("FOUNDRY_FA_PREFILL_WARPS")));
}

TEST(Selector, WideF32RowsTakePrefillTilesNarrowerThanTheSubgroup) {
  // D256 f32: one subgroup's width of keys (32) for K and V is 65,792 bytes, over the H200's 48 KiB.
  const DeviceInfo device = parseDevicePreset("h200");
  CallShape shape = prefillShape(8, 8, 256, 256, 256);
  shape.dtype = DType::F32;
  const PrefillVariant v = planFor(device, shape).prefillVariant;
  EXPECT_FALSE(v.coopMat);
  EXPECT_EQ(v.keysPerTile, 16u);
  EXPECT_EQ(v.keysPerLane(32), 1u);
  EXPECT_LE(v.sharedBytes(32), device.maxSharedMemoryBytes);
  // Where a subgroup-wide tile fits it is preferred, even single-buffered with fewer rows.
  shape.headDim = 128;
  EXPECT_EQ(planFor(device, shape).prefillVariant.keysPerTile, 32u);
}

TEST(Selector, ValueRowsNarrowerThanKeyRowsPlanInDecodeAndAreRefusedInPrefill) {
  // DeepSeek's absorbed MLA decode: 16 heads against one latent row of 576, values its first 512.
  const DeviceInfo device = parseDevicePreset("h200");
  AttentionProblem p;
  p.nHeads = 16;
  p.nKvHeads = 1;
  p.kvLen = p.kvCapacity = 4096;
  p.headDim = 576;
  p.valueDim = 512;
  p.valueRow = 576;
  const AttentionPlan plan = Selector::plan(p, device, AttentionOptions());
  const DecodeVariant& v = plan.decodeVariant;
  EXPECT_EQ(v.unusableReason(32), "");
  EXPECT_EQ(v.vDim(), 512u);
  EXPECT_EQ(576 % v.lanesPerKey(32), 0u);
  EXPECT_EQ(512 % v.lanesPerKey(32), 0u);
  EXPECT_THAT(v.key(), HasSubstr("D576v512"));  // the rows' stride is a push constant (KvAccessStage)
  // Rows of 576: 2 heads per workgroup leave registers for 4-element loads of 2 keys a step (the
  // H200: 29.9 us a layer against 284 with 8 heads).
  EXPECT_EQ(v.heads, 2u);
  EXPECT_EQ(v.vecWidth, 4u);
  EXPECT_THAT(plan, HasDecision("heads per workgroup", HasSubstr("tuning table")));
  // Split-K partials are value rows: 512 floats and (m, l) per head and split, plus arrival counters.
  ASSERT_GT(plan.splits, 1u);
  const std::uint64_t counters = v.fusedReduce ? 4ull * (16 / v.heads) : 0;
  EXPECT_EQ(plan.scratchBytes, 16ull * plan.splits * (512 * 4 + 8) + counters);
  p.qLen = 64;
  EXPECT_THAT([&] { Selector::plan(p, device, AttentionOptions()); },
              ::testing::ThrowsMessage<UnsupportedError>(AllOf(HasSubstr("value_dim 512"), HasSubstr("rows of 576"))));
}

TEST(Selector, TheScalarDecodeKeepsFloatPartials) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  EXPECT_THAT(
      [&] {
        planFor(device, decodeShape(1, 32, 8, 1024, 128),
                AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}, {"FOUNDRY_FA_DECODE_TG_OUT", "half"}}));
      },
      ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("FOUNDRY_FA_DECODE_TG_OUT"), HasSubstr("scalar"))));
  // Wide heads shed heads, not subgroups: one partial serves the whole workgroup.
  const AttentionPlan plan = planFor(device, decodeShape(1, 16, 1, 1024, 576),
                                     AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}));
  EXPECT_EQ(plan.decodeVariant.warps, 4u);
  EXPECT_LT(plan.decodeVariant.heads, 8u);
  EXPECT_EQ(plan.decodeVariant.partial, PartialStorage::Float);
}

// ---- reasons --------------------------------------------------------------------------------------

TEST(Selector, EveryDecisionHasAReason) {
  std::vector<AttentionOptions> optionSets = {
      AttentionOptions{},
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}, {"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}),
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "2"},
                                       {"FOUNDRY_FA_DECODE_TG_OUT", "float"},
                                       {"FOUNDRY_FA_PREFILL_SPLIT_K", "2"},
                                       {"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}),
  };
  int planned = 0;
  for (const char* preset : {"h200", "h100", "lavapipe", "small", "amd-rdna3"}) {
    const DeviceInfo device = parseDevicePreset(preset);
    for (const auto& options : optionSets) {
      for (const std::uint32_t d : {64u, 128u}) {
        for (const DType dtype : {DType::F16, DType::F32}) {
          for (const std::uint32_t qLen : {1u, 7u, 512u}) {
            for (const std::uint32_t kvLen : {512u, 20000u}) {
              CallShape s = prefillShape(32, 8, qLen, kvLen, d, dtype);
              SCOPED_TRACE(fmt::format("{} {}", preset, s.str()));
              AttentionPlan plan;
              try {
                plan = planFor(device, s, options);
              } catch (const UnsupportedError& e) {
                // Only prefill tiles a device's shared memory cannot hold may be refused here.
                EXPECT_GT(qLen, 1u) << e.what();
                EXPECT_THAT(e.what(), HasSubstr("shared memory"));
                continue;
              } catch (const UserError& e) {
                // A forced split count may leave lavapipe's 20000 keys past its loop limit.
                EXPECT_GT(device.loopLimit, 0u) << e.what();
                EXPECT_EQ(kvLen, 20000u) << e.what();
                EXPECT_THAT(e.what(), HasSubstr("loop limit"));
                continue;
              }
              ++planned;
              EXPECT_GE(plan.decisions.size(), 4u);
              for (const auto& dec : plan.decisions) {
                EXPECT_FALSE(dec.what.empty());
                EXPECT_FALSE(dec.value.empty()) << dec.what;
                EXPECT_FALSE(dec.reason.empty()) << dec.what << " = " << dec.value;
                EXPECT_THAT(plan.describe(), HasSubstr(dec.what + " = " + dec.value + " (" + dec.reason + ")"));
              }
              EXPECT_NE(findDecision(plan, "split-k"), nullptr);
              EXPECT_NE(findDecision(plan, "variant"), nullptr);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(planned, 300);
}

}  // namespace
}  // namespace foundry

namespace foundry {
namespace {

// ---- KV formats and layouts ------------------------------------------------------------------------

AttentionCall formatCall(test::CallShape s, DType q, DType kv, DType o, bool tokenMajorCache) {
  AttentionCall c = test::shapeCall(s);
  c.q.dtype = q;
  c.o.dtype = o;
  c.k.dtype = c.v.dtype = kv;
  if (tokenMajorCache) {
    const std::int64_t cap = c.k.dim(2);
    for (Tensor* t : {&c.k, &c.v}) {
      *t = Tensor::describe(t->name, kv, {s.batch, cap, s.nKvHeads, s.headDim}, Layout::TokenMajor);
    }
  }
  if (kv == DType::I8) {
    for (Tensor* t : {&c.k, &c.v}) t->scales = std::make_shared<Tensor>(scalesShape(*t));
  }
  return c;
}

TEST(SelectorFormats, Int8OnTheTensorCoresClaimsRoundsOfWholeScaleBlocks) {
  // int8 D128 on the H200: 16 splits of 4096 keys in rounds of a 32-key scale block; 300 claimed keys
  // leave each split 3712 of its own.
  const DeviceInfo h200 = parseDevicePreset("h200");
  const AttentionCall call =
      formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8, DType::F16, false);
  const AttentionPlan plan = Selector::plan(describeCall(call), h200, {});
  EXPECT_TRUE(plan.decodeVariant.tensorCores && !plan.decodeVariant.claims);
  const AttentionPlan claimed = Selector::plan(
      describeCall(call), h200, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "300"}}));
  EXPECT_TRUE(claimed.decodeVariant.tensorCores && claimed.decodeVariant.claims) << claimed.describe();
  EXPECT_EQ(claimed.kvChunk, 3712u);
  EXPECT_EQ(claimed.kvChunk % 32u, 0u);
}

TEST(SelectorFormats, Bf16DecodeLoadsLikeF16AndKeepsItsTypesInTheKernelKey) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const test::CallShape s = test::decodeShape(1, 32, 8, 65536, 128);
  // bf16 keeps the subgroup kernel where f16 takes the tensor cores (its tensor-core route converts each
  // tile as staged and measured slower; it is there when asked), and loads like f16 there.
  const AttentionPlan f16 =
      Selector::plan(describeCall(formatCall(s, DType::F16, DType::F16, DType::F16, false)), h200, subgroupDecode());
  const AttentionPlan bf16 = Selector::plan(describeCall(formatCall(s, DType::BF16, DType::BF16, DType::BF16, false)), h200, {});
  EXPECT_FALSE(bf16.decodeVariant.tensorCores);
  EXPECT_EQ(bf16.decodeVariant.vecWidth, f16.decodeVariant.vecWidth);
  EXPECT_EQ(bf16.decodeVariant.unroll, f16.decodeVariant.unroll);
  EXPECT_EQ(bf16.splits, f16.splits);
  EXPECT_EQ(bf16.decodeVariant.kvAccess().key(), "bf16_w8");
  // Separate types are in the key: two calls that differ only in o's type get two kernels.
  const AttentionPlan f32out = Selector::plan(describeCall(formatCall(s, DType::F16, DType::F16, DType::F32, false)), h200, {});
  EXPECT_NE(f32out.decodeVariant.key(), f16.decodeVariant.key());
  EXPECT_THAT(f32out.decodeVariant.key(), HasSubstr("_of32"));
  // Half partials only for f16 K/V: bf16 values beyond 65504 would overflow them.
  EXPECT_EQ(bf16.decodeVariant.partial, PartialStorage::Float);
}

TEST(SelectorFormats, HopperInt8AndQ8D128DecodeScattersItsScores) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const test::CallShape s = test::decodeShape(1, 32, 8, 65536, 128);
  const AttentionOptions subgroup = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}});
  for (const DType kv : {DType::I8, DType::Q8_0}) {
    const AttentionPlan plan =
        Selector::plan(describeCall(formatCall(s, DType::F16, kv, DType::F16, false)), h200, subgroup);
    EXPECT_TRUE(plan.decodeVariant.scatter) << plan.decodeVariant.key();
    EXPECT_EQ(plan.decodeVariant.lanesPerKey(h200.subgroupSize), 8u) << plan.decodeVariant.key();
  }
  const AttentionPlan f16 =
      Selector::plan(describeCall(formatCall(s, DType::F16, DType::F16, DType::F16, false)), h200, {});
  EXPECT_FALSE(f16.decodeVariant.scatter) << f16.decodeVariant.key();
}

TEST(SelectorFormats, PrefillTakesCooperativeMatricesForF16OrAllBf16Operands) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const test::CallShape s = test::prefillShape(32, 8, 1024, 1024);
  EXPECT_TRUE(Selector::plan(describeCall(formatCall(s, DType::F16, DType::F16, DType::F32, false)), h200, {})
                  .prefillVariant.coopMat);  // f32 output from f16 inputs: still tensor cores
  for (const DType kv : {DType::I8, DType::Q8_0}) {  // dequantized to f16 as they are staged
    const AttentionPlan plan = Selector::plan(describeCall(formatCall(s, DType::F16, kv, DType::F16, false)), h200, {});
    EXPECT_TRUE(plan.prefillVariant.coopMat) << dtypeName(kv);
    EXPECT_EQ(plan.prefillVariant.kvAccess().key(), fmt::format("{}v1_w8", dtypeName(kv)));
  }
  for (const auto& [q, kv] : {std::pair{DType::BF16, DType::BF16}, std::pair{DType::F16, DType::BF16},
                              std::pair{DType::F32, DType::F16}}) {
    const AttentionPlan plan = Selector::plan(describeCall(formatCall(s, q, kv, DType::F16, false)), h200, {});
    EXPECT_FALSE(plan.prefillVariant.coopMat) << dtypeName(q) << " " << dtypeName(kv);
    EXPECT_FALSE(plan.prefillVariant.tilesAreHalf());  // staged as f32: every bf16 value exactly
    EXPECT_THAT(plan, HasDecision("variant", HasSubstr("coopmat2 matrices")));
  }
  // Where coopmat2 matrices take bf16 operands, bf16 q, K and V multiply on them as stored; mixed types do not.
  const DeviceInfo bf16 = parseDevicePreset("h200,cm2=1,cm2-bf16=1");
  const AttentionPlan both = Selector::plan(describeCall(formatCall(s, DType::BF16, DType::BF16, DType::F32, false)), bf16, {});
  EXPECT_TRUE(both.prefillVariant.coopMat && both.prefillVariant.coopMat2) << both.describe();
  const AttentionPlan mixed = Selector::plan(describeCall(formatCall(s, DType::F16, DType::BF16, DType::F16, false)), bf16, {});
  EXPECT_FALSE(mixed.prefillVariant.coopMat) << mixed.describe();
  EXPECT_THROW(Selector::plan(describeCall(formatCall(s, DType::BF16, DType::BF16, DType::BF16, false)), h200,
                              AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}})),
               UnsupportedError);
}

TEST(SelectorFormats, TokenMajorCachesPassTheirRowStrideAndKeepWideLoads) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const AttentionCall call = formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::F16, DType::F16, true);
  const AttentionProblem p = describeCall(call);
  EXPECT_EQ(p.kvAlign, 8u);
  EXPECT_EQ(p.valueRow, 8u * 128u);
  EXPECT_EQ(Selector::plan(p, h200, {}).decodeVariant.vecWidth, 8u);
  // Rows 68 elements apart (a view inside wider rows): loads no wider than 4 elements.
  AttentionCall odd = test::shapeCall(test::decodeShape(1, 4, 1, 300, 64));
  for (Tensor* t : {&odd.k, &odd.v}) {
    t->strides = {300 * 68, 300 * 68, 68, 1};
  }
  const AttentionProblem q = describeCall(odd);
  EXPECT_EQ(q.kvAlign, 4u);
  const DecodeVariant v = Selector::plan(q, h200, {}).decodeVariant;
  EXPECT_LE(v.vecWidth, 4u);
  EXPECT_EQ(v.unusableReason(32), "");
}

TEST(SelectorFormats, EightBitRowsTakeSixteenCodeLoadsWithFourStepsInFlight) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const test::CallShape s = test::decodeShape(1, 32, 8, 65536, 128);
  // The subgroup kernel's plans (int8 D128 takes the tensor cores unless the knob says 0).
  const AttentionOptions subgroup = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}});
  for (const DType kv : {DType::I8, DType::Q8_0}) {
    SCOPED_TRACE(dtypeName(kv));
    const AttentionPlan plan =
        Selector::plan(describeCall(formatCall(s, DType::F16, kv, DType::F16, false)), h200, subgroup);
    const DecodeVariant& v = plan.decodeVariant;
    // The H200's int8 plans: 16 codes per load, 4 keys per subgroup step, 4 steps in flight (85.5 us,
    // against 91.8 with 8 codes and 8 steps); 16 codes per lane hold twice the q and o registers, and
    // 8 steps of them spill.
    EXPECT_EQ(v.vecWidth, 16u);
    EXPECT_EQ(v.keysPerWarp, 4u);
    EXPECT_EQ(v.unroll, 4u);
    EXPECT_EQ(v.kvAccess().key(), fmt::format("{}v1_w16", dtypeName(kv)));
    EXPECT_THAT(plan, HasDecision("vector width", HasSubstr("4096 keys per workgroup")));
    EXPECT_EQ(v.unusableReason(h200.subgroupSize), "");
    EXPECT_EQ(v.partial, PartialStorage::Float);
    // int8's codes are multiplied in packed f16, each step's scales read once (61.7 us against 78.2);
    // q8_0 keeps a scale in every row, so its steps share none.
    EXPECT_EQ(v.halfProducts, kv == DType::I8);
    EXPECT_EQ(v.stepScales, kv == DType::I8);
    // 8-bit rows of 128 skip a rescale by exactly 1 (int8: 60.2 against 61.7 us; 106.1 against 111.5
    // at B8).
    EXPECT_TRUE(v.lazyRescale);
  }
  // Widths an 8-bit load can take, down to one code; none wider than 16.
  for (const std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const AttentionPlan plan =
        Selector::plan(describeCall(formatCall(s, DType::F16, DType::I8, DType::F16, false)), h200,
                       AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_VEC", std::to_string(w)}}));
    EXPECT_EQ(plan.decodeVariant.vecWidth, w);
  }
  EXPECT_THROW(Selector::plan(describeCall(formatCall(s, DType::F16, DType::F16, DType::F16, false)), h200,
                              AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_VEC", "16"}})),
               UserError);
  // The register model: 16 codes per lane with 8 steps in flight do not fit, with 4 they do.
  DecodeVariant wide =
      Selector::plan(describeCall(formatCall(s, DType::F16, DType::I8, DType::F16, false)), h200, subgroup).decodeVariant;
  wide.keysPerWarp = 4, wide.vecWidth = 16, wide.unroll = 8;
  EXPECT_THAT(wide.unusableReason(32), HasSubstr("too many registers"));
  wide.unroll = 4;
  EXPECT_EQ(wide.unusableReason(32), "");
  // lavapipe: subgroups of 8 split a D64 row into 16-code loads, 4 lanes a key.
  const AttentionPlan cpu = Selector::plan(
      describeCall(formatCall(test::decodeShape(2, 8, 2, 300, 64), DType::F16, DType::I8, DType::F16, false)),
      parseDevicePreset("lavapipe"), {});
  EXPECT_EQ(cpu.decodeVariant.vecWidth, 16u);
  EXPECT_EQ(cpu.decodeVariant.keysPerWarp, 2u);
  EXPECT_EQ(cpu.decodeVariant.unusableReason(8), "");
}

TEST(SelectorFormats, QuantizedCachesNeedTheirBlockGeometry) {
  const test::CallShape s = test::decodeShape(1, 4, 1, 300, 64);
  AttentionCall noScales = formatCall(s, DType::F16, DType::I8, DType::F16, false);
  noScales.k.scales.reset();
  EXPECT_THAT([&] { describeCall(noScales); }, ThrowsMessage<UserError>(HasSubstr("has no scales tensor")));
  AttentionCall wrongScales = formatCall(s, DType::F16, DType::I8, DType::F16, false);
  wrongScales.v.scales = std::make_shared<Tensor>(Tensor::describe("s", DType::F16, {1, 1, 9, 1}, Layout::KvCache));
  EXPECT_THAT([&] { describeCall(wrongScales); }, ThrowsMessage<UserError>(HasSubstr("f16 [1, 1, 10, 2] kv-cache")));
  AttentionCall q8 = formatCall(test::decodeShape(1, 4, 1, 300, 48), DType::F16, DType::Q8_0, DType::F16, false);
  EXPECT_THAT([&] { describeCall(q8); }, ThrowsMessage<UserError>(HasSubstr("whole blocks of 32 values, but its head_dim is 48")));
  AttentionCall int8q = formatCall(s, DType::I8, DType::I8, DType::F16, false);
  EXPECT_THAT([&] { describeCall(int8q); }, ThrowsMessage<UserError>(HasSubstr("accepted: f16, bf16, f32")));
}

TEST(SelectorFormats, LazyRescaleWhereTheTuningTableMeasuredIt) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const auto plan = [&](std::uint32_t d, DType kv, std::map<std::string, std::string> env, const DeviceInfo& device) {
    return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, d), DType::F16, kv, DType::F16,
                                                  false)),
                          device, AttentionOptions::fromEnvironment(env));
  };
  // The H200's int8 rows of 96 and more skip a rescale by exactly 1, and f16 rows of 256 (137 against
  // 150 us); int8 D64 (38.0 both ways) and f16 D64 and D128 (73.4 against 71.0) do not.
  // (int8 D128 with the subgroup kernel: the tensor cores are the plan there.)
  for (const std::uint32_t d : {96u, 128u, 256u}) {
    const AttentionPlan p = plan(d, DType::I8, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, h200);
    EXPECT_TRUE(p.decodeVariant.lazyRescale) << d;
    EXPECT_THAT(p.decodeVariant.key(), HasSubstr("_lr_")) << d;
    EXPECT_THAT(p, HasDecision("rescale", HasSubstr("tuning table")));
  }
  EXPECT_FALSE(plan(64, DType::I8, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, h200).decodeVariant.lazyRescale);
  for (const std::uint32_t d : {64u, 128u}) {
    const DecodeVariant v = plan(d, DType::F16, {}, h200).decodeVariant;
    EXPECT_FALSE(v.lazyRescale) << d;
    EXPECT_THAT(v.key(), ::testing::Not(HasSubstr("_lr"))) << d;
  }
  EXPECT_TRUE(plan(256, DType::F16, {}, h200).decodeVariant.lazyRescale);
  EXPECT_FALSE(plan(256, DType::F16, {}, parseDevicePreset("lavapipe")).decodeVariant.lazyRescale);
  // The knob takes it anywhere a subgroup votes, and leaves it.
  EXPECT_TRUE(plan(128, DType::F16, {{"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}}, parseDevicePreset("lavapipe"))
                  .decodeVariant.lazyRescale);
  EXPECT_FALSE(plan(128, DType::I8, {{"FOUNDRY_FA_DECODE_LAZY_RESCALE", "0"}}, h200).decodeVariant.lazyRescale);
  // Without a subgroup vote the tuning table's choice falls away, and the knob is refused by name.
  DeviceInfo noVote = h200;
  noVote.subgroupVote = false;
  EXPECT_FALSE(plan(128, DType::I8, {}, noVote).decodeVariant.lazyRescale);
  try {
    plan(128, DType::I8, {{"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}}, noVote);
    ADD_FAILURE() << "accepted without a subgroup vote";
  } catch (const UserError& e) {
    EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_LAZY_RESCALE"));
    EXPECT_THAT(e.what(), HasSubstr("the device has no subgroup vote"));
  }
  // The scalar variant keeps one running maximum per workgroup: nothing to vote on.
  try {
    plan(128, DType::F16, {{"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}, {"FOUNDRY_FA_DECODE_SCALAR", "1"}}, h200);
    ADD_FAILURE() << "accepted with the scalar variant";
  } catch (const UserError& e) {
    EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_LAZY_RESCALE"));
  }
}

// Batch 1 decode of kv 65536 with f16 q and output, K/V of `kv` in rows of d, on the h200 preset.
AttentionPlan planOnH200(DType kv, std::uint32_t d, const std::map<std::string, std::string>& env) {
  return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, d), DType::F16, kv, DType::F16,
                                                false)),
                        parseDevicePreset("h200"), AttentionOptions::fromEnvironment(env));
}

TEST(SelectorFormats, TensorCoreTilePairsWhereTheTableOrTheKnobAsks) {
  const auto& plan = planOnH200;
  // The Hopper row: int8 rows of 128 on the tensor cores, not 64 (not shown faster there).
  const AttentionPlan paired = plan(DType::I8, 128, {});
  EXPECT_TRUE(paired.decodeVariant.tensorCores && paired.decodeVariant.tilePairs);
  EXPECT_THAT(paired, HasDecision("tiles", HasSubstr("tuning table: Hopper, int8 rows of 128 on the tensor cores")));
  EXPECT_FALSE(plan(DType::I8, 64, {}).decodeVariant.tilePairs);
  EXPECT_TRUE(plan(DType::I8, 64, {{"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}}).decodeVariant.tilePairs);
  EXPECT_FALSE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TILE_PAIRS", "0"}}).decodeVariant.tilePairs);
  // Where the subgroup kernel runs, or one tile is in flight, the table's pairs step aside; the knob's fail.
  EXPECT_FALSE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}).decodeVariant.tilePairs);
  const AttentionPlan one = plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_UNROLL", "1"}});
  EXPECT_TRUE(one.decodeVariant.tensorCores);
  EXPECT_FALSE(one.decodeVariant.tilePairs);
  const auto refused = [&](std::map<std::string, std::string> env, DType kv, const char* why) {
    env["FOUNDRY_FA_DECODE_TILE_PAIRS"] = "1";
    try {
      plan(kv, 128, env);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_TILE_PAIRS"));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused({{"FOUNDRY_FA_DECODE_UNROLL", "1"}}, DType::I8, "an even number of tiles in flight, not 1");
  refused({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, DType::F16, "the pairs are of the tensor-core kernel's tiles");
  EXPECT_FALSE(Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8,
                                                      DType::F16, false)),
                              parseDevicePreset("lavapipe"), AttentionOptions{})
                   .decodeVariant.tilePairs);
}

TEST(SelectorFormats, TensorCoreValueHalvesForInt8RowsOf128) {
  const auto& plan = planOnH200;
  // The Hopper row, where V is staged (V from registers off): int8 rows of 128, with the pairs or without; the
  // staging of V halves without them.
  const std::pair<std::string, std::string> staged = {"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "0"};
  const AttentionPlan halves = plan(DType::I8, 128, {staged});
  EXPECT_TRUE(halves.decodeVariant.tensorCores && halves.decodeVariant.tilePairs && halves.decodeVariant.valueHalves);
  EXPECT_THAT(halves, HasDecision("values", HasSubstr("tuning table: Hopper, int8 rows of 128 on the tensor cores: V "
                                                      "staged in two halves")));
  EXPECT_THAT(halves.decodeVariant.key(), HasSubstr("_vh"));
  const AttentionPlan alone = plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TILE_PAIRS", "0"}, staged});
  EXPECT_TRUE(alone.decodeVariant.valueHalves);
  DecodeVariant whole = alone.decodeVariant;
  whole.valueHalves = false;
  EXPECT_EQ(alone.decodeVariant.tensorRowsBytes() * 2, whole.tensorRowsBytes() + 16 * 16);
  EXPECT_FALSE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_VALUE_HALVES", "0"}}).decodeVariant.valueHalves);
  // Not planned where a lane holds other than four V loads a tile, nor for 16-bit rows or on the subgroup kernel.
  EXPECT_FALSE(plan(DType::I8, 64, {}).decodeVariant.valueHalves);
  EXPECT_FALSE(plan(DType::F16, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}}).decodeVariant.valueHalves);
  EXPECT_FALSE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}).decodeVariant.valueHalves);
  const auto refused = [&](std::map<std::string, std::string> env, DType kv, std::uint32_t d, const char* why) {
    env["FOUNDRY_FA_DECODE_VALUE_HALVES"] = "1";
    try {
      plan(kv, d, env);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_VALUE_HALVES"));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused({}, DType::I8, 64, "int8 V rows of four 16-byte loads a lane a tile (128 dims on a subgroup of 32), not "
                             "int8 rows of 64");
  refused({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}}, DType::F16, 128, "not f16 rows of 128");
  refused({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, DType::I8, 128, "the halves are of the tensor-core kernel's V tiles");
  EXPECT_FALSE(Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8,
                                                      DType::F16, false)),
                              parseDevicePreset("lavapipe"), AttentionOptions{})
                   .decodeVariant.valueHalves);
}

TEST(SelectorFormats, TensorCoreValueRegistersForInt8RowsOf128WhereTheF16LayoutIsKnown) {
  const auto& plan = planOnH200;
  // The Hopper row: int8 rows of 128, with the pairs or without, in place of the halves.
  const AttentionPlan regs = plan(DType::I8, 128, {});
  EXPECT_TRUE(regs.decodeVariant.tensorCores && regs.decodeVariant.tilePairs && regs.decodeVariant.valueRegisters);
  EXPECT_FALSE(regs.decodeVariant.valueHalves);
  EXPECT_THAT(regs, HasDecision("values", HasSubstr("tuning table: Hopper, int8 rows of 128 on the tensor cores, where "
                                                    "the probe finds the 16x16 f16 layout: V never staged")));
  EXPECT_THAT(regs.decodeVariant.key(), HasSubstr("_vr"));
  // No V rows staged: the staging is K's pair of tiles.
  DecodeVariant staged = regs.decodeVariant;
  staged.valueRegisters = false;
  EXPECT_EQ(regs.decodeVariant.tensorRowsBytes(), 2 * 16 * regs.decodeVariant.tensorRow4K() * 16);
  EXPECT_GE(staged.tensorRowsBytes(), regs.decodeVariant.tensorRowsBytes());
  EXPECT_TRUE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TILE_PAIRS", "0"}}).decodeVariant.valueRegisters);
  // The halves asked for, or the registers refused, leave V staged in halves.
  for (const auto& env : std::vector<std::map<std::string, std::string>>{{{"FOUNDRY_FA_DECODE_VALUE_HALVES", "1"}},
                                                                        {{"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "0"}}}) {
    const AttentionPlan p = plan(DType::I8, 128, env);
    EXPECT_TRUE(p.decodeVariant.valueHalves && !p.decodeVariant.valueRegisters) << p.describe();
  }
  EXPECT_FALSE(plan(DType::I8, 64, {}).decodeVariant.valueRegisters);
  EXPECT_FALSE(plan(DType::F16, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}}).decodeVariant.valueRegisters);
  EXPECT_FALSE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}).decodeVariant.valueRegisters);
  // A device without the f16 layout (no probe answer, or one of four elements a lane) takes the halves.
  DeviceInfo unknown = parseDevicePreset("h200"), four = unknown, ptx = unknown;
  unknown.coopMatLayoutF16 = {};
  four.coopMatLayoutF16 = nvidiaQuadLayout8();
  ptx.coopMatLayoutF16 = nvidiaQuadLayout();  // another order of the same elements: the kernel takes any
  const auto on = [&](const DeviceInfo& d, std::map<std::string, std::string> env) {
    return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8,
                                                  DType::F16, false)),
                          d, AttentionOptions::fromEnvironment(env));
  };
  EXPECT_TRUE(on(unknown, {}).decodeVariant.valueHalves);
  EXPECT_FALSE(on(four, {}).decodeVariant.valueRegisters);
  EXPECT_TRUE(on(ptx, {}).decodeVariant.valueRegisters);
  const auto refused = [&](std::map<std::string, std::string> env, const DeviceInfo& d, DType kv, std::uint32_t dim,
                           const char* field, const char* why) {
    env["FOUNDRY_FA_DECODE_VALUE_REGISTERS"] = "1";
    try {
      Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, dim), DType::F16, kv, DType::F16,
                                             false)),
                     d, AttentionOptions::fromEnvironment(env));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr(field));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  const DeviceInfo h200 = parseDevicePreset("h200");
  const char* knob = "FOUNDRY_FA_DECODE_VALUE_REGISTERS";
  refused({}, unknown, DType::I8, 128, knob, "device 'NVIDIA H200 (preset)' has no known 16x16 f16 layout");
  refused({}, h200, DType::I8, 64, knob, "int8 V rows of 128 in 16-byte loads on a subgroup of 32, without value "
                                         "halves; not int8 rows of 64");
  refused({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}}, h200, DType::F16, 128, knob, "not f16 rows of 128");
  refused({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, h200, DType::I8, 128, knob,
          "V's fragments are of the tensor-core kernel's tiles");
  refused({{"FOUNDRY_FA_DECODE_VALUE_HALVES", "1"}}, h200, DType::I8, 128, "FOUNDRY_FA_DECODE_VALUE_HALVES",
          "with value halves");
  EXPECT_FALSE(on(parseDevicePreset("lavapipe"), {}).decodeVariant.valueRegisters);
}

TEST(SelectorFormats, TensorCoreDecodeWhereTheTableOrTheKnobAsksAndPossible) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const auto plan = [&](DType kv, std::uint32_t d, std::map<std::string, std::string> env, const DeviceInfo& device) {
    return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, d), DType::F16, kv, DType::F16,
                                                  false)),
                          device, AttentionOptions::fromEnvironment(env))
        .decodeVariant;
  };
  const std::map<std::string, std::string> on = {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}};
  // By default: the Hopper rows' int8 and f16 rows of 64 and 128, where the device has the products;
  // elsewhere (D256, bf16, q8_0, a device without them, the knob at 0) the subgroup kernel, without an error
  // (bf16 takes them when asked).
  EXPECT_TRUE(plan(DType::I8, 128, {}, h200).tensorCores);
  EXPECT_TRUE(plan(DType::I8, 64, {}, h200).tensorCores);
  EXPECT_FALSE(plan(DType::I8, 256, {}, h200).tensorCores);
  EXPECT_TRUE(plan(DType::F16, 128, {}, h200).tensorCores);
  EXPECT_TRUE(plan(DType::F16, 64, {}, h200).tensorCores);
  EXPECT_FALSE(plan(DType::F16, 256, {}, h200).tensorCores);
  EXPECT_FALSE(plan(DType::BF16, 128, {}, h200).tensorCores);
  const AttentionPlan f16 = Selector::plan(
      describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::F16, DType::F16, false)), h200,
      {});
  EXPECT_THAT(f16, HasDecision("tensor cores", HasSubstr("tuning table: Hopper, f16 rows of 64 and 128")));
  EXPECT_FALSE(plan(DType::F16, 128, {}, parseDevicePreset("amd-rdna3")).tensorCores);
  EXPECT_FALSE(plan(DType::Q8_0, 128, {}, h200).tensorCores);
  EXPECT_FALSE(plan(DType::I8, 128, {}, parseDevicePreset("lavapipe")).tensorCores);
  EXPECT_FALSE(plan(DType::I8, 128, {}, parseDevicePreset("amd-rdna3")).tensorCores);
  const DecodeVariant off = plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}, h200);
  EXPECT_FALSE(off.tensorCores);
  EXPECT_TRUE(off.halfProducts && off.lazyRescale);  // the subgroup kernel's Hopper int8 plan
  // A knob of the subgroup kernel asks for that kernel.
  for (const auto& [knob, value] : std::vector<std::pair<std::string, std::string>>{
           {"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "0"},
           {"FOUNDRY_FA_DECODE_LAZY_RESCALE", "0"}, {"FOUNDRY_FA_DECODE_VEC", "8"}, {"FOUNDRY_FA_DECODE_SCALAR", "1"},
           {"FOUNDRY_FA_DECODE_TG_OUT", "half"}}) {
    EXPECT_FALSE(plan(DType::I8, 128, {{knob, value}}, h200).tensorCores) << knob;
  }
  EXPECT_TRUE(plan(DType::I8, 128, {{"FOUNDRY_FA_DECODE_UNROLL", "1"}}, h200).tensorCores);  // both kernels' knob
  // From 2048 keys a workgroup: 4096 keys in 16 splits of 256 take the subgroup kernel, and say why; the
  // knob takes the tensor cores there too.
  const auto shortPlan = [&](std::map<std::string, std::string> env) {
    return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 4096, 128), DType::F16, DType::I8,
                                                  DType::F16, false)),
                          h200, AttentionOptions::fromEnvironment(env));
  };
  const AttentionPlan fewKeys = shortPlan({});
  EXPECT_FALSE(fewKeys.decodeVariant.tensorCores);
  EXPECT_EQ(fewKeys.kvChunk, 256u);
  EXPECT_TRUE(fewKeys.decodeVariant.halfProducts);
  EXPECT_THAT(fewKeys, HasDecision("tensor cores", HasSubstr("256 keys per workgroup, under 2048")));
  EXPECT_TRUE(shortPlan(on).decodeVariant.tensorCores);
  // A variant planned at 65536 keys and fitted to 4096 takes the subgroup variant planned with it.
  const AttentionProblem longCall = describeCall(
      formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8, DType::F16, false));
  const AttentionPlan variant = Selector::variant(longCall, h200, {});
  ASSERT_TRUE(variant.shortRanges);
  EXPECT_FALSE(variant.shortRanges->decodeVariant.tensorCores);
  AttentionProblem shorter = longCall;
  shorter.kvLen = 4096;
  const AttentionPlan refit = Selector::fit(variant, shorter, h200, {});
  EXPECT_EQ(refit.decodeVariant.key(), fewKeys.decodeVariant.key());
  EXPECT_EQ(refit.kvChunk, 256u);
  EXPECT_TRUE(Selector::fit(variant, longCall, h200, {}).decodeVariant.tensorCores);
  EXPECT_FALSE(shortPlan(on).shortRanges);  // the knob's tensor cores hold at every length
  EXPECT_TRUE(Selector::plan(describeCall(formatCall(test::decodeShape(32, 32, 8, 2048, 128), DType::F16, DType::I8,
                                                     DType::F16, false)),
                             h200, AttentionOptions{})
                  .decodeVariant.tensorCores);  // 256 workgroups of 2048 keys
  EXPECT_THAT(Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8,
                                                     DType::F16, false)),
                             h200, AttentionOptions{})
                  .describe(),
              HasSubstr("tuning table: Hopper, int8 rows of 64 and 128: decode on the tensor cores"));
  // Two tiles in flight (32 registers a tile of int8 D128 rows, 64 of f16, at most 128); warps as many
  // as shared memory holds: 8, at 4608 bytes a subgroup for f16 D128 (16 rows that take K, then V,
  // then the partials, and P^T's rows) and 5120 for int8 D128, whose tiles the tuning table pairs (32
  // K rows staged together, 16 rows of P^T more), so that no part_o is declared beside them.
  for (const auto& [kv, width, ring, stage, key] :
       {std::tuple{DType::I8, 16u, 2u, 5120u, "_tcp_"}, std::tuple{DType::F16, 8u, 2u, 4608u, "_tc_"}}) {
    const DecodeVariant v = plan(kv, 128, on, h200);
    EXPECT_TRUE(v.tensorCores);
    EXPECT_EQ(v.vecWidth, width);  // 16-byte loads
    EXPECT_EQ(v.keysPerWarp, 1u);
    EXPECT_EQ(v.unroll, ring);
    EXPECT_EQ(v.warps, 8u);
    EXPECT_EQ(v.tensorStageBytes(), stage);
    EXPECT_LE(v.sharedBytes(32), h200.maxSharedMemoryBytes);
    EXPECT_FALSE(v.halfProducts || v.stepScales || v.scatter || v.lazyRescale);
    EXPECT_EQ(v.keyGranule(32), v.warps * 16u);
    EXPECT_THAT(v.key(), HasSubstr(key));
  }
  // The plan's decisions describe the tensor-core kernel, not the lane split it replaced.
  const AttentionPlan described = Selector::plan(
      describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8, DType::F16, false)), h200,
      AttentionOptions::fromEnvironment(on));
  EXPECT_THAT(described.describe(), HasSubstr("keys per warp = 1 (the tensor-core kernel's 16-key tiles"));
  EXPECT_THAT(described.describe(), HasSubstr("unroll = 2 (the tensor-core kernel's 16-key tiles: 2 in flight"));
  EXPECT_THAT(described.describe(), HasSubstr("the 4 heads as columns of 16x8 products (int8 x int8 K)"));
  // As many as asked where registers hold them: 4 int8 D128 tiles, not 4 f16 ones.
  const std::map<std::string, std::string> four = {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}, {"FOUNDRY_FA_DECODE_UNROLL", "4"}};
  EXPECT_EQ(plan(DType::I8, 128, four, h200).unroll, 4u);
  EXPECT_EQ(plan(DType::F16, 64, four, h200).unroll, 4u);
  try {
    plan(DType::F16, 128, four, h200);
    ADD_FAILURE() << "accepted 4 f16 D128 tiles in flight";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 to 4 tiles in flight of 64 registers each, at most 128 registers; not 4"));
  }
  EXPECT_THAT(described.describe(), Not(HasSubstr("K dot products")));
  const auto refused = [&](DType kv, std::uint32_t d, const DeviceInfo& device, const char* why) {
    try {
      plan(kv, d, on, device);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_TENSOR_CORES"));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused(DType::I8, 128, parseDevicePreset("lavapipe"), "has no 16x8x16 f16 cooperative matrices");
  DeviceInfo noInt8 = h200;
  std::erase_if(noInt8.coopMatShapes, [](const CoopMatShape& c) { return c.input == DType::I8; });
  refused(DType::I8, 128, noInt8, "has no 16x8x32 int8 cooperative matrices");
  EXPECT_TRUE(plan(DType::F16, 128, on, noInt8).tensorCores);
  // 16 heads of a GQA group are more than a product's 8 columns: two workgroups of 8 read the KV head.
  EXPECT_LE(Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 2, 65536, 128), DType::F16, DType::I8,
                                                   DType::F16, false)),
                           h200, AttentionOptions::fromEnvironment(on))
                .decodeVariant.heads,
            8u);
  DecodeVariant sixteen = plan(DType::F16, 128, on, h200);
  sixteen.heads = 16;
  EXPECT_THAT(sixteen.unusableReason(32), HasSubstr("up to 8 heads as columns, not 16"));
  // One workgroup to each of the 132 compute units (two measured slower: 89.5 against 76.5 us).
  EXPECT_EQ(Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::I8,
                                                   DType::F16, false)),
                           h200, AttentionOptions::fromEnvironment(on))
                .splits,
            16u);
  refused(DType::F32, 128, h200, "tensor-core decode takes f16, bf16 or int8 K/V, not f32");
  // bf16 when asked: f16 products over a power of two a tile, one tile in flight.
  const AttentionPlan bf16 = Selector::plan(
      describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::BF16, DType::BF16, DType::BF16, false)),
      h200, AttentionOptions::fromEnvironment(on));
  EXPECT_TRUE(bf16.decodeVariant.tensorCores);
  EXPECT_EQ(bf16.decodeVariant.unroll, 1u);
  EXPECT_THAT(bf16.describe(), HasSubstr("the 4 heads as columns of 16x8 products (bf16 in f16 over a power of two a tile K)"));
  EXPECT_THAT(bf16.describe(), HasSubstr("bf16, converted as staged, 1 in flight"));
  EXPECT_FALSE(bf16.decodeVariant.bf16Operands);
  // Where the device and glslc take bf16 operands: bf16 q, K and V multiply as stored, two tiles in flight
  // as f16's; an f16 q keeps the power-of-two route.
  DeviceInfo withBf16 = h200;
  withBf16.coopMat2 = withBf16.coopMat2Bf16 = true;
  const AttentionPlan ops = Selector::plan(
      describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::BF16, DType::BF16, DType::BF16, false)),
      withBf16, AttentionOptions::fromEnvironment(on));
  EXPECT_TRUE(ops.decodeVariant.tensorCores && ops.decodeVariant.bf16Operands) << ops.describe();
  EXPECT_EQ(ops.decodeVariant.unroll, 2u);
  EXPECT_THAT(ops.describe(), HasSubstr("(bf16 x bf16, as stored K)"));
  EXPECT_NE(ops.decodeVariant.key().find("_bf16ops"), std::string::npos) << ops.decodeVariant.key();
  const AttentionPlan mixed = Selector::plan(
      describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 128), DType::F16, DType::BF16, DType::BF16, false)),
      withBf16, AttentionOptions::fromEnvironment(on));
  EXPECT_TRUE(mixed.decodeVariant.tensorCores && !mixed.decodeVariant.bf16Operands) << mixed.describe();
  // Unasked, the tuning table's Hopper bf16 row plans them at head_dim 128 with bf16 operands only.
  const auto autoPlan = [](const DeviceInfo& device, std::uint32_t d) {
    return Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, d), DType::BF16, DType::BF16,
                                                  DType::BF16, false)),
                          device, {});
  };
  EXPECT_TRUE(autoPlan(withBf16, 128).decodeVariant.bf16Operands) << autoPlan(withBf16, 128).describe();
  EXPECT_FALSE(autoPlan(withBf16, 64).decodeVariant.tensorCores) << autoPlan(withBf16, 64).describe();
  const AttentionPlan staged = autoPlan(h200, 128);
  EXPECT_FALSE(staged.decodeVariant.tensorCores) << staged.describe();
  EXPECT_THAT(staged, HasDecision("tensor cores", HasSubstr("without bf16 operands")));
  refused(DType::I8, 80, h200, "multiples of 32, not 80 and 80");  // int8 scale chunks are whole
  DeviceInfo noLayout = h200;
  noLayout.coopMatLayout8 = {};
  refused(DType::F16, 128, noLayout, "no known 16x8 accumulator layout");
}

TEST(SelectorFormats, HalfProductsNeedInt8WithStepScales) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  const test::CallShape s = test::decodeShape(1, 32, 8, 65536, 128);
  const auto plan = [&](DType kv, std::map<std::string, std::string> env, const DeviceInfo& device) {
    return Selector::plan(describeCall(formatCall(s, DType::F16, kv, DType::F16, false)), device,
                          AttentionOptions::fromEnvironment(env))
        .decodeVariant;
  };
  const auto refused = [&](DType kv, std::map<std::string, std::string> env, const DeviceInfo& device,
                           const char* knob, const char* why) {
    try {
      plan(kv, env, device);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const UserError& e) {
      EXPECT_THAT(e.field(), HasSubstr(knob));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  // The knob turns them off, and step scales with them.
  const DecodeVariant off = plan(DType::I8, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "0"}}, h200);
  EXPECT_FALSE(off.halfProducts);
  EXPECT_FALSE(off.stepScales);
  EXPECT_TRUE(off.lazyRescale);  // the tuning table's, half products or not
  // Forced where the tuning table does not ask for them (lavapipe), they come with step scales.
  const DecodeVariant cpu = plan(DType::I8, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"}}, parseDevicePreset("lavapipe"));
  EXPECT_TRUE(cpu.halfProducts);
  EXPECT_TRUE(cpu.stepScales);
  EXPECT_FALSE(cpu.lazyRescale);
  EXPECT_FALSE(plan(DType::I8, {}, parseDevicePreset("lavapipe")).halfProducts);
  // K through integer dot products, V in packed f16.
  const DecodeVariant both = plan(DType::I8, {{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}}, h200);
  EXPECT_TRUE(both.int8Dot);
  EXPECT_TRUE(both.halfProducts);
  EXPECT_THAT(both.key(), HasSubstr("_idot_sc_ss_hp"));
  refused(DType::F16, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"}}, h200, "FOUNDRY_FA_DECODE_HALF_PRODUCTS",
          "the K/V cache is f16, not int8");
  refused(DType::Q8_0, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"}}, h200, "FOUNDRY_FA_DECODE_HALF_PRODUCTS",
          "half products take int8 K/V with step scales");
  refused(DType::I8, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"}, {"FOUNDRY_FA_DECODE_STEP_SCALES", "0"}}, h200,
          "FOUNDRY_FA_DECODE_HALF_PRODUCTS", "half products take int8 K/V with step scales");
  DeviceInfo noHalf = h200;
  noHalf.fp16Arithmetic = false;
  refused(DType::I8, {{"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"}}, noHalf, "FOUNDRY_FA_DECODE_HALF_PRODUCTS",
          "the device has no f16 arithmetic");
  EXPECT_FALSE(plan(DType::I8, {}, noHalf).halfProducts);
  // A step of 64 keys leaves the 32-key scale block.
  try {
    Selector::plan(describeCall(formatCall(test::decodeShape(1, 32, 8, 65536, 64), DType::F16, DType::I8, DType::F16,
                                           false)),
                   h200,
                   AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_STEP_SCALES", "1"},
                                                      {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "8"},
                                                      {"FOUNDRY_FA_DECODE_UNROLL", "8"},
                                                      {"FOUNDRY_FA_DECODE_Q_SHARED", "1"},
                                                      {"FOUNDRY_FA_DECODE_VEC", "16"}}));
    ADD_FAILURE() << "accepted a step of 64 keys";
  } catch (const UserError& e) {
    EXPECT_THAT(e.field(), HasSubstr("FOUNDRY_FA_DECODE_STEP_SCALES"));
    EXPECT_THAT(e.what(), HasSubstr("the 64 keys of a step dividing the 32-key scale block"));
  }
  refused(DType::F16, {{"FOUNDRY_FA_DECODE_STEP_SCALES", "1"}}, h200, "FOUNDRY_FA_DECODE_STEP_SCALES",
          "the K/V cache is f16, not int8");
}

}  // namespace
}  // namespace foundry
