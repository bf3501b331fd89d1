// Bring your own Vulkan, as an engine embedding Foundry does it: the application creates the instance
// (with the validation layer and its own messenger), the device, the queue and the buffers with raw
// Vulkan; Foundry adopts them and runs attention on the application's buffers; the result matches
// Foundry's own device and the CPU reference; the application's own submission chains on Foundry's
// timeline semaphore; after Foundry is gone every application handle still works, and the application
// destroys them all itself with the layer silent (a handle Foundry destroyed, or one it leaked, is a
// validation error). examples/adopt_vulkan is the same program against the installed package.
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/vk/External.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/OutputComparison.h"
#include "support/TestRuntime.h"

// The application's side, shared with the example program: raw Vulkan only.
#include "adopt_vulkan/ApplicationVulkan.h"

namespace foundry {
namespace {

using engine::App;

/// Runs `call` through FlashAttentionStep on `rt` and waits; returns the kernels it used.
std::vector<std::string> runFlash(Runtime& rt, const AttentionCall& call, Submission* async = nullptr,
                                  std::unique_ptr<VulkanDispatcher>* keep = nullptr) {
  FlashAttentionStep step(rt.info(), rt.snippets(), AttentionOptions());
  DeviceWorkspace workspace(rt);
  auto dispatcher = rt.dispatcher();
  StepContext ctx{*dispatcher, workspace, &rt};
  auto kernels = step.run(ctx, call).kernels;
  if (async) {
    *async = dispatcher->submitAsync();
    *keep = std::move(dispatcher);
  } else {
    dispatcher->submit();
  }
  return kernels;
}

TEST(ExternalVulkan, AttentionOnTheApplicationsDeviceAndBuffersMatchesFoundrysOwnAndTheCpu) {
  Runtime& own = test::runtime();
  const bool validation = own.options().validation;
  App app;
  app.create(validation);

  // Prefill of 5 queries over 37 keys, GQA 4:2, f32, head-major.
  const std::uint32_t B = 1, H = 4, Hkv = 2, M = 5, N = 37, D = 64;
  const auto qDesc = Tensor::describe("q", DType::F32, {B, H, M, D}, Layout::HeadMajor);
  const auto kvDesc = Tensor::describe("k", DType::F32, {B, Hkv, N, D}, Layout::KvCache);
  const auto q = test::randomVector(qDesc.numel(), 11), k = test::randomVector(kvDesc.numel(), 12),
             v = test::randomVector(kvDesc.numel(), 13);
  // K and V share one application buffer: V starts at an aligned offset after K.
  const VkDeviceSize kBytes = kvDesc.spanBytes(), vOffset = (kBytes + 255) / 256 * 256;
  App::Buffer qb = app.makeBuffer(qDesc.spanBytes()), kvb = app.makeBuffer(vOffset + kBytes),
              ob = app.makeBuffer(qDesc.spanBytes()), readback = app.makeBuffer(qDesc.spanBytes());
  std::memcpy(qb.mapped, q.data(), qb.bytes);
  std::memcpy(kvb.mapped, k.data(), kBytes);
  std::memcpy(reinterpret_cast<std::byte*>(kvb.mapped) + vOffset, v.data(), kBytes);
  for (std::size_t i = 0; i < q.size(); ++i) ob.mapped[i] = std::numeric_limits<float>::quiet_NaN();

  std::vector<float> adopted;
  std::vector<std::string> adoptedKernels;
  {
    ExternalVulkan ext;
    ext.instance = app.instance;
    ext.apiVersion = VK_API_VERSION_1_2;
    ext.physicalDevice = app.physical;
    ext.device = app.device;
    ext.queue = app.queue;
    ext.queueFamily = app.family;
    ext.enabledFeatures = &app.features;
    RuntimeOptions options = own.options();
    auto rt = adoptVulkan(options, ext);
    EXPECT_EQ(rt->info().name, own.info().name);
    AttentionCall call;
    call.q = adoptBuffer(*rt, qb.buffer, qb.bytes, 0, qDesc);
    call.k = adoptBuffer(*rt, kvb.buffer, kvb.bytes, 0, kvDesc);
    call.v = adoptBuffer(*rt, kvb.buffer, kvb.bytes, vOffset, Tensor::describe("v", DType::F32, {B, Hkv, N, D}, Layout::KvCache));
    call.o = adoptBuffer(*rt, ob.buffer, ob.bytes, 0, Tensor::describe("o", DType::F32, {B, H, M, D}, Layout::HeadMajor));
    call.kvLen = N;
    Submission done;
    std::unique_ptr<VulkanDispatcher> dispatcher;
    adoptedKernels = runFlash(*rt, call, &done, &dispatcher);
    EXPECT_GT(done.value, 0u);
    // The application's own work waits on Foundry's timeline: a copy of O, submitted before Foundry's
    // work is known to be done.
    app.run([&](VkCommandBuffer cmd) {
      const VkBufferCopy region{0, 0, ob.bytes};
      vkCmdCopyBuffer(cmd, ob.buffer, readback.buffer, 1, &region);
      VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
      b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
      vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0,
                           nullptr);
    }, timelineSemaphore(*rt), done.value);
    dispatcher->wait(done);
    adopted.assign(readback.mapped, readback.mapped + q.size());
    EXPECT_EQ(rt->download(call.o), adopted);
  }  // Foundry is gone: its pipelines, pools and semaphore destroyed, the application's objects not

  // Foundry's own device, same inputs.
  AttentionCall mine;
  mine.q = own.allocate(qDesc);
  mine.k = own.allocate(kvDesc);
  mine.v = own.allocate(kvDesc);
  mine.o = own.allocate(qDesc);
  mine.kvLen = N;
  own.upload(mine.q, q);
  own.upload(mine.k, k);
  own.upload(mine.v, v);
  own.poison(mine.o);
  const auto ownKernels = runFlash(own, mine);
  const auto ownResult = own.download(mine.o);
  if (adoptedKernels == ownKernels) {
    EXPECT_EQ(adopted, ownResult);
  }
  const auto p = describeCall(mine);
  const auto want = cpuAttention(p, q, k, v);
  const ErrorStats e = compareOutputs(adopted, want);
  EXPECT_TRUE(e.passes(1e-4)) << "max rel " << e.maxRel << ", non-finite " << e.nonFinite;

  // Every application handle still works: the buffers hold what they held, and the device, queue and
  // memory take a new submission.
  EXPECT_EQ(std::memcmp(qb.mapped, q.data(), qb.bytes), 0);
  app.run([&](VkCommandBuffer cmd) { vkCmdFillBuffer(cmd, ob.buffer, 0, VK_WHOLE_SIZE, 0); });
  EXPECT_EQ(ob.mapped[0], 0.0f);
  for (auto* b : {&qb, &kvb, &ob, &readback}) app.destroy(*b);
  app.destroyAll();
  EXPECT_EQ(app.errors, 0);
}

TEST(ExternalVulkan, AMissingHandleOrFeatureIsNamed) {
  Runtime& own = test::runtime();
  ExternalVulkan ext;
  try {
    adoptVulkan(own.options(), ext);
    FAIL() << "a null instance was adopted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("ExternalVulkan.instance"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace foundry
