#pragma once
// A device buffer. Device-local memory where the device has it; uploads and downloads go through a
// staging buffer unless the memory is host-visible (CPU drivers, unified memory).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <vulkan/vulkan.h>

namespace foundry {

class VulkanDevice;

class Buffer {
 public:
  /// Allocates `bytes` (at least 4). Beyond what the device allows: a DeviceError naming the size.
  Buffer(VulkanDevice& device, std::uint64_t bytes, std::string name);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  std::uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool hostVisible() const { return mapped_ != nullptr; }

  void upload(std::span<const std::byte> bytes, std::uint64_t offset = 0);
  void download(std::span<std::byte> bytes, std::uint64_t offset = 0) const;
  /// Fills the whole buffer with a repeated 32-bit pattern (e.g. the bits of a NaN, to poison outputs).
  void fill(std::uint32_t pattern);

 private:
  VulkanDevice& device_;
  std::string name_;
  std::uint64_t size_ = 0;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  bool coherent_ = true;
};

}  // namespace foundry
