// Builder tests that need no GPU: numbering, std430 offsets, contracts, budgets, emission.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "support/TempDir.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::ScriptedStage;

class KernelBuilderTest : public ::testing::Test {
 protected:
  DeviceInfo device = parseDevicePreset("lavapipe");
  KernelBuilder builder() { return KernelBuilder(device, SnippetLibrary::embedded()); }
  static StagePtr scripted(std::string name, ScriptedStage::Declare d, std::string body = {}) {
    return std::make_shared<ScriptedStage>(std::move(name), std::move(d), std::move(body));
  }
};

TEST_F(KernelBuilderTest, AssignsBindingsInFirstDeclarationOrderAndMergesAccess) {
  const auto src = builder()
                       .workgroup(64)
                       .add(scripted("A", [](KernelInterface& k) {
                         k.buffer("q", DType::F16, Access::ReadOnly).buffer("result", DType::F32, Access::WriteOnly);
                       }))
                       .add(scripted("B", [](KernelInterface& k) {
                         k.buffer("k", DType::F16, Access::ReadOnly).buffer("result", DType::F32, Access::ReadOnly);
                       }))
                       .build();
  ASSERT_EQ(src.layout.bindings.size(), 3u);
  EXPECT_EQ(src.layout.bindings[0].name, "q");
  EXPECT_EQ(src.layout.bindings[0].binding, 0u);
  EXPECT_EQ(src.layout.bindings[1].name, "result");
  EXPECT_EQ(src.layout.bindings[1].binding, 1u);
  EXPECT_EQ(src.layout.bindings[1].access, Access::ReadWrite);
  EXPECT_EQ(src.layout.bindings[2].name, "k");
  EXPECT_EQ(src.layout.bindings[2].binding, 2u);
  EXPECT_THAT(src.glsl, HasSubstr("layout(std430, set = 0, binding = 2) restrict readonly buffer Buffer_k { float16_t k[]; };"));
  EXPECT_THAT(src.glsl, HasSubstr("#extension GL_EXT_shader_16bit_storage : require"));
}

TEST_F(KernelBuilderTest, PushConstantOffsetsFollowStd430) {
  const auto src = builder()
                       .workgroup(8)
                       .add(scripted("A", [](KernelInterface& k) {
                         k.push("a", PushType::U32).push("b", PushType::Vec2).push("c", PushType::F32);
                         k.push("d", PushType::UVec4).push("e", PushType::I32);
                       }))
                       .add(scripted("B", [](KernelInterface& k) { k.push("a", PushType::U32).push("f", PushType::F32); }))
                       .build();
  std::vector<std::pair<std::string, std::uint32_t>> got;
  for (const auto& p : src.layout.push) got.emplace_back(p.name, p.offset);
  const std::vector<std::pair<std::string, std::uint32_t>> want = {{"a", 0}, {"b", 8}, {"c", 16}, {"d", 32}, {"e", 48},
                                                                   {"f", 52}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(src.layout.pushBytes, 64u);  // rounded to the block's 16-byte alignment
}

// The parameter-block variant reads the same fields at the same offsets from a storage buffer bound
// after the kernel's own: one line of the GLSL differs, so the #line blocks still hold.
TEST_F(KernelBuilderTest, TheParameterBlockVariantReadsPushFieldsFromABufferAtTheSameOffsets) {
  const auto src = builder()
                       .workgroup(64)
                       .add(scripted("A", [](KernelInterface& k) {
                         k.buffer("x", DType::F32, Access::WriteOnly).push("n", PushType::U32).push("v", PushType::Vec4);
                       }, "x[0] = pc.v.x + float(pc.n);"))
                       .build();
  const KernelSource variant = parameterBlockVariant(src);
  EXPECT_EQ(variant.name, src.name + "__params");
  EXPECT_NE(variant.hash, src.hash);
  ASSERT_EQ(variant.layout.bindings.size(), 2u);
  EXPECT_EQ(variant.layout.bindings[1].name, kParameterBinding);
  EXPECT_EQ(variant.layout.bindings[1].binding, 1u);
  EXPECT_EQ(variant.layout.bindings[1].access, Access::ReadOnly);
  ASSERT_EQ(variant.layout.push.size(), src.layout.push.size());
  EXPECT_EQ(variant.layout.push[1].offset, src.layout.push[1].offset);
  EXPECT_EQ(variant.layout.pushBytes, src.layout.pushBytes);
  EXPECT_THAT(variant.glsl, HasSubstr("layout(std430, set = 0, binding = 1) restrict readonly buffer ParameterBlock {"));
  EXPECT_THAT(variant.glsl, Not(HasSubstr("push_constant")));
  EXPECT_EQ(std::count(variant.glsl.begin(), variant.glsl.end(), '\n'), std::count(src.glsl.begin(), src.glsl.end(), '\n'));
  EXPECT_THAT(variant.glsl, HasSubstr("x[0] = pc.v.x + float(pc.n);"));
  // No push constants: nothing to move.
  const auto plain = builder().workgroup(64).add(scripted("B", [](KernelInterface& k) {
    k.buffer("x", DType::F32, Access::WriteOnly);
  }, "x[0] = 1.0;")).build();
  EXPECT_EQ(parameterBlockVariant(plain).hash, plain.hash);
  EXPECT_THROW(parameterBlockVariant(variant), InternalError);
}

TEST_F(KernelBuilderTest, RejectsConsumingBeforeAnyProducer) {
  auto b = builder();
  b.workgroup(8)
      .add(scripted("Consumer", [](KernelInterface& k) { k.consumes("q_base", "uint"); }))
      .add(scripted("Producer", [](KernelInterface& k) { k.produces("q_base", "uint"); }));
  try {
    b.build();
    FAIL() << "expected a contract error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("Consumer"), HasSubstr("q_base"), HasSubstr("Producer produces it, but later")));
  }
}

TEST_F(KernelBuilderTest, RejectsTwoProducersOfOneSymbol) {
  auto b = builder();
  b.workgroup(8)
      .add(scripted("First", [](KernelInterface& k) { k.produces("q_base", "uint"); }))
      .add(scripted("Second", [](KernelInterface& k) { k.produces("q_base", "uint"); }));
  EXPECT_THAT([&] { b.build(); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("First"), HasSubstr("Second"), HasSubstr("q_base"))));
}

