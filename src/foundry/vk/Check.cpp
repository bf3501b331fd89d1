#include "foundry/vk/Check.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace foundry {

const char* vkResultName(VkResult result) {
  switch (result) {
#define FOUNDRY_CASE(x) \
  case x: return #x;
    FOUNDRY_CASE(VK_SUCCESS)
    FOUNDRY_CASE(VK_NOT_READY)
    FOUNDRY_CASE(VK_TIMEOUT)
    FOUNDRY_CASE(VK_INCOMPLETE)
    FOUNDRY_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    FOUNDRY_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    FOUNDRY_CASE(VK_ERROR_INITIALIZATION_FAILED)
    FOUNDRY_CASE(VK_ERROR_DEVICE_LOST)
    FOUNDRY_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    FOUNDRY_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    FOUNDRY_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    FOUNDRY_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    FOUNDRY_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    FOUNDRY_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    FOUNDRY_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    FOUNDRY_CASE(VK_ERROR_FRAGMENTED_POOL)
    FOUNDRY_CASE(VK_ERROR_UNKNOWN)
    FOUNDRY_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    FOUNDRY_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    FOUNDRY_CASE(VK_ERROR_FRAGMENTATION)
    FOUNDRY_CASE(VK_PIPELINE_COMPILE_REQUIRED)
#undef FOUNDRY_CASE
    default: return "VkResult(?)";
  }
}

namespace {
std::string& driverSaid() {
  thread_local std::string said;
  return said;
}
}  // namespace

void noteDriverError(const char* text) {
  std::string line = text ? text : "";
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::string& said = driverSaid();
  // Only the latest messages can belong to the call that fails next; older ones are dropped.
  said = said.empty() || said.size() > 1000 ? std::move(line) : said + "; " + line;
}

void throwVkError(VkResult result, const char* call, const char* file, int line) {
  const std::string said = std::exchange(driverSaid(), {});
  throw DeviceError(fmt::format("{} failed with {} ({}) at {}:{}{}", call, vkResultName(result),
                                static_cast<int>(result), file, line,
                                said.empty() ? "" : "; the driver said: " + said));
}

}  // namespace foundry
