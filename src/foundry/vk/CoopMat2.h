#pragma once
// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 as their registry defines them: Debian 12's
// Vulkan headers (1.3.239) predate both. Where the headers have them, theirs are used.
#include <vulkan/vulkan.h>

namespace foundry::vkx {

constexpr const char* kCoopMatKhrExtension = "VK_KHR_cooperative_matrix";
constexpr const char* kCoopMat2Extension = "VK_NV_cooperative_matrix2";
constexpr auto kCoopMatKhrFeaturesType = static_cast<VkStructureType>(1000506000);
constexpr auto kCoopMat2FeaturesType = static_cast<VkStructureType>(1000593000);
constexpr auto kCoopMat2PropertiesType = static_cast<VkStructureType>(1000593002);

struct CoopMatKhrFeatures {
  VkStructureType sType = kCoopMatKhrFeaturesType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

struct CoopMat2Features {
  VkStructureType sType = kCoopMat2FeaturesType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrixWorkgroupScope = VK_FALSE;
  VkBool32 cooperativeMatrixFlexibleDimensions = VK_FALSE;
  VkBool32 cooperativeMatrixReductions = VK_FALSE;
  VkBool32 cooperativeMatrixConversions = VK_FALSE;
  VkBool32 cooperativeMatrixPerElementOperations = VK_FALSE;
  VkBool32 cooperativeMatrixTensorAddressing = VK_FALSE;
  VkBool32 cooperativeMatrixBlockLoads = VK_FALSE;

  /// What the workgroup-scope prefill (prefill_coopmat2.glsl) uses.
  bool prefill() const {
    return cooperativeMatrixWorkgroupScope && cooperativeMatrixFlexibleDimensions && cooperativeMatrixReductions &&
           cooperativeMatrixConversions && cooperativeMatrixPerElementOperations;
  }
};

struct CoopMat2Properties {
  VkStructureType sType = kCoopMat2PropertiesType;
  void* pNext = nullptr;
  uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize = 0;
  uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension = 0;
  uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory = 0;
};

}  // namespace foundry::vkx
