#pragma once
// Bring your own Vulkan: a Runtime on an application's VkInstance, VkPhysicalDevice, VkDevice and
// queue, and Tensors on the application's VkBuffers. Foundry never destroys what it is given; it
// destroys what it creates itself (pipelines, command pools, its timeline semaphore) before the
// Runtime's last user lets go. docs/embedding.md walks through it.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "foundry/RuntimeOptions.h"
#include "foundry/Tensor.h"

namespace foundry {

class Runtime;

/// The application's Vulkan objects. Foundry needs Vulkan 1.2 with the timelineSemaphore feature
/// enabled; it uses fp16, 16-bit storage, subgroup size control and VK_NV_cooperative_matrix only
/// where `enabledFeatures` / `enabledExtensions` say the application enabled them.
struct ExternalVulkan {
  VkInstance instance = VK_NULL_HANDLE;
  std::uint32_t apiVersion = VK_API_VERSION_1_2;  ///< the instance's VkApplicationInfo::apiVersion
  VkPhysicalDevice physicalDevice = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;  ///< a queue with VK_QUEUE_COMPUTE_BIT
  std::uint32_t queueFamily = 0;
  /// The pNext chain given to vkCreateDevice (VkPhysicalDeviceFeatures2 and/or
  /// VkPhysicalDeviceVulkan11Features, ...12Features, subgroup size control, cooperative matrix).
  const void* enabledFeatures = nullptr;
  std::vector<std::string> enabledExtensions;
  /// Held while Foundry submits to `queue`, when the application submits to it from other threads
  /// (Vulkan requires queue submissions to be externally synchronised). Null: Foundry's own lock.
  std::mutex* queueMutex = nullptr;
};

/// A Runtime on the application's objects. Throws UserError naming the field for a null handle,
/// UnsupportedError when a required feature is not enabled.
std::unique_ptr<Runtime> adoptVulkan(RuntimeOptions options, const ExternalVulkan& vulkan);

/// A Tensor viewing `bytes` bytes of the application's `buffer` from byte `offset`, described by
/// `shape` (dtype, dims, layout; strides packed). The buffer needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
/// (and TRANSFER_SRC/DST for Runtime::upload/download); Foundry never destroys it, and the
/// application keeps it alive while Foundry work that uses it may run.
Tensor adoptBuffer(Runtime& runtime, VkBuffer buffer, VkDeviceSize bytes, VkDeviceSize offset, const Tensor& shape);

/// The timeline semaphore Foundry signals: a Submission's value is reached on it when the work is done,
/// so an application's own vkQueueSubmit can wait on it (VkTimelineSemaphoreSubmitInfo).
VkSemaphore timelineSemaphore(Runtime& runtime);

}  // namespace foundry
