// The coopmat2 prefill (workgroup-scope matrices, or subgroup-scope ones of flexible dimensions) without
// a device: what the Selector plans with and without VK_NV_cooperative_matrix2 and a glslc for it, the
// knobs' refusals, the driver's shared-memory
// reserve, the external compiler's probe, and every coopmat2 kernel (modifiers, Split-K, LSE, staging
// depths) compiled and validated by the glslc FOUNDRY_GLSLC names (CI makes one from Debian 13's
// packages with scripts/newer-compilers.sh; without one those cases skip).
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/stages/CeilingStages.h"
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

const std::map<std::string, std::string> kWorkgroupScope = {{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"},
                                                            {"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", "workgroup"}};

TEST(CoopMat2Plan, ForcedOnADeviceThatHasItTakesTheScopeAsked) {
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  for (const std::uint32_t d : {64u, 128u, 256u}) {
    SCOPED_TRACE(d);
    // Without a scope, the tuning table's: subgroup scope for head_dim 64 and 128 on Hopper.
    const AttentionPlan plan = planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}}), 2048, d);
    EXPECT_TRUE(plan.prefillVariant.coopMat2);
    EXPECT_EQ(plan.prefillVariant.coopMat2Subgroup, d != 256) << plan.describe();
    EXPECT_EQ(plan.prefillVariant.key().find("_coopmat2sg_") != std::string::npos, d != 256)
        << plan.prefillVariant.key();
    const AttentionPlan sub =
        planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", "subgroup"}}), 2048, d);
    EXPECT_TRUE(sub.prefillVariant.coopMat2 && sub.prefillVariant.coopMat2Subgroup) << sub.describe();
    EXPECT_NE(sub.describe().find("FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE"), std::string::npos) << sub.describe();
  }
  for (const std::uint32_t d : {64u, 128u}) {
    const AttentionPlan plan = planFor(device, knobs(kWorkgroupScope), 2048, d);
    const PrefillVariant& v = plan.prefillVariant;
    EXPECT_TRUE(v.coopMat && v.coopMat2) << plan.describe();
    EXPECT_FALSE(v.quadSoftmax || v.loader) << plan.describe();
    EXPECT_FALSE(v.coopMat2Subgroup) << plan.describe();
    EXPECT_NE(v.key().find("_coopmat2_"), std::string::npos) << v.key();
    // The tile fits what the driver leaves of the shared memory.
    EXPECT_LE(v.sharedBytes(32) + device.coopMat2ReservedShared, device.maxSharedMemoryBytes) << plan.describe();
    EXPECT_LE(v.workgroupSize(32), device.coopMat2MaxWorkgroup);
  }
}

