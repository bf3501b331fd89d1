#pragma once
// A device buffer. Device-local memory where the device has it; uploads and downloads go through a
// staging buffer unless the memory is host-visible (CPU drivers, unified memory). A Buffer holds its
// device, so a Tensor that outlives its Runtime still frees its memory into a live VkDevice. An
// adopted buffer (an application's VkBuffer) is used, never destroyed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <vulkan/vulkan.h>

#include "foundry/vk/Handle.h"

namespace foundry {

class VulkanDevice;
struct Tensor;

/// What a buffer holds: tensors (device-local memory where the device has it), parameters the host
/// writes between submissions and the device reads as storage and as indirect dispatch grids
/// (host-visible, coherent memory), or staging: host memory (coherent, cached where the device has
/// it, not device-local) that the host reads and writes through mapped() and the device copies from
/// and to (copyFrom), e.g. a block that arrives by MPI straight into it.
enum class BufferUse { Tensor, Parameters, Staging };

class Buffer {
 public:
  /// Allocates `bytes` (at least 4). Beyond what the device allows: a DeviceError naming the size.
  Buffer(VulkanDevice& device, std::uint64_t bytes, std::string name, BufferUse use = BufferUse::Tensor);
  /// Adopts the application's `buffer` of `bytes` bytes: no memory of Foundry's, never destroyed.
  Buffer(VulkanDevice& device, VkBuffer buffer, std::uint64_t bytes, std::string name);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return adopted_ ? adopted_ : buffer_.get(); }
  std::uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool hostVisible() const { return mapped_ != nullptr; }
  /// False for an application's buffer.
  bool owned() const { return adopted_ == VK_NULL_HANDLE; }
  VulkanDevice& device() const { return *device_; }

  void upload(std::span<const std::byte> bytes, std::uint64_t offset = 0);
  void download(std::span<std::byte> bytes, std::uint64_t offset = 0) const;
  /// The mapped bytes of a host-visible buffer; InternalError for another.
  std::span<std::byte> mapped();
  /// Copies `bytes` bytes of `from` at `fromOffset` to this buffer at `offset` on the device, ordered
  /// against compute work on both sides, and waits for it.
  void copyFrom(const Buffer& from, std::uint64_t fromOffset, std::uint64_t offset, std::uint64_t bytes);
  /// Several regions of `from` to this buffer in one submission, waited for.
  void copyFrom(const Buffer& from, std::span<const VkBufferCopy> regions);
  /// Fills the whole buffer with a repeated 32-bit pattern (e.g. the bits of a NaN, to poison outputs).
  void fill(std::uint32_t pattern);

 private:
  std::shared_ptr<VulkanDevice> device_;  ///< declared first: destroyed after the handles below
  std::string name_;
  std::uint64_t size_ = 0;
  Owned<VkDevice, VkDeviceMemory> memory_;  ///< declared before buffer_: freed after it
  Owned<VkDevice, VkBuffer> buffer_;
  VkBuffer adopted_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  bool coherent_ = true;
  bool counted_ = false;  ///< in the device's allocation accounting
};

/// Why `t` cannot be read or written on `device` ("has no device memory ...", "lives in the memory of
/// another Runtime's device ...", "spans bytes a..b but its buffer ... holds n"), or "" when it can: what
/// the data API and every dispatch check before they touch a tensor.
std::string memoryProblem(const Tensor& t, const VulkanDevice& device);

}  // namespace foundry
