// The DeviceInfo of the device the tests run on: written as a device string and read back, it is the
// same device, so `foundry kernels --pretend` plans for it exactly as a run on it would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/DeviceInfo.h"
#include "support/TestRuntime.h"

namespace foundry {
namespace {

TEST(RuntimeDeviceInfo, RoundTripsThroughItsString) {
  const DeviceInfo& info = test::runtime().info();
  const std::string text = info.toString();
  SCOPED_TRACE(text);
  EXPECT_EQ(parseDevicePreset(text), info);
  EXPECT_FALSE(info.name.empty());
  EXPECT_THAT(text, ::testing::HasSubstr(info.name));
}

TEST(RuntimeDeviceInfo, TheFamilyComesFromTheDriver) {
  const DeviceInfo& info = test::runtime().info();
  EXPECT_EQ(info.family, deviceFamilyFor(info.vendor, info.name));
  if (info.name.find("llvmpipe") != std::string::npos) {
    EXPECT_EQ(info.family, DeviceFamily::Lavapipe);
  }
}

}  // namespace
}  // namespace foundry
