#pragma once
// Compute pipelines for KernelSources, created once per process and device, through one
// VkPipelineCache per device that is loaded from and saved to the disk cache. Thread-safe: a pipeline
// that several threads miss at once is created once, by the first; the others wait for it.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <vulkan/vulkan.h>

#include "foundry/DiskCache.h"
#include "foundry/KernelCache.h"
#include "foundry/KernelSource.h"
#include "foundry/vk/Handle.h"

namespace foundry {

class VulkanDevice;

class Pipeline {
 public:
  Pipeline(VulkanDevice& device, VkPipelineCache cache, const KernelSource& source, const Spirv& spirv);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_.get(); }
  const std::string& name() const { return name_; }
  /// What the driver reports about the compiled kernel (registers, local memory, ...), where it can.
  const std::vector<std::pair<std::string, std::string>>& statistics() const { return statistics_; }
  VkPipelineLayout layout() const { return layout_.get(); }
  VkDescriptorSetLayout setLayout() const { return setLayout_.get(); }

 private:
  void readStatistics();

  std::shared_ptr<VulkanDevice> device_;  ///< first: outlives the handles below
  std::string name_;
  Owned<VkDevice, VkShaderModule> module_;
  Owned<VkDevice, VkDescriptorSetLayout> setLayout_;
  Owned<VkDevice, VkPipelineLayout> layout_;
  Owned<VkDevice, VkPipeline> pipeline_;
  std::vector<std::pair<std::string, std::string>> statistics_;
};

class PipelineCache {
 public:
  PipelineCache(VulkanDevice& device, std::shared_ptr<KernelCache> kernels, std::shared_ptr<const DiskCache> disk);
  ~PipelineCache();  ///< saves the VkPipelineCache
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  std::shared_ptr<const Pipeline> get(const KernelSource& source);
  /// Writes the VkPipelineCache data to the disk cache (atomically).
  void save();
  std::uint64_t created() const { return created_.load(); }
  /// The driver's statistics for the pipeline of the kernel called `kernelName`, if one was made.
  std::vector<std::pair<std::string, std::string>> statistics(const std::string& kernelName);
  KernelCache& kernels() { return *kernels_; }

 private:
  std::string diskKey() const;
  std::shared_ptr<const Pipeline> rebuild(const KernelSource& source, const std::string& failure);
  std::shared_ptr<const Pipeline> create(const KernelSource& source);

  std::shared_ptr<VulkanDevice> device_;
  std::shared_ptr<KernelCache> kernels_;
  std::shared_ptr<const DiskCache> disk_;
  Owned<VkDevice, VkPipelineCache> cache_;
  std::mutex mutex_;
  std::condition_variable built_;  ///< signalled when a pipeline another thread was creating is ready
  std::map<std::string, std::shared_ptr<const Pipeline>> pipelines_;
  std::set<std::string> creating_;  ///< hashes some thread is creating now
  std::atomic<std::uint64_t> created_{0};
  std::atomic<bool> seeded_{false};  ///< cache_ started from data an earlier run saved
  std::atomic<bool> stale_{false};   ///< that data was refused: cache_ is never saved
};

}  // namespace foundry
