// The workgroup-scope (coopmat2) prefill without a device: what the Selector plans with and without
// VK_NV_cooperative_matrix2 and a glslc for it, the knob's refusals, the driver's shared-memory
// reserve, the external compiler's probe, and every coopmat2 kernel (modifiers, Split-K, LSE, staging
// depths) compiled and validated by the glslc FOUNDRY_GLSLC names (CI makes one from Debian 13's
// packages with scripts/newer-compilers.sh; without one those cases skip).
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/Selector.h"
#include "foundry/testing/ShapeCall.h"

namespace foundry {
namespace {

// The H200 as its driver reported it on 2026-11-26 (`foundry devices`): 8 KiB kept by the driver.
constexpr const char* kH200Cm2 = "h200,cm2=1,cm2-reserve=8192,cm2-invocations=256";

AttentionOptions knobs(std::map<std::string, std::string> env) { return AttentionOptions::fromEnvironment(env); }

AttentionPlan planFor(const DeviceInfo& device, const AttentionOptions& o, std::uint32_t qLen = 2048,
                      std::uint32_t headDim = 128) {
  FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
  return step.plan(test::shapeCall(test::prefillShape(32, 8, qLen, qLen, headDim)));
}

std::string userErrorField(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.field();
  }
  return "";
}

TEST(CoopMat2Plan, ForcedOnADeviceThatHasItTakesWorkgroupScope) {
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  for (const std::uint32_t d : {64u, 128u}) {
    const AttentionPlan plan = planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}}), 2048, d);
    const PrefillVariant& v = plan.prefillVariant;
    EXPECT_TRUE(v.coopMat && v.coopMat2) << plan.describe();
    EXPECT_FALSE(v.quadSoftmax || v.loader) << plan.describe();
    EXPECT_NE(v.key().find("_coopmat2_"), std::string::npos) << v.key();
    // The tile fits what the driver leaves of the shared memory.
    EXPECT_LE(v.sharedBytes(32) + device.coopMat2ReservedShared, device.maxSharedMemoryBytes) << plan.describe();
    EXPECT_LE(v.workgroupSize(32), device.coopMat2MaxWorkgroup);
  }
}

TEST(CoopMat2Plan, AutoKeepsSubgroupScopeWhereTheTableSaysSo) {
  // The workgroup-scope kernel measured slower on the H200 (docs/performance.md): the table leaves it off.
  const AttentionPlan plan = planFor(parseDevicePreset(kH200Cm2), AttentionOptions{});
  EXPECT_TRUE(plan.prefillVariant.coopMat);
  EXPECT_FALSE(plan.prefillVariant.coopMat2) << plan.describe();
  EXPECT_NE(plan.describe().find("subgroup scope"), std::string::npos) << plan.describe();
}

TEST(CoopMat2Plan, UnstagedTilesOnlyOnWorkgroupScope) {
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  const AttentionPlan plan =
      planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}, {"FOUNDRY_FA_PREFILL_STAGES", "0"}}));
  EXPECT_EQ(plan.prefillVariant.stages, 0u);
  EXPECT_TRUE(plan.prefillVariant.coopMat2);
  EXPECT_EQ(userErrorField([&] { planFor(device, knobs({{"FOUNDRY_FA_PREFILL_STAGES", "0"}})); }),
            "FOUNDRY_FA_PREFILL_STAGES");
  PrefillVariant v = plan.prefillVariant;
  v.pageSize = 16;
  EXPECT_NE(v.unusableReason(32).find("not paged"), std::string::npos);
}

TEST(CoopMat2Plan, ForcedWhereItCannotRunNamesTheKnob) {
  const AttentionOptions on = knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}});
  for (const char* preset : {"h200", "lavapipe", "amd-rdna3"}) {
    SCOPED_TRACE(preset);
    const DeviceInfo device = parseDevicePreset(preset);
    try {
      planFor(device, on);
      FAIL() << "planned workgroup-scope matrices on " << preset;
    } catch (const UserError& e) {
      EXPECT_EQ(e.field(), "FOUNDRY_FA_PREFILL_COOPMAT2");
      EXPECT_NE(std::string(e.what()).find("auto, 0"), std::string::npos) << e.what();
    }
  }
  // The loader is a subgroup-scope variant: asking for both is refused.
  EXPECT_EQ(userErrorField([&] {
              planFor(parseDevicePreset(kH200Cm2),
                      knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}, {"FOUNDRY_FA_PREFILL_LOADER", "1"}}));
            }),
            "FOUNDRY_FA_PREFILL_COOPMAT2");
}

