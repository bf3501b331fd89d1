#pragma once
// GMock doubles for the two interfaces the step layer plans and records against, plus matchers for
// what a mocked dispatcher receives.
//
// MockDeviceInfo delegates every capability to a preset ("h200", "lavapipe", "small", with optional
// overrides such as "h200,cus=8") — GMock's "delegating to a fake" pattern — so a test pretends to be
// that device and overrides single capabilities with ON_CALL. Use it as NiceMock<MockDeviceInfo>.
//
// MockDispatcher records nothing by itself; its default dispatch action runs checkArguments, as the
// Vulkan dispatcher does, so a step that binds or sets the wrong fields fails even in a mock test.
// Use it as StrictMock<MockDispatcher> so an unexpected dispatch is a failure.
#include <gmock/gmock.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/Dispatcher.h"

namespace foundry {

// Readable failure messages for what a mocked dispatcher receives (found by ADL).
inline void PrintTo(const KernelSource& k, std::ostream* os) {
  *os << "kernel " << k.name;
}
inline void PrintTo(const Grid& g, std::ostream* os) {
  *os << "grid {" << g.x << ", " << g.y << ", " << g.z << "}";
}
inline void PrintTo(const Arguments& a, std::ostream* os) {
  *os << "arguments {";
  for (const auto& [name, t] : a.tensors()) *os << " " << name << "='" << t.name << "'";
  *os << ";";
  for (const auto& [name, v] : a.push()) {
    *os << " " << name << "=";
    std::visit([&](const auto& x) { *os << ::testing::PrintToString(x); }, v);
  }
  *os << " }";
}

}  // namespace foundry

namespace foundry::test {

class MockDeviceInfo : public DeviceInfo {
 public:
  explicit MockDeviceInfo(const std::string& preset) : fake_(parseDevicePreset(preset)) { delegateToFake(); }

  MOCK_METHOD(std::string, name, (), (const, override));
  MOCK_METHOD(Vendor, vendor, (), (const, override));
  MOCK_METHOD(DeviceKind, kind, (), (const, override));
  MOCK_METHOD(std::uint32_t, subgroupSize, (), (const, override));
  MOCK_METHOD(bool, subgroupArithmetic, (), (const, override));
  MOCK_METHOD(bool, subgroupShuffle, (), (const, override));
  MOCK_METHOD(std::uint32_t, maxSharedMemoryBytes, (), (const, override));
  MOCK_METHOD(std::uint64_t, maxStorageBufferRange, (), (const, override));
  MOCK_METHOD(std::uint64_t, maxAllocationBytes, (), (const, override));
  MOCK_METHOD(std::uint64_t, deviceMemoryBytes, (), (const, override));
  MOCK_METHOD(std::uint32_t, maxWorkgroupInvocations, (), (const, override));
  MOCK_METHOD(std::uint32_t, maxPushConstantBytes, (), (const, override));
  MOCK_METHOD(bool, fp16Arithmetic, (), (const, override));
  MOCK_METHOD(bool, storage16Bit, (), (const, override));
  MOCK_METHOD(std::vector<CoopMatShape>, coopMatShapes, (), (const, override));
  MOCK_METHOD(CoopMatLayout, coopMatLayout, (), (const, override));
  MOCK_METHOD(std::uint32_t, computeUnits, (), (const, override));
  MOCK_METHOD((std::array<std::uint8_t, 16>), uuid, (), (const, override));
  MOCK_METHOD(std::uint32_t, driverVersion, (), (const, override));

  /// The preset answering every call that a test has not overridden.
  const StaticDeviceInfo& fake() const { return fake_; }

