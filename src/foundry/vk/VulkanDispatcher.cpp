#include "foundry/vk/VulkanDispatcher.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/PipelineCache.h"

namespace foundry {

namespace {
constexpr std::uint32_t kQueriesPerPool = 512;
constexpr std::uint32_t kSetsPerPool = 256;
constexpr unsigned kRead = 1, kWrite = 2;
}  // namespace

VulkanDispatcher::VulkanDispatcher(VulkanDevice& device, PipelineCache& pipelines)
    : device_(device), pipelines_(pipelines), uncaughtAtCreation_(std::uncaught_exceptions()) {
  VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  poolInfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  poolInfo.queueFamilyIndex = device.queueFamily();
  FOUNDRY_VK(vkCreateCommandPool(device.handle(), &poolInfo, nullptr, &pool_));
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  const VkResult r = vkAllocateCommandBuffers(device.handle(), &alloc, &cmd_);
  if (r != VK_SUCCESS) {
    vkDestroyCommandPool(device.handle(), pool_, nullptr);
    FOUNDRY_VK(r);
  }
  timestamps_ = device.timestampValidBits() > 0;
}

VulkanDispatcher::~VulkanDispatcher() {
  // Unwinding from an error leaves work unsubmitted by design; that error is the one line to show.
  if (!pending_.empty() && std::uncaught_exceptions() <= uncaughtAtCreation_) {
    spdlog::warn("dispatcher destroyed with {} dispatches never submitted", pending_.size());
  }
  const VkDevice d = device_.handle();
  if (recording_) vkEndCommandBuffer(cmd_);
  for (auto p : descriptorPools_) vkDestroyDescriptorPool(d, p, nullptr);
  for (auto q : queryPools_) vkDestroyQueryPool(d, q, nullptr);
  vkDestroyCommandPool(d, pool_, nullptr);
}

void VulkanDispatcher::begin() {
  if (recording_) return;
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FOUNDRY_VK(vkBeginCommandBuffer(cmd_, &info));
  recording_ = true;
}

VkDescriptorSet VulkanDispatcher::allocateSet(VkDescriptorSetLayout layout) {
  for (;;) {
    if (descriptorPool_ == descriptorPools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
      VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      info.maxSets = kSetsPerPool;
      info.poolSizeCount = 1;
      info.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      FOUNDRY_VK(vkCreateDescriptorPool(device_.handle(), &info, nullptr, &pool));
      descriptorPools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = descriptorPools_[descriptorPool_];
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = vkAllocateDescriptorSets(device_.handle(), &alloc, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) FOUNDRY_VK(r);
    ++descriptorPool_;
  }
}

std::uint32_t VulkanDispatcher::nextQueryPair() {
  const std::uint32_t pool = queriesUsed_ / kQueriesPerPool;
  if (queriesUsed_ % kQueriesPerPool == 0) {
    if (pool == queryPools_.size()) {
      VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      info.queryType = VK_QUERY_TYPE_TIMESTAMP;
      info.queryCount = kQueriesPerPool;
      VkQueryPool q = VK_NULL_HANDLE;
      FOUNDRY_VK(vkCreateQueryPool(device_.handle(), &info, nullptr, &q));
      queryPools_.push_back(q);
    }
    vkCmdResetQueryPool(cmd_, queryPools_[pool], 0, kQueriesPerPool);
  }
  const std::uint32_t q = queriesUsed_;
  queriesUsed_ += 2;
  return q;
}

void VulkanDispatcher::dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) {
  checkArguments(kernel, args);
  const auto& caps = device_.info();
  const std::string field = fmt::format("kernel {}", kernel.name);

  // Everything that can fail is checked before anything is recorded.
  struct Bound {
    const BindingSlot* slot;
    const Tensor* tensor;
    VkDeviceSize offset, range;
  };
  std::vector<Bound> bound;
  for (const auto& slot : kernel.layout.bindings) {
    const Tensor& t = args.tensors().at(slot.name);
    if (!t.buffer) throw UserError(field, fmt::format("tensor '{}' bound as '{}' has no device memory", t.name, slot.name));
    const VkDeviceSize offset = t.offset * dtypeBytes(t.dtype);
    const VkDeviceSize span = t.spanBytes();
    if (offset % device_.storageOffsetAlignment() != 0) {
      throw UserError(field, fmt::format("tensor '{}' starts at byte {}, not a multiple of the device's storage offset "
                                         "alignment {}", t.name, offset, device_.storageOffsetAlignment()));
    }
    if (offset + span > t.buffer->size()) {
      throw UserError(field, fmt::format("tensor '{}' ({}) spans bytes {}..{} but its buffer '{}' holds {}", t.name,
                                         t.shapeString(), offset, offset + span, t.buffer->name(), t.buffer->size()));
    }
    if (span > caps.maxStorageBufferRange) {
      throw UnsupportedError(fmt::format("tensor '{}' ({}) spans {} bytes; device '{}' binds at most {} bytes per "
                                         "storage buffer", t.name, t.shapeString(), span, caps.name,
                                         caps.maxStorageBufferRange));
    }
    const VkDeviceSize range = std::min<VkDeviceSize>({(span + 15) / 16 * 16, t.buffer->size() - offset,
                                                       caps.maxStorageBufferRange});
    bound.push_back({&slot, &t, offset, std::max<VkDeviceSize>(range, 4)});
  }
  // Kernels declare their buffers `restrict`: a written binding must not overlap any other binding.
  for (std::size_t i = 0; i < bound.size(); ++i) {
    for (std::size_t j = i + 1; j < bound.size(); ++j) {
      const auto &a = bound[i], &b = bound[j];
      if (a.tensor->buffer != b.tensor->buffer) continue;
      const bool written = a.slot->access != Access::ReadOnly || b.slot->access != Access::ReadOnly;
      const bool overlap = a.offset < b.offset + b.range && b.offset < a.offset + a.range;
      if (written && overlap) {
        throw UserError(field, fmt::format("bindings '{}' and '{}' overlap in buffer '{}' and one is written", a.slot->name,
                                           b.slot->name, a.tensor->buffer->name()));
      }
    }
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // no work
  const auto& maxGroups = device_.maxWorkgroupCount();
  if (grid.x > maxGroups[0] || grid.y > maxGroups[1] || grid.z > maxGroups[2]) {
    throw UnsupportedError(fmt::format("kernel {}: grid {}x{}x{} exceeds the device's {}x{}x{} workgroups", kernel.name,
                                       grid.x, grid.y, grid.z, maxGroups[0], maxGroups[1], maxGroups[2]));
  }
  const auto pipeline = pipelines_.get(kernel);
  const auto push = packPushConstants(kernel, args);

  begin();
  // A barrier only where this dispatch touches a buffer that an earlier one since the last barrier
  // wrote, or writes one that an earlier one read.
  bool hazard = false;
  for (const auto& b : bound) {
    auto it = touched_.find(b.tensor->buffer->handle());
    if (it == touched_.end()) continue;
    const bool writes = b.slot->access != Access::ReadOnly;
    if ((it->second & kWrite) || (writes && (it->second & kRead))) hazard = true;
  }
  if (hazard) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                         &barrier, 0, nullptr, 0, nullptr);
    ++barriers_;
    touched_.clear();
  }
  for (const auto& b : bound) {
    touched_[b.tensor->buffer->handle()] |= b.slot->access == Access::ReadOnly ? kRead : (kRead | kWrite);
  }

