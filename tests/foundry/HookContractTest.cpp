// The hook contract of the builder, with no GPU: a stage hosts hook points, others plug functions into
// them; the builder composes them (chain, all, reduce, single), checks every rule before compiling
// (hosted, one provider where one is allowed, defined, companions, `uses`, pc.* reads) and the
// composed kernel compiles with shaderc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/ShaderCompiler.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::ScriptedStage;

HookPoint chainPoint() {
  return {"t_score", "float", {{"float", "s"}, {"uint", "i"}}, HookCompose::Chain, "s", {}, "changes a score", {}};
}
HookPoint allPoint() {
  return {"t_keep", "bool", {{"uint", "i"}}, HookCompose::All, "true", {}, "keeps an element", "t_range"};
}
HookPoint reducePoint() {
  return {"t_range", "uint", {{"uint", "i"}}, HookCompose::Reduce, "0xffffffffu", "min(hook_x, hook_y)",
          "bounds the elements", {}};
}
HookPoint singlePoint() {
  return {"t_extra", "float", {{"uint", "i"}}, HookCompose::Single, "0.0", {}, "one extra term", {}};
}

class HookContractTest : public ::testing::Test {
 protected:
  DeviceInfo device = parseDevicePreset("lavapipe");
  KernelBuilder builder() { return KernelBuilder(device, SnippetLibrary::embedded()).workgroup(64); }
  static StagePtr stage(std::string name, ScriptedStage::Declare d, std::string body = {}) {
    return std::make_shared<ScriptedStage>(std::move(name), std::move(d), std::move(body));
  }
  /// Hosts all four points and calls them, writing one value per invocation.
  static StagePtr host(bool withSingle = true) {
    return stage(
        "HostStage",
        [withSingle](KernelInterface& k) {
          k.buffer("result", DType::F32, Access::WriteOnly).push("count", PushType::U32);
          k.hosts(chainPoint()).hosts(allPoint()).hosts(reducePoint());
          if (withSingle) k.hosts(singlePoint());
        },
        withSingle ? "{ const uint i = gl_GlobalInvocationID.x; if (i < min(pc.count, t_range(i)) && t_keep(i)) "
                     "result[i] = t_score(float(i), i) + t_extra(i); }"
                   : "{ const uint i = gl_GlobalInvocationID.x; if (i < pc.count && t_keep(i)) result[i] = t_score(1.0, i); }");
  }
  /// A modifier bringing its own GLSL.
  static StagePtr modifier(std::string name, std::string glsl, std::vector<std::pair<std::string, std::string>> hooks,
                           std::vector<std::string> pushes = {}) {
    return stage(name, [=](KernelInterface& k) {
      for (const auto& p : pushes) k.push(p, PushType::F32);
      k.snippetText(name + "_glsl", glsl);
      for (const auto& [point, fn] : hooks) k.hook(point, fn);
    });
  }
  static std::string compileError(const KernelSource& src) {
    try {
      ShaderCompiler().compile(src);
    } catch (const DeviceError& e) {
      return e.what();
    }
    return {};
  }
  static std::string buildError(KernelBuilder b) {
    try {
      b.build();
    } catch (const UserError& e) {
      return e.what();
    }
    return "built";
  }
};

TEST_F(HookContractTest, ComposesEveryKindAndCompiles) {
  const auto src =
      builder()
          .add(host())
          .add(modifier("Twice", "float twice(float s, uint i) { return 2.0 * s; }\n"
                                 "bool even(uint i) { return i % 2u == 0u; }\n"
                                 "uint below100(uint i) { return 100u; }\n",
                        {{"t_score", "twice"}, {"t_keep", "even"}, {"t_range", "below100"}}))
          .add(modifier("Plus", "float plus(float s, uint i) { return s + pc.plus_amount; }\n"
                                "uint below50(uint i) { return 50u; }\n"
                                "float extra(uint i) { return 0.5; }\n",
                        {{"t_score", "plus"}, {"t_range", "below50"}, {"t_extra", "extra"}}, {"plus_amount"}))
          .build();
  // Chain in the order of the stages, reduce with the combiner, the single one called directly.
  EXPECT_THAT(src.glsl, HasSubstr("s = twice(s, i);\n  s = plus(s, i);\n  return s;"));
  EXPECT_THAT(src.glsl, HasSubstr("uint r = below100(i);\n  { const uint hook_x = r, hook_y = below50(i); r = min(hook_x, hook_y); }"));
  EXPECT_THAT(src.glsl, HasSubstr("return even(i);"));
  EXPECT_THAT(src.glsl, HasSubstr("return extra(i);"));
  EXPECT_THAT(src.glsl, HasSubstr("const bool T_SCORE_HOOKED = true;"));
  EXPECT_EQ(compileError(src), "");
}