 private:
  void delegateToFake() {
    using ::testing::Invoke;
    const DeviceInfo* f = &fake_;
    ON_CALL(*this, name()).WillByDefault(Invoke(f, &DeviceInfo::name));
    ON_CALL(*this, vendor()).WillByDefault(Invoke(f, &DeviceInfo::vendor));
    ON_CALL(*this, kind()).WillByDefault(Invoke(f, &DeviceInfo::kind));
    ON_CALL(*this, subgroupSize()).WillByDefault(Invoke(f, &DeviceInfo::subgroupSize));
    ON_CALL(*this, subgroupArithmetic()).WillByDefault(Invoke(f, &DeviceInfo::subgroupArithmetic));
    ON_CALL(*this, subgroupShuffle()).WillByDefault(Invoke(f, &DeviceInfo::subgroupShuffle));
    ON_CALL(*this, maxSharedMemoryBytes()).WillByDefault(Invoke(f, &DeviceInfo::maxSharedMemoryBytes));
    ON_CALL(*this, maxStorageBufferRange()).WillByDefault(Invoke(f, &DeviceInfo::maxStorageBufferRange));
    ON_CALL(*this, maxAllocationBytes()).WillByDefault(Invoke(f, &DeviceInfo::maxAllocationBytes));
    ON_CALL(*this, deviceMemoryBytes()).WillByDefault(Invoke(f, &DeviceInfo::deviceMemoryBytes));
    ON_CALL(*this, maxWorkgroupInvocations()).WillByDefault(Invoke(f, &DeviceInfo::maxWorkgroupInvocations));
    ON_CALL(*this, maxPushConstantBytes()).WillByDefault(Invoke(f, &DeviceInfo::maxPushConstantBytes));
    ON_CALL(*this, fp16Arithmetic()).WillByDefault(Invoke(f, &DeviceInfo::fp16Arithmetic));
    ON_CALL(*this, storage16Bit()).WillByDefault(Invoke(f, &DeviceInfo::storage16Bit));
    ON_CALL(*this, coopMatShapes()).WillByDefault(Invoke(f, &DeviceInfo::coopMatShapes));
    ON_CALL(*this, coopMatLayout()).WillByDefault(Invoke(f, &DeviceInfo::coopMatLayout));
    ON_CALL(*this, computeUnits()).WillByDefault(Invoke(f, &DeviceInfo::computeUnits));
    ON_CALL(*this, uuid()).WillByDefault(Invoke(f, &DeviceInfo::uuid));
    ON_CALL(*this, driverVersion()).WillByDefault(Invoke(f, &DeviceInfo::driverVersion));
  }

  StaticDeviceInfo fake_;
};

class MockDispatcher : public Dispatcher {
 public:
  MockDispatcher() {
    ON_CALL(*this, dispatch).WillByDefault([](const KernelSource& kernel, const Arguments& args, Grid) {
      checkArguments(kernel, args);
    });
  }
  MOCK_METHOD(void, dispatch, (const KernelSource& kernel, const Arguments& args, Grid grid), (override));
  MOCK_METHOD(SubmitResult, submit, (), (override));
};

/// The kernel's stages, in order, match `m` (e.g. ElementsAre("HeadLayoutStage", "FlashDecodeStage")).
inline auto KernelStages(auto m) {
  return ::testing::Field("stages", &KernelSource::stages, m);
}
/// The kernel's name matches `m`.
inline auto KernelNamed(auto m) {
  return ::testing::Field("name", &KernelSource::name, m);
}

/// Push constant `field` was set to the uint32 `value`.
MATCHER_P2(PushU32, field, value,
           std::string(negation ? "does not set " : "sets ") + field + " = " + ::testing::PrintToString(value)) {
  if (!arg.push().count(field)) {
    *result_listener << "push constant '" << field << "' is not set";
    return false;
  }
  const std::uint32_t got = arg.pushU32(field);
  *result_listener << field << " is " << got;
  return got == static_cast<std::uint32_t>(value);
}

/// Push constant `field` was set to a float within `tolerance` of `value`.
MATCHER_P3(PushF32Near, field, value, tolerance, std::string("sets float ") + field) {
  auto it = arg.push().find(field);
  if (it == arg.push().end() || !std::holds_alternative<float>(it->second)) {
    *result_listener << "push constant '" << field << "' is not set as a float";
    return false;
  }
  const float got = std::get<float>(it->second);
  *result_listener << field << " is " << got;
  return std::abs(got - static_cast<float>(value)) <= tolerance;
}

/// Push constant `field` was not set at all.
MATCHER_P(LacksPush, field, std::string("does not set ") + field) {
  return arg.push().count(field) == 0;
}

/// Buffer `slot` is bound to a tensor named `tensorName`.
MATCHER_P2(Binds, slot, tensorName, std::string("binds ") + slot + " to '" + tensorName + "'") {
  auto it = arg.tensors().find(slot);
  if (it == arg.tensors().end()) {
    *result_listener << "nothing is bound as '" << slot << "'";
    return false;
  }
  *result_listener << slot << " is bound to '" << it->second.name << "'";
  return it->second.name == std::string(tensorName);
}

/// Buffer `slot` is not bound.
MATCHER_P(LacksBinding, slot, std::string("does not bind ") + slot) {
  return arg.tensors().count(slot) == 0;
}

}  // namespace foundry::test