TEST(CoopMat2Plan, TheDriversReserveShrinksTheTile) {
  // With 16 KiB kept by the driver, 32 KiB remain: the 64-row tile's epilogue (40 KiB) no longer fits.
  const DeviceInfo device = parseDevicePreset("h200,cm2=1,cm2-reserve=16384,cm2-invocations=256");
  const AttentionPlan plan = planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}}));
  const PrefillVariant& v = plan.prefillVariant;
  EXPECT_TRUE(v.coopMat2);
  EXPECT_LT(v.rowsPerWorkgroup(), 64u) << plan.describe();
  EXPECT_LE(v.sharedBytes(32), 32768u) << plan.describe();
}

TEST(ExternalGlslc, AMissingCommandHasNoCapability) {
  const ExternalGlslc missing("/nonexistent/glslc");
  EXPECT_FALSE(missing.coopMat2());
  EXPECT_NE(missing.problem().find("/nonexistent/glslc"), std::string::npos) << missing.problem();
  // A compiler that cannot is an UnsupportedError naming the knob, for a kernel that needs it.
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  FlashAttentionStep step(device, SnippetLibrary::embedded(), knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}}));
  const auto kernels = step.kernelsFor(test::shapeCall(test::prefillShape(8, 2, 300, 300)));
  ASSERT_TRUE(kernels.at(0).usesCoopMat2);
  for (const ShaderCompiler& compiler : {ShaderCompiler(), ShaderCompiler(ShaderCompiler::Optimization::None,
                                                                          "/nonexistent/glslc")}) {
    try {
      compiler.compile(kernels[0]);
      FAIL() << "compiled a coopmat2 kernel without a glslc for it";
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find("GL_NV_cooperative_matrix2"), std::string::npos) << e.what();
    }
  }
}

TEST(ExternalGlslc, Debian12sGlslcCannot) {
  if (std::system("command -v glslc >/dev/null 2>&1") != 0) GTEST_SKIP() << "no glslc on PATH";
  const ExternalGlslc system("glslc");
  EXPECT_FALSE(system.version().empty());
  EXPECT_FALSE(system.coopMat2()) << "the system glslc compiles GL_NV_cooperative_matrix2: " << system.version();
}

// Every coopmat2 kernel: modifiers through the element operations, Split-K parts, LSE, each staging depth.
TEST(CoopMat2Compile, EveryKernelCompilesAndValidates) {
  const char* glslc = std::getenv("FOUNDRY_GLSLC");
  if (!glslc || !*glslc) GTEST_SKIP() << "FOUNDRY_GLSLC is not set (bash scripts/newer-compilers.sh makes one)";
  const ShaderCompiler compiler(ShaderCompiler::Optimization::None, glslc);
  ASSERT_TRUE(compiler.coopMat2()) << compiler.external()->problem();
  PerHeadValues slopes;
  slopes.tensor = Tensor::describe("values", DType::F32, {8});
  slopes.values.assign(8, 0.5);
  const std::vector<Modifiers> sets = {
      {},
      {std::make_shared<SlidingWindowStage>(100, 0), std::make_shared<SoftCapStage>(30.0),
       std::make_shared<SinksStage>(slopes)},
      {std::make_shared<AlibiStage>(slopes)},
  };
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  std::set<std::string> names;
  for (const char* stages : {"0", "1", "2"}) {
    for (const char* split : {"1", "3"}) {
      const AttentionOptions o = knobs(
          {{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}, {"FOUNDRY_FA_PREFILL_STAGES", stages}, {"FOUNDRY_FA_PREFILL_SPLIT_K", split}});
      for (const std::uint32_t d : {64u, 128u}) {
        for (const auto& mods : sets) {
          for (const bool lse : {false, true}) {
            test::CallShape s = test::prefillShape(8, 2, 200, 300, d);
            s.lse = lse && split == std::string("1");
            AttentionCall call = test::shapeCall(s);
            call.modifiers = mods;
            FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
            for (const auto& k : step.kernelsFor(call)) {
              if (!k.usesCoopMat2 || !names.insert(k.name).second) continue;
              SCOPED_TRACE(k.name);
              std::vector<std::uint32_t> spirv;
              ASSERT_NO_THROW(spirv = compiler.compile(k));
              EXPECT_EQ(compiler.rejects(spirv, true), "");
            }
          }
        }
      }
    }
  }
  EXPECT_GE(names.size(), 36u);
}

}  // namespace
}  // namespace foundry
