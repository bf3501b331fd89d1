#include "foundry/vk/Instance.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/CoopMat2.h"

namespace foundry {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool hasLayer(const char* name) {
  std::uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const auto& l) { return std::strcmp(l.layerName, name) == 0; });
}

std::vector<std::string> instanceExtensions(const char* layer) {
  std::uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(layer, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateInstanceExtensionProperties(layer, &n, exts.data());
  std::vector<std::string> out;
  for (const auto& e : exts) out.emplace_back(e.extensionName);
  return out;
}

bool contains(const std::vector<std::string>& v, const char* s) { return std::find(v.begin(), v.end(), s) != v.end(); }

Vendor vendorFromId(std::uint32_t id) {
  switch (id) {
    case 0x10DE: return Vendor::Nvidia;
    case 0x1002: return Vendor::Amd;
    case 0x8086: return Vendor::Intel;
    case 0x13B5: return Vendor::Arm;
    case 0x5143: return Vendor::Qualcomm;
    case 0x106B: return Vendor::Apple;
    case 0x10005: return Vendor::Mesa;
    default: return Vendor::Other;
  }
}

DeviceKind kindFromType(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceKind::Discrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceKind::Integrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceKind::Virtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceKind::Cpu;
    default: return DeviceKind::Other;
  }
}

std::optional<DType> coopComponent(VkComponentTypeNV t) {
  if (t == VK_COMPONENT_TYPE_FLOAT16_NV) return DType::F16;
  if (t == VK_COMPONENT_TYPE_FLOAT32_NV) return DType::F32;
  if (t == VK_COMPONENT_TYPE_SINT8_NV) return DType::I8;
  if (t == VK_COMPONENT_TYPE_SINT32_NV) return DType::I32;
  return std::nullopt;
}

/// The device multiplies bf16 A and B matrices into f32 in matrices of flexible dimensions
/// (VK_NV_cooperative_matrix2), at either scope.
bool multipliesBf16(VkInstance instance, VkPhysicalDevice device) {
  auto get = reinterpret_cast<vkx::PFN_GetFlexibleDimensions>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
  if (!get) return false;
  std::uint32_t n = 0;
  if (get(device, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<vkx::FlexibleDimensions> all(n);
  if (get(device, &n, all.data()) < 0) return false;
  bool workgroup = false, subgroup = false;
  for (const auto& f : all) {
    spdlog::debug("flexible-dimension matrices: A {} B {} C {} result {} scope {}, granularity {}x{}x{}", f.AType,
                  f.BType, f.CType, f.ResultType, f.scope, f.MGranularity, f.NGranularity, f.KGranularity);
    if (f.AType != vkx::kComponentBf16 || f.BType != vkx::kComponentBf16 || f.CType != vkx::kComponentFloat32 ||
        f.ResultType != vkx::kComponentFloat32) {
      continue;
    }
    workgroup |= f.scope == vkx::kScopeWorkgroup;
    subgroup |= f.scope == vkx::kScopeSubgroup;
  }
  return workgroup || subgroup;
}

}  // namespace

std::vector<std::string> deviceExtensions(VkPhysicalDevice device) {
  std::uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, exts.data());
  std::vector<std::string> out;
  for (const auto& e : exts) out.emplace_back(e.extensionName);
  return out;
}

