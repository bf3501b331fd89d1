// Every head dim the kernels serve, on every device preset: the Selector plans each kind of call
// (decode, Split-K decode, fused RoPE decode, prefill, Split-K prefill), the plan fits the preset's
// shared memory and the variants' register models, and every kernel of the plan builds and compiles.
// Compile-only: no device is needed, so GPU presets are checked on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/testing/ShapeCall.h"
#include "support/AttentionHarness.h"
#include "support/CachedCompiler.h"

namespace foundry {
namespace {

constexpr std::uint32_t kHeadDims[] = {32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256};

std::vector<std::pair<std::string, AttentionCall>> callsFor(std::uint32_t d, DType t) {
  std::vector<std::pair<std::string, AttentionCall>> out;
  test::CallShape s;
  s.nHeads = 32;
  s.nKvHeads = 8;
  s.headDim = d;
  s.dtype = t;
  s.kvLen = 200;
  out.emplace_back("decode", test::shapeCall(s));
  s.kvLen = 16384;
  out.emplace_back("decode, Split-K", test::shapeCall(s));
  out.emplace_back("fused RoPE decode", test::withRope(test::shapeCall(s), d, s.kvLen - 1));
  s.qLen = s.kvLen = 300;
  out.emplace_back("prefill", test::shapeCall(s));
  s.nHeads = s.nKvHeads = 1;
  s.qLen = 7;
  s.kvLen = 16384;
  out.emplace_back("prefill, Split-K", test::shapeCall(s));
  return out;
}

class HeadDimPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(HeadDimPlan, EveryHeadDimPlansFitsAndCompiles) {
  const DeviceInfo device = parseDevicePreset(GetParam());
  const std::uint32_t sg = device.subgroupSize;
  FlashAttentionStep step(device, SnippetLibrary::embedded(), AttentionOptions());
  const test::CachedCompiler compiler{ShaderCompiler::Optimization::None};
  std::set<std::string> compiled;
  std::set<bool> splits;
  // h100 and small share the kernels of h200 and lavapipe but for their limits: planned, not compiled.
  const bool compile = GetParam() != "h100" && GetParam() != "small";
  for (const std::uint32_t d : kHeadDims) {
    for (const DType t : {DType::F16, DType::F32}) {
      for (const auto& [what, call] : callsFor(d, t)) {
        SCOPED_TRACE(fmt::format("{} D{} {} on {}", what, d, dtypeName(t), GetParam()));
        AttentionPlan plan;
        try {
          plan = step.plan(call);
        } catch (const Error& e) {
          ADD_FAILURE() << "no plan: " << e.what();
          continue;
        }
        splits.insert(plan.splits > 1);
        if (plan.decode) {
          const DecodeVariant& v = plan.decodeVariant;
          EXPECT_EQ(v.headDim, d);
          EXPECT_LE(v.sharedBytes(sg), device.maxSharedMemoryBytes) << v.key();
          EXPECT_EQ(v.unusableReason(sg), "") << v.key();
          EXPECT_LE(v.workgroupSize(sg), device.maxWorkgroupInvocations) << v.key();
        } else {
          const PrefillVariant& v = plan.prefillVariant;
          EXPECT_EQ(v.headDim, d);
          EXPECT_LE(v.sharedBytes(sg), device.maxSharedMemoryBytes) << v.key();
          EXPECT_EQ(v.unusableReason(sg), "") << v.key();
          EXPECT_LE(v.workgroupSize(sg), device.maxWorkgroupInvocations) << v.key();
          // Cooperative matrices wherever the device has them and the dim is a multiple of 16.
          const bool coop = device.hasCoopMat({16, 16, 16, DType::F16, DType::F32}) && t == DType::F16 && d % 16 == 0;
          EXPECT_EQ(v.coopMat, coop) << v.key();
        }
        std::vector<KernelSource> kernels;
        try {
          kernels = step.kernelsFor(call);
        } catch (const Error& e) {
          ADD_FAILURE() << "did not build: " << e.what();
          continue;
        }
        for (const auto& k : kernels) {
          if (!compile || !compiled.insert(k.name).second) continue;
          try {
            EXPECT_FALSE(compiler.compile(k).empty()) << k.name;
          } catch (const Error& e) {
            ADD_FAILURE() << k.name << ":\n" << e.what();
          }
        }
      }
    }
  }
  EXPECT_EQ(splits, (std::set<bool>{false, true})) << "both split and unsplit plans were exercised";
}

INSTANTIATE_TEST_SUITE_P(Presets, HeadDimPlan, ::testing::ValuesIn(devicePresetNames()),
                         [](const auto& param) { return test::gtestSafe(param.param); });

}  // namespace
}  // namespace foundry
