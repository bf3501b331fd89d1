#pragma once
// The entry point: one Vulkan device with its compiler, caches and allocator, configured by
// RuntimeOptions. Everything that needs a real device goes through here. This header does not include
// Vulkan: a C++ user builds, dispatches and waits without it; vk/External.h adopts an application's
// Vulkan objects. A Runtime is shared by threads (docs/threading.md); Tensors and dispatchers hold
// the device, so they may outlive it.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/Dispatcher.h"
#include "foundry/KernelBuilder.h"
#include "foundry/KernelCache.h"
#include "foundry/RuntimeOptions.h"
#include "foundry/Tensor.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

class PipelineCache;
class VulkanDevice;
class VulkanInstance;

class Runtime {
 public:
  /// Opens the device chosen by `options.device`. Throws DeviceError when Vulkan has no device.
  explicit Runtime(RuntimeOptions options);
  /// On a device already open (an adopted one: vk/External.h's adoptVulkan).
  Runtime(RuntimeOptions options, std::shared_ptr<VulkanDevice> device);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeOptions& options() const { return options_; }
  VulkanDevice& device() { return *device_; }
  std::shared_ptr<VulkanDevice> sharedDevice() const { return device_; }
  const DeviceInfo& info() const;
  std::shared_ptr<const SnippetLibrary> snippets() const { return snippets_; }
  KernelCache& kernels() { return *kernels_; }
  PipelineCache& pipelines() { return *pipelines_; }
  const DiskCache& diskCache() const { return *disk_; }

  /// A builder for this device and this runtime's snippets.
  KernelBuilder builder() const { return KernelBuilder(info(), snippets_); }
  /// A new dispatcher recording on this device (one per thread).
  std::unique_ptr<VulkanDispatcher> dispatcher();
  /// Blocks until `submission` (from any dispatcher of this runtime) has run.
  void wait(Submission submission);

  /// Allocates storage for `shape` (packed strides) on the device.
  Tensor allocate(const Tensor& shape);
  Tensor allocate(std::string name, DType dtype, std::vector<std::int64_t> dims, Layout layout = Layout::Contiguous);
  /// Converts `values` to the tensor's dtype and writes them in its packed element order.
  void upload(const Tensor& tensor, std::span<const float> values);
  /// Writes u32 words into a U32 tensor in its packed element order, exactly.
  void upload(const Tensor& tensor, std::span<const std::uint32_t> words);
  /// Reads the tensor's elements in row-major order of its dims, as floats; a strided view is gathered.
  std::vector<float> download(const Tensor& tensor);
  /// Fills the tensor's buffer with NaN (outputs are poisoned so unwritten elements show).
  void poison(const Tensor& tensor);

 private:
  void start();

  RuntimeOptions options_;
  std::shared_ptr<VulkanDevice> device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::shared_ptr<DiskCache> disk_;
  std::shared_ptr<KernelCache> kernels_;
  std::shared_ptr<PipelineCache> pipelines_;
};

/// Applies FOUNDRY_LOG_LEVEL to the default logger (stderr).
void configureLogging(const RuntimeOptions& options);

/// Where the disk cache lives for `options`: FOUNDRY_CACHE_DIR, else DiskCache::defaultDirectory.
std::string diskCacheDirectory(const RuntimeOptions& options);

}  // namespace foundry
