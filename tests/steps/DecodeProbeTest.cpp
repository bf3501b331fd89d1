// The decode probe's build of the kernels (FOUNDRY_FA_DECODE_PROBE) computes what the plain build
// does, and every subgroup of the grid writes a record whose milestones come in order; with the
// Split-K merged in the last workgroup, exactly one workgroup of each head group merges.
#include <gtest/gtest.h>

#include "foundry/stages/PrefillProbe.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct ProbeCase {
  AttentionCase shape;
  std::uint32_t splits = 1;
  Force fused = Force::Auto;
  bool scalar = false;
};

class DecodeProbe : public ::testing::TestWithParam<ProbeCase> {};

TEST_P(DecodeProbe, RecordsEverySubgroupsMilestonesInOrderAndMatchesTheReference) {
  const ProbeCase& pc = GetParam();
  if (!runtime().info().shaderClock) GTEST_SKIP() << "the device has no shader clocks";
  AttentionOptions o;
  o.faDecodeProbe = true;
  if (pc.splits > 1) o.faDecodeSplitK = pc.splits;
  o.faDecodeFusedReduce = pc.fused;
  o.faDecodeScalar = pc.scalar;
  const AttentionResult r = runFlash(pc.shape, o);
  const AttentionPlan& plan = r.record.plan;
  ASSERT_TRUE(plan.decode && plan.decodeVariant.probe) << plan.describe();
  EXPECT_NE(r.record.kernels[0].find("_probe"), std::string::npos) << r.record.kernels[0];
  EXPECT_TRUE(matchesReference(pc.shape, r));

  const std::uint32_t warps = plan.probeSubgroups();
  const std::uint64_t groups = std::uint64_t(plan.grid.x) * plan.grid.y * plan.grid.z;
  ASSERT_EQ(r.probeWords.size(), probe::words(groups, warps));
  std::uint32_t mergedRecords = 0;
  for (std::uint64_t i = 0; i < groups * warps; ++i) {
    const std::uint32_t* rec = &r.probeWords[i * probe::kWords];
    SCOPED_TRACE(testing::Message() << "subgroup " << i % warps << " of workgroup " << i / warps);
    using probe::clockAt;
    const std::uint64_t start = clockAt(rec, probe::kStart), begun = clockAt(rec, probe::kStreamBegun),
                        done = clockAt(rec, probe::kStreamDone), handed = clockAt(rec, probe::kHandedOver),
                        end = clockAt(rec, probe::kEnd);
    ASSERT_NE(start, 0u) << "no record";
    EXPECT_LE(start, begun);
    EXPECT_LE(begun, done);
    EXPECT_LE(done, handed);
    EXPECT_LE(handed, end);
    EXPECT_LE(rec[probe::kMerged], 1u);
    mergedRecords += rec[probe::kMerged];
    EXPECT_EQ(rec[0] == ~0u, !runtime().info().smBuiltins);
  }
  const probe::DecodeSummary s = probe::summarizeDecode(r.probeWords, warps);
  EXPECT_EQ(s.workgroups, groups);
  EXPECT_GT(s.spanTicks, 0.0) << s.describe();
  EXPECT_GE(s.tail, 0.0) << s.describe();
  // The last workgroup of each head group (batch x KV heads' worth of query-head groups) merges.
  const bool fused = plan.splits > 1 && plan.decodeVariant.fusedReduce;
  EXPECT_EQ(s.merged, fused ? std::uint64_t(plan.grid.y) * plan.grid.z : 0u) << s.describe();
  EXPECT_EQ(mergedRecords, s.merged * warps);
}

INSTANTIATE_TEST_SUITE_P(
    Decode, DecodeProbe,
    ::testing::Values(ProbeCase{attentionCase(1, 8, 2, 1, 300, 128, DType::F16)},
                      ProbeCase{attentionCase(2, 8, 2, 1, 1000, 80, DType::F16), 3, Force::On},
                      ProbeCase{attentionCase(1, 4, 1, 1, 700, 64, DType::F16), 4, Force::Off},
                      ProbeCase{attentionCase(1, 4, 2, 1, 500, 64, DType::F32), 2, Force::On, true}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

}  // namespace
}  // namespace foundry::test