TEST_F(KernelBuilderTest, RejectsATypeMismatchBetweenProducerAndConsumer) {
  auto b = builder();
  b.workgroup(8)
      .add(scripted("Rope", [](KernelInterface& k) { k.shared("q_shared", "float", 64, 4); }))
      .add(scripted("Decode", [](KernelInterface& k) { k.consumes("q_shared", "shared float[128]"); }));
  EXPECT_THAT([&] { b.build(); }, ::testing::ThrowsMessage<UserError>(AllOf(
                                      HasSubstr("Decode"), HasSubstr("Rope"), HasSubstr("shared float[64]"))));
}

TEST_F(KernelBuilderTest, RejectsSharedMemoryOverTheDeviceBudgetNamingEachStage) {
  auto b = builder();
  b.workgroup(8)
      .add(scripted("Big", [](KernelInterface& k) { k.shared("a", "float", 6000, 4); }))
      .add(scripted("Bigger", [](KernelInterface& k) { k.shared("b", "vec4", 1000, 16); }));
  EXPECT_THAT([&] { b.build(); },
              ::testing::ThrowsMessage<UnsupportedError>(AllOf(HasSubstr("Big.a 24000 B"), HasSubstr("Bigger.b 16000 B"),
                                                               HasSubstr("40000"), HasSubstr("32768"))));
  // The same chain fits a device with more shared memory.
  const DeviceInfo h200 = parseDevicePreset("h200");
  EXPECT_NO_THROW(KernelBuilder(h200, SnippetLibrary::embedded())
                      .workgroup(32)
                      .add(scripted("Big", [](KernelInterface& k) { k.shared("a", "float", 6000, 4); }))
                      .add(scripted("Bigger", [](KernelInterface& k) { k.shared("b", "vec4", 1000, 16); }))
                      .build());
}

TEST_F(KernelBuilderTest, RejectsConflictingDeclarations) {
  auto b1 = builder();
  b1.workgroup(8)
      .add(scripted("A", [](KernelInterface& k) { k.push("n", PushType::U32); }))
      .add(scripted("B", [](KernelInterface& k) { k.push("n", PushType::F32); }));
  EXPECT_THAT([&] { b1.build(); }, ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("'n'"), HasSubstr("A"), HasSubstr("B"))));
  auto b2 = builder();
  b2.workgroup(8)
      .add(scripted("A", [](KernelInterface& k) { k.buffer("x", DType::F16, Access::ReadOnly); }))
      .add(scripted("B", [](KernelInterface& k) { k.buffer("x", DType::F32, Access::ReadOnly); }));
  EXPECT_THROW(b2.build(), UserError);
  auto b3 = builder();
  b3.workgroup(8)
      .add(scripted("A", [](KernelInterface& k) { k.constant("D", 64); }))
      .add(scripted("B", [](KernelInterface& k) { k.constant("D", 128); }));
  EXPECT_THAT([&] { b3.build(); }, ::testing::ThrowsMessage<UserError>(HasSubstr("constant D")));
}

