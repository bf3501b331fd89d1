#include "support/TestRuntime.h"

#include <memory>

#include <gtest/gtest.h>

#include "foundry/steps/Options.h"
#include "foundry/KernelBuilder.h"
#include "foundry/vk/Device.h"
#include "support/TestStages.h"

namespace foundry::test {

namespace {
std::unique_ptr<Runtime>& holder() {
  static std::unique_ptr<Runtime> rt;
  return rt;
}

std::uint64_t& baseline() {
  static std::uint64_t n = 0;
  return n;
}

class ValidationListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { baseline() = validationErrors(); }
  void OnTestEnd(const ::testing::TestInfo&) override {
    const auto after = validationErrors();
    if (after > baseline()) {
      ADD_FAILURE() << (after - baseline()) << " Vulkan validation error(s) during this test; last: "
                    << holder()->device().instance().lastValidationError();
    }
  }
};
}  // namespace

std::uint64_t validationErrors() {
  return runtimeCreated() ? holder()->device().instance().validationErrors() : 0;
}

void acknowledgeValidationErrors() { baseline() = validationErrors(); }

Runtime& runtime() {
  auto& rt = holder();
  if (!rt) rt = std::make_unique<Runtime>(Options::fromEnvironment().runtime);
  return *rt;
}

bool runtimeCreated() { return holder() != nullptr; }

void shutdownRuntime() { holder().reset(); }

KernelSource scaleKernel(Runtime& rt) {
  return rt.builder()
      .workgroup(64)
      .add(std::make_shared<LoadStage>(DType::F32, 64))
      .add(std::make_shared<ScaleStage>(64))
      .add(std::make_shared<StoreStage>(DType::F32))
      .build();
}

std::vector<float> randomVector(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

void installValidationListener() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new ValidationListener());
}

}  // namespace foundry::test