  const VkDescriptorSet set = allocateSet(pipeline->setLayout());
  std::vector<VkDescriptorBufferInfo> infos(bound.size());
  std::vector<VkWriteDescriptorSet> writes(bound.size());
  for (std::size_t i = 0; i < bound.size(); ++i) {
    infos[i] = {bound[i].tensor->buffer->handle(), bound[i].offset, bound[i].range};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = bound[i].slot->binding;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device_.handle(), static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);

  Pending p{kernel.name, 0, pipeline, {}};
  for (const auto& b : bound) p.buffers.push_back(b.tensor->buffer);
  if (timestamps_) {
    p.query = nextQueryPair();
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queryPools_[p.query / kQueriesPerPool],
                        p.query % kQueriesPerPool);
  }
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->handle());
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout(), 0, 1, &set, 0, nullptr);
  if (!push.empty()) {
    vkCmdPushConstants(cmd_, pipeline->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<std::uint32_t>(push.size()),
                       push.data());
  }
  vkCmdDispatch(cmd_, grid.x, grid.y, grid.z);
  if (timestamps_) {
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queryPools_[p.query / kQueriesPerPool],
                        p.query % kQueriesPerPool + 1);
  }
  pending_.push_back(std::move(p));
}

void VulkanDispatcher::barrier() {
  if (!recording_) return;
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &b, 0,
                       nullptr, 0, nullptr);
  ++barriers_;
  touched_.clear();
}

