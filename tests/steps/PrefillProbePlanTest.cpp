// The prefill probe without a device: probe::summarize on hand-made records (residency per SM, idle
// SMs, the phase shares), and the probe's kernels planned and compiled for device presets.
#include <gtest/gtest.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/stages/PrefillProbe.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/testing/ShapeCall.h"
#include "support/CachedCompiler.h"

namespace foundry::probe {
namespace {

struct Record {
  std::uint32_t sm;
  std::uint64_t start, end;
  std::array<std::uint32_t, kPhases> phases{};
  std::uint32_t cycles = 0;
};

std::vector<std::uint32_t> words(const std::vector<std::vector<Record>>& groups) {
  std::vector<std::uint32_t> w;
  for (const auto& g : groups) {
    for (const auto& r : g) {
      std::vector<std::uint32_t> rec(kWords, 0u);
      rec[0] = r.sm;
      rec[2] = static_cast<std::uint32_t>(r.start);
      rec[3] = static_cast<std::uint32_t>(r.start >> 32);
      rec[4] = static_cast<std::uint32_t>(r.end);
      rec[5] = static_cast<std::uint32_t>(r.end >> 32);
      rec[6] = r.cycles;
      for (std::uint32_t p = 0; p < kPhases; ++p) rec[7 + p] = r.phases[p];
      w.insert(w.end(), rec.begin(), rec.end());
    }
  }
  return w;
}

TEST(PrefillProbeSummary, CountsWorkgroupsSharingAnSm) {
  const std::uint64_t t = 1ull << 33;  // past 32 bits: the high words count
  // SM 0: two workgroups overlapping for half of each, then a third alone. SM 1: one, then idle.
  const auto w = words({{{0, t, t + 100}}, {{0, t + 50, t + 150}}, {{0, t + 150, t + 200}}, {{1, t, t + 100}}});
  const Summary s = summarize(w, 1);
  EXPECT_EQ(s.workgroups, 4u);
  EXPECT_EQ(s.sms, 2u);
  EXPECT_EQ(s.maxResident, 2u);
  // SM 0 busy 200 ticks holding 250 workgroup-ticks, SM 1 busy 100 holding 100: (250 + 100) / 300.
  EXPECT_NEAR(s.meanResident, 350.0 / 300.0, 1e-12);
  EXPECT_NEAR(s.smBusy, 300.0 / (2 * 200.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.spanTicks, 200.0);
  EXPECT_DOUBLE_EQ(s.workgroupTicks, 350.0 / 4);
}

TEST(PrefillProbeSummary, OneEndingAsAnotherStartsIsNotShared) {
  const auto w = words({{{3, 10, 20}}, {{3, 20, 30}}});
  EXPECT_EQ(summarize(w, 1).maxResident, 1u);
}

TEST(PrefillProbeSummary, PhaseSharesAndTheEpilogue) {
  Record a{0, 1, 101, {10, 20, 30, 0, 20, 0, 10}, 100};  // 90 in phases, 10 after the loop
  Record b{0, 1, 101, {0, 0, 50, 0, 50, 0, 0}, 100};
  const Summary s = summarize(words({{a, b}}), 2);
  EXPECT_EQ(s.workgroups, 1u);
  EXPECT_NEAR(s.phaseShare[2], 80.0 / 200, 1e-12);   // scores
  EXPECT_NEAR(s.phaseShare[4], 70.0 / 200, 1e-12);   // values
  EXPECT_NEAR(s.phaseShare[kPhases], 10.0 / 200, 1e-12);  // epilogue
  EXPECT_NEAR(s.cyclesPerTick, 1.0, 1e-12);
  EXPECT_EQ(std::string(phaseNames()[kPhases]), "epilogue");
}

TEST(PrefillProbeSummary, SkipsUnwrittenRecordsAndNeedsWholeWorkgroups) {
  const auto w = words({{{0, 5, 9}}, {{0, 0, 0}}});
  EXPECT_EQ(summarize(w, 1).workgroups, 1u);
  EXPECT_THROW(summarize(std::vector<std::uint32_t>(kWords * 3, 0u), 2), InternalError);
}

TEST(PrefillProbeSummary, WithoutSmIdsOnlyTimes) {
  const Summary s = summarize(words({{{~0u, 10, 20}}}), 1);
  EXPECT_EQ(s.sms, 0u);
  EXPECT_EQ(s.maxResident, 0u);
  EXPECT_NE(s.describe().find("no SM ids"), std::string::npos);
}

AttentionCall prefillCall(std::uint32_t qLen, std::uint32_t kvLen) {
  test::CallShape s;
  s.nHeads = 8;
  s.nKvHeads = 2;
  s.headDim = 128;
  s.qLen = qLen;
  s.kvLen = kvLen;
  return test::shapeCall(s);
}

// Each prefill kernel of a probed plan (the cooperative-matrix one on the H200, the subgroup one on
// lavapipe, a Split-K part) carries the probe and compiles with this machine's compiler.
TEST(PrefillProbePlan, ProbedKernelsCompileForPresets) {
  const test::CachedCompiler compiler{ShaderCompiler::Optimization::None};
  AttentionOptions o;
  o.faPrefillProbe = true;
  AttentionOptions withLoader = o;
  withLoader.faPrefillLoader = Force::On;
  for (const auto& [preset, knobs] : {std::pair{"h200", o}, std::pair{"h200", withLoader}, std::pair{"lavapipe,clock=1", o}}) {
    const DeviceInfo device = parseDevicePreset(preset);  // the step keeps a reference
    FlashAttentionStep step(device, SnippetLibrary::embedded(), knobs);
    for (const auto& call : {prefillCall(300, 300), prefillCall(7, 16384)}) {
      SCOPED_TRACE(preset);
      const auto kernels = step.kernelsFor(call);
      ASSERT_FALSE(kernels.empty());
      EXPECT_NE(kernels[0].name.find("_probe"), std::string::npos) << kernels[0].name;
      EXPECT_NE(kernels[0].glsl.find("clock2x32ARB"), std::string::npos);
      for (const auto& k : kernels) EXPECT_NO_THROW(compiler.compile(k)) << k.name;
    }
  }
}

TEST(PrefillProbePlan, RefusedWithoutShaderClocks) {
  AttentionOptions o;
  o.faPrefillProbe = true;
  const DeviceInfo device = parseDevicePreset("h200,clock=0");
  FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
  try {
    step.kernelsFor(prefillCall(300, 300));
    FAIL() << "the probe was built without shader clocks";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("VK_KHR_shader_clock"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace foundry::probe
