#pragma once
// Compute pipelines for KernelSources, created once per process and device, through one
// VkPipelineCache per device that is loaded from and saved to the disk cache.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <vulkan/vulkan.h>

#include "foundry/DiskCache.h"
#include "foundry/KernelCache.h"
#include "foundry/KernelSource.h"

namespace foundry {

class VulkanDevice;

class Pipeline {
 public:
  Pipeline(VulkanDevice& device, VkPipelineCache cache, const KernelSource& source, const Spirv& spirv);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  const std::string& name() const { return name_; }
  /// What the driver reports about the compiled kernel (registers, local memory, ...), where it can.
  const std::vector<std::pair<std::string, std::string>>& statistics() const { return statistics_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout setLayout() const { return setLayout_; }

 private:
  void release();
  void readStatistics();

  VulkanDevice& device_;
  std::string name_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
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

  VulkanDevice& device_;
  std::shared_ptr<KernelCache> kernels_;
  std::shared_ptr<const DiskCache> disk_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Pipeline>> pipelines_;
  std::atomic<std::uint64_t> created_{0};
  std::atomic<bool> seeded_{false};  ///< cache_ started from data an earlier run saved
  std::atomic<bool> stale_{false};   ///< that data was refused: cache_ is never saved
};

}  // namespace foundry
