// Bring your own Vulkan, as an engine embedding Foundry does: this program creates the instance (with
// the validation layer and its own messenger when FOUNDRY_VALIDATION=1), the device, the queue and the
// buffers with raw Vulkan. Foundry adopts them and runs attention on the program's buffers; the
// program's own copy of the output waits on Foundry's timeline semaphore. The result is compared with
// Foundry on a device of its own and with the CPU float64 reference; afterwards the program's handles
// still work, and it destroys them itself with the layer silent. Exit code 0 when all of that holds.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <foundry/foundry.h>
#include <foundry/vk/External.h>
#include <foundry/vk/VulkanDispatcher.h>

#include "ApplicationVulkan.h"

int main() try {
  using namespace foundry;
  const Options options = Options::fromEnvironment();
  engine::App app;
  app.create(options.runtime.validation);

  // Prefill of 5 queries over 37 keys, GQA 4:2, head_dim 64, f32, head-major.
  const std::uint32_t B = 1, H = 4, Hkv = 2, M = 5, N = 37, D = 64;
  const Tensor qDesc = Tensor::describe("q", DType::F32, {B, H, M, D}, Layout::HeadMajor);
  const Tensor kvDesc = Tensor::describe("k", DType::F32, {B, Hkv, N, D}, Layout::KvCache);
  const auto qCount = static_cast<std::size_t>(qDesc.numel()), kvCount = static_cast<std::size_t>(kvDesc.numel());
  const std::vector<float> q = randomUniforms(11, 0, qCount), k = randomUniforms(12, 0, kvCount),
                           v = randomUniforms(13, 0, kvCount);
  // K and V share one application buffer: V starts at an aligned offset after K.
  const VkDeviceSize kBytes = kvDesc.spanBytes(), vOffset = (kBytes + 255) / 256 * 256;
  engine::App::Buffer qb = app.makeBuffer(qDesc.spanBytes()), kvb = app.makeBuffer(vOffset + kBytes),
              ob = app.makeBuffer(qDesc.spanBytes()), readback = app.makeBuffer(qDesc.spanBytes());
  std::memcpy(qb.mapped, q.data(), qb.bytes);
  std::memcpy(kvb.mapped, k.data(), kBytes);
  std::memcpy(reinterpret_cast<std::byte*>(kvb.mapped) + vOffset, v.data(), kBytes);
  for (std::size_t i = 0; i < q.size(); ++i) ob.mapped[i] = std::numeric_limits<float>::quiet_NaN();

  std::vector<float> adopted;
  {
    ExternalVulkan ext;
    ext.instance = app.instance;
    ext.apiVersion = VK_API_VERSION_1_2;
    ext.physicalDevice = app.physical;
    ext.device = app.device;
    ext.queue = app.queue;
    ext.queueFamily = app.family;
    ext.enabledFeatures = &app.features;
    const std::unique_ptr<Runtime> rt = adoptVulkan(options.runtime, ext);
    AttentionCall call;
    call.q = adoptBuffer(*rt, qb.buffer, qb.bytes, 0, qDesc);
    call.k = adoptBuffer(*rt, kvb.buffer, kvb.bytes, 0, kvDesc);
    call.v = adoptBuffer(*rt, kvb.buffer, kvb.bytes, vOffset,
                         Tensor::describe("v", DType::F32, {B, Hkv, N, D}, Layout::KvCache));
    call.o = adoptBuffer(*rt, ob.buffer, ob.bytes, 0, Tensor::describe("o", DType::F32, {B, H, M, D}, Layout::HeadMajor));
    call.kvLen = N;
    FlashAttentionStep step(rt->info(), rt->snippets(), options.attention);
    DeviceWorkspace workspace(*rt);
    const std::unique_ptr<VulkanDispatcher> dispatcher = rt->dispatcher();
    StepContext ctx{*dispatcher, workspace, rt.get()};
    const auto kernels = step.run(ctx, call).kernels;
    const Submission done = dispatcher->submitAsync();  // returns at once
    // The application's own work waits on Foundry's timeline: a copy of O, submitted before Foundry's
    // work is known to be done.
    app.run(
        [&](VkCommandBuffer cmd) {
          const VkBufferCopy region{0, 0, ob.bytes};
          vkCmdCopyBuffer(cmd, ob.buffer, readback.buffer, 1, &region);
          VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
          b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
          b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
          vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr,
                               0, nullptr);
        },
        timelineSemaphore(*rt), done.value);
    dispatcher->wait(done);
    adopted.assign(readback.mapped, readback.mapped + q.size());
    std::printf("on the application's device: %s (timeline value %llu)\n", kernels.back().c_str(),
                static_cast<unsigned long long>(done.value));
  }  // Foundry is gone: what it created is destroyed, the application's objects are not

  // Foundry on a device of its own, same inputs.
  Runtime own(options.runtime);
  FusedAttention attention(own, options.attention);
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
  attention.run(mine);
  const std::vector<float> ownOut = own.download(mine.o);
  const ErrorStats vsOwn = compareOutputs(adopted, std::vector<double>(ownOut.begin(), ownOut.end()));
  const ErrorStats vsCpu = compareOutputs(adopted, cpuAttention(describeCall(mine), q, k, v));

  // Every application handle still works: the buffers hold what they held, and the device, queue and
  // memory take a new submission.
  const bool intact = std::memcmp(qb.mapped, q.data(), qb.bytes) == 0;
  app.run([&](VkCommandBuffer cmd) { vkCmdFillBuffer(cmd, ob.buffer, 0, VK_WHOLE_SIZE, 0); });
  const bool usable = ob.mapped[0] == 0.0f;
  for (engine::App::Buffer* b : {&qb, &kvb, &ob, &readback}) app.destroy(*b);
  app.destroyAll();

  const bool ok = vsOwn.passes(1e-6) && vsCpu.passes(1e-4) && intact && usable && app.errors == 0;
  std::printf("against Foundry's own device: max relative error %.2e; against the CPU: %.2e\n", vsOwn.maxRel,
              vsCpu.maxRel);
  std::printf("application's handles after Foundry: %s; validation errors: %d\n",
              intact && usable ? "intact and usable" : "BROKEN", app.errors);
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "adopt_vulkan: %s\n", e.what());
  return 2;
}
