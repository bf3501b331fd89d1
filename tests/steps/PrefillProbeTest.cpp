// The prefill probe's build of the kernels (FOUNDRY_FA_PREFILL_PROBE) computes what the plain build
// does, and every subgroup of the grid writes a coherent record.
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/stages/PrefillProbe.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct ProbeCase {
  AttentionCase shape;
  bool coopMat = false;
  std::uint32_t splits = 1;
  bool loader = false;  ///< a loader subgroup, whose record follows the compute subgroups'
};

class PrefillProbe : public ::testing::TestWithParam<ProbeCase> {};

TEST_P(PrefillProbe, RecordsEverySubgroupAndMatchesTheReference) {
  const ProbeCase& pc = GetParam();
  if (!runtime().info().shaderClock) GTEST_SKIP() << "the device has no shader clocks";
  if (pc.coopMat && !runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    GTEST_SKIP() << "the device has no cooperative matrices";
  }
  AttentionOptions o;
  o.faPrefillProbe = true;
  o.faPrefillCoopMat = pc.coopMat ? Force::On : Force::Off;
  o.faPrefillSplitK = pc.splits;
  if (pc.loader) o.faPrefillLoader = Force::On;
  const AttentionResult r = runFlash(pc.shape, o);
  const AttentionPlan& plan = r.record.plan;
  ASSERT_TRUE(plan.prefillVariant.probe) << plan.describe();
  EXPECT_NE(r.record.kernels[0].find("_probe"), std::string::npos);
  EXPECT_TRUE(matchesReference(pc.shape, r));

  const std::uint32_t warps = plan.prefillVariant.subgroups();
  const std::uint64_t groups = std::uint64_t(plan.grid.x) * plan.grid.y * plan.grid.z;
  ASSERT_EQ(r.probeWords.size(), probe::words(groups, warps));
  for (std::uint64_t i = 0; i < groups * warps; ++i) {
    const std::uint32_t* rec = &r.probeWords[i * probe::kWords];
    const std::uint64_t start = probe::clockAt(rec, probe::kStart), end = probe::clockAt(rec, probe::kEnd);
    ASSERT_NE(start, 0u) << "subgroup " << i % warps << " of workgroup " << i / warps << " wrote no record";
    EXPECT_LE(start, end);
    std::uint64_t phases = 0;
    for (std::uint32_t p = 0; p < probe::kPhases; ++p) phases += rec[7 + p];
    EXPECT_LE(phases, rec[6]) << "workgroup " << i / warps;
    EXPECT_EQ(rec[0] == ~0u, !runtime().info().smBuiltins);
  }
  const probe::Summary s = probe::summarize(r.probeWords, warps);
  EXPECT_EQ(s.workgroups, groups);
  // Every kernel loads K/V; the cooperative-matrix one marks its products, the subgroup one its tile.
  EXPECT_GT(s.phaseShare[1], 0.0) << s.describe();
  if (pc.coopMat) {
    EXPECT_GT(s.phaseShare[2], 0.0) << s.describe();
    EXPECT_GT(s.phaseShare[4], 0.0) << s.describe();
  } else {
    EXPECT_GT(s.phaseShare[5], 0.0) << s.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Prefill, PrefillProbe,
    ::testing::Values(ProbeCase{attentionCase(1, 4, 2, 70, 70, 64, DType::F16)},
                      ProbeCase{attentionCase(2, 2, 1, 33, 100, 128, DType::F16), false, 2},
                      ProbeCase{attentionCase(1, 4, 2, 200, 200, 128, DType::F16), true},
                      ProbeCase{attentionCase(1, 4, 2, 70, 300, 64, DType::F16), true, 2},
                      ProbeCase{attentionCase(1, 4, 2, 200, 200, 128, DType::F16), true, 1, true}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

}  // namespace
}  // namespace foundry::test