// bf16 q, K and V: coopmat2 matrices with bf16 operands where the device and the glslc have them (whatever the
// tuning table's coop2 rows say, and at any length: the alternative is the subgroup kernel's f32 tiles);
// the subgroup kernel otherwise, and where FOUNDRY_FA_PREFILL_COOPMAT2 is 0. Mixed types never take them.
TEST(CoopMat2Plan, Bf16TakesBf16OperandsWhereTheDeviceHasThem) {
  const DeviceInfo bf16 = parseDevicePreset(std::string(kH200Cm2) + ",cm2-bf16=1");
  const DeviceInfo noBf16 = parseDevicePreset(kH200Cm2);
  const auto plan = [](const DeviceInfo& device, const AttentionOptions& o, std::uint32_t qLen, std::uint32_t d,
                       DType q = DType::BF16) {
    FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
    AttentionCall call = test::shapeCall(test::prefillShape(32, 8, qLen, qLen, d, DType::BF16));
    call.q = Tensor::describe("q", q, call.q.dims, call.q.layout);
    return step.plan(call);
  };
  for (const std::uint32_t d : {64u, 80u, 96u, 128u, 256u}) {
    for (const std::uint32_t qLen : {100u, 8192u}) {
      SCOPED_TRACE(fmt::format("D{} S{}", d, qLen));
      const AttentionPlan p = plan(bf16, knobs({}), qLen, d);
      EXPECT_TRUE(p.prefillVariant.coopMat && p.prefillVariant.coopMat2) << p.describe();
      EXPECT_NE(p.prefillVariant.key().find("_bf16_coopmat2"), std::string::npos) << p.prefillVariant.key();
      EXPECT_NE(p.describe().find("bf16 operands exist only in coopmat2 matrices"), std::string::npos) << p.describe();
      const AttentionPlan without = plan(noBf16, knobs({}), qLen, d);
      EXPECT_FALSE(without.prefillVariant.coopMat) << without.describe();
      EXPECT_NE(without.describe().find("VK_KHR_shader_bfloat16"), std::string::npos) << without.describe();
    }
  }
  // The tuning table's bf16 row: 64-key tiles at head_dim 64, where f16 keeps 32.
  EXPECT_EQ(plan(bf16, knobs({}), 8192, 64).prefillVariant.keysPerTile, 64u);
  FlashAttentionStep f16Step(bf16, SnippetLibrary::embedded(), knobs({}));
  EXPECT_EQ(f16Step.plan(test::shapeCall(test::prefillShape(32, 8, 8192, 8192, 64))).prefillVariant.keysPerTile, 32u);
  // Where no row says more, subgroup scope with staged tiles; at D256 4 subgroups and 16-key tiles.
  const PrefillVariant d256 = plan(bf16, knobs({}), 8192, 256).prefillVariant;
  EXPECT_TRUE(d256.coopMat2Subgroup && d256.keysPerTile == 16 && d256.warps == 4 && d256.stages == 2) << d256.key();
  EXPECT_TRUE(plan(bf16, knobs({}), 8192, 192).prefillVariant.coopMat2Subgroup);
  const AttentionPlan off = plan(bf16, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "0"}}), 2048, 128);
  EXPECT_FALSE(off.prefillVariant.coopMat) << off.describe();
  EXPECT_NE(off.describe().find("FOUNDRY_FA_PREFILL_COOPMAT2 is 0"), std::string::npos) << off.describe();
  const AttentionPlan mixed = plan(bf16, knobs({}), 2048, 128, DType::F16);
  EXPECT_FALSE(mixed.prefillVariant.coopMat) << mixed.describe();
  // Tiles straight from the cache (0 staging buffers) on workgroup scope, bf16 as f16.
  const AttentionPlan unstaged = plan(bf16, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", "workgroup"},
                                                   {"FOUNDRY_FA_PREFILL_STAGES", "0"}}), 2048, 128);
  EXPECT_EQ(unstaged.prefillVariant.stages, 0u) << unstaged.describe();
  EXPECT_FALSE(unstaged.prefillVariant.coopMat2Subgroup) << unstaged.describe();
}

TEST(CoopMat2Plan, AutoTakesSubgroupScopeMatricesWhereTheTableSaysSo) {
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  // Hopper, head_dim 128, from one workgroup of 8 subgroups per SM: 8 subgroups, two 32-key buffers.
  const AttentionPlan d128 = planFor(device, AttentionOptions{}, 2048, 128);
  const PrefillVariant& v = d128.prefillVariant;
  EXPECT_TRUE(v.coopMat && v.coopMat2 && v.coopMat2Subgroup) << d128.describe();
  EXPECT_EQ(v.warps, 8u);
  EXPECT_EQ(v.keysPerTile, 32u);
  EXPECT_EQ(v.stages, 2u);
  EXPECT_EQ(v.coopMat2OutRows(), 48u);  // 34816 bytes of staging hold 48 rows of O, m and l
  EXPECT_LE(v.sharedBytes(32), 34816u);
  EXPECT_NE(d128.describe().find("coopmat2, subgroup scope"), std::string::npos) << d128.describe();
  // S 512: 128 query tiles of 128 rows leave SMs idle; GL_NV_cooperative_matrix with smaller tiles.
  const AttentionPlan short128 = planFor(device, AttentionOptions{}, 512, 128);
  EXPECT_TRUE(short128.prefillVariant.coopMat);
  EXPECT_FALSE(short128.prefillVariant.coopMat2) << short128.describe();
  EXPECT_NE(short128.describe().find("fewer than 1 per compute unit"), std::string::npos) << short128.describe();
  // head_dim 64: 4 subgroups and one 32-key buffer from 12 workgroups per SM (S 8192: 4096 of them;
  // S 4096: 2048, S 2048: 1024).
  const AttentionPlan d64 = planFor(device, AttentionOptions{}, 8192, 64);
  EXPECT_TRUE(d64.prefillVariant.coopMat2 && d64.prefillVariant.coopMat2Subgroup) << d64.describe();
  EXPECT_EQ(d64.prefillVariant.warps, 4u);
  EXPECT_EQ(d64.prefillVariant.stages, 1u);
  EXPECT_TRUE(planFor(device, AttentionOptions{}, 4096, 64).prefillVariant.coopMat2);
  EXPECT_FALSE(planFor(device, AttentionOptions{}, 2048, 64).prefillVariant.coopMat2);
  // head_dim 96 and 80: one 64-key buffer (a 32-key tile of 80-wide rows does not split over the
  // loads), 8 subgroups from one workgroup per SM and 4 from two (S 512 at D80: 256 workgroups, 1.9 an SM).
  for (const auto& [d, warps] : {std::pair{96u, 8u}, std::pair{80u, 4u}}) {
    SCOPED_TRACE(d);
    const PrefillVariant v8192 = planFor(device, AttentionOptions{}, 8192, d).prefillVariant;
    EXPECT_TRUE(v8192.coopMat2 && v8192.coopMat2Subgroup);
    EXPECT_EQ(v8192.warps, warps);
    EXPECT_EQ(v8192.keysPerTile, 64u);
    EXPECT_EQ(v8192.stages, 1u);
    EXPECT_TRUE(planFor(device, AttentionOptions{}, 1024, d).prefillVariant.coopMat2);
    EXPECT_FALSE(planFor(device, AttentionOptions{}, 512, d).prefillVariant.coopMat2);
  }
  // No row for head_dim 256, and nothing without a glslc for the matrices.
  EXPECT_FALSE(planFor(device, AttentionOptions{}, 8192, 256).prefillVariant.coopMat2);
  const AttentionPlan plain = planFor(parseDevicePreset("h200"), AttentionOptions{}, 8192, 128);
  EXPECT_TRUE(plain.prefillVariant.coopMat);
  EXPECT_FALSE(plain.prefillVariant.coopMat2) << plain.describe();
}

