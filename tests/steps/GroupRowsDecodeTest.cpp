// Decode as a prefill of each KV head's GQA group (FOUNDRY_FA_DECODE_GROUP_ROWS): the query heads that
// share a KV head become the rows of one prefill query, so the prefill kernels (cooperative matrices on
// a GPU that has them, the subgroup variant on lavapipe) serve the call. Against the CPU float64
// reference with NaN-poisoned outputs (AttentionHarness), through every cache format and layout the
// prefill takes, Split-K parts and the LSE; and the Selector's rules for when a call may go this way.
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/steps/Selector.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct GroupCase {
  std::string label;
  AttentionCase c;
  std::vector<std::pair<std::string, std::string>> knobs;  ///< beside FOUNDRY_FA_DECODE_GROUP_ROWS=1
};

void PrintTo(const GroupCase& g, std::ostream* os) { *os << g.label << "_" << g.c.name(); }

GroupCase groupCase(std::string label, std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads,
                    std::uint32_t kvLen, std::uint32_t headDim, DType kv = DType::F16,
                    std::vector<std::pair<std::string, std::string>> knobs = {}) {
  GroupCase g{std::move(label), attentionCase(batch, heads, kvHeads, 1, kvLen, headDim, kv), std::move(knobs)};
  g.c.seed = batch * 131 + heads * 17 + kvLen + headDim;
  if (quantized(kv)) g.c.qType = g.c.oType = DType::F16;
  return g;
}

GroupCase with(GroupCase g, const std::function<void(AttentionCase&)>& change) {
  change(g.c);
  return g;
}

AttentionOptions groupOptions(const GroupCase& g) {
  std::map<std::string, std::string> env(g.knobs.begin(), g.knobs.end());
  env["FOUNDRY_FA_DECODE_GROUP_ROWS"] = "1";
  return AttentionOptions::fromEnvironment(env);
}

void checkGroupCase(const GroupCase& g) {
  const AttentionResult r = runFlash(g.c, groupOptions(g));
  const AttentionPlan& plan = r.record.plan;
  // The call went through the prefill kernels, and the plan says why first.
  ASSERT_FALSE(plan.decode) << plan.describe();
  ASSERT_FALSE(plan.decisions.empty());
  EXPECT_EQ(plan.decisions.front().what, "decode") << plan.describe();
  EXPECT_EQ(plan.decisions.front().reason, "FOUNDRY_FA_DECODE_GROUP_ROWS");
  ASSERT_FALSE(r.record.kernels.empty());
  EXPECT_NE(r.record.kernels.back().find(plan.splits > 1 ? "SplitKReduce" : "SdpaPrefill"), std::string::npos)
      << r.record.kernels.back();
  const bool coop = runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32}) && g.c.headDim % 16 == 0 &&
                    (g.c.dtype == DType::F16 || quantized(g.c.dtype));
  EXPECT_EQ(plan.prefillVariant.coopMat, coop) << plan.describe();
  EXPECT_TRUE(matchesReference(g.c, r)) << r.record.plan.describe();
  if (quantized(g.c.dtype)) {
    EXPECT_LE(r.errorUnquantized.maxRel, quantizationBound(g.c.dtype)) << "against the values before quantization";
  }
}

class GroupRowsDecode : public ::testing::TestWithParam<GroupCase> {};

TEST_P(GroupRowsDecode, MatchesCpuReference) { checkGroupCase(GetParam()); }

std::string groupName(const ::testing::TestParamInfo<GroupCase>& info) {
  return gtestSafe(info.param.label + "_" + info.param.c.name());
}

using Knobs = std::vector<std::pair<std::string, std::string>>;
constexpr DType F16 = DType::F16;

// Formats and layouts on one head dim, so that most cases share their kernels (lavapipe compiles each
// in seconds); other head dims on cooperative matrices only (on lavapipe the subgroup prefill they
// would run is HeadDimParity's).
INSTANTIATE_TEST_SUITE_P(
    Formats, GroupRowsDecode,
    ::testing::Values(groupCase("g4", 1, 8, 2, 300, 64),
                      groupCase("g8", 1, 16, 2, 257, 64),
                      groupCase("g16", 1, 32, 2, 100, 64),
                      groupCase("kv1", 1, 8, 2, 1, 64),
                      groupCase("g4_b3", 3, 16, 4, 1000, 64),
                      with(groupCase("g4_qtok_otok", 2, 8, 2, 300, 64),
                           [](AttentionCase& c) { c.qLayout = c.oLayout = Layout::TokenMajor; }),
                      with(groupCase("g4_kvtok", 2, 8, 2, 300, 64), [](AttentionCase& c) { c.tokenMajorCache = true; }),
                      with(groupCase("g4_paged", 2, 8, 2, 300, 64), [](AttentionCase& c) { c.pageSize = 32; }),
                      with(groupCase("g4_lse", 1, 8, 2, 300, 64), [](AttentionCase& c) { c.lse = true; }),
                      with(groupCase("g4_f32out", 1, 8, 2, 300, 64), [](AttentionCase& c) { c.oType = DType::F32; }),
                      groupCase("g4_bf16", 1, 8, 2, 300, 64, DType::BF16),
                      groupCase("g4_int8", 1, 8, 2, 300, 64, DType::I8),
                      groupCase("g4_q8_0", 1, 8, 2, 300, 64, DType::Q8_0)),
    groupName);

