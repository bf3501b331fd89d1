// RAII ownership of Vulkan handles: an Owned handle is destroyed exactly once and moves without a
// second destroy; a Tensor (and a dispatcher) that outlive their Runtime keep the device alive and
// free into it; a buffer whose memory bind fails frees what it had created. With the validation
// layer on, vkDestroyDevice reports any object still alive, so a leak fails the test.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/steps/FusedAttention.h"
#include "foundry/steps/Options.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/Handle.h"
#include "support/Subprocess.h"
#include "support/TempDir.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

int destroyed = 0;
void countDestroy(VkDevice, VkBuffer, const VkAllocationCallbacks*) { ++destroyed; }

VkBuffer fakeBuffer(std::uintptr_t n) {
  VkBuffer b{};
  static_assert(sizeof(b) == sizeof(std::uint64_t) || sizeof(b) == sizeof(void*));
  std::memcpy(&b, &n, sizeof(n) < sizeof(b) ? sizeof(n) : sizeof(b));
  return b;
}

TEST(Owned, DestroysOnceAndMovesWithoutASecondDestroy) {
  destroyed = 0;
  {
    Owned<VkDevice, VkBuffer> a(VK_NULL_HANDLE, fakeBuffer(7), countDestroy);
    Owned<VkDevice, VkBuffer> b(std::move(a));
    EXPECT_FALSE(a);
    EXPECT_TRUE(b);
    Owned<VkDevice, VkBuffer> c;
    c = std::move(b);
    EXPECT_EQ(destroyed, 0);
    c = Owned<VkDevice, VkBuffer>(VK_NULL_HANDLE, fakeBuffer(8), countDestroy);  // the first goes now
    EXPECT_EQ(destroyed, 1);
  }
  EXPECT_EQ(destroyed, 2);
  Owned<VkDevice, VkBuffer> empty;
  empty.reset();
  EXPECT_EQ(destroyed, 2);
}

/// A second runtime of its own (the shared test runtime must stay up).
std::unique_ptr<Runtime> freshRuntime() { return std::make_unique<Runtime>(test::runtime().options()); }

TEST(Ownership, ATensorThatOutlivesItsRuntimeFreesIntoALiveDevice) {
  auto rt = freshRuntime();
  std::weak_ptr<VulkanDevice> device = rt->sharedDevice();
  auto instance = rt->device().sharedInstance();
  Tensor t = rt->allocate("survivor", DType::F32, {256});
  const auto x = test::randomVector(256, 5);
  rt->upload(t, x);
  auto dispatcher = rt->dispatcher();
  rt.reset();
  EXPECT_FALSE(device.expired()) << "the tensor's buffer holds the device";
  std::vector<std::byte> bytes(256 * 4);
  t.buffer->download(bytes);  // the buffer still works
  EXPECT_EQ(std::memcmp(bytes.data(), x.data(), bytes.size()), 0);
  dispatcher.reset();
  t.buffer.reset();
  EXPECT_TRUE(device.expired()) << "the last holder let go: the device is destroyed";
  EXPECT_EQ(instance->validationErrors(), 0u) << instance->lastValidationError();
}

TEST(Ownership, AFailedBindFreesTheBufferAndItsMemory) {
  auto rt = freshRuntime();
  auto instance = rt->device().sharedInstance();
  const auto before = rt->device().memoryStats();
  rt->device().injectFailure("vkBindBufferMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_THAT([&] { rt->allocate("unbound", DType::F32, {1024}); },
              ::testing::ThrowsMessage<DeviceError>(::testing::HasSubstr("VK_ERROR_OUT_OF_DEVICE_MEMORY")));
  EXPECT_EQ(rt->device().memoryStats().liveBytes, before.liveBytes);
  Tensor fine = rt->allocate("after", DType::F32, {16});  // the injected failure was used up
  fine.buffer.reset();
  rt.reset();  // vkDestroyDevice: the layer names a VkBuffer or VkDeviceMemory still alive
  if (!test::runtime().options().validation) GTEST_SKIP() << "FOUNDRY_VALIDATION is off: leaks are not observed";
  EXPECT_EQ(instance->validationErrors(), 0u) << instance->lastValidationError();
}

// A Runtime held in a function-local static is destroyed at exit after the library's own statics that
// were made later, and saves its pipeline cache as it goes (which once wrote into a destroyed set:
// heap corruption). The child test builds one, runs a decode that compiles into a fresh cache directory,
// and returns; the parent runs it and asks for a clean exit.
std::unique_ptr<Runtime>& staticRuntime() {
  static std::unique_ptr<Runtime> rt;
  return rt;
}

TEST(StaticRuntimeChild, RunsADecodeAndLeavesItsRuntimeToTheExit) {
  if (!std::getenv("OWNERSHIP_STATIC_RUNTIME_CHILD")) GTEST_SKIP() << "run by Ownership.ARuntimeHeldInAStaticOutlivesTheLibrarysStatics";
  staticRuntime() = std::make_unique<Runtime>(Options::fromEnvironment().runtime);
  Runtime& rt = *staticRuntime();
  AttentionProblem p;
  p.nHeads = 4, p.nKvHeads = 1, p.headDim = 64, p.kvCapacity = 64, p.dtype = DType::F16;
  AttentionCall call;
  call.k = rt.allocate("k_cache", p.dtype, p.kvDims(), Layout::KvCache);
  call.v = rt.allocate("v_cache", p.dtype, p.vDims(), Layout::KvCache);
  call.q = rt.allocate("q", p.dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
  call.o = rt.allocate("o", p.dtype, p.oDims(Layout::HeadMajor), Layout::HeadMajor);
  for (const Tensor& t : {call.k, call.v, call.q}) rt.upload(t, test::randomVector(t.numel(), 3));
  call.kvLen = 64;
  FusedAttention(rt).run(call);
}

TEST(Ownership, ARuntimeHeldInAStaticOutlivesTheLibrarysStatics) {
  const test::TempDir cache;
  test::ProcessSpec spec;
  spec.argv = {std::filesystem::read_symlink("/proc/self/exe").string(), "--gtest_filter=StaticRuntimeChild.*"};
  spec.env = {{"OWNERSHIP_STATIC_RUNTIME_CHILD", "1"}, {"FOUNDRY_CACHE_DIR", cache.str()}};
  const test::ProcessResult r = test::Process(spec).wait();
  EXPECT_EQ(r.exitCode, 0) << r.summary();
  EXPECT_THAT(r.out, ::testing::HasSubstr("[  PASSED  ] 1 test")) << r.summary();
}

}  // namespace
}  // namespace foundry