SubmitResult VulkanDispatcher::submit() {
  SubmitResult result = std::exchange(flushed_, {});
  SubmitResult now = runPending();
  // The flushed dispatches ran first: this submission's times continue after theirs.
  for (auto& d : now.dispatches) {
    d.startMicros += result.totalGpuMicros;
    d.endMicros += result.totalGpuMicros;
    result.dispatches.push_back(std::move(d));
  }
  result.totalGpuMicros += now.totalGpuMicros;
  return result;
}

void VulkanDispatcher::flush() { flushed_ = submit(); }

SubmitResult VulkanDispatcher::runPending() {
  SubmitResult result;
  if (!recording_) return result;
  // Make shader writes visible to the host and to later transfers (downloads, uploads).
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, nullptr, 0,
                       nullptr);
  FOUNDRY_VK(vkEndCommandBuffer(cmd_));
  recording_ = false;
  try {
    device_.submitAndWait(cmd_);
  } catch (...) {
    reset();
    throw;
  }
  if (timestamps_ && queriesUsed_ > 0) {
    std::vector<std::uint64_t> ticks(queriesUsed_);
    for (std::uint32_t first = 0; first < queriesUsed_; first += kQueriesPerPool) {
      const std::uint32_t count = std::min(kQueriesPerPool, queriesUsed_ - first);
      FOUNDRY_VK(vkGetQueryPoolResults(device_.handle(), queryPools_[first / kQueriesPerPool], 0, count,
                                       count * sizeof(std::uint64_t), ticks.data() + first, sizeof(std::uint64_t),
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    }
    const std::uint64_t mask =
        device_.timestampValidBits() >= 64 ? ~0ull : ((1ull << device_.timestampValidBits()) - 1);
    const double ns = device_.timestampPeriodNs();
    std::uint64_t first = ~0ull, last = 0;
    for (const auto& p : pending_) first = std::min(first, ticks[p.query] & mask);
    for (const auto& p : pending_) {
      const std::uint64_t t0 = ticks[p.query] & mask, t1 = ticks[p.query + 1] & mask;
      last = std::max(last, t1);
      auto us = [&](std::uint64_t a, std::uint64_t b) { return b >= a ? static_cast<double>(b - a) * ns / 1000.0 : 0.0; };
      result.dispatches.push_back({p.kernel, us(t0, t1), us(first, t0), us(first, t1)});
    }
    result.totalGpuMicros = last >= first ? static_cast<double>(last - first) * ns / 1000.0 : 0.0;
  } else {
    for (const auto& p : pending_) result.dispatches.push_back({p.kernel, 0.0});
  }
  reset();
  return result;
}

void VulkanDispatcher::reset() {
  pending_.clear();
  touched_.clear();
  queriesUsed_ = 0;
  for (auto p : descriptorPools_) vkResetDescriptorPool(device_.handle(), p, 0);
  descriptorPool_ = 0;
  vkResetCommandBuffer(cmd_, 0);
}

}  // namespace foundry