TEST_F(KernelBuilderTest, RejectsNamesGlslCannotUse) {
  auto b = builder();
  b.workgroup(8).add(scripted("Io", [](KernelInterface& k) { k.buffer("output", DType::F32, Access::WriteOnly); }));
  EXPECT_THAT([&] { b.build(); }, ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("Io"), HasSubstr("'output'"),
                                                                             HasSubstr("reserved word"))));
  auto c = builder();
  c.workgroup(8).add(scripted("Bad", [](KernelInterface& k) { k.push("2x", PushType::U32); }));
  EXPECT_THROW(c.build(), UserError);
}

TEST_F(KernelBuilderTest, RejectsWorkgroupsTheDeviceCannotRun) {
  auto b = builder();
  b.workgroup(12).add(scripted("A", [](KernelInterface&) {}));
  EXPECT_THROW(b.build(), UnsupportedError);  // not a multiple of the subgroup size 8
  auto c = builder();
  c.workgroup(2048).add(scripted("A", [](KernelInterface&) {}));
  EXPECT_THROW(c.build(), UnsupportedError);
  // Within the total, past one dimension's own limit (z: 64 by default, as on NVIDIA's drivers).
  DeviceInfo narrow = device;
  narrow.maxWorkgroupSize = {1024, 1024, 64};
  KernelBuilder d(narrow, SnippetLibrary::embedded());
  d.workgroup(1, 1, 128).add(scripted("A", [](KernelInterface&) {}));
  EXPECT_THAT([&] { d.build(); }, ::testing::ThrowsMessage<UnsupportedError>(
                                      AllOf(HasSubstr("1x1x128"), HasSubstr("at most 1024x1024x64 along each of x, y and z"))));
}

TEST_F(KernelBuilderTest, RejectsPushConstantsOverTheDeviceLimit) {
  auto b = builder();
  b.workgroup(8).add(scripted("Wide", [](KernelInterface& k) {
    for (int i = 0; i < 9; ++i) k.push(fmt::format("v{}", i), PushType::Vec4);
  }));
  EXPECT_THAT([&] { b.build(); }, ::testing::ThrowsMessage<UnsupportedError>(AllOf(HasSubstr("144"), HasSubstr("128"))));
}

TEST_F(KernelBuilderTest, DeduplicatesSnippetsAndExtensionsAndResolvesRequirements) {
  test::TempDir dir;
  dir.write("a.glsl", "//! requires: base.glsl\nfloat a() { return base(); }\n");
  dir.write("b.glsl", "//! requires: base.glsl\nfloat b() { return base() * 2.0; }\n");
  dir.write("base.glsl", "float base() { return 1.0; }\n");
  const auto lib = SnippetLibrary::fromDirectory(dir.str());
  const auto src = KernelBuilder(device, lib)
                       .workgroup(8)
                       .add(scripted("A", [](KernelInterface& k) {
                         k.snippet("a.glsl").extension("GL_KHR_shader_subgroup_basic");
                       }))
                       .add(scripted("B", [](KernelInterface& k) {
                         k.snippet("b.glsl").snippet("a.glsl").extension("GL_KHR_shader_subgroup_basic");
                       }))
                       .build();
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto pos = src.glsl.find(needle); pos != std::string::npos; pos = src.glsl.find(needle, pos + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("float base()"), 1u);
  EXPECT_EQ(count("float a()"), 1u);
  EXPECT_EQ(count("#extension GL_KHR_shader_subgroup_basic"), 1u);
  EXPECT_LT(src.glsl.find("float base()"), src.glsl.find("float a()"));
  EXPECT_LT(src.glsl.find("float a()"), src.glsl.find("float b()"));
  EXPECT_THAT(src.glsl, HasSubstr("#line 1 \"kernels/base.glsl\""));
}

