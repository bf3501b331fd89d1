// The tuning table: every preset resolves every value from a row, no row is shadowed everywhere, the
// family, head-dim and dtype keys select the rows they say, and the Selector starts from what the
// table gives (and says so in its reasons).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/Selector.h"
#include "foundry/steps/TuningTable.h"
#include "foundry/testing/ShapeCall.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

constexpr std::uint32_t kHeadDims[] = {32, 40, 64, 80, 96, 112, 128, 192, 256, 576};

TEST(TuningTable, EveryPresetResolvesEveryValueFromARow) {
  for (const std::string& preset : devicePresetNames()) {
    for (const std::uint32_t d : kHeadDims) {
      for (const DType t : {DType::F16, DType::F32, DType::I8}) {
        SCOPED_TRACE(fmt::format("{} D{} {}", preset, d, dtypeName(t)));
        const Tuning tune = tuningFor(devicePreset(preset), d, t);
        for (const std::string_view name : tuningValueNames()) EXPECT_THAT(tune.sourceOf(name), HasSubstr("tuning table: "));
        EXPECT_GT(tune.decodeWarps, 0u);
        EXPECT_GT(tune.prefillKeysPerTile, 0u);
      }
    }
  }
}

TEST(TuningTable, EveryRowGivesSomeValueToSomePreset) {
  const auto& table = tuningTable();
  for (std::size_t i = 0; i < table.size(); ++i) {
    bool gives = false;
    for (const std::string& preset : devicePresetNames()) {
      for (const std::uint32_t d : kHeadDims) {
        for (const DType t : {DType::F16, DType::BF16, DType::F32, DType::I8}) {
          const Tuning tune = tuningFor(devicePreset(preset), d, t);
          for (const auto& [name, why] : tune.sources) gives = gives || why == table[i].why;
        }
      }
    }
    EXPECT_TRUE(gives) << "row " << i << " is shadowed on every preset: " << table[i].why;
  }
}

TEST(TuningTable, KeysSelectTheirRows) {
  const DeviceInfo h200 = devicePreset("h200"), lavapipe = devicePreset("lavapipe"), small = devicePreset("small");
  // Family: lavapipe keeps no extra loads in flight and never takes the wide loads.
  EXPECT_EQ(tuningFor(h200, 128, DType::F16).decodeUnroll, 4u);
  EXPECT_EQ(tuningFor(lavapipe, 128, DType::F16).decodeUnroll, 1u);
  EXPECT_EQ(tuningFor(lavapipe, 128, DType::F16).wideDecodeKeys, 0u);
  // Dtype: the wide loads are f16's.
  EXPECT_EQ(tuningFor(h200, 128, DType::F16).wideDecodeKeys, 4096u);
  EXPECT_EQ(tuningFor(h200, 128, DType::F32).wideDecodeKeys, 0u);
  // Head dim: shared-memory-softmax tiles narrow above 64.
  EXPECT_EQ(tuningFor(h200, 64, DType::F16).coopKeysPerTileShared, 64u);
  EXPECT_EQ(tuningFor(h200, 72, DType::F16).coopKeysPerTileShared, 32u);
  // Subgroup width, for a device of no known family.
  EXPECT_EQ(small.family, DeviceFamily::Other);
  EXPECT_EQ(tuningFor(small, 128, DType::F16).decodeWarps, 4u);
  EXPECT_EQ(tuningFor(small, 128, DType::F16).prefillWarps, 2u);
  EXPECT_EQ(tuningFor(h200, 128, DType::F16).decodeWarps, 8u);
}

TEST(TuningTable, MatchesByEachKey) {
  const DeviceInfo h200 = devicePreset("h200");
  EXPECT_TRUE(tuningMatches({}, h200, 128, DType::F32));
  EXPECT_FALSE(tuningMatches({.family = DeviceFamily::Rdna3}, h200, 128, DType::F16));
  EXPECT_TRUE(tuningMatches({.family = DeviceFamily::Hopper}, h200, 128, DType::F16));
  EXPECT_FALSE(tuningMatches({.minHeadDim = 129}, h200, 128, DType::F16));
  EXPECT_FALSE(tuningMatches({.maxHeadDim = 127}, h200, 128, DType::F16));
  EXPECT_FALSE(tuningMatches({.elementBytes = 4}, h200, 128, DType::F16));
  EXPECT_TRUE(tuningMatches({.elementBytes = 2}, h200, 128, DType::BF16));  // bf16 loads like f16
  EXPECT_FALSE(tuningMatches({.format = DType::F16}, h200, 128, DType::BF16));  // unless a row names one format
  EXPECT_TRUE(tuningMatches({.format = DType::F16}, h200, 128, DType::F16));
  EXPECT_FALSE(tuningMatches({.narrowSubgroup = true}, h200, 128, DType::F16));
  EXPECT_TRUE(tuningMatches({.headDims = {80, 112}}, h200, 112, DType::F16));
  EXPECT_FALSE(tuningMatches({.headDims = {80, 112}}, h200, 96, DType::F16));
  EXPECT_FALSE(tuningMatches({.maxHeadDim = 100, .headDims = {80, 112}}, h200, 112, DType::F16));
}

AttentionPlan planOn(const std::string& preset, const test::CallShape& s) {
  return Selector::plan(describeCall(test::shapeCall(s)), devicePreset(preset), AttentionOptions());
}

const Decision& decision(const AttentionPlan& plan, const std::string& what) {
  const auto it = std::find_if(plan.decisions.begin(), plan.decisions.end(), [&](const Decision& d) { return d.what == what; });
  if (it == plan.decisions.end()) throw std::runtime_error("no decision " + what);
  return *it;
}

TEST(TuningTable, TheSelectorStartsFromTheTable) {
  for (const std::string& preset : devicePresetNames()) {
    const DeviceInfo device = devicePreset(preset);
    SCOPED_TRACE(preset);
    const Tuning tune = tuningFor(device, 128, DType::F16);
    const AttentionPlan decode = planOn(preset, test::decodeShape(1, 32, 8, 1024));
    if (!decode.decodeVariant.scalar) {
      EXPECT_EQ(decode.decodeVariant.warps,
                std::min(tune.decodeWarps, device.maxWorkgroupInvocations / device.subgroupSize));
      EXPECT_EQ(decision(decode, "unroll").reason, tune.sourceOf("decodeUnroll"));
    }
    // Long enough that the query tiles fill every preset's compute units (no smaller tiles).
    const AttentionPlan prefill = planOn(preset, test::prefillShape(32, 8, 4096, 4096));
    const PrefillVariant& v = prefill.prefillVariant;
    if (v.coopMat && v.quadSoftmax) {
      EXPECT_EQ(v.warps, tune.coopWarps);
      EXPECT_EQ(v.keysPerTile, tune.coopKeysPerTile);
      EXPECT_EQ(decision(prefill, "warps").reason, tune.sourceOf("coopWarps"));
    } else if (!v.coopMat) {
      EXPECT_EQ(v.warps, tune.prefillWarps);
      EXPECT_EQ(decision(prefill, "warps").reason, tune.sourceOf("prefillWarps"));
    }
  }
}

}  // namespace
}  // namespace foundry
