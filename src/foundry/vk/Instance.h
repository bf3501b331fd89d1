#pragma once
// The Vulkan instance: optional Khronos validation with synchronization checks, and a debug
// messenger that counts validation errors so tests can fail on any.
#include <atomic>
#include <mutex>
#include <cstdint>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "foundry/DeviceInfo.h"

namespace foundry {

/// A device as `foundry devices` lists it.
struct PhysicalDeviceEntry {
  std::uint32_t index = 0;
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  DeviceInfo info;
  std::uint32_t apiVersion = 0;
};

class VulkanInstance {
 public:
  /// `validation`: enable VK_LAYER_KHRONOS_validation (an UnsupportedError if it is not installed).
  explicit VulkanInstance(bool validation);
  /// Adopts an application's instance created for `apiVersion` (VkApplicationInfo::apiVersion):
  /// Foundry lists its devices and never destroys it. Validation messages go to the application's
  /// own messenger; validationErrors() stays 0.
  VulkanInstance(VkInstance adopted, std::uint32_t apiVersion);
  ~VulkanInstance();
  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return validation_; }
  /// False when the instance is an application's (adopted).
  bool owned() const { return owned_; }
  std::uint32_t apiVersion() const { return apiVersion_; }

  /// Every physical device with its capabilities. Throws DeviceError when there is none.
  const std::vector<PhysicalDeviceEntry>& devices() const { return devices_; }

  /// Validation messages of error severity seen so far (zero without validation).
  std::uint64_t validationErrors() const { return errors_.load(); }
  std::uint64_t validationWarnings() const { return warnings_.load(); }
  /// The last validation error's text, for test failure messages.
  std::string lastValidationError() const;

 private:
  void release();
  void enumerateDevices();
  static VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT types,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool owned_ = true;
  bool validation_ = false;
  std::uint32_t apiVersion_ = VK_API_VERSION_1_2;
  std::vector<PhysicalDeviceEntry> devices_;
  std::atomic<std::uint64_t> errors_{0}, warnings_{0};
  mutable std::mutex mutex_;
  std::string lastError_;
  // The loader reports why vkCreateInstance failed through the messenger; those messages are kept
  // here while the instance is created and go into the one error line instead of the log.
  bool creating_ = false;
  std::vector<std::string> creationMessages_;
};

/// The extensions a physical device offers.
std::vector<std::string> deviceExtensions(VkPhysicalDevice device);

/// Reads the capabilities of one physical device.
DeviceInfo queryDeviceInfo(VkInstance instance, VkPhysicalDevice device);

}  // namespace foundry