TEST(CoopMat2Plan, TheScopeKnobsRefusalsNameIt) {
  const std::string scope = "FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE";
  EXPECT_EQ(userErrorField([&] {
              planFor(parseDevicePreset(kH200Cm2),
                      knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "0"}, {scope, "subgroup"}}));
            }),
            scope);
  try {
    planFor(parseDevicePreset("h200"), knobs({{scope, "subgroup"}}));
    FAIL() << "planned coopmat2 matrices without a glslc for them";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), scope);
    EXPECT_NE(std::string(e.what()).find("accepted here: auto"), std::string::npos) << e.what();
  }
  EXPECT_EQ(userErrorField([&] { knobs({{scope, "warp"}}); }).rfind(scope, 0), 0u);
}

TEST(CoopMat2Plan, UnstagedTilesOnlyOnWorkgroupScope) {
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  const AttentionPlan plan =
      planFor(device, knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}, {"FOUNDRY_FA_PREFILL_STAGES", "0"}}));
  EXPECT_EQ(plan.prefillVariant.stages, 0u);
  EXPECT_TRUE(plan.prefillVariant.coopMat2);
  // Where the plan keeps GL_NV_cooperative_matrix (S 512 here), no staging is refused.
  EXPECT_EQ(userErrorField([&] { planFor(device, knobs({{"FOUNDRY_FA_PREFILL_STAGES", "0"}}), 512); }),
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
  // The loader is part of the GL_NV_cooperative_matrix kernel: asking for both is refused.
  EXPECT_EQ(userErrorField([&] {
              planFor(parseDevicePreset(kH200Cm2),
                      knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}, {"FOUNDRY_FA_PREFILL_LOADER", "1"}}));
            }),
            "FOUNDRY_FA_PREFILL_COOPMAT2");
}

TEST(CoopMat2Plan, TheDriversReserveShrinksTheTile) {
  // With 16 KiB kept by the driver, 32 KiB remain: the 64-row tile's epilogue (40 KiB) no longer fits.
  const DeviceInfo device = parseDevicePreset("h200,cm2=1,cm2-reserve=16384,cm2-invocations=256");
  const AttentionPlan plan = planFor(device, knobs(kWorkgroupScope));
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
  for (const char* scope : {"workgroup", "subgroup"}) {
    for (const char* stages : {"0", "1", "2"}) {
      for (const char* split : {"1", "3"}) {
        const AttentionOptions o = knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"},
                                          {"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", scope},
                                          {"FOUNDRY_FA_PREFILL_STAGES", stages},
                                          {"FOUNDRY_FA_PREFILL_SPLIT_K", split}});
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
  }
  EXPECT_GE(names.size(), 72u);
}

