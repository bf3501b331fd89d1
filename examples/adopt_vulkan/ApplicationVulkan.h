#pragma once
// The application's side of examples/adopt_vulkan (and of tests/foundry/ExternalVulkanTest.cpp): an
// engine's own Vulkan instance (the validation layer and its own messenger when asked), device, queue
// and host-visible buffers, made and destroyed with raw Vulkan only; Foundry never sees this code.
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

namespace engine {

inline void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw std::runtime_error(std::string(what) + " failed: VkResult " + std::to_string(r));
}

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
                                                  VkDebugUtilsMessageTypeFlagsEXT,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
      ++static_cast<App*>(self)->errors;
      std::fprintf(stderr, "application's messenger: %s\n", data->pMessage);
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
    check(vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance");
    if (validation) {
      VkDebugUtilsMessengerCreateInfoEXT m{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
      m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
      m.pfnUserCallback = &App::onMessage;
      m.pUserData = this;
      auto make = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
      if (!make) throw std::runtime_error("vkCreateDebugUtilsMessengerEXT is missing");
      check(make(instance, &m, nullptr, &messenger), "vkCreateDebugUtilsMessengerEXT");
    }
    std::uint32_t n = 1;
    const VkResult listed = vkEnumeratePhysicalDevices(instance, &n, &physical);
    if ((listed != VK_SUCCESS && listed != VK_INCOMPLETE) || n == 0) throw std::runtime_error("no Vulkan device");
    std::uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, props.data());
    while (family < families && !(props[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
    if (family == families) throw std::runtime_error("no compute queue");
    // What the engine enables; Foundry makes do with exactly this.
    VkPhysicalDeviceVulkan11Features s11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features s12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    s11.pNext = &s12;
    VkPhysicalDeviceFeatures2 supported{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    supported.pNext = &s11;
    vkGetPhysicalDeviceFeatures2(physical, &supported);
    if (!s12.timelineSemaphore) throw std::runtime_error("the device has no timeline semaphores");
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
    check(vkCreateDevice(physical, &d, nullptr, &device), "vkCreateDevice");
    vkGetDeviceQueue(device, family, 0, &queue);
  }

  /// A host-visible, mapped storage buffer.
  Buffer makeBuffer(VkDeviceSize bytes) {
    Buffer b;
    b.bytes = bytes;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    check(vkCreateBuffer(device, &info, nullptr, &b.buffer), "vkCreateBuffer");
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
    if (type == mem.memoryTypeCount) throw std::runtime_error("no host-visible memory for a storage buffer");
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    check(vkAllocateMemory(device, &alloc, nullptr, &b.memory), "vkAllocateMemory");
    check(vkBindBufferMemory(device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    void* p = nullptr;
    check(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b.mapped = static_cast<float*>(p);
    return b;
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
    check(vkCreateCommandPool(device, &poolInfo, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    check(vkAllocateCommandBuffers(device, &alloc, &cmd), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
    record(cmd);
    check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
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
    check(vkCreateFence(device, &fenceInfo, nullptr, &fence), "vkCreateFence");
    check(vkQueueSubmit(queue, 1, &submit, fence), "vkQueueSubmit");
    check(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vkDestroyFence(device, fence, nullptr);
    vkDestroyCommandPool(device, pool, nullptr);
  }

  /// Destroys the device (the layer reports any child object left behind), then the instance.
  void destroyAll() {
    if (device) {
      vkDeviceWaitIdle(device);
      vkDestroyDevice(device, nullptr);
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

}  // namespace engine
