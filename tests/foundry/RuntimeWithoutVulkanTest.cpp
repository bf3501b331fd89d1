// A C++ user of Runtime.h builds a kernel, dispatches it, submits without waiting and waits, all
// without <vulkan/vulkan.h>: this file does not compile if Runtime.h (or what it includes) brings
// Vulkan in.
#include <gtest/gtest.h>

#include "foundry/Runtime.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

#ifdef VK_VERSION_1_0
#error "foundry/Runtime.h includes <vulkan/vulkan.h>"
#endif

namespace foundry {
namespace {

TEST(RuntimeWithoutVulkan, BuildsDispatchesAndWaits) {
  Runtime& rt = test::runtime();
  const auto kernel = rt.builder()
                          .workgroup(64)
                          .add(std::make_shared<test::LoadStage>(DType::F32, 64))
                          .add(std::make_shared<test::ScaleStage>(64))
                          .add(std::make_shared<test::StoreStage>(DType::F32))
                          .build();
  const auto in = rt.allocate("in", DType::F32, {64});
  const auto out = rt.allocate("out", DType::F32, {64});
  const auto x = test::randomVector(64, 3);
  rt.upload(in, x);
  rt.poison(out);
  auto d = rt.dispatcher();
  d->dispatch(kernel, Arguments().bind("src", in).bind("dst", out).set("count", 64u).set("scale", 3.0f), {1});
  const Submission s = d->submitAsync();
  rt.wait(s);
  EXPECT_EQ(d->wait(s).dispatches.size(), 1u);
  const auto got = rt.download(out);
  for (std::uint32_t i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(got[i], x[(i + 1) % 64] * 3.0f) << i;
}

}  // namespace
}  // namespace foundry