TEST_F(HookContractTest, UnhookedPointsFallBackAndSayNotHooked) {
  const auto src = builder().add(host()).build();
  EXPECT_THAT(src.glsl, HasSubstr("const bool T_SCORE_HOOKED = false;  // not hooked"));
  EXPECT_THAT(src.glsl, HasSubstr("return s;"));
  EXPECT_THAT(src.glsl, HasSubstr("return 0xffffffffu;"));
  EXPECT_EQ(compileError(src), "");
}

TEST_F(HookContractTest, AHookOnAPointNoStageHostsIsRejectedNamingTheStageAndWhatIsHosted) {
  const std::string e = buildError(builder().add(host(false)).add(
      modifier("Sinky", "float extra(uint i) { return 1.0; }\n", {{"t_extra", "extra"}})));
  EXPECT_THAT(e, AllOf(HasSubstr("stage Sinky hooks 't_extra'"), HasSubstr("no stage of this kernel hosts that point"),
                       HasSubstr("hosted here: t_score, t_keep, t_range")));
}

TEST_F(HookContractTest, AHintOnAPointNoStageHostsIsDropped) {
  const auto src = builder()
                       .add(host(false))
                       .add(stage("Hinting", [](KernelInterface& k) {
                         k.snippetText("hint_glsl", "float extra(uint i) { return 1.0; }\n");
                         k.hook("t_extra", "extra", /*hint=*/true);
                       }))
                       .build();
  EXPECT_THAT(src.glsl, Not(HasSubstr("T_EXTRA_HOOKED")));
  EXPECT_EQ(compileError(src), "");
}

TEST_F(HookContractTest, ASinglePointTakesOneStage) {
  const std::string e =
      buildError(builder()
                     .add(host())
                     .add(modifier("SinkA", "float sink_a(uint i) { return 1.0; }\n", {{"t_extra", "sink_a"}}))
                     .add(modifier("SinkB", "float sink_b(uint i) { return 2.0; }\n", {{"t_extra", "sink_b"}})));
  EXPECT_THAT(e, AllOf(HasSubstr("stages SinkA and SinkB both hook 't_extra'"), HasSubstr("one extra term")));
}

TEST_F(HookContractTest, TheSameFunctionTwiceIsRejected) {
  const std::string glsl = "float twice(float s, uint i) { return 2.0 * s; }\n";
  const std::string e = buildError(builder()
                                       .add(host())
                                       .add(modifier("Twice", glsl, {{"t_score", "twice"}}))
                                       .add(modifier("Twice", glsl, {{"t_score", "twice"}})));
  EXPECT_THAT(e, HasSubstr("both hook 't_score' with the same function twice"));
}

TEST_F(HookContractTest, AFunctionNoneOfTheStagesSnippetsDefinesIsRejected) {
  const std::string e = buildError(builder().add(host()).add(
      modifier("Typo", "float twice(float s, uint i) { return 2.0 * s; }\n", {{"t_score", "twcie"}})));
  EXPECT_THAT(e, AllOf(HasSubstr("stage Typo hooks 't_score' with twcie"), HasSubstr("inline/Typo_glsl"),
                       HasSubstr("defines twcie")));
}

TEST_F(HookContractTest, AMaskMustAlsoSayWhichElementsItSurelyKeeps) {
  const std::string e = buildError(
      builder().add(host()).add(modifier("Odd", "bool odd(uint i) { return i % 2u == 1u; }\n", {{"t_keep", "odd"}})));
  EXPECT_THAT(e, AllOf(HasSubstr("stage Odd hooks 't_keep' but not 't_range'"), HasSubstr("bounds the elements")));
}

