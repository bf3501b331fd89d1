#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/CoopMatProbe.h"
#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

TEST(DeviceInfo, PresetsDescribeTheDevicesTheyName) {
  const auto h200 = makePresetDevice("h200");
  EXPECT_EQ(h200->subgroupSize(), 32u);
  EXPECT_EQ(h200->maxSharedMemoryBytes(), 49152u);
  EXPECT_EQ(h200->computeUnits(), 132u);
  EXPECT_TRUE(h200->hasCoopMat({16, 16, 16, DType::F16, DType::F32}));
  const auto lavapipe = makePresetDevice("lavapipe");
  EXPECT_EQ(lavapipe->subgroupSize(), 8u);
  EXPECT_EQ(lavapipe->maxSharedMemoryBytes(), 32768u);
  EXPECT_EQ(lavapipe->maxStorageBufferRange(), 134217728u);
  EXPECT_TRUE(lavapipe->coopMatShapes().empty());
}

TEST(DeviceInfo, OverridesApplyOnTopOfAPreset) {
  const auto caps = parseDevicePreset("h200,subgroup=64,shared=32768,coopmat=0,cus=8");
  EXPECT_EQ(caps.subgroupSize, 64u);
  EXPECT_EQ(caps.maxSharedMemoryBytes, 32768u);
  EXPECT_TRUE(caps.coopMatShapes.empty());
  EXPECT_EQ(caps.computeUnits, 8u);
}

TEST(DeviceInfo, BadPresetsNameWhatIsAccepted) {
  try {
    parseDevicePreset("b200");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("b200"));
    EXPECT_THAT(e.what(), HasSubstr("h200"));
    EXPECT_THAT(e.what(), HasSubstr("lavapipe"));
  }
  EXPECT_THROW(parseDevicePreset("h200,warp=32"), UserError);
  EXPECT_THROW(parseDevicePreset("h200,subgroup=24"), UserError);
  EXPECT_THROW(parseDevicePreset("h200,subgroup"), UserError);
}

TEST(CoopMatLayout, TheQuadPatternIsRecognisedAndAnythingElseRejected) {
  const CoopMatLayout nv = nvidiaQuadLayout();
  CoopMatProbeResult probe;
  probe.subgroupSize = 32;
  probe.elements = 8;
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    for (std::uint32_t e = 0; e < 8; ++e) {
      probe.flat.push_back((nv.rowOf[e] + lane / 4) * 16 + nv.colOf[e] + 2 * (lane % 4));
    }
  }
  EXPECT_EQ(quadLayoutFrom(probe), nv);
  CoopMatProbeResult swapped = probe;
  std::swap(swapped.flat[5 * 8 + 2], swapped.flat[6 * 8 + 2]);  // two lanes disagree with the pattern
  EXPECT_FALSE(quadLayoutFrom(swapped).quad());
  CoopMatProbeResult empty = probe;
  empty.elements = 0;
  empty.flat.clear();
  EXPECT_FALSE(quadLayoutFrom(empty).quad());
}

}  // namespace
}  // namespace foundry
