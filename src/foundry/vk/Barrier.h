#pragma once
// One global memory barrier in a command buffer: the accesses `srcAccess` of stages `src` finish and
// become visible to the accesses `dstAccess` of stages `dst`.
#include <vulkan/vulkan.h>

namespace foundry {

inline void memoryBarrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags srcAccess,
                          VkPipelineStageFlags dst, VkAccessFlags dstAccess) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = srcAccess;
  b.dstAccessMask = dstAccess;
  vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
}

}  // namespace foundry