INSTANTIATE_TEST_SUITE_P(
    SplitK, GroupRowsDecode,
    ::testing::Values(groupCase("split3", 1, 8, 2, 1000, 64, F16, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
                      with(groupCase("split5_lse", 2, 16, 4, 2100, 64, F16, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "5"}}),
                           [](AttentionCase& c) { c.lse = true; }),
                      with(groupCase("split3_paged", 2, 8, 2, 700, 64, F16, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
                           [](AttentionCase& c) { c.pageSize = 64; })),
    groupName);

class GroupRowsDecodeCoopMat : public ::testing::TestWithParam<GroupCase> {};

TEST_P(GroupRowsDecodeCoopMat, MatchesCpuReference) {
  if (!runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    GTEST_SKIP() << "no cooperative matrices on this device";
  }
  checkGroupCase(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    HeadDims, GroupRowsDecodeCoopMat,
    ::testing::Values(groupCase("d80", 1, 4, 2, 333, 80), groupCase("d96", 1, 8, 2, 129, 96),
                      groupCase("d128", 2, 16, 4, 1000, 128), groupCase("d256", 1, 8, 2, 200, 256),
                      groupCase("d128_int8", 1, 8, 2, 1500, 128, DType::I8),
                      groupCase("d128_int8_split4", 1, 8, 2, 1500, 128, DType::I8,
                                Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "4"}}),
                      groupCase("d128_split64", 1, 32, 8, 8192, 128, F16, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "64"}})),
    groupName);

// ---- The Selector's rules (pure: no device).

AttentionProblem decodeProblem() {
  AttentionProblem p;
  p.batch = 2, p.nHeads = 32, p.nKvHeads = 8, p.qLen = 1, p.kvLen = p.kvCapacity = 4096, p.headDim = 128;
  return p;
}

TEST(GroupRowsSelector, RefusesWhatItCannotTake) {
  EXPECT_EQ(Selector::groupRowsRefusal(decodeProblem(), false), "");
  AttentionProblem prefill = decodeProblem();
  prefill.qLen = 2;
  EXPECT_NE(Selector::groupRowsRefusal(prefill, false).find("q_len 2"), std::string::npos);
  AttentionProblem mha = decodeProblem();
  mha.nKvHeads = mha.nHeads;
  EXPECT_NE(Selector::groupRowsRefusal(mha, false).find("GQA group has 1"), std::string::npos);
  EXPECT_NE(Selector::groupRowsRefusal(decodeProblem(), true).find("RoPE"), std::string::npos);
  AttentionProblem latent = decodeProblem();
  latent.valueDim = 64;
  EXPECT_NE(Selector::groupRowsRefusal(latent, false).find("value_dim 64"), std::string::npos);
}

TEST(GroupRowsSelector, KnobOnARefusedCallIsAUserError) {
  AttentionOptions o;
  o.faDecodeGroupRows = Force::On;
  try {
    Selector::decodeAsGroupRows(decodeProblem(), true, parseDevicePreset("h200"), o);
    FAIL() << "fused RoPE taken as group rows";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.field()).find("FOUNDRY_FA_DECODE_GROUP_ROWS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RoPE"), std::string::npos) << e.what();
  }
  // A prefill call is not the knob's business: it stays a prefill of its own rows.
  AttentionProblem prefill = decodeProblem();
  prefill.qLen = 64;
  EXPECT_FALSE(Selector::decodeAsGroupRows(prefill, false, parseDevicePreset("h200"), o));
  o.faDecodeGroupRows = Force::Off;
  EXPECT_FALSE(Selector::decodeAsGroupRows(decodeProblem(), false, parseDevicePreset("h200"), o));
  // Auto on a device without cooperative matrices: the decode kernels.
  EXPECT_FALSE(Selector::decodeAsGroupRows(decodeProblem(), false, parseDevicePreset("lavapipe"), AttentionOptions{}));
}

TEST(GroupRowsSelector, TheGroupedProblemIsOnePrefillQueryPerKvHead) {
  const AttentionProblem g = Selector::groupRowsProblem(decodeProblem());
  EXPECT_EQ(g.nHeads, 8u);
  EXPECT_EQ(g.nKvHeads, 8u);
  EXPECT_EQ(g.qLen, 4u);
  EXPECT_FALSE(g.causal);
  // On the H200 the prefill of the groups takes cooperative matrices, split over the keys to fill the
  // device (8 query tiles for 132 compute units).
  const AttentionPlan plan = Selector::plan(g, parseDevicePreset("h200"), AttentionOptions{});
  ASSERT_FALSE(plan.decode);
  EXPECT_TRUE(plan.prefillVariant.coopMat) << plan.describe();
  EXPECT_GT(plan.splits, 1u) << plan.describe();
}

}  // namespace
}  // namespace foundry::test