TEST_F(KernelBuilderTest, EmitsBannersLineMarkersAndADeterministicName) {
  const auto build = [&] {
    return builder()
        .workgroup(64)
        .add(std::make_shared<test::LoadStage>(DType::F16, 64))
        .add(std::make_shared<test::ScaleStage>(64))
        .add(std::make_shared<test::StoreStage>(DType::F32))
        .build();
  };
  const auto src = build();
  EXPECT_EQ(src.name, "Load_Scale_Store__f16_t64_f32");
  EXPECT_THAT(src.glsl, HasSubstr("// ===== stage 1/3: LoadStage [f16_t64] ====="));
  EXPECT_THAT(src.glsl, HasSubstr("// ===== stage 3/3: StoreStage [f32] ====="));
  EXPECT_THAT(src.glsl, HasSubstr("#line 1 \"stage ScaleStage\""));
  EXPECT_THAT(src.glsl, HasSubstr("uint count;  // offset 0"));
  EXPECT_THAT(src.glsl, HasSubstr("float scale;  // offset 4"));
  EXPECT_EQ(src.layout.sharedBytes, 256u);
  EXPECT_EQ(build().hash, src.hash);  // same stages, same text
}

// A trial's findings: a shared array's bytes wrapped past 2^32 to 0 and the kernel crashed the driver;
// an element size of 0 (or one GLSL does not give the type) passed the budget; a stage's name with a
// newline or a quote broke the kernel's banners and #line markers.
TEST_F(KernelBuilderTest, SharedArraysAreBudgetedAtTheirTrueSize) {
  const auto build = [&](std::string element, std::uint32_t count, std::uint32_t bytes) {
    builder().workgroup(64).add(scripted("Big", [=](KernelInterface& k) { k.shared("big", element, count, bytes); })).build();
  };
  EXPECT_THAT([&] { build("float", 1u << 30, 4); },
              ::testing::ThrowsMessage<UnsupportedError>(HasSubstr("needs 4294967296 bytes of shared memory")));
  EXPECT_THAT([&] { build("vec4", 100000, 0); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("'big' of vec4 with 0 bytes an element; accepted: 16")));
  EXPECT_THAT([&] { build("float", 64, 2); }, ::testing::ThrowsMessage<UserError>(HasSubstr("accepted: 4")));
  EXPECT_NO_THROW(build("vec4", 64, 16));
  EXPECT_NO_THROW(build("MyStruct", 8, 24));  // a type of the stage's own: its stated size is taken
}

TEST_F(KernelBuilderTest, AStageNameIsOnePrintableLineWithoutQuotes) {
  for (const std::string name : {"Bad\nStage", "Bad\"Stage", "Back\\slash", ""}) {
    EXPECT_THAT([&] { builder().workgroup(64).add(scripted(name, [](KernelInterface&) {})).build(); },
                ::testing::ThrowsMessage<UserError>(HasSubstr("a stage's name is one line of printable ASCII")))
        << name;
  }
  EXPECT_NO_THROW(builder().workgroup(64).add(scripted("My stage-2.v1", [](KernelInterface&) {})).build());
}

// One name, one kind: a trial found these clashes surfacing as glslang errors (DeviceError) instead.
TEST_F(KernelBuilderTest, NamesOfDifferentKindsNeverClash) {
  using Declare = ScriptedStage::Declare;
  const Declare buffer = [](KernelInterface& k) { k.buffer("x", DType::F32, Access::ReadOnly); };
  const std::vector<std::pair<Declare, Declare>> clashes = {
      {buffer, [](KernelInterface& k) { k.shared("x", "float", 4, 4); }},
      {buffer, [](KernelInterface& k) { k.constant("x", 1u); }},
      {buffer, [](KernelInterface& k) { k.produces("x", "uint"); }},
      {[](KernelInterface& k) { k.define("X", "2"); }, [](KernelInterface& k) { k.constant("X", 1u); }},
  };
  for (const auto& clash : clashes) {  // not a structured binding: clang 14 does not capture one
    const auto build = [&] {
      builder().workgroup(64).add(scripted("A", clash.first)).add(scripted("Bee", clash.second)).build();
    };
    EXPECT_THAT(build,
                ::testing::ThrowsMessage<UserError>(
                    AllOf(HasSubstr("stage Bee declares"), HasSubstr("stage A declared"), HasSubstr("share the kernel"))));
  }
  // The same kind twice merges as before.
  EXPECT_NO_THROW(builder().workgroup(64).add(scripted("A", buffer)).add(scripted("Bee", buffer)).build());
}

}  // namespace
}  // namespace foundry
