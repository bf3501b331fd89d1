#pragma once
// Turns a failing VkResult into a DeviceError naming the call and the result.
#include <vulkan/vulkan.h>

#include "foundry/Error.h"

namespace foundry {

const char* vkResultName(VkResult result);

/// Keeps what the driver itself (not the validation layer) reported as an error on this thread, for
/// the next failing call on it to quote ("the driver said: ..."), in place of a log line of its own.
void noteDriverError(const char* text);

/// The DeviceError names the call, the result and, once, what the driver said on this thread.
[[noreturn]] void throwVkError(VkResult result, const char* call, const char* file, int line);

}  // namespace foundry

#define FOUNDRY_VK(call)                                                         \
  do {                                                                           \
    const VkResult foundry_vk_result_ = (call);                                  \
    if (foundry_vk_result_ != VK_SUCCESS)                                        \
      ::foundry::throwVkError(foundry_vk_result_, #call, __FILE__, __LINE__);    \
  } while (0)
