// Every decode and prefill variant forced through the knobs, against the CPU float64 reference, with
// the StepRecord checked so that a knob the step ignored fails the test: the plan carries the forced
// variant and split, and the recorded kernels are the ones that variant needs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/steps/Selector.h"
#include "foundry/steps/TuningTable.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

AttentionCase shape(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen,
                   std::uint32_t kvLen, std::uint32_t headDim, DType dtype, Layout q = HM, Layout o = HM) {
  return attentionCase(batch, heads, kvHeads, qLen, kvLen, headDim, dtype, q, o);
}

/// Knobs as a builder: Knobs().warps(2).keys(4).splitK(3) ... The subgroup prefill variant is the
/// default here (it is the one every device runs); coopMat() asks for the cooperative-matrix one.
struct Knobs {
  Knobs() {
    o.faPrefillCoopMat = Force::Off;
    o.faPrefillCoopMat2 = Force::Off;
  }
  AttentionOptions o;
  Knobs& coopMat() { o.faPrefillCoopMat = Force::On; return *this; }
  /// Workgroup-scope matrices (GL_NV_cooperative_matrix2).
  Knobs& coopMat2() {
    o.faPrefillCoopMat = o.faPrefillCoopMat2 = Force::On;
    o.faPrefillCoopMat2Subgroup = false;
    return *this;
  }
  /// GL_NV_cooperative_matrix2 matrices of flexible dimensions at subgroup scope (each subgroup's rows).
  Knobs& coopMat2Subgroup() {
    coopMat2();
    o.faPrefillCoopMat2Subgroup = true;
    return *this;
  }
  Knobs& sharedSoftmax() { o.faPrefillRegisterSoftmax = Force::Off; return *this; }
  Knobs& headsFirst(bool on) { o.faPrefillHeadsFirst = on ? Force::On : Force::Off; return *this; }
  Knobs& maskSplit(bool on) { o.faPrefillMaskSplit = on ? Force::On : Force::Off; return *this; }
  Knobs& warps(std::uint32_t w) { o.faDecodeWarps = w; return *this; }
  Knobs& keys(std::uint32_t k) { o.faDecodeKeysPerWarp = k; return *this; }
  Knobs& vec(std::uint32_t v) { o.faDecodeVectorWidth = v; return *this; }
  Knobs& unroll(std::uint32_t u) { o.faDecodeUnroll = u; return *this; }
  Knobs& scalar() { o.faDecodeScalar = true; return *this; }
  Knobs& queryShared() { o.faDecodeQueryShared = Force::On; return *this; }
  Knobs& idleLanes() { o.faDecodeIdleLanes = Force::On; return *this; }
  Knobs& tailWords() { o.faDecodeTailWords = Force::On; return *this; }
  Knobs& scatter() { o.faDecodeScatter = Force::On; return *this; }
  Knobs& lazy() { o.faDecodeLazyRescale = Force::On; return *this; }
  Knobs& half() { o.faDecodeTgOut = PartialStorage::Half; return *this; }
  Knobs& floatPartials() { o.faDecodeTgOut = PartialStorage::Float; return *this; }
  Knobs& tensorCores() { o.faDecodeTensorCores = Force::On; return *this; }
  Knobs& splitK(std::uint32_t s) { o.faDecodeSplitK = s; return *this; }
  Knobs& reduceKernel() { o.faDecodeFusedReduce = Force::Off; return *this; }
  Knobs& merged() { o.faDecodeFusedReduce = Force::On; return *this; }
  Knobs& batched() { o.faDecodeBatchedMerge = Force::On; return *this; }
  Knobs& claims(std::uint32_t keys) { o.faDecodeClaimedKeys = keys; return *this; }
  Knobs& prefillKeys(std::uint32_t k) { o.faPrefillKeysPerTile = k; return *this; }
  Knobs& prefillWarps(std::uint32_t w) { o.faPrefillWarps = w; return *this; }
  Knobs& prefillSplitK(std::uint32_t s) { o.faPrefillSplitK = s; return *this; }
  Knobs& noPrefillSplitK() { o.disableFaPrefillSplitK = true; return *this; }
  Knobs& loader() { o.faPrefillLoader = Force::On; return *this; }
  Knobs& stages(std::uint32_t s) { o.faPrefillStages = s; return *this; }
  operator AttentionOptions() const { return o; }
};

struct VariantCase {
  AttentionCase shape;
  AttentionOptions options;
  std::uint32_t splits = 1;  ///< the Split-K factor the plan must carry
  std::uint32_t stages = 0;  ///< prefill on lavapipe: the staging depth the plan must carry (0: not checked)
  std::uint32_t rows = 0;    ///< prefill on lavapipe: query rows per subgroup the plan must carry (0: not checked)
  std::string name() const { return shape.name() + "__" + optionsName(options); }
};

void PrintTo(const VariantCase& v, std::ostream* os) { *os << v.name(); }

