#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/steps/Options.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

TEST(Options, ParsesEveryKnobFromTheEnvironment) {
  const auto o = Options::fromEnvironment({{"FOUNDRY_DISABLE_FA", "1"},
                                           {"FOUNDRY_FA_DECODE_WARPS", "4"},
                                           {"FOUNDRY_FA_DECODE_TG_OUT", "half"},
                                           {"FOUNDRY_FA_PREFILL_SPLIT_K", "3"},
                                           {"FOUNDRY_FA_PREFILL_COOPMAT", "0"},
                                           {"FOUNDRY_LOG_LEVEL", "debug"},
                                           {"FOUNDRY_DEVICE", "llvmpipe"},
                                           {"PATH", "/usr/bin"}});
  EXPECT_TRUE(o.attention.disableFa);
  EXPECT_EQ(o.attention.faDecodeWarps, 4u);
  EXPECT_EQ(o.attention.faDecodeTgOut, PartialStorage::Half);
  EXPECT_EQ(o.attention.faPrefillSplitK, 3u);
  EXPECT_EQ(o.attention.faPrefillCoopMat, Force::Off);
  EXPECT_EQ(o.runtime.logLevel, "debug");
  EXPECT_EQ(o.runtime.device, "llvmpipe");
  EXPECT_FALSE(o.attention.faDecodeKeysPerWarp.has_value());
}

TEST(Options, InvalidValueNamesTheVariableAndTheAcceptedValues) {
  try {
    Options::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "3"}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WARPS"));
    EXPECT_THAT(e.what(), HasSubstr("'3'"));
    EXPECT_THAT(e.what(), HasSubstr("1, 2, 4, 8, 16"));
  }
  EXPECT_THROW(Options::fromEnvironment({{"FOUNDRY_DISABLE_FA", "maybe"}}), UserError);
  EXPECT_THROW(Options::fromEnvironment({{"FOUNDRY_FA_DECODE_TG_OUT", "double"}}), UserError);
  EXPECT_THROW(Options::fromEnvironment({{"FOUNDRY_LOG_LEVEL", "loud"}}), UserError);
}

TEST(Options, TheCoopMat2GlslcIsTheOneGivenElsePathsGlslc) {
  EXPECT_EQ(Options::fromEnvironment({}).runtime.glslcCommand(true), "glslc");
  EXPECT_EQ(Options::fromEnvironment({}).runtime.glslcCommand(false), "");  // no extension: no PATH probe
  EXPECT_EQ(Options::fromEnvironment({{"FOUNDRY_GLSLC", "/opt/trixie/glslc"}}).runtime.glslcCommand(true),
            "/opt/trixie/glslc");
  EXPECT_EQ(Options::fromEnvironment({{"FOUNDRY_GLSLC", ""}}).runtime.glslcCommand(true), "");
}

TEST(Options, UnknownFoundryVariableIsRejected) {
  try {
    Options::fromEnvironment({{"FOUNDRY_FA_DECODE_WRAPS", "4"}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WRAPS"));
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WARPS"));
  }
}

TEST(Options, TuningOverridesTheEnvironmentAndErrorsCarryThePointer) {
  auto o = Options::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "4"}});
  o.applyTuning(nlohmann::json{{"fa_decode_warps", 8}, {"disable_fa_prefill_splitk", true}}, "/tuning");
  EXPECT_EQ(o.attention.faDecodeWarps, 8u);
  EXPECT_TRUE(o.attention.disableFaPrefillSplitK);
  try {
    o.applyTuning(nlohmann::json{{"fa_decode_keys_per_warp", 3}}, "/tuning");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "/tuning/fa_decode_keys_per_warp");
  }
  try {
    o.applyTuning(nlohmann::json{{"warp_count", 3}}, "/tuning");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "/tuning/warp_count");
    EXPECT_THAT(e.what(), HasSubstr("fa_decode_warps"));
  }
}

TEST(Options, SetWinsOverEarlierSources) {
  auto o = Options::fromEnvironment({{"FOUNDRY_FA_PREFILL_WARPS", "2"}});
  o.set("FOUNDRY_FA_PREFILL_WARPS", "auto", "--set");
  EXPECT_FALSE(o.attention.faPrefillWarps.has_value());
  o.set("FOUNDRY_FA_PREFILL_WARPS", "8", "--set");
  EXPECT_EQ(o.attention.faPrefillWarps, 8u);
}

TEST(Options, EveryKnobIsDocumentedAndDescribed) {
  const auto described = Options().describe();
  EXPECT_EQ(described.size(), knobTable().size());
  for (const auto& k : knobTable()) {
    EXPECT_TRUE(k.name.starts_with("FOUNDRY_"));
    EXPECT_FALSE(k.help.empty()) << k.name;
  }
}

// Each layer owns its knobs: the runtime's table has no attention knob and the other way round, and a
// value set through Options lands, with its source, in the struct of the layer that reads it.
TEST(Options, EachLayerOwnsItsKnobs) {
  for (const auto& k : RuntimeOptions::knobs()) EXPECT_FALSE(k.info.name.starts_with("FOUNDRY_FA_")) << k.info.name;
  std::vector<std::string_view> names;
  for (const auto& k : AttentionOptions::knobs()) names.push_back(k.info.name);
  for (const auto& k : RuntimeOptions::knobs()) names.push_back(k.info.name);
  ASSERT_EQ(names.size(), knobTable().size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], knobTable()[i].name);
  EXPECT_THAT(names, ::testing::Contains("FOUNDRY_FA_DECODE_WARPS"));
  EXPECT_THAT(names, ::testing::Contains("FOUNDRY_CACHE_DIR"));

  Options o = Options::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_CACHE_DIR", "off"}});
  o.applyTuning(nlohmann::json{{"fa_prefill_warps", 2}}, "/tuning");
  EXPECT_EQ(o.attention.faDecodeSplitK, 3u);
  EXPECT_EQ(o.runtime.cacheDir, "off");
  EXPECT_EQ(o.attention.sourceOf("FOUNDRY_FA_DECODE_SPLIT_K"), "environment");
  EXPECT_EQ(o.attention.fieldOf("FOUNDRY_FA_PREFILL_WARPS"), "/tuning/fa_prefill_warps");
  EXPECT_EQ(o.runtime.sourceOf("FOUNDRY_CACHE_DIR"), "environment");
  EXPECT_EQ(o.runtime.sourceOf("FOUNDRY_FA_DECODE_SPLIT_K"), "default");
  EXPECT_EQ(o.sourceOf("FOUNDRY_FA_PREFILL_WARPS"), "/tuning/fa_prefill_warps");
  // AttentionOptions::fromEnvironment rejects what Options rejects.
  EXPECT_THROW(AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WRAPS", "4"}}), UserError);
  EXPECT_EQ(AttentionOptions::fromEnvironment({{"FOUNDRY_DEVICE", "0"}, {"FOUNDRY_FA_DECODE_VEC", "2"}}).faDecodeVectorWidth, 2u);
}

}  // namespace
}  // namespace foundry
