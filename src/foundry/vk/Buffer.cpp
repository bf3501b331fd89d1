#include "foundry/vk/Buffer.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/MemoryBudget.h"
#include "foundry/Tensor.h"
#include "foundry/vk/Barrier.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/Device.h"

namespace foundry {

namespace {

/// A host-visible buffer for one transfer, freed when it goes out of scope.
/// Makes host writes to mapped memory visible to the device (`flush`) or device writes visible to the
/// host; nothing to do for host-coherent memory.
void syncMapped(VkDevice device, VkDeviceMemory memory, bool coherent, bool flush) {
  if (coherent) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = memory;
  range.size = VK_WHOLE_SIZE;
  if (flush) vkFlushMappedMemoryRanges(device, 1, &range);
  else vkInvalidateMappedMemoryRanges(device, 1, &range);
}

struct Staging {
  VulkanDevice& device;
  Owned<VkDevice, VkDeviceMemory> memory;
  Owned<VkDevice, VkBuffer> buffer;
  void* mapped = nullptr;
  bool coherent = true;

  Staging(VulkanDevice& d, std::uint64_t bytes, bool readback) : device(d) {
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    buffer = createOwned<VkBuffer>(d.handle(), vkCreateBuffer, info, vkDestroyBuffer, "vkCreateBuffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(d.handle(), buffer.get(), &req);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex =
        d.memoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                     readback ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                              : VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     0);
    coherent = d.memoryFlags(alloc.memoryTypeIndex) & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkDeviceMemory m = VK_NULL_HANDLE;
    const VkResult r = vkAllocateMemory(d.handle(), &alloc, nullptr, &m);
    if (r != VK_SUCCESS) {
      throw DeviceError(fmt::format("allocating a {} staging buffer failed with {}", humanBytes(bytes), vkResultName(r)));
    }
    memory = Owned<VkDevice, VkDeviceMemory>(d.handle(), m, vkFreeMemory);
    FOUNDRY_VK(vkBindBufferMemory(d.handle(), buffer.get(), memory.get(), 0));
    FOUNDRY_VK(vkMapMemory(d.handle(), memory.get(), 0, VK_WHOLE_SIZE, 0, &mapped));
  }
  void flushOrInvalidate(bool flush) const { syncMapped(device.handle(), memory.get(), coherent, flush); }
};

// Transfers are ordered against compute work on both sides (memoryBarrier): earlier shader access
// finishes before the copy, and the copy's writes are visible to later shaders.

constexpr VkAccessFlags kShaderAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;

}  // namespace

Buffer::Buffer(VulkanDevice& device, std::uint64_t bytes, std::string name, BufferUse use)
    : device_(device.shared_from_this()), name_(std::move(name)), size_(std::max<std::uint64_t>(bytes, 4)) {
  checkAllocationFits(device.info(), size_, name_);
  const VkDevice d = device.handle();
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size_;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (use == BufferUse::Parameters) info.usage |= VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  // Each handle is owned the moment it exists: a failure further down frees what came before.
  buffer_ = createOwned<VkBuffer>(d, vkCreateBuffer, info, vkDestroyBuffer, "vkCreateBuffer");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(d, buffer_.get(), &req);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  // Device-local memory that the host cannot see is the fast kind on discrete GPUs; a CPU driver
  // only has host-visible memory, which is then mapped directly.
  // Parameters are written by the host without a transfer: host-visible and coherent, device-local
  // where the device has such memory.
  constexpr VkMemoryPropertyFlags kHostCoherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  alloc.memoryTypeIndex =
      use == BufferUse::Parameters ? device.memoryType(req.memoryTypeBits, kHostCoherent, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
      : use == BufferUse::Staging  ? device.memoryType(req.memoryTypeBits, kHostCoherent, VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                                       VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
                                   : device.memoryType(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult r = vkAllocateMemory(d, &alloc, nullptr, &memory);
  if (r != VK_SUCCESS) {
    throw DeviceError(fmt::format("allocating {} bytes ({}) for '{}' failed with {}", size_, humanBytes(size_), name_,
                                  vkResultName(r)));
  }
  memory_ = Owned<VkDevice, VkDeviceMemory>(d, memory, vkFreeMemory);
  const VkResult bound = device.injected("vkBindBufferMemory");
  FOUNDRY_VK(bound != VK_SUCCESS ? bound : vkBindBufferMemory(d, buffer_.get(), memory_.get(), 0));
  const auto flags = device.memoryFlags(alloc.memoryTypeIndex);
  if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    coherent_ = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    FOUNDRY_VK(vkMapMemory(d, memory_.get(), 0, VK_WHOLE_SIZE, 0, &mapped_));
  }
  device_->noteAllocation(size_);
  counted_ = true;
}

Buffer::Buffer(VulkanDevice& device, VkBuffer buffer, std::uint64_t bytes, std::string name)
    : device_(device.shared_from_this()), name_(std::move(name)), size_(bytes), adopted_(buffer) {
  if (!buffer) throw UserError(name_, "the application's VkBuffer is VK_NULL_HANDLE");
  if (bytes == 0) throw UserError(name_, "the application's buffer is 0 bytes; give its size in bytes");
}

Buffer::~Buffer() {
  if (counted_) device_->noteFree(size_);
  if (mapped_) vkUnmapMemory(device_->handle(), memory_.get());
}

void Buffer::upload(std::span<const std::byte> bytes, std::uint64_t offset) {
  if (offset + bytes.size() > size_) {
    throw InternalError(fmt::format("upload of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes.size(),
                                    offset, name_, size_));
  }
  if (bytes.empty()) return;
  if (mapped_) {
    std::memcpy(static_cast<std::byte*>(mapped_) + offset, bytes.data(), bytes.size());
    syncMapped(device_->handle(), memory_.get(), coherent_, true);
    return;
  }
  Staging staging(*device_, bytes.size(), false);
  std::memcpy(staging.mapped, bytes.data(), bytes.size());
  staging.flushOrInvalidate(true);
  device_->submitAndWait([&](VkCommandBuffer cmd) {
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT);
    VkBufferCopy region{0, offset, bytes.size()};
    vkCmdCopyBuffer(cmd, staging.buffer.get(), handle(), 1, &region);
    memoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            kShaderAccess);
  });
}

std::span<std::byte> Buffer::mapped() {
  if (!mapped_) throw InternalError(fmt::format("buffer '{}' is not host-visible: it has no mapped bytes", name_));
  return {static_cast<std::byte*>(mapped_), size_};
}

void Buffer::copyFrom(const Buffer& from, std::uint64_t fromOffset, std::uint64_t offset, std::uint64_t bytes) {
  const VkBufferCopy region{fromOffset, offset, bytes};
  copyFrom(from, std::span<const VkBufferCopy>(&region, 1));
}

void Buffer::copyFrom(const Buffer& from, std::span<const VkBufferCopy> regions) {
  std::vector<VkBufferCopy> copies;
  for (const VkBufferCopy& r : regions) {
    if (r.srcOffset + r.size > from.size_ || r.dstOffset + r.size > size_) {
      throw InternalError(fmt::format("copy of {} bytes from '{}' at {} to '{}' at {} overruns a buffer ({} and {} bytes)",
                                      r.size, from.name_, r.srcOffset, name_, r.dstOffset, from.size_, size_));
    }
    if (r.size > 0) copies.push_back(r);
  }
  if (copies.empty()) return;
  device_->submitAndWait([&](VkCommandBuffer cmd) {
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess, VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdCopyBuffer(cmd, from.handle(), handle(), static_cast<std::uint32_t>(copies.size()), copies.data());
    memoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                  kShaderAccess | VK_ACCESS_HOST_READ_BIT);
  });
}

