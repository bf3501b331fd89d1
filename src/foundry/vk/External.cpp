#include "foundry/vk/External.h"

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/Instance.h"

namespace foundry {

std::unique_ptr<Runtime> adoptVulkan(RuntimeOptions options, const ExternalVulkan& vulkan) {
  configureLogging(options);
  // The application's validation layer and messenger report; Foundry adds none of its own.
  options.validation = false;
  auto instance = std::make_shared<VulkanInstance>(vulkan.instance, vulkan.apiVersion);
  auto device = std::make_shared<VulkanDevice>(std::move(instance), vulkan);
  return std::make_unique<Runtime>(std::move(options), std::move(device));
}

Tensor adoptBuffer(Runtime& runtime, VkBuffer buffer, VkDeviceSize bytes, VkDeviceSize offset, const Tensor& shape) {
  Tensor::describe(shape.name, shape.dtype, shape.dims, shape.layout);  // its dims' own checks first
  const std::uint64_t unit = shape.dtype == DType::Q8_0 ? 32 : 1;  // elements in a whole number of bytes
  const std::uint64_t element = storageBytes(shape.dtype, unit);
  if (offset % element != 0) {
    throw UserError(shape.name, fmt::format("offset {} is not a multiple of the {} {} size {}", offset,
                                            dtypeName(shape.dtype), unit == 1 ? "element" : "block", element));
  }
  Tensor t = shape;
  t.strides = Tensor::packedStrides(t.dims);
  t.offset = offset / element * unit;
  if (offset + t.spanBytes() > bytes) {
    throw UserError(shape.name, fmt::format("{} needs bytes {}..{} but the application's buffer holds {}",
                                            t.shapeString(), offset, offset + t.spanBytes(), bytes));
  }
  t.buffer = std::make_shared<Buffer>(runtime.device(), buffer, bytes, t.name);
  return t;
}

VkSemaphore timelineSemaphore(Runtime& runtime) { return runtime.device().timeline(); }

}  // namespace foundry