std::string variantName(const ::testing::TestParamInfo<VariantCase>& info) { return info.param.name(); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The tile expectations below were worked out for lavapipe (subgroup 8, 32 KiB of shared memory).
bool onLavapipeLimits() {
  const DeviceInfo& d = runtime().info();
  return d.subgroupSize == 8 && d.maxSharedMemoryBytes == 32768;
}

// The split factor a forced `wanted` gives for this kv length and key granule (no empty last split).
std::uint32_t forcedSplits(std::uint32_t kvLen, std::uint32_t wanted, std::uint32_t granule) {
  std::uint32_t splits = 0, chunk = 0;
  Selector::splitKeys(kvLen, wanted, granule, splits, chunk);
  return splits;
}

// The recorded kernels are the main (or Split-K part) kernel, then the reduce when splitting (unless
// decode merges the splits in its last workgroup).
void expectKernels(const StepRecord& record, const std::string& variantKey) {
  const bool split = record.plan.splits > 1;
  ASSERT_EQ(record.kernels.size(), record.plan.reduceKernel() ? 2u : 1u) << record.plan.describe();
  EXPECT_TRUE(contains(record.kernels[0], variantKey)) << record.kernels[0] << " does not run " << variantKey;
  EXPECT_EQ(contains(record.kernels[0], "_split"), split) << record.kernels[0];
  if (record.plan.reduceKernel()) {
    EXPECT_TRUE(contains(record.kernels[1], "SplitKReduce")) << record.kernels[1];
  }
}

// ---- Decode.

class DecodeVariants : public ::testing::TestWithParam<VariantCase> {};

TEST_P(DecodeVariants, ForcedVariantRunsAndMatches) {
  const VariantCase& vc = GetParam();
  const AttentionOptions& o = vc.options;
  const std::uint32_t sg = runtime().info().subgroupSize;
  if (o.faDecodeTensorCores == Force::On && !test::tensorCoreDecode(runtime().info())) {
    GTEST_SKIP() << "the device has no cooperative matrices with the quad accumulator layout";
  }
  AttentionResult r;
  try {
    r = runFlash(vc.shape, o);
  } catch (const UserError& e) {
    // A knob this device cannot honour must be refused by name, and only then.
    DecodeVariant want;
    want.headDim = vc.shape.headDim;
    want.heads = Selector::decodeHeadsPerWorkgroup(vc.shape.heads / vc.shape.kvHeads);
    want.keysPerWarp = o.faDecodeKeysPerWarp.value_or(1);
    const Tuning tune = tuningFor(runtime().info(), vc.shape.headDim, vc.shape.dtype);
    want.vecWidth = o.faDecodeVectorWidth.value_or(tune.decodeVecWidth);
    want.unroll = o.faDecodeUnroll.value_or(tune.decodeUnroll);
    want.queryShared = o.faDecodeQueryShared == Force::On;
    want.idleLanes = o.faDecodeIdleLanes == Force::On;
    want.tailWords = o.faDecodeTailWords == Force::On;
    want.scatter = o.faDecodeScatter == Force::On;
    ASSERT_FALSE(o.faDecodeScalar) << e.what();
    ASSERT_FALSE(want.unusableReason(sg).empty()) << "refused a usable variant: " << e.what();
    EXPECT_TRUE(contains(e.field(), "FOUNDRY_FA_DECODE_")) << e.what();
    return;
  }
  const AttentionPlan& plan = r.record.plan;
  ASSERT_TRUE(plan.decode);
  const DecodeVariant& v = plan.decodeVariant;
  if (o.faDecodeWarps) {
    EXPECT_EQ(v.warps, *o.faDecodeWarps) << plan.describe();
  }
  if (o.faDecodeKeysPerWarp) {
    EXPECT_EQ(v.keysPerWarp, *o.faDecodeKeysPerWarp) << plan.describe();
  }
  if (o.faDecodeVectorWidth) {
    EXPECT_EQ(v.vecWidth, *o.faDecodeVectorWidth) << plan.describe();
  }
  if (o.faDecodeUnroll && !o.faDecodeScalar) {
    EXPECT_EQ(v.unroll, *o.faDecodeUnroll) << plan.describe();
  }
  EXPECT_EQ(v.scalar, o.faDecodeScalar) << plan.describe();
  if (o.faDecodeIdleLanes != Force::Auto) {
    EXPECT_EQ(v.idleLanes, o.faDecodeIdleLanes == Force::On) << plan.describe();
  }
  if (o.faDecodeTailWords != Force::Auto) {
    EXPECT_EQ(v.tailWords, o.faDecodeTailWords == Force::On) << plan.describe();
  }
  if (o.faDecodeScatter != Force::Auto) {
    EXPECT_EQ(v.scatter, o.faDecodeScatter == Force::On) << plan.describe();
  }
  if (o.faDecodeLazyRescale != Force::Auto) {
    EXPECT_EQ(v.lazyRescale, o.faDecodeLazyRescale == Force::On) << plan.describe();
  }
  if (o.faDecodeTgOut) {
    EXPECT_EQ(v.partial, *o.faDecodeTgOut) << plan.describe();
  }
  // Left to the Selector, the tensor cores are a device's choice (the Hopper rows take them from 2048 keys a
  // workgroup), never made where the device cannot run them.
  if (o.faDecodeTensorCores != Force::Auto) {
    EXPECT_EQ(v.tensorCores, o.faDecodeTensorCores == Force::On) << plan.describe();
  } else if (!test::tensorCoreDecode(runtime().info())) {
    EXPECT_FALSE(v.tensorCores) << plan.describe();
  }
  const std::uint32_t granule = v.keyGranule(sg);
  const std::uint32_t splits = forcedSplits(vc.shape.kvLen, vc.splits, granule);
  EXPECT_EQ(plan.splits, splits) << plan.describe();
  EXPECT_EQ(v.split, splits > 1) << plan.describe();
  // Merged in the last workgroup when forced, or by default where the grid is one wave.
  const bool oneWave = std::uint64_t(plan.grid.x) * plan.grid.y * plan.grid.z <= runtime().info().computeUnits;
  const bool merged = o.faDecodeFusedReduce == Force::On || (o.faDecodeFusedReduce == Force::Auto && oneWave);
  EXPECT_EQ(v.fusedReduce, splits > 1 && merged) << plan.describe();
  if (o.faDecodeBatchedMerge != Force::Auto) {
    EXPECT_EQ(v.batchedMerge, o.faDecodeBatchedMerge == Force::On) << plan.describe();
  }
  if (o.faDecodeClaimedKeys) {
    EXPECT_EQ(v.claims, *o.faDecodeClaimedKeys > 0) << plan.describe();
  }
  expectKernels(r.record, v.key());
  EXPECT_TRUE(matchesReference(vc.shape, r));
}

// A: MQA with 4 query heads per workgroup, head_dim 64, f16. B: one head per workgroup, head_dim 128,
// f32, token-major. C: GQA 8 (8 heads per workgroup), head_dim 128, f16.
const AttentionCase A = shape(1, 4, 1, 1, 77, 64, DType::F16);
const AttentionCase B = shape(1, 4, 4, 1, 77, 128, DType::F32, TM, TM);
const AttentionCase C = shape(1, 8, 1, 1, 150, 128, DType::F16);
const AttentionCase Long = shape(1, 8, 1, 1, 3001, 128, DType::F16);
const AttentionCase Batch3 = shape(3, 8, 2, 1, 101, 64, DType::F32, TM, HM);
const AttentionCase Narrow = shape(1, 2, 2, 1, 300, 32, DType::F16);  // rows narrow enough for 16 steps
// Rows that no power-of-two cluster divides into whole loads: D80 (GQA 4) and D96, f16 and f32.
const AttentionCase D80 = shape(1, 8, 2, 1, 203, 80, DType::F16);
const AttentionCase D80f32 = shape(2, 4, 1, 1, 97, 80, DType::F32, TM, TM);
const AttentionCase D96 = shape(1, 4, 1, 1, 1501, 96, DType::F16);
const AttentionCase D80bf16 = shape(1, 8, 2, 1, 203, 80, DType::BF16);
const AttentionCase D40 = shape(2, 4, 1, 1, 300, 40, DType::F16, TM, HM);
// GQA 4 at D72: 288 output elements, which leave some of 64 or 256 invocations one element fewer in
// the merged Split-K's last workgroup (the ragged fold).
const AttentionCase D72 = shape(1, 8, 2, 1, 1501, 72, DType::F16);
// MHA (Phi-2's D80 layout), the LSE returned too.
AttentionCase withLse(AttentionCase c) {
  c.lse = true;
  return c;
}
const AttentionCase D80mha = withLse(shape(1, 4, 4, 1, 257, 80, DType::F16));

INSTANTIATE_TEST_SUITE_P(
    Knobs, DecodeVariants,
    ::testing::Values(
        // Subgroups per workgroup.
        VariantCase{A, Knobs().warps(1)}, VariantCase{A, Knobs().warps(2)}, VariantCase{A, Knobs().warps(4)},
        VariantCase{A, Knobs().warps(8)}, VariantCase{B, Knobs().warps(1)}, VariantCase{B, Knobs().warps(8)},
        // Keys per subgroup step (1..8 on a subgroup of 8) and the vector width of K/V loads.
        VariantCase{A, Knobs().keys(1)}, VariantCase{A, Knobs().keys(2)}, VariantCase{A, Knobs().keys(4)},
        VariantCase{A, Knobs().keys(8)}, VariantCase{B, Knobs().keys(2)}, VariantCase{B, Knobs().keys(4)},
        VariantCase{B, Knobs().keys(8)}, VariantCase{C, Knobs().keys(2)},
        VariantCase{A, Knobs().vec(1)}, VariantCase{A, Knobs().vec(2)}, VariantCase{A, Knobs().keys(8).vec(1)},
        VariantCase{B, Knobs().vec(1)}, VariantCase{B, Knobs().keys(4).vec(2)}, VariantCase{C, Knobs().vec(2)},
        // 16-byte loads (f16): two vec4 chunks per load.
        VariantCase{A, Knobs().vec(8)}, VariantCase{A, Knobs().keys(4).vec(8)}, VariantCase{C, Knobs().vec(8).unroll(8)},
        VariantCase{Long, Knobs().vec(8).unroll(8).splitK(5), 5}, VariantCase{Long, Knobs().vec(8).unroll(8).splitK(4).merged(), 4},
        // Key steps whose loads are in flight together per lane (unroll).
        VariantCase{A, Knobs().unroll(2).keys(2)}, VariantCase{A, Knobs().unroll(8)}, VariantCase{B, Knobs().unroll(8)},
        VariantCase{B, Knobs().unroll(8).splitK(3), 3}, VariantCase{Batch3, Knobs().unroll(8)},
        VariantCase{C, Knobs().unroll(8)},
        // q read from shared memory at each use, up to 16 steps in flight.
        VariantCase{A, Knobs().queryShared()}, VariantCase{B, Knobs().queryShared().keys(4)},
        VariantCase{C, Knobs().queryShared().unroll(8)}, VariantCase{Narrow, Knobs().queryShared().unroll(16)},
        VariantCase{Narrow, Knobs().queryShared().unroll(16).keys(1).splitK(2), 2},
        VariantCase{Long, Knobs().queryShared().vec(8).unroll(16).splitK(4).merged(), 4},
        // Lane clusters wider than the row: whole loads, lanes (or a lane's last load) past the row idle.
        VariantCase{D80, Knobs().idleLanes()}, VariantCase{D80, Knobs().idleLanes().vec(8)},
        VariantCase{D80, Knobs().idleLanes().vec(8).keys(1).unroll(4)},
        VariantCase{D80, Knobs().idleLanes().vec(8).keys(2).queryShared()},
        VariantCase{D80, Knobs().idleLanes().vec(8).splitK(3), 3},
        VariantCase{D80f32, Knobs().idleLanes().vec(4).keys(4)}, VariantCase{D80f32, Knobs().idleLanes().half()},
        VariantCase{D96, Knobs().idleLanes().vec(8).splitK(4).merged(), 4},
        VariantCase{D96, Knobs().idleLanes().vec(8).keys(4).queryShared().splitK(2).reduceKernel(), 2},
        VariantCase{D96, Knobs().idleLanes().vec(8).keys(1).queryShared().splitK(2).reduceKernel(), 2},
        // Whole loads, then words: D80 over 8 lanes as 2 loads of 4 (or 1 of 8) and a word; D96 over 8
        // lanes as a load of 8 and two words; D40 over 4 lanes as a load of 8 and a word.
        VariantCase{D80, Knobs().tailWords()}, VariantCase{D80, Knobs().tailWords().vec(8).unroll(4)},
        VariantCase{D80, Knobs().tailWords().vec(8).queryShared().splitK(3), 3},
        VariantCase{D80bf16, Knobs().tailWords().vec(8).keys(1)},
        VariantCase{D96, Knobs().tailWords().vec(8).keys(1).splitK(2).merged(), 2},
        VariantCase{D40, Knobs().tailWords().vec(8).keys(2).queryShared()},
        VariantCase{D40, Knobs().tailWords().vec(8).keys(2).splitK(2).reduceKernel(), 2},
        VariantCase{D80mha, Knobs().tailWords()}, VariantCase{D80mha, Knobs().tailWords().splitK(3).reduceKernel(), 3},
        // Scores summed once per key and weighed by one lane group each: 2 lanes per head and 2 steps
        // per lane (D80, 4 heads, 8 lanes, 4 steps); 1 step per lane; 1 lane per head (8 heads, and 4
        // heads on 4 lanes); 8 lanes of one head; and lanes outnumbering the heads x steps (refused).
        VariantCase{D80, Knobs().tailWords().unroll(4).scatter()},
        VariantCase{D80bf16, Knobs().tailWords().vec(8).keys(1).unroll(4).scatter()},
        VariantCase{D80, Knobs().tailWords().vec(8).keys(1).unroll(2).scatter().splitK(3), 3},
        VariantCase{C, Knobs().keys(1).scatter().splitK(3).reduceKernel(), 3},
        VariantCase{A, Knobs().keys(2).unroll(2).scatter().queryShared()},
        VariantCase{Batch3, Knobs().keys(2).unroll(2).scatter()},
        VariantCase{Narrow, Knobs().keys(1).unroll(16).scatter()},
        VariantCase{D80mha, Knobs().tailWords().keys(1).unroll(8).scatter()},
        VariantCase{D80mha, Knobs().tailWords().keys(1).unroll(4).scatter()},
        VariantCase{Long, Knobs().vec(8).keys(1).unroll(2).scatter().splitK(4).merged(), 4},
        // The output's rescale skipped where no lane's maximum grew (a subgroup vote), per head and
        // with scattered scores.
        VariantCase{A, Knobs().lazy()}, VariantCase{Batch3, Knobs().keys(2).unroll(2).lazy()},
        VariantCase{Long, Knobs().vec(8).unroll(8).lazy().splitK(4).merged(), 4},
        VariantCase{D80, Knobs().tailWords().unroll(4).scatter().lazy()},
        VariantCase{Batch3, Knobs().keys(2).unroll(2).scatter().lazy()},
        // Scalar variant.
        VariantCase{A, Knobs().scalar()}, VariantCase{B, Knobs().scalar().warps(1)},
        VariantCase{C, Knobs().scalar().warps(2)},
        // Partials kept in half or float in shared memory.
        VariantCase{A, Knobs().half()}, VariantCase{B, Knobs().half().keys(2)}, VariantCase{C, Knobs().half().warps(8)},
        VariantCase{C, Knobs().floatPartials().warps(2)}, VariantCase{A, Knobs().scalar().floatPartials()},
        // Split-K off and on.
        VariantCase{A, Knobs().splitK(1), 1}, VariantCase{A, Knobs().splitK(3), 3}, VariantCase{A, Knobs().splitK(5), 5},
        VariantCase{B, Knobs().splitK(3).scalar(), 3}, VariantCase{B, Knobs().splitK(5).keys(4).vec(2), 5},
        VariantCase{C, Knobs().splitK(5).half().warps(8), 5}, VariantCase{Batch3, Knobs().splitK(3), 3},
        VariantCase{Batch3, Knobs().splitK(1), 1}, VariantCase{Long, Knobs().splitK(1), 1},
        VariantCase{Long, Knobs().splitK(5), 5},
        // Split-K merged in the last workgroup of each head group (the default) or by a reduce kernel;
        // Long with 64 splits has splits that see no key.
        VariantCase{A, Knobs().splitK(3).reduceKernel(), 3}, VariantCase{Batch3, Knobs().splitK(3).reduceKernel(), 3},
        VariantCase{B, Knobs().splitK(5).scalar().reduceKernel(), 5}, VariantCase{Batch3, Knobs().splitK(4).merged(), 4},
        VariantCase{C, Knobs().splitK(7).merged().half(), 7}, VariantCase{Long, Knobs().splitK(64).merged(), 64},
        VariantCase{A, Knobs().splitK(1).merged(), 1},
        // The batched merge (the tuning table's choice on GPUs; lavapipe folds each element's splits in a
        // loop): 4 elements an invocation, and the ragged fold with 8 subgroups: one batch of 4, one of
        // 16, and two batches of 16 (the second folded at a new maximum); and the loop's form there.
        VariantCase{B, Knobs().warps(1).splitK(5).merged().batched(), 5},
        VariantCase{D72, Knobs().warps(8).splitK(3).merged().batched(), 3},
        VariantCase{D72, Knobs().warps(8).splitK(13).merged().batched(), 13},
        VariantCase{D72, Knobs().warps(8).splitK(29).merged().batched(), 29},
        VariantCase{D72, Knobs().warps(8).splitK(13).merged(), 13},
        // Each split's own chunk shortened and the keys past them claimed a step (or a tensor-core round)
        // at a time by the subgroups done first: most of the keys claimed, a few, with unrolled steps,
        // scattered scores and the vote, tail words, several sequences, step-aligned ends past a
        // range's start, and on the tensor cores.
        VariantCase{Long, Knobs().splitK(4).merged().claims(600), 4},
        VariantCase{Long, Knobs().vec(8).unroll(8).splitK(5).merged().claims(64), 5},
        VariantCase{Long, Knobs().vec(8).keys(1).unroll(2).scatter().lazy().splitK(4).merged().claims(300), 4},
        VariantCase{D80, Knobs().tailWords().vec(8).splitK(3).merged().claims(40), 3},
        VariantCase{Batch3, Knobs().keys(2).unroll(2).splitK(3).merged().claims(12), 3},
        VariantCase{D72, Knobs().warps(8).splitK(3).merged().batched().claims(200), 3},
        VariantCase{Long, Knobs().tensorCores().splitK(5).merged().claims(256), 5},
        VariantCase{D80, Knobs().tensorCores().splitK(2).merged().claims(64), 2},
        // The heads as columns of tensor-core products (where the device has them): GQA 8 and MQA 4,
        // rows of 64, 80, 96 and 128, Split-K merged or reduced, 4 and 8 subgroups, 1 to 4 tiles in
        // flight.
        VariantCase{C, Knobs().tensorCores(), 1}, VariantCase{A, Knobs().tensorCores().warps(4), 1},
        VariantCase{Long, Knobs().tensorCores().splitK(5), 5}, VariantCase{Long, Knobs().tensorCores().unroll(1).splitK(2), 2},
        VariantCase{Long, Knobs().tensorCores().splitK(3).reduceKernel().warps(4), 3},
        VariantCase{D80, Knobs().tensorCores().splitK(2), 2}, VariantCase{D96, Knobs().tensorCores().warps(8).splitK(1), 1}),
    variantName);

// ---- Prefill.

class PrefillVariants : public ::testing::TestWithParam<VariantCase> {};

TEST_P(PrefillVariants, ForcedVariantRunsAndMatches) {
  const VariantCase& vc = GetParam();
  const AttentionOptions& o = vc.options;
  if (o.faPrefillCoopMat == Force::On && !runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    GTEST_SKIP() << "the device has no cooperative matrices";
  }
  if (o.faPrefillCoopMat2 == Force::On && !runtime().info().coopMat2) {
    GTEST_SKIP() << "no workgroup-scope cooperative matrices here (the device, or a glslc for them: FOUNDRY_GLSLC)";
  }
  const AttentionResult r = runFlash(vc.shape, o);
  const AttentionPlan& plan = r.record.plan;
  ASSERT_FALSE(plan.decode);
  const PrefillVariant& v = plan.prefillVariant;
  EXPECT_EQ(v.coopMat, o.faPrefillCoopMat == Force::On) << plan.describe();
  if (o.faPrefillWarps) {
    EXPECT_EQ(v.warps, *o.faPrefillWarps) << plan.describe();
  }
  if (vc.stages && onLavapipeLimits()) {
    EXPECT_EQ(v.stages, vc.stages) << plan.describe();
  }
  if (vc.rows && onLavapipeLimits()) {
    EXPECT_EQ(v.rowsPerWarp, vc.rows) << plan.describe();
  }
  if (o.faPrefillKeysPerTile) {
    EXPECT_EQ(v.keysPerTile, *o.faPrefillKeysPerTile) << plan.describe();
  }
  if (o.faPrefillHeadsFirst != Force::Auto) {
    EXPECT_EQ(v.headsFirst, o.faPrefillHeadsFirst == Force::On) << plan.describe();
  }
  if (o.faPrefillMaskSplit != Force::Auto) {
    EXPECT_EQ(v.maskSplit, o.faPrefillMaskSplit == Force::On) << plan.describe();
  }
  EXPECT_EQ(v.loader, o.faPrefillLoader == Force::On) << plan.describe();
  EXPECT_EQ(v.coopMat2, o.faPrefillCoopMat2 == Force::On) << plan.describe();
  EXPECT_EQ(v.coopMat2Subgroup, o.faPrefillCoopMat2Subgroup.value_or(false)) << plan.describe();
  if (o.faPrefillStages) {
    EXPECT_EQ(v.stages, *o.faPrefillStages) << plan.describe();
  }
  const std::uint32_t splits = forcedSplits(vc.shape.kvLen, vc.splits, v.keysPerTile);
  EXPECT_EQ(plan.splits, splits) << plan.describe();
  EXPECT_EQ(v.split, splits > 1) << plan.describe();
  if (vc.splits > 1) {
    EXPECT_EQ(plan.kvChunk % v.keysPerTile, 0u) << plan.describe();
  }
  // The kernel name carries the variant key without its split suffix.
  PrefillVariant unsplit = v;
  unsplit.split = false;
  expectKernels(r.record, unsplit.key());
  EXPECT_TRUE(matchesReference(vc.shape, r));
}

// The tiles the Selector picks on lavapipe (subgroup 8, 32 KiB of shared memory): 16 keys, one staging
// buffer (the tuning table's lavapipe row), and for f32 D128 with 8 subgroups only 2 query rows per
// subgroup. Two staging buffers, forced, where they fit: f16 D64 and D128, f32 D64.
const AttentionCase P1 = shape(1, 4, 1, 33, 100, 64, DType::F16);
const AttentionCase P2 = shape(1, 4, 2, 31, 257, 128, DType::F32, TM, TM);
const AttentionCase P3 = shape(1, 2, 1, 128, 128, 128, DType::F16);
const AttentionCase P4 = shape(1, 4, 4, 7, 85, 64, DType::F32, HM, TM);
const AttentionCase P5 = shape(3, 8, 1, 32, 90, 64, DType::F16, TM, TM);
const AttentionCase P6 = shape(2, 4, 2, 45, 300, 128, DType::F16, TM, TM);
const AttentionCase P7 = shape(1, 4, 2, 100, 130, 256, DType::F16);
// Row maxima that keep growing past the first tiles, by more than the subgroup-scope coopmat2 kernel's
// slack (8 in log2): ALiBi with steep slopes (each key nearer the query scores higher, by 4 to 32 per
// 32-key tile), and q and k of magnitude 4 (scores with a standard deviation of about 8 in log2).
AttentionCase withModifiers(AttentionCase c, std::vector<ModifierSpec> m) {
  c.modifiers = std::move(m);
  return c;
}
AttentionCase withMagnitude(AttentionCase c, float magnitude) {
  c.magnitude = magnitude;
  return c;
}
const AttentionCase P8 = withModifiers(shape(1, 4, 2, 64, 300, 128, DType::F16), {alibi({0.125, 0.25, 0.5, 1.0})});
const AttentionCase P9 = withMagnitude(shape(2, 4, 1, 70, 260, 64, DType::F16, TM, TM), 4.0f);
// Rows of 80 and 96 (the Hopper plans' coopmat2 tilings: 64-key tiles in one staging buffer), the
// scores of magnitude 4 so that the rescale runs at later tiles too.
const AttentionCase P10 = withMagnitude(shape(1, 4, 2, 70, 200, 80, DType::F16), 4.0f);
const AttentionCase P11 = withMagnitude(shape(2, 4, 1, 90, 230, 96, DType::F16, TM, TM), 4.0f);

INSTANTIATE_TEST_SUITE_P(
    Knobs, PrefillVariants,
    ::testing::Values(
        // Subgroups per workgroup (each a different query tile height), and the staging depth.
        VariantCase{P1, Knobs().prefillWarps(1).noPrefillSplitK(), 1, 1, 4},
        VariantCase{P1, Knobs().prefillWarps(2).stages(2).noPrefillSplitK(), 1, 2, 4},
        VariantCase{P1, Knobs().prefillWarps(4).noPrefillSplitK(), 1, 1, 4},
        VariantCase{P4, Knobs().prefillWarps(1).stages(2).noPrefillSplitK(), 1, 2, 4},
        VariantCase{P2, Knobs().prefillWarps(2).noPrefillSplitK(), 1, 1, 4},
        VariantCase{P2, Knobs().prefillWarps(4).noPrefillSplitK(), 1, 1, 4},
        VariantCase{P2, Knobs().prefillWarps(8).noPrefillSplitK(), 1, 1, 2},  // and 2 rows per subgroup
        VariantCase{P3, Knobs().prefillWarps(4).stages(2).noPrefillSplitK(), 1, 2, 4},
        VariantCase{P4, Knobs().prefillWarps(2).noPrefillSplitK(), 1, 1, 4},
        // Split-K off (explicitly, and disabled over a requested split) and on.
        VariantCase{P1, Knobs().prefillSplitK(1), 1}, VariantCase{P1, Knobs().prefillSplitK(2), 2},
        VariantCase{P1, Knobs().prefillSplitK(2).prefillWarps(4), 2},
        VariantCase{P2, Knobs().prefillSplitK(3).noPrefillSplitK(), 1}, VariantCase{P2, Knobs().prefillSplitK(3), 3},
        VariantCase{P2, Knobs().prefillSplitK(2).prefillWarps(8), 2, 1, 2},
        VariantCase{P3, Knobs().prefillSplitK(3), 3},  // early query tiles see only the first split
        VariantCase{P4, Knobs().prefillSplitK(3), 3}, VariantCase{P5, Knobs().prefillSplitK(2), 2},
        // Keys per K/V tile.
        VariantCase{P1, Knobs().prefillKeys(16).noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().prefillKeys(64).prefillWarps(2).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().prefillKeys(32).prefillSplitK(2), 2},
        // Grid order: heads fastest, or each head's query tiles in turn (batches of 3, Split-K).
        VariantCase{P5, Knobs().headsFirst(true).prefillSplitK(2), 2},
        VariantCase{P5, Knobs().headsFirst(false).prefillSplitK(2), 2},
        VariantCase{P2, Knobs().headsFirst(false).noPrefillSplitK(), 1},
        VariantCase{P5, Knobs().coopMat().headsFirst(false).noPrefillSplitK(), 1},
        // The tile code once, its masks under a run-time flag (causal tiles on and off the diagonal,
        // a Split-K whose early splits need no mask).
        VariantCase{P3, Knobs().maskSplit(false).prefillSplitK(3), 3},
        VariantCase{P5, Knobs().maskSplit(false).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().maskSplit(false).noPrefillSplitK(), 1},
        VariantCase{P5, Knobs().coopMat().maskSplit(true).prefillSplitK(2), 2},
        VariantCase{P7, Knobs().maskSplit(false).noPrefillSplitK(), 1},
        // The cooperative-matrix variant, where the device has it (the f16 shapes).
        VariantCase{P1, Knobs().coopMat().prefillWarps(1).noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat().prefillWarps(2).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().prefillSplitK(3), 3}, VariantCase{P5, Knobs().coopMat().prefillSplitK(2), 2},
        VariantCase{P1, Knobs().coopMat().prefillSplitK(2).prefillWarps(4), 2},
        VariantCase{P3, Knobs().coopMat().prefillKeys(32).prefillWarps(8).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().prefillKeys(64).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P5, Knobs().coopMat().prefillKeys(32).prefillSplitK(2), 2},
        // ... with a loader subgroup (the other subgroups only compute), and a forced staging depth.
        VariantCase{P1, Knobs().coopMat().loader().noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().loader().prefillKeys(32).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().loader().prefillWarps(4).prefillSplitK(3), 3},
        VariantCase{P5, Knobs().coopMat().loader().prefillKeys(32).prefillWarps(2).prefillSplitK(2), 2},
        VariantCase{P3, Knobs().coopMat().stages(1).prefillKeys(32).prefillWarps(4).noPrefillSplitK(), 1},
        // ... with Q staged in passes: query tiles taller than the staging area (4 passes, 2 with rows past
        // the end, and the 256-wide rows' 2).
        VariantCase{P3, Knobs().coopMat().stages(1).prefillKeys(16).prefillWarps(8).noPrefillSplitK(), 1},
        VariantCase{P6, Knobs().coopMat().stages(1).prefillKeys(16).prefillWarps(4).prefillSplitK(2), 2},
        VariantCase{P7, Knobs().coopMat().stages(1).prefillKeys(32).prefillWarps(8).noPrefillSplitK(), 1},
        VariantCase{P7, Knobs().coopMat().loader().prefillKeys(16).prefillWarps(8).noPrefillSplitK(), 1},
        // ... with the softmax through shared memory, the route for devices whose layout is unknown.
        VariantCase{P1, Knobs().coopMat().sharedSoftmax().noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat().sharedSoftmax().prefillSplitK(3), 3},
        VariantCase{P5, Knobs().coopMat().sharedSoftmax().prefillWarps(2).noPrefillSplitK(), 1},
        // ... on workgroup-scope matrices (GL_NV_cooperative_matrix2), where the device and a glslc have them.
        VariantCase{P1, Knobs().coopMat2().noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat2().prefillWarps(2).noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat2().prefillWarps(4).prefillKeys(16).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2().prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2().prefillSplitK(3), 3}, VariantCase{P5, Knobs().coopMat2().prefillSplitK(2), 2},
        VariantCase{P3, Knobs().coopMat2().prefillKeys(64).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2().stages(1).prefillKeys(32).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P5, Knobs().coopMat2().prefillKeys(16).prefillWarps(2).headsFirst(false).noPrefillSplitK(), 1},
        // ... with K/V tiles loaded straight from the cache (no staging; rows past the range read as 0).
        VariantCase{P1, Knobs().coopMat2().stages(0).noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat2().stages(0).prefillWarps(2).prefillKeys(64).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2().stages(0).prefillSplitK(3), 3},
        VariantCase{P5, Knobs().coopMat2().stages(0).prefillKeys(16).prefillWarps(2).prefillSplitK(2), 2},
        VariantCase{P6, Knobs().coopMat2().stages(0).noPrefillSplitK(), 1},
        VariantCase{P6, Knobs().coopMat2().stages(0).prefillSplitK(2), 2},
        // ... on subgroup-scope matrices of flexible dimensions (each subgroup's 16 rows), the epilogue
        // through the staging area in passes (P6 with 8 subgroups: 3 passes of 48, 48 and 32 rows).
        VariantCase{P1, Knobs().coopMat2Subgroup().noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat2Subgroup().prefillWarps(2).noPrefillSplitK(), 1},
        VariantCase{P1, Knobs().coopMat2Subgroup().prefillWarps(4).prefillKeys(16).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2Subgroup().prefillWarps(8).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2Subgroup().prefillSplitK(3), 3},
        VariantCase{P5, Knobs().coopMat2Subgroup().prefillSplitK(2), 2},
        VariantCase{P3, Knobs().coopMat2Subgroup().prefillKeys(64).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P3, Knobs().coopMat2Subgroup().stages(1).prefillKeys(32).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P5, Knobs().coopMat2Subgroup().prefillKeys(16).prefillWarps(2).headsFirst(false).noPrefillSplitK(), 1},
        VariantCase{P6, Knobs().coopMat2Subgroup().noPrefillSplitK(), 1},
        VariantCase{P6, Knobs().coopMat2Subgroup().prefillWarps(8).prefillSplitK(2), 2},
        VariantCase{P1, Knobs().coopMat2Subgroup().stages(0).noPrefillSplitK(), 1},
        VariantCase{P6, Knobs().coopMat2Subgroup().stages(0).prefillSplitK(2), 2},
        // ... and row maxima that grow past the first tiles: O and L rescaled at later tiles too (the
        // subgroup-scope kernel rescales only where a maximum passed the one in use by its slack).
        VariantCase{P8, Knobs().coopMat2Subgroup().noPrefillSplitK(), 1},
        VariantCase{P8, Knobs().coopMat2Subgroup().prefillWarps(4).prefillSplitK(2), 2},
        VariantCase{P9, Knobs().coopMat2Subgroup().noPrefillSplitK(), 1},
        VariantCase{P9, Knobs().coopMat2Subgroup().stages(1).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P8, Knobs().coopMat().noPrefillSplitK(), 1}, VariantCase{P9, Knobs().coopMat().prefillSplitK(2), 2},
        VariantCase{P8, Knobs().noPrefillSplitK(), 1}, VariantCase{P9, Knobs().noPrefillSplitK(), 1},
        VariantCase{P10, Knobs().coopMat2Subgroup().stages(1).prefillKeys(64).prefillWarps(4).noPrefillSplitK(), 1},
        VariantCase{P10, Knobs().coopMat2Subgroup().stages(1).prefillKeys(64).prefillWarps(4).prefillSplitK(2), 2},
        VariantCase{P11, Knobs().coopMat2Subgroup().stages(1).prefillKeys(64).prefillWarps(8).noPrefillSplitK(), 1},
        VariantCase{P11, Knobs().coopMat2Subgroup().stages(1).prefillKeys(32).prefillWarps(4).prefillSplitK(2), 2},
        VariantCase{P10, Knobs().noPrefillSplitK(), 1}, VariantCase{P11, Knobs().noPrefillSplitK(), 1}),
    variantName);

}  // namespace
}  // namespace foundry::test
