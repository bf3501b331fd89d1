#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/RuntimeOptions.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

TEST(RuntimeOptions, ParsesEveryKnobFromTheEnvironment) {
  const auto o = RuntimeOptions::fromEnvironment({{"FOUNDRY_DISABLE_FA", "1"},
                                                  {"FOUNDRY_FA_DECODE_WARPS", "4"},
                                                  {"FOUNDRY_FA_DECODE_TG_OUT", "half"},
                                                  {"FOUNDRY_FA_PREFILL_SPLIT_K", "3"},
                                                  {"FOUNDRY_FA_PREFILL_COOPMAT", "0"},
                                                  {"FOUNDRY_LOG_LEVEL", "debug"},
                                                  {"FOUNDRY_DEVICE", "llvmpipe"},
                                                  {"PATH", "/usr/bin"}});
  EXPECT_TRUE(o.disableFa);
  EXPECT_EQ(o.faDecodeWarps, 4u);
  EXPECT_EQ(o.faDecodeTgOut, PartialStorage::Half);
  EXPECT_EQ(o.faPrefillSplitK, 3u);
  EXPECT_EQ(o.faPrefillCoopMat, Force::Off);
  EXPECT_EQ(o.logLevel, "debug");
  EXPECT_EQ(o.device, "llvmpipe");
  EXPECT_FALSE(o.faDecodeKeysPerWarp.has_value());
}

TEST(RuntimeOptions, InvalidValueNamesTheVariableAndTheAcceptedValues) {
  try {
    RuntimeOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "3"}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WARPS"));
    EXPECT_THAT(e.what(), HasSubstr("'3'"));
    EXPECT_THAT(e.what(), HasSubstr("1, 2, 4, 8, 16"));
  }
  EXPECT_THROW(RuntimeOptions::fromEnvironment({{"FOUNDRY_DISABLE_FA", "maybe"}}), UserError);
  EXPECT_THROW(RuntimeOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TG_OUT", "double"}}), UserError);
  EXPECT_THROW(RuntimeOptions::fromEnvironment({{"FOUNDRY_LOG_LEVEL", "loud"}}), UserError);
}

TEST(RuntimeOptions, UnknownFoundryVariableIsRejected) {
  try {
    RuntimeOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WRAPS", "4"}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WRAPS"));
    EXPECT_THAT(e.what(), HasSubstr("FOUNDRY_FA_DECODE_WARPS"));
  }
}

TEST(RuntimeOptions, TuningOverridesTheEnvironmentAndErrorsCarryThePointer) {
  auto o = RuntimeOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "4"}});
  o.applyTuning(nlohmann::json{{"fa_decode_warps", 8}, {"disable_fa_prefill_splitk", true}}, "/tuning");
  EXPECT_EQ(o.faDecodeWarps, 8u);
  EXPECT_TRUE(o.disableFaPrefillSplitK);
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

TEST(RuntimeOptions, SetWinsOverEarlierSources) {
  auto o = RuntimeOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_WARPS", "2"}});
  o.set("FOUNDRY_FA_PREFILL_WARPS", "auto", "--set");
  EXPECT_FALSE(o.faPrefillWarps.has_value());
  o.set("FOUNDRY_FA_PREFILL_WARPS", "8", "--set");
  EXPECT_EQ(o.faPrefillWarps, 8u);
}

TEST(RuntimeOptions, EveryKnobIsDocumentedAndDescribed) {
  const auto described = RuntimeOptions().describe();
  EXPECT_EQ(described.size(), knobTable().size());
  for (const auto& k : knobTable()) {
    EXPECT_TRUE(k.name.starts_with("FOUNDRY_"));
    EXPECT_FALSE(k.help.empty()) << k.name;
  }
}

}  // namespace
}  // namespace foundry