// The bench's coopmat2 read stream (bench --read-scan ...:cm2), one and two tiles at once.
TEST(CoopMat2Compile, ReadStreamCompilesAndValidates) {
  const char* glslc = std::getenv("FOUNDRY_GLSLC");
  if (!glslc || !*glslc) GTEST_SKIP() << "FOUNDRY_GLSLC is not set (bash scripts/newer-compilers.sh makes one)";
  const ShaderCompiler compiler(ShaderCompiler::Optimization::None, glslc);
  ASSERT_TRUE(compiler.coopMat2()) << compiler.external()->problem();
  const DeviceInfo device = parseDevicePreset(kH200Cm2);
  for (const std::uint32_t loads : {1u, 2u}) {
    const KernelSource k =
        KernelBuilder(device, SnippetLibrary::embedded()).workgroup(256).emplace<CoopMat2ReadStage>(loads).build();
    EXPECT_TRUE(k.usesCoopMat2);
    std::vector<std::uint32_t> spirv;
    ASSERT_NO_THROW(spirv = compiler.compile(k)) << k.glsl;
    EXPECT_EQ(compiler.rejects(spirv, true), "");
  }
}

// The bf16-operand kernels (GL_EXT_bfloat16) at each scope and staging depth, with and without Split-K,
// and every head dim the tuning table names: where the glslc compiles them (glslang 15.3 or newer).
TEST(CoopMat2Compile, Bf16KernelsCompileAndValidate) {
  const char* glslc = std::getenv("FOUNDRY_GLSLC");
  if (!glslc || !*glslc) GTEST_SKIP() << "FOUNDRY_GLSLC is not set (bash scripts/newer-compilers.sh makes one)";
  const ShaderCompiler compiler(ShaderCompiler::Optimization::None, glslc);
  ASSERT_TRUE(compiler.coopMat2()) << compiler.external()->problem();
  if (!compiler.coopMat2Bf16()) GTEST_SKIP() << compiler.external()->bf16Problem();
  const DeviceInfo device = parseDevicePreset(std::string(kH200Cm2) + ",cm2-bf16=1");
  // Compiles and validates each bf16-operand kernel of `kernels` not in `names` yet, named with `marker`.
  const auto compileNew = [&](const std::vector<KernelSource>& kernels, std::set<std::string>& names,
                              const char* marker) {
    for (const auto& k : kernels) {
      if (!k.usesBf16 || !names.insert(k.name).second) continue;
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.name.find(marker), std::string::npos);
      std::vector<std::uint32_t> spirv;
      ASSERT_NO_THROW(spirv = compiler.compile(k));
      EXPECT_EQ(compiler.rejects(spirv, true), "");
    }
  };
  std::set<std::string> names;
  for (const char* scope : {"workgroup", "subgroup"}) {
    for (const char* stages : {"0", "1", "2"}) {
      for (const char* split : {"1", "3"}) {
        const AttentionOptions o = knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", scope},
                                          {"FOUNDRY_FA_PREFILL_STAGES", stages},
                                          {"FOUNDRY_FA_PREFILL_SPLIT_K", split}});
        for (const std::uint32_t d : {64u, 80u, 96u, 128u, 256u}) {
          FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
          try {
            compileNew(step.kernelsFor(test::shapeCall(test::prefillShape(8, 2, 200, 300, d, DType::BF16))), names,
                       "_bf16_coopmat2");
          } catch (const UserError&) {
            continue;  // a staging depth or split that does not fit this head dim
          }
        }
      }
    }
  }
  EXPECT_GE(names.size(), 24u);
  // Decode on the tensor cores with bf16 operands (GL_KHR_cooperative_matrix types): one tile or two in
  // flight, tile pairs, Split-K merged or reduced, a GQA group of 8.
  std::set<std::string> decode;
  for (const char* unroll : {"1", "2"}) {
    for (const char* pairs : {"0", "1"}) {
      for (const char* split : {"1", "4"}) {
        if (pairs == std::string("1") && unroll == std::string("1")) continue;
        const AttentionOptions o = knobs({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}, {"FOUNDRY_FA_DECODE_UNROLL", unroll},
                                          {"FOUNDRY_FA_DECODE_TILE_PAIRS", pairs}, {"FOUNDRY_FA_DECODE_SPLIT_K", split}});
        for (const std::uint32_t d : {64u, 128u}) {
          for (const std::uint32_t kvHeads : {8u, 4u}) {
            test::CallShape shape = test::decodeShape(1, 32, kvHeads, 8192, d);
            shape.dtype = DType::BF16;
            FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
            compileNew(step.kernelsFor(test::shapeCall(shape)), decode, "_bf16ops");
          }
        }
      }
    }
  }
  EXPECT_GE(decode.size(), 8u);
}

}  // namespace
}  // namespace foundry
