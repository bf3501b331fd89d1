// A compile failure quotes the numbered lines around the error and names the snippet or stage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/GlslSource.h"
#include "foundry/KernelBuilder.h"
#include "foundry/ShaderCompiler.h"
#include "support/TempDir.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// The message of the error compiling `src` throws, which must be an `E` (a test failure if it compiles
/// or throws another kind): a UserError where the first error lies in a user's own GLSL, else a DeviceError.
template <typename E = DeviceError>
std::string compileFailure(const KernelSource& src) {
  try {
    ShaderCompiler().compile(src);
  } catch (const E& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "expected another kind of error than " << errorKindName(e.kind()) << ": " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected a compile error";
  return {};
}

TEST(CompileError, QuotesTheFailingSnippetLine) {
  test::TempDir dir;
  dir.write("broken/helper.glsl",
            "// A helper with a mistake on line 4.\n"
            "float helper(float x) {\n"
            "  float y = x * 2.0;\n"
            "  return y + undefined_symbol;\n"
            "}\n");
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto src = KernelBuilder(device, SnippetLibrary::fromDirectory(dir.str()))
                       .workgroup(8)
                       .add(std::make_shared<test::ScriptedStage>(
                           "HelperStage", [](KernelInterface& k) { k.snippet("broken/helper.glsl"); },
                           "float h = helper(1.0);"))
                       .build();
  const std::string msg = compileFailure(src);
  EXPECT_THAT(msg, AllOf(HasSubstr("kernels/broken/helper.glsl:4"), HasSubstr("undefined_symbol"),
                         HasSubstr("in snippet kernels/broken/helper.glsl (used by HelperStage)"),
                         HasSubstr(">    4 |   return y + undefined_symbol;"),
                         HasSubstr("     3 |   float y = x * 2.0;")))
      << msg;
}

// A stage's own GLSL file (GlslSource::fromFile) is named by its path, as a library snippet is, and its
// errors are the user's to fix: a UserError whose field is the file.
TEST(CompileError, QuotesTheLineOfAStagesOwnGlslFile) {
  test::TempDir dir;
  dir.write("mine.glsl", "float mine(float x) {\n  return x + not_declared;\n}\n");
  const GlslSource glsl = GlslSource::fromFile(dir.str() + "/mine.glsl");
  EXPECT_EQ(glsl.name, "file_mine_glsl");
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto src = KernelBuilder(device, SnippetLibrary::embedded())
                       .workgroup(8)
                       .add(std::make_shared<test::ScriptedStage>(
                           "MineStage", [&](KernelInterface& k) { k.snippet(glsl); }, "float m = mine(1.0);"))
                       .build();
  const std::string msg = compileFailure<UserError>(src);
  EXPECT_THAT(msg, AllOf(HasSubstr(dir.str() + "/mine.glsl: compiling kernel"), HasSubstr(dir.str() + "/mine.glsl:2"), HasSubstr("in snippet " + dir.str() + "/mine.glsl"),
                         HasSubstr(">    2 |   return x + not_declared;")))
      << msg;
}

TEST(CompileError, NamesTheStageWhoseEmittedCodeFails) {
  const DeviceInfo device = parseDevicePreset("lavapipe");
  const auto src = KernelBuilder(device, SnippetLibrary::embedded())
                       .workgroup(8)
                       .add(std::make_shared<test::ScriptedStage>("GoodStage", [](KernelInterface& k) {
                         k.produces("x", "float");
                       }, "float x = 1.0;"))
                       .add(std::make_shared<test::ScriptedStage>("BadStage", [](KernelInterface& k) {
                         k.consumes("x", "float");
                       }, "float y = x + nothing_here;"))
                       .build();
  try {
    ShaderCompiler().compile(src);
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("stage BadStage:1"), HasSubstr("in the code emitted by BadStage"),
                                HasSubstr(">    1 |   float y = x + nothing_here;")))
        << e.what();
  }
}

}  // namespace
}  // namespace foundry
