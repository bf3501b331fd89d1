#pragma once
// The Vulkan Dispatcher: records dispatches into one command buffer with the memory barriers their
// buffer hazards need (read-after-write, write-after-write, write-after-read), GPU timestamps around
// each, and submits them together.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "foundry/Dispatcher.h"

namespace foundry {

class Buffer;
class Pipeline;
class PipelineCache;
class VulkanDevice;

class VulkanDispatcher : public Dispatcher {
 public:
  VulkanDispatcher(VulkanDevice& device, PipelineCache& pipelines);
  ~VulkanDispatcher() override;
  VulkanDispatcher(const VulkanDispatcher&) = delete;
  VulkanDispatcher& operator=(const VulkanDispatcher&) = delete;

  void dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) override;
  SubmitResult submit() override;
  void flush() override;
  void barrier() override;

  std::size_t pending() const { return pending_.size(); }
  /// Barriers recorded since construction (tests check that independent dispatches get none).
  std::uint64_t barriers() const { return barriers_; }

 private:
  struct Pending {
    std::string kernel;
    std::uint32_t query = 0;  ///< first of two timestamps, in queryPools_ order
    std::shared_ptr<const Pipeline> pipeline;
    std::vector<std::shared_ptr<Buffer>> buffers;
  };

  void begin();
  VkDescriptorSet allocateSet(VkDescriptorSetLayout layout);
  std::uint32_t nextQueryPair();
  void reset();
  SubmitResult runPending();

  VulkanDevice& device_;
  PipelineCache& pipelines_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptorPools_;
  std::size_t descriptorPool_ = 0;
  std::vector<VkQueryPool> queryPools_;
  std::uint32_t queriesUsed_ = 0;
  bool recording_ = false;
  bool timestamps_ = false;
  std::vector<Pending> pending_;
  SubmitResult flushed_;  ///< what flush() ran, for the next submit() to report
  int uncaughtAtCreation_;  ///< std::uncaught_exceptions() then: more at destruction means unwinding
  std::map<VkBuffer, unsigned> touched_;  ///< accesses since the last barrier: 1 read, 2 write
  std::uint64_t barriers_ = 0;
};

}  // namespace foundry