TEST_F(HookContractTest, TwoHostsMustAgreeOnAPointsContract) {
  HookPoint other = chainPoint();
  other.fallback = "0.0";
  const std::string e = buildError(
      builder().add(host()).add(stage("Other", [other](KernelInterface& k) { k.hosts(other); })));
  EXPECT_THAT(e, HasSubstr("host hook point 't_score' with different contracts"));
}

TEST_F(HookContractTest, UsesNamesWhatAnotherStageMustDeclare) {
  EXPECT_THAT(buildError(builder().add(host()).add(stage("Reader", [](KernelInterface& k) { k.usesPush("scale"); }))),
              HasSubstr("stage Reader uses push constant 'scale', which no stage of the chain declares"));
  EXPECT_THAT(buildError(builder().add(host()).add(stage("Reader", [](KernelInterface& k) { k.usesBuffer("table"); }))),
              HasSubstr("stage Reader uses buffer 'table', which no stage of the chain declares"));
  // Declared elsewhere in the chain and marked as used: fine.
  EXPECT_EQ(buildError(builder().add(host()).add(stage("Reader", [](KernelInterface& k) { k.usesPush("count"); }))),
            "built");
}

TEST_F(HookContractTest, ReadingAPushFieldWithoutDeclaringOrUsingItIsRejectedBeforeCompiling) {
  // Stage B reads pc.count, which A declares, but B never says so: glslang would accept it here, and
  // fail as soon as B is used without A.
  const std::string e =
      buildError(builder().add(host()).add(stage("B", [](KernelInterface&) {}, "const uint n = pc.count;")));
  EXPECT_THAT(e, AllOf(HasSubstr("stage B (for B) reads pc.count"), HasSubstr("usesPush")));
  const std::string missing = buildError(builder().add(stage("C", [](KernelInterface&) {}, "const uint n = pc.nothing;")));
  EXPECT_THAT(missing, HasSubstr("no stage of the chain declares it"));
}

TEST_F(HookContractTest, AnUnknownSnippetIsAUserErrorNamingTheStage) {
  const std::string e =
      buildError(builder().add(stage("Mine", [](KernelInterface& k) { k.snippet("mine/not_there.glsl"); })));
  EXPECT_THAT(e, AllOf(HasSubstr("stage Mine asks for snippet kernels/mine/not_there.glsl"),
                       HasSubstr("KernelInterface::snippetText")));
}

TEST_F(HookContractTest, InlineSnippetsAreSharedByNameAndMustAgree) {
  const auto src = builder()
                       .add(host())
                       .add(modifier("Twice", "float twice(float s, uint i) { return 2.0 * s; }\n", {{"t_score", "twice"}}))
                       .add(stage("Again", [](KernelInterface& k) {
                         k.snippetText("Twice_glsl", "float twice(float s, uint i) { return 2.0 * s; }\n");
                       }))
                       .build();
  EXPECT_EQ(compileError(src), "");
  const std::string e = buildError(builder().add(host()).add(
      stage("Clash", [](KernelInterface& k) { k.snippetText("shared_name", "float a() { return 1.0; }\n"); })).add(
      stage("Clash2", [](KernelInterface& k) { k.snippetText("shared_name", "float b() { return 2.0; }\n"); })));
  EXPECT_THAT(e, HasSubstr("different GLSL under the same snippet name 'inline/shared_name'"));
}

TEST_F(HookContractTest, InlineSnippetsMayRequireLibrarySnippets) {
  const auto src = builder()
                       .add(host())
                       .add(modifier("Capped",
                                     "//! requires: flashattention/common.glsl\n"
                                     "float capped(float s, uint i) { return min(s, HALF_MAX); }\n",
                                     {{"t_score", "capped"}}))
                       .build();
  EXPECT_THAT(src.glsl, HasSubstr("#line 1 \"kernels/flashattention/common.glsl\""));
  EXPECT_EQ(compileError(src), "");
}

