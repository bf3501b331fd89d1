#pragma once
// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 as their registry defines them: Debian 12's
// Vulkan headers (1.3.239) predate both. Where the headers have them, theirs are used.
#include <cstdint>

#include <vulkan/vulkan.h>

namespace foundry::vkx {

constexpr const char* kCoopMatKhrExtension = "VK_KHR_cooperative_matrix";
constexpr const char* kCoopMat2Extension = "VK_NV_cooperative_matrix2";
constexpr auto kCoopMatKhrFeaturesType = static_cast<VkStructureType>(1000506000);
constexpr auto kCoopMat2FeaturesType = static_cast<VkStructureType>(1000593000);
constexpr auto kCoopMat2PropertiesType = static_cast<VkStructureType>(1000593002);
constexpr auto kFlexibleDimensionsType = static_cast<VkStructureType>(1000593001);
// VK_KHR_shader_bfloat16 (extension 142): bf16 operands in cooperative matrices.
constexpr const char* kBf16Extension = "VK_KHR_shader_bfloat16";
constexpr auto kBf16FeaturesType = static_cast<VkStructureType>(1000141000);
// VkComponentTypeKHR and VkScopeKHR values.
constexpr std::uint32_t kComponentFloat32 = 1, kComponentBf16 = 1000141000;
constexpr std::uint32_t kScopeWorkgroup = 2, kScopeSubgroup = 3;

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

struct Bf16Features {
  VkStructureType sType = kBf16FeaturesType;
  void* pNext = nullptr;
  VkBool32 shaderBFloat16Type = VK_FALSE;
  VkBool32 shaderBFloat16DotProduct = VK_FALSE;
  VkBool32 shaderBFloat16CooperativeMatrix = VK_FALSE;

  bool coopMat() const { return shaderBFloat16Type && shaderBFloat16CooperativeMatrix; }
};

/// VkCooperativeMatrixFlexibleDimensionsPropertiesNV: one combination of types and scope the device
/// multiplies in matrices of flexible dimensions.
struct FlexibleDimensions {
  VkStructureType sType = kFlexibleDimensionsType;
  void* pNext = nullptr;
  std::uint32_t MGranularity = 0, NGranularity = 0, KGranularity = 0;
  std::uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;
  VkBool32 saturatingAccumulation = VK_FALSE;
  std::uint32_t scope = 0;
  std::uint32_t workgroupInvocations = 0;
};

using PFN_GetFlexibleDimensions = VkResult(VKAPI_PTR*)(VkPhysicalDevice, std::uint32_t*, FlexibleDimensions*);

}  // namespace foundry::vkx