DeviceInfo queryDeviceInfo(VkInstance instance, VkPhysicalDevice device) {
  const auto exts = deviceExtensions(device);
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(device, &base);
  const bool v13 = base.apiVersion >= VK_API_VERSION_1_3;

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties sizeControl{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  void** next = &props.pNext;
  auto chain = [&](auto& s) {
    *next = &s;
    next = &s.pNext;
  };
  chain(subgroup);
  chain(driver);
  chain(ids);
  chain(maint3);
  const bool hasSizeControl = v13 || contains(exts, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (hasSizeControl) chain(sizeControl);
  if (contains(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) chain(sm);
  if (contains(exts, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) chain(amd);
  const bool hasCoop2 = contains(exts, vkx::kCoopMat2Extension) && contains(exts, vkx::kCoopMatKhrExtension) && v13;
  vkx::CoopMat2Properties coop2Props;
  if (hasCoop2) chain(coop2Props);
  vkGetPhysicalDeviceProperties2(device, &props);

  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures fsize{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcoop{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  next = &feats.pNext;
  chain(f11);
  chain(f12);
  if (hasSizeControl) chain(fsize);
  const bool hasCoop = contains(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (hasCoop) chain(fcoop);
  VkPhysicalDeviceShaderClockFeaturesKHR fclock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  if (contains(exts, VK_KHR_SHADER_CLOCK_EXTENSION_NAME)) chain(fclock);
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV fsm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
  if (contains(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) chain(fsm);
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (v13 || contains(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) chain(fdot);
  vkx::CoopMatKhrFeatures fcoopKhr;
  vkx::CoopMat2Features fcoop2;
  vkx::Bf16Features fbf16;
  if (hasCoop2) {
    chain(fcoopKhr);
    chain(fcoop2);
    if (contains(exts, vkx::kBf16Extension)) chain(fbf16);
  }
  vkGetPhysicalDeviceFeatures2(device, &feats);

  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(device, &mem);

  DeviceInfo c;
  c.name = base.deviceName;
  c.vendor = vendorFromId(base.vendorID);
  c.kind = kindFromType(base.deviceType);
  c.family = deviceFamilyFor(c.vendor, c.name);
  c.loopLimit = c.family == DeviceFamily::Lavapipe ? kLlvmpipeLoopLimit : 0;
  c.subgroupSize = subgroup.subgroupSize;
  c.minSubgroupSize = c.maxSubgroupSize = subgroup.subgroupSize;
  if (hasSizeControl && fsize.subgroupSizeControl &&
      (sizeControl.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
    c.subgroupSizeControl = true;
    c.minSubgroupSize = sizeControl.minSubgroupSize;
    c.maxSubgroupSize = sizeControl.maxSubgroupSize;
  }
  const bool computeSubgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  c.subgroupArithmetic = computeSubgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  c.subgroupShuffle = computeSubgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  c.subgroupVote = computeSubgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);
  c.maxSharedMemoryBytes = base.limits.maxComputeSharedMemorySize;
  c.maxStorageBufferRange = base.limits.maxStorageBufferRange;
  c.maxAllocationBytes = maint3.maxMemoryAllocationSize;
  c.deviceMemoryBytes = 0;
  for (std::uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      c.deviceMemoryBytes = std::max<std::uint64_t>(c.deviceMemoryBytes, mem.memoryHeaps[i].size);
    }
  }
  c.maxWorkgroupInvocations = base.limits.maxComputeWorkGroupInvocations;
  for (std::size_t i = 0; i < 3; ++i) c.maxWorkgroupSize[i] = base.limits.maxComputeWorkGroupSize[i];
  c.maxPushConstantBytes = base.limits.maxPushConstantsSize;
  c.fp16Arithmetic = f12.shaderFloat16;
  c.storage16Bit = f11.storageBuffer16BitAccess;
  // The prefill probe reads both clocks (as two 32-bit halves, so without 64-bit integers).
  c.shaderClock = fclock.shaderSubgroupClock && fclock.shaderDeviceClock;
  c.smBuiltins = fsm.shaderSMBuiltins != 0;
  c.int8Dot = fdot.shaderIntegerDotProduct != 0;
  if (hasCoop && fcoop.cooperativeMatrix) {
    auto get = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
    if (get) {
      std::uint32_t n = 0;
      get(device, &n, nullptr);
      std::vector<VkCooperativeMatrixPropertiesNV> shapes(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
      get(device, &n, shapes.data());
      for (const auto& s : shapes) {
        const auto a = coopComponent(s.AType), b = coopComponent(s.BType), cc = coopComponent(s.CType),
                   d = coopComponent(s.DType);
        if (s.scope != VK_SCOPE_SUBGROUP_NV || !a || a != b || !cc || cc != d) continue;
        c.coopMatShapes.push_back({s.MSize, s.NSize, s.KSize, *a, *cc});
      }
    }
  }
  if (hasCoop2 && fcoopKhr.cooperativeMatrix && fcoop2.prefill()) {
    c.coopMat2 = true;
    c.coopMat2ReservedShared = coop2Props.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
    c.coopMat2MaxWorkgroup = coop2Props.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    c.coopMat2Bf16 = fbf16.coopMat() && multipliesBf16(instance, device);
  }
  if (sm.shaderSMCount) c.computeUnits = sm.shaderSMCount;
  else if (amd.shaderEngineCount)
    c.computeUnits = amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
  else if (c.kind == DeviceKind::Cpu) c.computeUnits = std::max(1u, std::thread::hardware_concurrency());
  else c.computeUnits = 16;  // unknown: a mid-sized GPU
  std::memcpy(c.uuid.data(), ids.deviceUUID, 16);
  c.driverVersion = base.driverVersion;
  c.driverName = fmt::format("{} {}", driver.driverName, driver.driverInfo);
  return c;
}

VulkanInstance::VulkanInstance(bool validation) : validation_(validation) {
  if (validation && !hasLayer(kValidationLayer)) {
    throw UnsupportedError(fmt::format(
        "FOUNDRY_VALIDATION=1 needs {}, which is not installed (Debian: apt-get install vulkan-validationlayers)",
        kValidationLayer));
  }
  std::uint32_t loaderVersion = VK_API_VERSION_1_0;
  if (auto fn = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
          vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"))) {
    fn(&loaderVersion);
  }
  if (loaderVersion < VK_API_VERSION_1_2) {
    throw UnsupportedError(fmt::format("the Vulkan loader offers {}.{}; Foundry needs Vulkan 1.2 or newer",
                                       VK_API_VERSION_MAJOR(loaderVersion), VK_API_VERSION_MINOR(loaderVersion)));
  }
  apiVersion_ = std::min<std::uint32_t>(loaderVersion, VK_API_VERSION_1_3);

  const auto exts = instanceExtensions(nullptr);
  std::vector<const char*> enabled;
  const bool debugUtils = contains(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                          (validation && contains(instanceExtensions(kValidationLayer), VK_EXT_DEBUG_UTILS_EXTENSION_NAME));
  if (debugUtils) enabled.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  const bool portability = contains(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
  if (portability) enabled.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
  std::vector<const char*> layers;
  if (validation) layers.push_back(kValidationLayer);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "foundry";
  app.pEngineName = "foundry";
  app.apiVersion = apiVersion_;

  VkDebugUtilsMessengerCreateInfoEXT messengerInfo{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messengerInfo.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messengerInfo.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messengerInfo.pfnUserCallback = &VulkanInstance::onMessage;
  messengerInfo.pUserData = this;

  // Synchronization validation checks the dispatcher's barriers.
  const VkValidationFeatureEnableEXT features[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT validationFeatures{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  validationFeatures.enabledValidationFeatureCount = 1;
  validationFeatures.pEnabledValidationFeatures = features;

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  info.enabledExtensionCount = static_cast<std::uint32_t>(enabled.size());
  info.ppEnabledExtensionNames = enabled.data();
  info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  if (portability) info.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  // The instance chain is [validation features ->] messenger info; the messenger info itself must end
  // the chain because it is passed alone to vkCreateDebugUtilsMessengerEXT below.
  const void* chainHead = debugUtils ? static_cast<const void*>(&messengerInfo) : nullptr;
  if (validation) {
    validationFeatures.pNext = chainHead;
    chainHead = &validationFeatures;
  }
  info.pNext = chainHead;
  creating_ = true;
  const VkResult r = vkCreateInstance(&info, nullptr, &instance_);
  creating_ = false;
  std::string loaderSaid;
  for (const auto& m : creationMessages_) loaderSaid += (loaderSaid.empty() ? "" : "; ") + m;
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) {
    throw DeviceError(fmt::format("no usable Vulkan driver ({}{}); install one, e.g. mesa-vulkan-drivers for the CPU "
                                  "driver lavapipe, and check VK_DRIVER_FILES / VK_ICD_FILENAMES",
                                  vkResultName(r), loaderSaid.empty() ? "" : ": the loader says: " + loaderSaid));
  }
  if (r != VK_SUCCESS && !loaderSaid.empty()) {
    throw DeviceError(fmt::format("vkCreateInstance failed with {}: the loader says: {}", vkResultName(r), loaderSaid));
  }
  FOUNDRY_VK(r);
  // The instance works: whatever the loader complained about (a stale driver manifest, say) is worth a
  // warning, not an error.
  for (const auto& m : creationMessages_) spdlog::warn("Vulkan loader: {}", m);
  creationMessages_.clear();
  if (debugUtils) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    const VkResult m = create ? create(instance_, &messengerInfo, nullptr, &messenger_) : VK_SUCCESS;
    if (m != VK_SUCCESS) {
      release();
      FOUNDRY_VK(m);
    }
  }

  try {
    enumerateDevices();
  } catch (...) {
    release();
    throw;
  }
}

VulkanInstance::VulkanInstance(VkInstance adopted, std::uint32_t apiVersion)
    : instance_(adopted), owned_(false), apiVersion_(std::min<std::uint32_t>(apiVersion, VK_API_VERSION_1_3)) {
  if (!adopted) throw UserError("ExternalVulkan.instance", "is VK_NULL_HANDLE; pass the application's VkInstance");
  if (apiVersion_ < VK_API_VERSION_1_2) {
    throw UnsupportedError(fmt::format("the application's instance was created for Vulkan {}.{}; Foundry needs 1.2 or "
                                       "newer (VkApplicationInfo.apiVersion)", VK_API_VERSION_MAJOR(apiVersion),
                                       VK_API_VERSION_MINOR(apiVersion)));
  }
  enumerateDevices();
}

void VulkanInstance::enumerateDevices() {
  std::uint32_t n = 0;
  vkEnumeratePhysicalDevices(instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> handles(n);
  vkEnumeratePhysicalDevices(instance_, &n, handles.data());
  for (std::uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties p{};
    vkGetPhysicalDeviceProperties(handles[i], &p);
    if (p.apiVersion < VK_API_VERSION_1_2) {
      spdlog::info("skipping Vulkan device '{}': it offers Vulkan {}.{}, Foundry needs 1.2", p.deviceName,
                   VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
      continue;
    }
    devices_.push_back({static_cast<std::uint32_t>(devices_.size()), handles[i], queryDeviceInfo(instance_, handles[i]),
                        p.apiVersion});
  }
  if (devices_.empty()) {
    throw DeviceError(
        "no Vulkan 1.2 device found; install a driver, e.g. mesa-vulkan-drivers for the CPU driver lavapipe, and check "
        "VK_DRIVER_FILES / VK_ICD_FILENAMES");
  }
}

VulkanInstance::~VulkanInstance() { release(); }

void VulkanInstance::release() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  // An adopted instance is the application's to destroy.
  if (instance_ && owned_) vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

std::string VulkanInstance::lastValidationError() const {
  std::lock_guard lock(mutex_);
  return lastError_;
}

VkBool32 VKAPI_CALL VulkanInstance::onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT types,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<VulkanInstance*>(user);
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  const bool validationType = (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) != 0;
  if (self->creating_ && !validationType) {
    // Only the thread creating the instance can be here: no other call can use it yet.
    std::string line = text;
    std::replace(line.begin(), line.end(), '\n', ' ');
    self->creationMessages_.push_back(std::move(line));
    return VK_FALSE;
  }
  if ((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) && !validationType) {
    noteDriverError(text);
    spdlog::debug("Vulkan driver: {}", text);
    return VK_FALSE;
  }
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ++self->errors_;
    {
      std::lock_guard lock(self->mutex_);
      self->lastError_ = text;
    }
    spdlog::error("Vulkan validation: {}", text);
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    if (validationType) ++self->warnings_;
    spdlog::warn("Vulkan: {}", text);
  }
  return VK_FALSE;
}

}  // namespace foundry
