// The Vulkan dispatcher: arguments checked before recording, barriers only where buffers conflict,
// chained dispatches see each other's writes, timings reported; allocations beyond the device fail.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

class DispatcherTest : public ::testing::Test {
 protected:
  Runtime& rt = test::runtime();
  KernelSource kernel() const { return test::scaleKernel(rt); }
};

TEST_F(DispatcherTest, WrongArgumentsFailBeforeAnythingIsRecorded) {
  const auto src = kernel();
  const auto a = rt.allocate("a", DType::F32, {64});
  const auto b = rt.allocate("b", DType::F32, {64});
  const auto h = rt.allocate("h", DType::F16, {64});
  auto d = rt.dispatcher();
  auto good = [&] { return Arguments().bind("src", a).bind("dst", b).set("count", 64u).set("scale", 1.0f); };
  EXPECT_THAT([&] { d->dispatch(src, Arguments().bind("src", a).set("count", 64u).set("scale", 1.0f), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("buffer 'dst' (f32 writeonly) is not bound")));
  EXPECT_THAT([&] { d->dispatch(src, good().bind("extra", a), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("'extra'")));
  EXPECT_THAT([&] { d->dispatch(src, good().set("count", 64.0f), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("push constant 'count' is uint but was set as float")));
  EXPECT_THAT([&] { d->dispatch(src, good().set("bogus", 1u), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("'bogus'")));
  EXPECT_THAT([&] { d->dispatch(src, good().bind("src", h), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("expects f32 but tensor 'h' is f16")));
  EXPECT_THAT([&] { d->dispatch(src, good().bind("dst", a), {1}); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("overlap")));
  Arguments noScale = Arguments().bind("src", a).bind("dst", b).set("count", 64u);
  EXPECT_THROW(d->dispatch(src, noScale, {1}), UserError);
  EXPECT_EQ(d->pending(), 0u);
}

TEST_F(DispatcherTest, ChainedDispatchesSeeEarlierWritesAndIndependentOnesNeedNoBarrier) {
  const auto src = kernel();
  const std::uint32_t n = 640;
  const auto x = test::randomVector(n, 99);
  const auto t0 = rt.allocate("t0", DType::F32, {n});
  const auto t1 = rt.allocate("t1", DType::F32, {n});
  const auto t2 = rt.allocate("t2", DType::F32, {n});
  const auto u0 = rt.allocate("u0", DType::F32, {n});
  const auto u1 = rt.allocate("u1", DType::F32, {n});
  rt.upload(t0, x);
  rt.upload(u0, x);
  rt.poison(t2);
  auto d = rt.dispatcher();
  const auto before = d->barriers();
  auto args = [&](const Tensor& in, const Tensor& out, float s) {
    return Arguments().bind("src", in).bind("dst", out).set("count", n).set("scale", s);
  };
  d->dispatch(src, args(t0, t1, 2.0f), {n / 64});
  d->dispatch(src, args(u0, u1, 3.0f), {n / 64});  // independent of the first
  EXPECT_EQ(d->barriers(), before);
  d->dispatch(src, args(t1, t2, 0.5f), {n / 64});  // reads what the first wrote
  EXPECT_EQ(d->barriers(), before + 1);
  const auto result = d->submit();
  ASSERT_EQ(result.dispatches.size(), 3u);
  for (const auto& t : result.dispatches) EXPECT_GT(t.gpuMicros, 0.0) << t.kernel;
  EXPECT_GE(result.totalGpuMicros, result.dispatches[0].gpuMicros);
  const auto got = rt.download(t2);
  for (std::uint32_t i = 0; i < n; ++i) {
    // Each pass reads the next lane of its workgroup: two passes shift by two lanes.
    const std::uint32_t g = i / 64, lane = i % 64;
    const double expected = x[g * 64 + (lane + 2) % 64] * 2.0 * 0.5;
    ASSERT_NEAR(got[i], expected, 1e-5) << i;
  }
}

TEST_F(DispatcherTest, AllocationBeyondTheDeviceIsADeviceErrorNamingTheSize) {
  const auto limit = rt.info().maxAllocationBytes;
  try {
    Buffer too_big(rt.device(), limit + 4096, "huge");
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(limit + 4096)));
    EXPECT_THAT(e.what(), HasSubstr("huge"));
  }
}

TEST_F(DispatcherTest, TensorsBeyondTheStorageBufferRangeAreRejectedBeforeRecording) {
  const auto src = kernel();
  const auto range = rt.info().maxStorageBufferRange;
  if (range >= rt.info().maxAllocationBytes) GTEST_SKIP() << "the device binds whole allocations";
  const auto big = rt.allocate("big", DType::F32, {static_cast<std::int64_t>(range / 4 + 1024)});
  const auto out = rt.allocate("out", DType::F32, {64});
  auto d = rt.dispatcher();
  EXPECT_THAT([&] {
    d->dispatch(src, Arguments().bind("src", big).bind("dst", out).set("count", 64u).set("scale", 1.0f), {1});
  }, ::testing::ThrowsMessage<UnsupportedError>(HasSubstr("'big'")));
  EXPECT_EQ(d->pending(), 0u);
}

TEST_F(DispatcherTest, TheValidationLayerIsOnAndItsErrorsAreCounted) {
  if (!rt.options().validation) GTEST_SKIP() << "FOUNDRY_VALIDATION is off";
  const auto before = test::validationErrors();
  // An invalid call on purpose: a buffer of size zero violates VUID-VkBufferCreateInfo-size-00912.
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 0;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(rt.device().handle(), &info, nullptr, &buffer) == VK_SUCCESS && buffer) {
    vkDestroyBuffer(rt.device().handle(), buffer, nullptr);
  }
  EXPECT_GT(test::validationErrors(), before);
  test::acknowledgeValidationErrors();
}

// Synchronization validation is what checks the dispatcher's barriers; prove it is on by recording a
// hazard the dispatcher would never record: two writes of one buffer with no barrier between them.
TEST_F(DispatcherTest, SynchronizationValidationCatchesAMissingBarrier) {
  if (!rt.options().validation) GTEST_SKIP() << "FOUNDRY_VALIDATION is off";
  const auto t = rt.allocate("t", DType::F32, {1024});
  const VkBuffer buffer = t.buffer->handle();
  const auto before = test::validationErrors();
  rt.device().submitAndWait([&](VkCommandBuffer cmd) {
    vkCmdFillBuffer(cmd, buffer, 0, VK_WHOLE_SIZE, 1u);
    vkCmdFillBuffer(cmd, buffer, 0, VK_WHOLE_SIZE, 2u);
  });
  EXPECT_GT(test::validationErrors(), before);
  EXPECT_THAT(rt.device().instance().lastValidationError(), HasSubstr("SYNC-HAZARD-WRITE-AFTER-WRITE"));
  test::acknowledgeValidationErrors();
}

TEST_F(DispatcherTest, MemoryAccountingTracksLiveAndPeakBytes) {
  rt.device().resetPeak();
  const auto before = rt.device().memoryStats();
  {
    const auto t = rt.allocate("t", DType::F32, {1 << 20});
    EXPECT_EQ(rt.device().memoryStats().liveBytes, before.liveBytes + (4u << 20));
  }
  const auto after = rt.device().memoryStats();
  EXPECT_EQ(after.liveBytes, before.liveBytes);
  EXPECT_EQ(after.peakBytes, before.liveBytes + (4u << 20));
}

}  // namespace
}  // namespace foundry
