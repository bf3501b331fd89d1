// Bring your own Vulkan, as an engine embedding Foundry does it: the application creates the instance
// (with the validation layer and its own messenger), the device, the queue and the buffers with raw
// Vulkan; Foundry adopts them and runs attention on the application's buffers; the result matches
// Foundry's own device and the CPU reference; the application's own submission chains on Foundry's
// timeline semaphore; after Foundry is gone every application handle still works, and the application
// destroys them all itself with the layer silent (a handle Foundry destroyed, or one it leaked, is a
// validation error). Self-contained, so it can serve as an example program.
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

namespace foundry {
namespace {

#define APP_VK(call) ASSERT_EQ((call), VK_SUCCESS) << #call

/// The application's Vulkan: created and destroyed here only.
struct App {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  std::uint32_t family = 0;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  int errors = 0;

  struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    float* mapped = nullptr;
    VkDeviceSize bytes = 0;
  };

  static VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                  void* self) {
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
      ++static_cast<App*>(self)->errors;
      ADD_FAILURE() << "validation: " << data->pMessage;
    }
    return VK_FALSE;
  }

  void create(bool validation) {
    VkApplicationInfo appInfo{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    appInfo.pApplicationName = "an engine";
    appInfo.apiVersion = VK_API_VERSION_1_2;
    const char* layer = "VK_LAYER_KHRONOS_validation";
    const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &appInfo;
    info.enabledLayerCount = validation ? 1 : 0;
    info.ppEnabledLayerNames = &layer;
    info.enabledExtensionCount = validation ? 1 : 0;
    info.ppEnabledExtensionNames = &ext;
    APP_VK(vkCreateInstance(&info, nullptr, &instance));
    if (validation) {
      VkDebugUtilsMessengerCreateInfoEXT m{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
      m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
      m.pfnUserCallback = &App::onMessage;
      m.pUserData = this;
      auto make = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
      ASSERT_NE(make, nullptr);
      APP_VK(make(instance, &m, nullptr, &messenger));
    }
    std::uint32_t n = 1;
    ASSERT_NE(vkEnumeratePhysicalDevices(instance, &n, &physical), VK_ERROR_INITIALIZATION_FAILED);
    ASSERT_GE(n, 1u);
    std::uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, props.data());
    while (family < families && !(props[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
    ASSERT_LT(family, families);
    // What the engine enables; Foundry must make do with exactly this.
    VkPhysicalDeviceVulkan11Features s11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features s12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    s11.pNext = &s12;
    VkPhysicalDeviceFeatures2 supported{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    supported.pNext = &s11;
    vkGetPhysicalDeviceFeatures2(physical, &supported);
    ASSERT_TRUE(s12.timelineSemaphore);
    f11.storageBuffer16BitAccess = s11.storageBuffer16BitAccess;
    f12.shaderFloat16 = s12.shaderFloat16;
    f12.timelineSemaphore = VK_TRUE;
    features.pNext = &f11;
    f11.pNext = &f12;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo d{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    d.pNext = &features;
    d.queueCreateInfoCount = 1;
    d.pQueueCreateInfos = &q;
    APP_VK(vkCreateDevice(physical, &d, nullptr, &device));
    vkGetDeviceQueue(device, family, 0, &queue);
  }

  void makeBuffer(Buffer& b, VkDeviceSize bytes) {
    b.bytes = bytes;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    APP_VK(vkCreateBuffer(device, &info, nullptr, &b.buffer));
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    std::uint32_t type = 0;
    while (type < mem.memoryTypeCount &&
           (!(req.memoryTypeBits & (1u << type)) || (mem.memoryTypes[type].propertyFlags & want) != want)) {
      ++type;
    }
    ASSERT_LT(type, mem.memoryTypeCount);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    APP_VK(vkAllocateMemory(device, &alloc, nullptr, &b.memory));
    APP_VK(vkBindBufferMemory(device, b.buffer, b.memory, 0));
    void* p = nullptr;
    APP_VK(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &p));
    b.mapped = static_cast<float*>(p);
  }

  void destroy(Buffer& b) const {
    vkDestroyBuffer(device, b.buffer, nullptr);
    vkFreeMemory(device, b.memory, nullptr);
  }

  /// Records `record` and submits it, waiting first for `waitValue` on `timeline` (if given).
  void run(const std::function<void(VkCommandBuffer)>& record, VkSemaphore timeline = VK_NULL_HANDLE,
           std::uint64_t waitValue = 0) {
    VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    poolInfo.queueFamilyIndex = family;
    VkCommandPool pool = VK_NULL_HANDLE;
    APP_VK(vkCreateCommandPool(device, &poolInfo, nullptr, &pool));
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    APP_VK(vkAllocateCommandBuffers(device, &alloc, &cmd));
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    APP_VK(vkBeginCommandBuffer(cmd, &begin));
    record(cmd);
    APP_VK(vkEndCommandBuffer(cmd));
    VkTimelineSemaphoreSubmitInfo values{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    values.waitSemaphoreValueCount = 1;
    values.pWaitSemaphoreValues = &waitValue;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    if (timeline) {
      submit.pNext = &values;
      submit.waitSemaphoreCount = 1;
      submit.pWaitSemaphores = &timeline;
      submit.pWaitDstStageMask = &stage;
    }
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    VkFenceCreateInfo fenceInfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence = VK_NULL_HANDLE;
    APP_VK(vkCreateFence(device, &fenceInfo, nullptr, &fence));
    APP_VK(vkQueueSubmit(queue, 1, &submit, fence));
    APP_VK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    vkDestroyFence(device, fence, nullptr);
    vkDestroyCommandPool(device, pool, nullptr);
  }

  /// Destroys the device, then reads the layer's verdict, then the instance.
  void destroyAll() {
    if (device) {
      vkDeviceWaitIdle(device);
      vkDestroyDevice(device, nullptr);  // the layer reports any child Foundry leaked
      device = VK_NULL_HANDLE;
    }
    if (messenger) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
      destroy(instance, messenger, nullptr);
      messenger = VK_NULL_HANDLE;
    }
    if (instance) vkDestroyInstance(instance, nullptr);
    instance = VK_NULL_HANDLE;
  }
  ~App() { destroyAll(); }
};

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
  ASSERT_FALSE(HasFatalFailure());

  // Prefill of 5 queries over 37 keys, GQA 4:2, f32, head-major.
  const std::uint32_t B = 1, H = 4, Hkv = 2, M = 5, N = 37, D = 64;
  const auto qDesc = Tensor::describe("q", DType::F32, {B, H, M, D}, Layout::HeadMajor);
  const auto kvDesc = Tensor::describe("k", DType::F32, {B, Hkv, N, D}, Layout::KvCache);
  const auto q = test::randomVector(qDesc.numel(), 11), k = test::randomVector(kvDesc.numel(), 12),
             v = test::randomVector(kvDesc.numel(), 13);
  App::Buffer qb, kvb, ob, readback;
  // K and V share one application buffer: V starts at an aligned offset after K.
  const VkDeviceSize kBytes = kvDesc.spanBytes(), vOffset = (kBytes + 255) / 256 * 256;
  app.makeBuffer(qb, qDesc.spanBytes());
  app.makeBuffer(kvb, vOffset + kBytes);
  app.makeBuffer(ob, qDesc.spanBytes());
  app.makeBuffer(readback, qDesc.spanBytes());
  ASSERT_FALSE(HasFatalFailure());
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
