#include "foundry/vk/Buffer.h"

#include <cstring>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/MemoryBudget.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/Device.h"

namespace foundry {

namespace {

/// A host-visible buffer for one transfer, freed when it goes out of scope.
struct Staging {
  VulkanDevice& device;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  bool coherent = true;

  Staging(VulkanDevice& d, std::uint64_t bytes, bool readback) : device(d) {
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    FOUNDRY_VK(vkCreateBuffer(d.handle(), &info, nullptr, &buffer));
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(d.handle(), buffer, &req);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex =
        d.memoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                     readback ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                              : VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     0);
    coherent = d.memoryFlags(alloc.memoryTypeIndex) & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const VkResult r = vkAllocateMemory(d.handle(), &alloc, nullptr, &memory);
    if (r != VK_SUCCESS) {
      vkDestroyBuffer(d.handle(), buffer, nullptr);
      throw DeviceError(fmt::format("allocating a {} staging buffer failed with {}", humanBytes(bytes), vkResultName(r)));
    }
    FOUNDRY_VK(vkBindBufferMemory(d.handle(), buffer, memory, 0));
    FOUNDRY_VK(vkMapMemory(d.handle(), memory, 0, VK_WHOLE_SIZE, 0, &mapped));
  }
  ~Staging() {
    if (mapped) vkUnmapMemory(device.handle(), memory);
    vkDestroyBuffer(device.handle(), buffer, nullptr);
    vkFreeMemory(device.handle(), memory, nullptr);
  }
  void flushOrInvalidate(bool flush) const {
    if (coherent) return;
    VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
    range.memory = memory;
    range.size = VK_WHOLE_SIZE;
    if (flush) vkFlushMappedMemoryRanges(device.handle(), 1, &range);
    else vkInvalidateMappedMemoryRanges(device.handle(), 1, &range);
  }
};

// Transfers are ordered against compute work on both sides: earlier shader access finishes before
// the copy, and the copy's writes are visible to later shaders.
void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags srcAccess, VkPipelineStageFlags dst,
             VkAccessFlags dstAccess) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = srcAccess;
  b.dstAccessMask = dstAccess;
  vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
}

constexpr VkAccessFlags kShaderAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;

}  // namespace

Buffer::Buffer(VulkanDevice& device, std::uint64_t bytes, std::string name)
    : device_(device), name_(std::move(name)), size_(std::max<std::uint64_t>(bytes, 4)) {
  checkAllocationFits(device.info(), size_, name_);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size_;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  FOUNDRY_VK(vkCreateBuffer(device.handle(), &info, nullptr, &buffer_));
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device.handle(), buffer_, &req);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  // Device-local memory that the host cannot see is the fast kind on discrete GPUs; a CPU driver
  // only has host-visible memory, which is then mapped directly.
  alloc.memoryTypeIndex = device.memoryType(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  const VkResult r = vkAllocateMemory(device.handle(), &alloc, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device.handle(), buffer_, nullptr);
    throw DeviceError(fmt::format("allocating {} bytes ({}) for '{}' failed with {}", size_, humanBytes(size_), name_,
                                  vkResultName(r)));
  }
  FOUNDRY_VK(vkBindBufferMemory(device.handle(), buffer_, memory_, 0));
  const auto flags = device.memoryFlags(alloc.memoryTypeIndex);
  if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    coherent_ = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    FOUNDRY_VK(vkMapMemory(device.handle(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_));
  }
  device_.noteAllocation(size_);
}

Buffer::~Buffer() {
  device_.noteFree(size_);
  if (mapped_) vkUnmapMemory(device_.handle(), memory_);
  vkDestroyBuffer(device_.handle(), buffer_, nullptr);
  vkFreeMemory(device_.handle(), memory_, nullptr);
}

void Buffer::upload(std::span<const std::byte> bytes, std::uint64_t offset) {
  if (offset + bytes.size() > size_) {
    throw InternalError(fmt::format("upload of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes.size(),
                                    offset, name_, size_));
  }
  if (bytes.empty()) return;
  if (mapped_) {
    std::memcpy(static_cast<std::byte*>(mapped_) + offset, bytes.data(), bytes.size());
    if (!coherent_) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
      range.memory = memory_;
      range.size = VK_WHOLE_SIZE;
      vkFlushMappedMemoryRanges(device_.handle(), 1, &range);
    }
    return;
  }
  Staging staging(device_, bytes.size(), false);
  std::memcpy(staging.mapped, bytes.data(), bytes.size());
  staging.flushOrInvalidate(true);
  device_.submitAndWait([&](VkCommandBuffer cmd) {
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT);
    VkBufferCopy region{0, offset, bytes.size()};
    vkCmdCopyBuffer(cmd, staging.buffer, buffer_, 1, &region);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            kShaderAccess);
  });
}

void Buffer::download(std::span<std::byte> bytes, std::uint64_t offset) const {
  if (offset + bytes.size() > size_) {
    throw InternalError(fmt::format("download of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes.size(),
                                    offset, name_, size_));
  }
  if (bytes.empty()) return;
  if (mapped_) {
    if (!coherent_) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
      range.memory = memory_;
      range.size = VK_WHOLE_SIZE;
      vkInvalidateMappedMemoryRanges(device_.handle(), 1, &range);
    }
    std::memcpy(bytes.data(), static_cast<const std::byte*>(mapped_) + offset, bytes.size());
    return;
  }
  Staging staging(device_, bytes.size(), true);
  device_.submitAndWait([&](VkCommandBuffer cmd) {
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy region{offset, 0, bytes.size()};
    vkCmdCopyBuffer(cmd, buffer_, staging.buffer, 1, &region);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
  });
  staging.flushOrInvalidate(false);
  std::memcpy(bytes.data(), staging.mapped, bytes.size());
}

void Buffer::fill(std::uint32_t pattern) {
  if (mapped_) {
    auto* words = static_cast<std::uint32_t*>(mapped_);
    for (std::uint64_t i = 0; i < size_ / 4; ++i) words[i] = pattern;
    if (!coherent_) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
      range.memory = memory_;
      range.size = VK_WHOLE_SIZE;
      vkFlushMappedMemoryRanges(device_.handle(), 1, &range);
    }
    return;
  }
  device_.submitAndWait([&](VkCommandBuffer cmd) {
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdFillBuffer(cmd, buffer_, 0, size_ / 4 * 4, pattern);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            kShaderAccess);
  });
}

}  // namespace foundry
