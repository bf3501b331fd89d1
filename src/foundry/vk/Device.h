#pragma once
// A logical Vulkan device with one compute queue. Holds the DeviceInfo read from the driver, enables
// fp16, 16-bit storage, subgroup size control and VK_NV_cooperative_matrix where offered, and keeps the
// allocation accounting. Everything that holds a Vulkan object of the device (buffers, pipelines,
// dispatchers) holds the device by shared_ptr, so the device goes last. It either creates its VkDevice
// or adopts an application's (vk/External.h), which it then never destroys. Submissions signal one
// timeline semaphore; its values are what callers wait on.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <vulkan/vulkan.h>

#include "foundry/DeviceInfo.h"
#include "foundry/vk/Handle.h"
#include "foundry/vk/Instance.h"

namespace foundry {

/// Bytes of device memory Foundry holds: now, at peak, and how many allocations.
struct MemoryStats {
  std::uint64_t liveBytes = 0;
  std::uint64_t peakBytes = 0;
  std::uint64_t allocations = 0;
};

struct ExternalVulkan;

class VulkanDevice : public std::enable_shared_from_this<VulkanDevice> {
 public:
  /// `selector`: empty picks the first discrete GPU, else the first device; a number picks by index;
  /// anything else picks the first device whose name contains it.
  /// `field` names where `selector` came from in an error ("--device", "/tuning/device", ...).
  VulkanDevice(std::shared_ptr<VulkanInstance> instance, const std::string& selector,
               const std::string& field = "FOUNDRY_DEVICE");
  /// Adopts `external.device` and its queue (of the physical device `external.physicalDevice` of
  /// `instance`); capabilities are what the application enabled.
  VulkanDevice(std::shared_ptr<VulkanInstance> instance, const ExternalVulkan& external);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  /// What the driver reports, with the cooperative-matrix layout the probe found.
  const DeviceInfo& info() const { return info_; }
  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  std::uint32_t queueFamily() const { return queueFamily_; }
  const VulkanInstance& instance() const { return *instance_; }
  std::shared_ptr<const VulkanInstance> sharedInstance() const { return instance_; }
  /// False when the VkDevice is an application's (adopted): Foundry never destroys it.
  bool ownsDevice() const { return owned_; }
  std::uint32_t index() const { return index_; }

  double timestampPeriodNs() const { return timestampPeriod_; }
  std::uint32_t timestampValidBits() const { return timestampBits_; }
  VkDeviceSize storageOffsetAlignment() const { return storageAlignment_; }
  const std::array<std::uint32_t, 3>& maxWorkgroupCount() const { return maxGroups_; }
  bool fullSubgroups() const { return fullSubgroups_; }
  bool coopMatEnabled() const { return !info_.coopMatShapes.empty(); }
  /// Records what the layout probe found (Runtime runs it once the compiler is up).
  void setCoopMatLayout(CoopMatLayout layout, CoopMatLayout layout8, CoopMatLayout layoutF16) {
    info_.coopMatLayout = std::move(layout);
    info_.coopMatLayout8 = std::move(layout8);
    info_.coopMatLayoutF16 = std::move(layoutF16);
  }
  /// A Runtime without a compiler for workgroup-scope cooperative matrices says so here.
  void clearCoopMat2() { info_.coopMat2 = info_.coopMat2Bf16 = false; }
  void clearCoopMat2Bf16() { info_.coopMat2Bf16 = false; }
  /// VK_KHR_pipeline_executable_properties: register counts and the like for each pipeline.
  bool pipelineStatistics() const { return pipelineStatistics_; }

  /// Index of a memory type with `required` flags, preferring one with `preferred` and without `avoid`.
  std::uint32_t memoryType(std::uint32_t typeBits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                           VkMemoryPropertyFlags avoid) const;
  VkMemoryPropertyFlags memoryFlags(std::uint32_t type) const;

  /// Records commands with `record` into a one-shot command buffer, submits and waits.
  void submitAndWait(const std::function<void(VkCommandBuffer)>& record);
  /// Submits one recorded command buffer on the compute queue and waits for it.
  void submitAndWait(VkCommandBuffer commands);
  /// Submits `commands` and returns at once: the value the timeline semaphore reaches when they have
  /// run (queue order: after everything submitted before).
  std::uint64_t submit(VkCommandBuffer commands);
  /// Blocks until the timeline reaches `value`.
  void wait(std::uint64_t value);
  /// UserError unless the submission was made on this device (its `device` is this one's id, or 0 from
  /// code that does not say) and its value is 0 or was submitted on this device's queue: a wait for a
  /// value never submitted (a stale number) would wait for ever, and another Runtime's value counts on
  /// another timeline.
  void requireSubmitted(std::uint64_t value, std::uint64_t device) const;
  /// This device's id, unique in the process (never 0): what a Submission made here carries.
  std::uint64_t id() const { return id_; }
  /// Whether the timeline has reached `value`.
  bool reached(std::uint64_t value) const;
  /// The semaphore submit() signals (applications chain on it).
  VkSemaphore timeline() const { return timeline_.get(); }

  /// Test seam for failure paths that a driver cannot be made to take: the next Foundry call named
  /// `call` (e.g. "vkBindBufferMemory") returns `result` instead of running.
  void injectFailure(std::string call, VkResult result);
  /// The injected result for `call` (consumed), else VK_SUCCESS.
  VkResult injected(const char* call);

  // Accounting, updated by Buffer.
  void noteAllocation(std::uint64_t bytes);
  void noteFree(std::uint64_t bytes);
  MemoryStats memoryStats() const;
  /// Starts a new peak measurement at the current live size.
  void resetPeak();

 private:
  std::shared_ptr<VulkanInstance> instance_;
  DeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;  ///< destroyed by ~VulkanDevice only when owned_
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t queueFamily_ = 0;
  std::uint32_t index_ = 0;
  double timestampPeriod_ = 1.0;
  std::uint32_t timestampBits_ = 0;
  VkDeviceSize storageAlignment_ = 16;
  std::array<std::uint32_t, 3> maxGroups_{65535, 65535, 65535};
  bool fullSubgroups_ = false;
  bool pipelineStatistics_ = false;
  VkPhysicalDeviceMemoryProperties memory_{};
  bool owned_ = true;
  Owned<VkDevice, VkCommandPool> oneShotPool_;
  Owned<VkDevice, VkSemaphore> timeline_;
  std::uint64_t submitted_ = 0;  ///< the last value a submission signals (under the queue lock)
  const std::uint64_t id_ = nextId();
  static std::uint64_t nextId();
  std::mutex ownQueueMutex_;
  std::mutex* queueMutex_ = &ownQueueMutex_;
  std::mutex oneShotMutex_;  ///< the one-shot pool is used by one thread at a time
  std::mutex faultMutex_;
  std::string faultCall_;
  VkResult faultResult_ = VK_SUCCESS;
  mutable std::mutex statsMutex_;
  MemoryStats stats_;

  void readProperties();
  void createOwnObjects();
};

}  // namespace foundry
