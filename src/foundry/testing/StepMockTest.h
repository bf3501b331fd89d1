#pragma once
// The fixture of the step-level GMock suites: a device stated as a value (a preset, with fields a test
// overrides), a strict mocked dispatcher and a shape-only workspace, so a test states a GPU and asserts
// exactly what a FlashAttentionStep records for a call, with no device and no compilation.
#include <memory>
#include <stdexcept>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Workspace.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/testing/Mocks.h"

namespace foundry::test {

class StepMockTest : public ::testing::Test {
 protected:
  /// Plans for `device` from now on: a device string ("h200", "lavapipe,cus=8") or a value.
  void pretend(const std::string& preset, AttentionOptions options = {}) {
    pretend(parseDevicePreset(preset), std::move(options));
  }
  void pretend(DeviceInfo device, AttentionOptions options = {}) {
    step_.reset();
    device_ = std::make_unique<DeviceInfo>(std::move(device));
    step_ = std::make_unique<FlashAttentionStep>(*device_, SnippetLibrary::embedded(), std::move(options));
  }
  const DeviceInfo& device() const { return requirePretended(), *device_; }
  FlashAttentionStep& step() { return requirePretended(), *step_; }
  StepRecord run(const AttentionCall& call) { return step().run(ctx, call); }

  /// Expects the call to throw E with a message matching `m`, and nothing recorded or allocated.
  template <typename E, typename M>
  void expectRefused(const AttentionCall& call, M m) {
    EXPECT_CALL(dispatcher, dispatch(::testing::_, ::testing::_, ::testing::_)).Times(0);
    EXPECT_THAT([&] { run(call); }, ::testing::ThrowsMessage<E>(m));
    EXPECT_THAT(workspace.requests(), ::testing::IsEmpty());
    EXPECT_THROW(step().plan(call), E);
  }

  ::testing::StrictMock<MockDispatcher> dispatcher;
  ShapeWorkspace workspace;
  StepContext ctx{dispatcher, workspace};

 private:
  void requirePretended() const {
    if (!step_) throw std::logic_error("StepMockTest: call pretend(\"<device>\") before run(), step() or device()");
  }
  std::unique_ptr<DeviceInfo> device_;
  std::unique_ptr<FlashAttentionStep> step_;
};

}  // namespace foundry::test