void Buffer::download(std::span<std::byte> bytes, std::uint64_t offset) const {
  if (offset + bytes.size() > size_) {
    throw InternalError(fmt::format("download of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes.size(),
                                    offset, name_, size_));
  }
  if (bytes.empty()) return;
  if (mapped_) {
    syncMapped(device_->handle(), memory_.get(), coherent_, false);
    std::memcpy(bytes.data(), static_cast<const std::byte*>(mapped_) + offset, bytes.size());
    return;
  }
  Staging staging(*device_, bytes.size(), true);
  device_->submitAndWait([&](VkCommandBuffer cmd) {
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy region{offset, 0, bytes.size()};
    vkCmdCopyBuffer(cmd, handle(), staging.buffer.get(), 1, &region);
    memoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
  });
  staging.flushOrInvalidate(false);
  std::memcpy(bytes.data(), staging.mapped, bytes.size());
}

void Buffer::fill(std::uint32_t pattern) {
  if (mapped_) {
    auto* words = static_cast<std::uint32_t*>(mapped_);
    for (std::uint64_t i = 0; i < size_ / 4; ++i) words[i] = pattern;
    syncMapped(device_->handle(), memory_.get(), coherent_, true);
    return;
  }
  device_->submitAndWait([&](VkCommandBuffer cmd) {
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdFillBuffer(cmd, handle(), 0, size_ / 4 * 4, pattern);
    memoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            kShaderAccess);
  });
}

std::string memoryProblem(const Tensor& t, const VulkanDevice& device) {
  if (!t.buffer) {
    return "has no device memory (Tensor::describe gives a shape only; Runtime::allocate or adoptBuffer gives it "
           "memory)";
  }
  if (&t.buffer->device() != &device) {
    return fmt::format("lives in the memory of another Runtime's device ('{}'); a device reads only its own buffers",
                       t.buffer->device().info().name);
  }
  const std::uint64_t offset = storageBytes(t.dtype, t.offset), span = t.spanBytes();
  if (offset + span > t.buffer->size()) {
    return fmt::format("spans bytes {}..{} but its buffer '{}' holds {}", offset, offset + span, t.buffer->name(),
                       t.buffer->size());
  }
  return "";
}

}  // namespace foundry