// A hook function that does not take what its point passes is refused before glslang, whose message
// would quote the call the builder generated; types GLSL converts the point's to are accepted.
TEST_F(HookContractTest, AHookFunctionMustTakeWhatItsPointPasses) {
  const std::string e = buildError(
      builder().add(host()).add(modifier("Short", "float short_score(float s) { return s; }\n", {{"t_score", "short_score"}})));
  EXPECT_THAT(e, AllOf(HasSubstr("stage Short hooks 't_score' with short_score, defined as float short_score(float)"),
                       HasSubstr("inline/Short_glsl:1"), HasSubstr("the point calls it as float t_score(float s, uint i)"),
                       HasSubstr("it must take (float, uint)"), HasSubstr("and return float")));
  EXPECT_THAT(buildError(builder().add(host()).add(modifier(
                  "Out", "float out_score(float s, out uint i) { i = 0u; return s; }\n", {{"t_score", "out_score"}}))),
              HasSubstr("defined as float out_score(float, out uint)"));
  EXPECT_THAT(buildError(builder().add(host()).add(
                  modifier("Vec", "vec2 vec_score(float s, uint i) { return vec2(s); }\n", {{"t_score", "vec_score"}}))),
              HasSubstr("defined as vec2 vec_score(float, uint)"));
  // uint to float is an implicit conversion; an overload that fits is enough; comments are not code.
  const auto src = builder()
                       .add(host())
                       .add(modifier("Wide",
                                     "// float wide(float s) { return s; }\n"
                                     "float wide(float s) { return s; }\n"
                                     "float wide(const in float s, float i) { return s + i; }\n",
                                     {{"t_score", "wide"}}))
                       .build();
  EXPECT_EQ(compileError(src), "");
}

// A user's GLSL takes no file-scope name the library's snippets or the builder's declarations take
// (glslang reported the redefinition inside the library's code, as a DeviceError); overloads are fine.
TEST_F(HookContractTest, AUsersNamesNeverTakeTheLibrarysOrTheBuilders) {
  const auto withCommon = [&](const std::string& glsl) {
    return buildError(builder().add(host()).add(modifier(
        "Mine", "//! requires: flashattention/common.glsl\n" + glsl + "float mine(float s, uint i) { return s; }\n",
        {{"t_score", "mine"}})));
  };
  EXPECT_THAT(withCommon("float softmax_inverse(float l) { return l; }\n"),
              AllOf(HasSubstr("function float softmax_inverse(float) at line 19 in kernels/flashattention/common.glsl"),
                    HasSubstr("function float softmax_inverse(float) at line 2 in kernels/inline/Mine_glsl (stage Mine)"),
                    HasSubstr("rename the user's")));
  EXPECT_THAT(withCommon("const float NEG_BIG = -1.0;\n"), HasSubstr("takes the name 'NEG_BIG'"));
  EXPECT_THAT(withCommon("#define LOG2E 1.0\n"), HasSubstr("macro LOG2E at line 2"));
  EXPECT_THAT(withCommon("const uint WORKGROUP_SIZE = 1u;\n"), HasSubstr("name WORKGROUP_SIZE in the builder's declarations"));
  EXPECT_THAT(withCommon("const float result = 1.0;\n"), HasSubstr("buffer result in the builder's declarations"));
  EXPECT_THAT(withCommon("float t_score(float s, uint i) { return s; }\n"),
              HasSubstr("hook point float t_score(float s, uint i) in the builder's declarations"));
  // Two users' stages with one helper.
  EXPECT_THAT(buildError(builder()
                             .add(host())
                             .add(modifier("A", "float helper(float s) { return s; }\nfloat a(float s, uint i) { return s; }\n",
                                           {{"t_score", "a"}}))
                             .add(modifier("B", "float helper(float s) { return s; }\nfloat b(float s, uint i) { return s; }\n",
                                           {{"t_score", "b"}}))),
              AllOf(HasSubstr("kernels/inline/A_glsl (stage A)"), HasSubstr("kernels/inline/B_glsl (stage B)")));
  // Overloads of the library's functions and of a hook point compile.
  const auto src = builder()
                       .add(host())
                       .add(modifier("Over",
                                     "//! requires: flashattention/common.glsl\n"
                                     "float softmax_inverse(float l, float k) { return k / l; }\n"
                                     "float t_score(float s) { return s; }\n"
                                     "float over(float s, uint i) { return softmax_inverse(2.0, t_score(s)); }\n",
                                     {{"t_score", "over"}}))
                       .build();
  EXPECT_EQ(compileError(src), "");
}

}  // namespace
}  // namespace foundry
