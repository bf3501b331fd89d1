#pragma once
// The GMock double of the dispatcher the step layer records against, plus matchers for what it
// receives. (A device needs no double: a test builds a DeviceInfo from a preset and sets fields.)
//
// MockDispatcher records nothing by itself; its default dispatch action runs checkArguments, as the
// Vulkan dispatcher does, so a step that binds or sets the wrong fields fails even in a mock test.
// Use it as StrictMock<MockDispatcher> so an unexpected dispatch is a failure.
#include <gmock/gmock.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

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
