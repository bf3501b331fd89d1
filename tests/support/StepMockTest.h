#pragma once
// The fixture of the step-level GMock suites: a mocked device pretending to be a preset, a strict
// mocked dispatcher and a shape-only workspace, so a test states a GPU and asserts exactly what a
// FlashAttentionStep records for a call, with no device and no compilation.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Workspace.h"
#include "steps/FlashAttentionStep.h"
#include "support/Mocks.h"

namespace foundry::test {

class StepMockTest : public ::testing::Test {
 protected:
  void pretend(const std::string& preset, RuntimeOptions options = {}) {
    step_.reset();
    device_ = std::make_unique<::testing::NiceMock<MockDeviceInfo>>(preset);
    step_ = std::make_unique<FlashAttentionStep>(*device_, SnippetLibrary::embedded(), std::move(options));
  }
  ::testing::NiceMock<MockDeviceInfo>& device() { return *device_; }
  FlashAttentionStep& step() { return *step_; }
  StepRecord run(const AttentionCall& call) { return step_->run(ctx, call); }

  /// Expects the call to throw E with a message matching `m`, and nothing recorded or allocated.
  template <typename E, typename M>
  void expectRefused(const AttentionCall& call, M m) {
    EXPECT_CALL(dispatcher, dispatch(::testing::_, ::testing::_, ::testing::_)).Times(0);
    EXPECT_THAT([&] { run(call); }, ::testing::ThrowsMessage<E>(m));
    EXPECT_THAT(workspace.requests(), ::testing::IsEmpty());
    EXPECT_THROW(step_->plan(call), E);
  }

  ::testing::StrictMock<MockDispatcher> dispatcher;
  ShapeWorkspace workspace;
  StepContext ctx{dispatcher, workspace};

 private:
  std::unique_ptr<::testing::NiceMock<MockDeviceInfo>> device_;
  std::unique_ptr<FlashAttentionStep> step_;
};

}  // namespace foundry::test
