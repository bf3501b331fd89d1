#include "foundry/vk/Device.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/CoopMat2.h"
#include "foundry/vk/External.h"

namespace foundry {

namespace {

const PhysicalDeviceEntry& selectEntry(const VulkanInstance& instance, const std::string& selector,
                                       const std::string& field) {
  const auto& devices = instance.devices();
  if (selector.empty()) {
    for (const auto& d : devices) {
      if (d.info.kind == DeviceKind::Discrete) return d;
    }
    return devices.front();
  }
  std::uint32_t index = 0;
  const auto [ptr, ec] = std::from_chars(selector.data(), selector.data() + selector.size(), index);
  const bool numeric = ec == std::errc() && ptr == selector.data() + selector.size();
  std::string available;
  for (const auto& d : devices) {
    available += fmt::format("{}{}: {}", available.empty() ? "" : ", ", d.index, d.info.name);
    if (numeric && d.index == index) return d;
    if (!numeric && d.info.name.find(selector) != std::string::npos) return d;
  }
  throw UserError(field, fmt::format("'{}' matches no Vulkan device; available: {}", printable(selector), available));
}

bool has(const std::vector<std::string>& v, const char* s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<VulkanInstance> instance, const std::string& selector,
                           const std::string& field)
    : instance_(std::move(instance)) {
  const PhysicalDeviceEntry& entry = selectEntry(*instance_, selector, field);
  info_ = entry.info;
  physical_ = entry.handle;
  index_ = entry.index;
  const auto exts = deviceExtensions(physical_);
  const std::uint32_t api = std::min(entry.apiVersion, instance_->apiVersion());

  std::uint32_t nFamilies = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, nullptr);
  std::vector<VkQueueFamilyProperties> families(nFamilies);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, families.data());
  bool found = false;
  for (std::uint32_t i = 0; i < nFamilies && !found; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queueFamily_ = i;
      found = true;
    }
  }
  if (!found) throw UnsupportedError(fmt::format("device '{}' has no compute queue", info_.name));
  readProperties();

  // Features: ask for what Foundry uses, where the device has it.
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures fsize{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcoop{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 supported{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  const bool sizeControlExt = api >= VK_API_VERSION_1_3 || has(exts, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool coopExt = has(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  const bool execExt = has(exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  void** next = &supported.pNext;
  auto chain = [&](auto& s) {
    *next = &s;
    next = &s.pNext;
  };
  chain(f11);
  chain(f12);
  if (sizeControlExt) chain(fsize);
  if (coopExt) chain(fcoop);
  if (execExt) chain(fexec);
  vkGetPhysicalDeviceFeatures2(physical_, &supported);

  VkPhysicalDeviceVulkan11Features e11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  e11.storageBuffer16BitAccess = f11.storageBuffer16BitAccess;
  VkPhysicalDeviceVulkan12Features e12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  e12.shaderFloat16 = f12.shaderFloat16;
  e12.shaderInt8 = f12.shaderInt8;
  e12.hostQueryReset = f12.hostQueryReset;
  if (!f12.timelineSemaphore) {
    throw UnsupportedError(fmt::format("device '{}' has no timeline semaphores (Vulkan 1.2 timelineSemaphore)", info_.name));
  }
  e12.timelineSemaphore = VK_TRUE;
  VkPhysicalDeviceSubgroupSizeControlFeatures esize{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  esize.subgroupSizeControl = fsize.subgroupSizeControl;
  esize.computeFullSubgroups = fsize.computeFullSubgroups;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV ecoop{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  ecoop.cooperativeMatrix = fcoop.cooperativeMatrix;
  VkPhysicalDeviceFeatures2 enabled{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enabled.features.shaderInt64 = supported.features.shaderInt64;
  next = &enabled.pNext;
  chain(e11);
  chain(e12);
  std::vector<const char*> extensions;
  if (sizeControlExt) {
    chain(esize);
    if (api < VK_API_VERSION_1_3) extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    fullSubgroups_ = fsize.computeFullSubgroups;
  }
  if (coopExt && fcoop.cooperativeMatrix) {
    chain(ecoop);
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR eexec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  if (execExt && fexec.pipelineExecutableInfo) {
    eexec.pipelineExecutableInfo = VK_TRUE;
    chain(eexec);
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    pipelineStatistics_ = true;
  }
  // The clocks and SM ids are for the prefill probe (FOUNDRY_FA_PREFILL_PROBE), enabled where the
  // device has them (DeviceInfo, from the instance's query).
  VkPhysicalDeviceShaderClockFeaturesKHR eclock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  if (info_.shaderClock) {
    eclock.shaderSubgroupClock = eclock.shaderDeviceClock = VK_TRUE;
    chain(eclock);
    extensions.push_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
  }
  // Workgroup-scope cooperative matrices (the coopmat2 prefill), where the device has all it needs.
  vkx::CoopMatKhrFeatures ecoopKhr;
  vkx::CoopMat2Features ecoop2;
  if (info_.coopMat2) {
    ecoopKhr.cooperativeMatrix = VK_TRUE;
    ecoop2.cooperativeMatrixWorkgroupScope = ecoop2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    ecoop2.cooperativeMatrixReductions = ecoop2.cooperativeMatrixConversions = VK_TRUE;
    ecoop2.cooperativeMatrixPerElementOperations = VK_TRUE;
    chain(ecoopKhr);
    chain(ecoop2);
    extensions.push_back(vkx::kCoopMatKhrExtension);
    extensions.push_back(vkx::kCoopMat2Extension);
  }
  vkx::Bf16Features ebf16;
  if (info_.coopMat2 && info_.coopMat2Bf16) {
    ebf16.shaderBFloat16Type = ebf16.shaderBFloat16CooperativeMatrix = VK_TRUE;
    chain(ebf16);
    extensions.push_back(vkx::kBf16Extension);
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures edot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (info_.int8Dot) {
    edot.shaderIntegerDotProduct = VK_TRUE;
    chain(edot);
    if (api < VK_API_VERSION_1_3) extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV esm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
  if (info_.smBuiltins) {
    esm.shaderSMBuiltins = VK_TRUE;
    chain(esm);
    extensions.push_back(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queueInfo{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queueInfo.queueFamilyIndex = queueFamily_;
  queueInfo.queueCount = 1;
  queueInfo.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &enabled;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queueInfo;
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  FOUNDRY_VK(vkCreateDevice(physical_, &info, nullptr, &device_));
  vkGetDeviceQueue(device_, queueFamily_, 0, &queue_);
  try {
    createOwnObjects();
  } catch (...) {
    vkDestroyDevice(device_, nullptr);
    throw;
  }
  spdlog::debug("Vulkan device {}: {} ({}), subgroup {}, shared {} B, coopmat shapes {}", index_, info_.name,
                info_.driverName, info_.subgroupSize, info_.maxSharedMemoryBytes, info_.coopMatShapes.size());
}

namespace {

/// What an application enabled, read from the pNext chain it gave vkCreateDevice.
struct EnabledFeatures {
  bool storage16 = false, float16 = false, timeline = false, sizeControl = false, fullSubgroups = false,
       coopMat = false, executableProperties = false, subgroupClock = false, deviceClock = false, smBuiltins = false,
       coopMatKhr = false, coopMat2 = false, int8Dot = false, bf16CoopMat = false;
};

EnabledFeatures readChain(const void* chain) {
  EnabledFeatures e;
  for (auto* s = static_cast<const VkBaseInStructure*>(chain); s; s = s->pNext) {
    switch (s->sType) {
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
        e.storage16 |= reinterpret_cast<const VkPhysicalDeviceVulkan11Features*>(s)->storageBuffer16BitAccess != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
        e.storage16 |= reinterpret_cast<const VkPhysicalDevice16BitStorageFeatures*>(s)->storageBuffer16BitAccess != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceVulkan12Features*>(s);
        e.float16 |= f->shaderFloat16 != 0;
        e.timeline |= f->timelineSemaphore != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
        e.timeline |= reinterpret_cast<const VkPhysicalDeviceTimelineSemaphoreFeatures*>(s)->timelineSemaphore != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceSubgroupSizeControlFeatures*>(s);
        e.sizeControl |= f->subgroupSizeControl != 0;
        e.fullSubgroups |= f->computeFullSubgroups != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceVulkan13Features*>(s);
        e.sizeControl |= f->subgroupSizeControl != 0;
        e.fullSubgroups |= f->computeFullSubgroups != 0;
        e.int8Dot |= f->shaderIntegerDotProduct != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES:
        e.int8Dot |= reinterpret_cast<const VkPhysicalDeviceShaderIntegerDotProductFeatures*>(s)->shaderIntegerDotProduct != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV:
        e.coopMat |= reinterpret_cast<const VkPhysicalDeviceCooperativeMatrixFeaturesNV*>(s)->cooperativeMatrix != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR:
        e.executableProperties |=
            reinterpret_cast<const VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*>(s)->pipelineExecutableInfo != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceShaderClockFeaturesKHR*>(s);
        e.subgroupClock |= f->shaderSubgroupClock != 0;
        e.deviceClock |= f->shaderDeviceClock != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV:
        e.smBuiltins |= reinterpret_cast<const VkPhysicalDeviceShaderSMBuiltinsFeaturesNV*>(s)->shaderSMBuiltins != 0;
        break;
      default:
        // Not in Debian 12's headers: compared as values (foundry/vk/CoopMat2.h).
        if (s->sType == vkx::kCoopMatKhrFeaturesType) {
          e.coopMatKhr |= reinterpret_cast<const vkx::CoopMatKhrFeatures*>(s)->cooperativeMatrix != 0;
        } else if (s->sType == vkx::kCoopMat2FeaturesType) {
          e.coopMat2 |= reinterpret_cast<const vkx::CoopMat2Features*>(s)->prefill();
        } else if (s->sType == vkx::kBf16FeaturesType) {
          e.bf16CoopMat |= reinterpret_cast<const vkx::Bf16Features*>(s)->coopMat();
        }
        break;
    }
  }
  return e;
}

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<VulkanInstance> instance, const ExternalVulkan& external)
    : instance_(std::move(instance)), owned_(false) {
  if (!external.device) throw UserError("ExternalVulkan.device", "is VK_NULL_HANDLE; pass the application's VkDevice");
  if (!external.queue) throw UserError("ExternalVulkan.queue", "is VK_NULL_HANDLE; pass a queue of queueFamily");
  const auto& devices = instance_->devices();
  const auto entry = std::find_if(devices.begin(), devices.end(),
                                  [&](const PhysicalDeviceEntry& d) { return d.handle == external.physicalDevice; });
  if (entry == devices.end()) {
    throw UserError("ExternalVulkan.physicalDevice", "is not a Vulkan 1.2 device of ExternalVulkan.instance");
  }
  info_ = entry->info;
  physical_ = entry->handle;
  index_ = entry->index;
  device_ = external.device;
  queue_ = external.queue;
  queueFamily_ = external.queueFamily;
  if (external.queueMutex) queueMutex_ = external.queueMutex;
  std::uint32_t nFamilies = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, nullptr);
  std::vector<VkQueueFamilyProperties> families(nFamilies);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, families.data());
  if (queueFamily_ >= nFamilies || !(families[queueFamily_].queueFlags & VK_QUEUE_COMPUTE_BIT)) {
    throw UserError("ExternalVulkan.queueFamily", fmt::format("{} is not a compute queue family of '{}' ({} families)",
                                                              queueFamily_, info_.name, nFamilies));
  }
  readProperties();

  // Foundry uses what the application enabled, nothing more.
  const EnabledFeatures e = readChain(external.enabledFeatures);
  const auto enabled = [&](const char* ext) {
    return std::find(external.enabledExtensions.begin(), external.enabledExtensions.end(), ext) !=
           external.enabledExtensions.end();
  };
  if (!e.timeline) {
    throw UnsupportedError("Foundry waits on a timeline semaphore: enable VkPhysicalDeviceVulkan12Features::"
                           "timelineSemaphore when creating the device (ExternalVulkan.enabledFeatures)");
  }
  info_.storage16Bit = info_.storage16Bit && e.storage16;
  info_.fp16Arithmetic = info_.fp16Arithmetic && e.float16;
  const bool sizeControlExt = external.apiVersion >= VK_API_VERSION_1_3 || enabled(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (!(info_.subgroupSizeControl && e.sizeControl && sizeControlExt)) {
    info_.subgroupSizeControl = false;
    info_.minSubgroupSize = info_.maxSubgroupSize = info_.subgroupSize;
  }
  fullSubgroups_ = e.fullSubgroups && sizeControlExt;
  if (!(e.coopMat && enabled(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))) info_.coopMatShapes.clear();
  info_.shaderClock = info_.shaderClock && e.subgroupClock && e.deviceClock && enabled(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
  info_.smBuiltins = info_.smBuiltins && e.smBuiltins && enabled(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  info_.int8Dot = info_.int8Dot && e.int8Dot &&
                  (external.apiVersion >= VK_API_VERSION_1_3 || enabled(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME));
  info_.coopMat2 = info_.coopMat2 && e.coopMatKhr && e.coopMat2 && enabled(vkx::kCoopMatKhrExtension) &&
                   enabled(vkx::kCoopMat2Extension);
  info_.coopMat2Bf16 = info_.coopMat2 && info_.coopMat2Bf16 && e.bf16CoopMat && enabled(vkx::kBf16Extension);
  pipelineStatistics_ = e.executableProperties && enabled(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  createOwnObjects();
  spdlog::debug("adopted Vulkan device {}: {}, queue family {}", index_, info_.name, queueFamily_);
}

void VulkanDevice::readProperties() {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical_, &props);
  timestampPeriod_ = props.limits.timestampPeriod;
  storageAlignment_ = std::max<VkDeviceSize>(4, props.limits.minStorageBufferOffsetAlignment);
  for (int i = 0; i < 3; ++i) maxGroups_[i] = props.limits.maxComputeWorkGroupCount[i];
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
  std::uint32_t nFamilies = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, nullptr);
  std::vector<VkQueueFamilyProperties> families(nFamilies);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nFamilies, families.data());
  if (queueFamily_ < nFamilies) timestampBits_ = families[queueFamily_].timestampValidBits;
}

void VulkanDevice::createOwnObjects() {
  VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  poolInfo.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT | VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  poolInfo.queueFamilyIndex = queueFamily_;
  oneShotPool_ = createOwned<VkCommandPool>(device_, vkCreateCommandPool, poolInfo, vkDestroyCommandPool,
                                            "vkCreateCommandPool");
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo semaphoreInfo{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  semaphoreInfo.pNext = &type;
  timeline_ = createOwned<VkSemaphore>(device_, vkCreateSemaphore, semaphoreInfo, vkDestroySemaphore,
                                       "vkCreateSemaphore");
}

VulkanDevice::~VulkanDevice() {
  if (!device_) return;
  if (owned_) {
    vkDeviceWaitIdle(device_);
  } else {
    // The application's device may be busy with its own work: wait for Foundry's only.
    try {
      wait(submitted_);
    } catch (const std::exception& e) {
      spdlog::warn("waiting for Foundry's work on the application's device failed: {}", e.what());
    }
  }
  // Foundry's own objects go before the device (members would go after this body).
  timeline_.reset();
  oneShotPool_.reset();
  if (owned_) vkDestroyDevice(device_, nullptr);
}

std::uint32_t VulkanDevice::memoryType(std::uint32_t typeBits, VkMemoryPropertyFlags required,
                                       VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoid) const {
  int best = -1;
  int bestScore = -1;
  for (std::uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(typeBits & (1u << i))) continue;
    const auto flags = memory_.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    const int score = ((flags & preferred) == preferred ? 2 : 0) + ((flags & avoid) == 0 ? 1 : 0);
    if (score > bestScore) {
      best = static_cast<int>(i);
      bestScore = score;
    }
  }
  if (best < 0) {
    throw DeviceError(fmt::format("device '{}' has no memory type with flags 0x{:x} for type bits 0x{:x}", info_.name,
                                  required, typeBits));
  }
  return static_cast<std::uint32_t>(best);
}

VkMemoryPropertyFlags VulkanDevice::memoryFlags(std::uint32_t type) const {
  return memory_.memoryTypes[type].propertyFlags;
}

void VulkanDevice::submitAndWait(const std::function<void(VkCommandBuffer)>& record) {
  std::lock_guard lock(oneShotMutex_);
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = oneShotPool_.get();
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  FOUNDRY_VK(vkAllocateCommandBuffers(device_, &alloc, &cmd));
  struct Free {
    VkDevice d;
    VkCommandPool p;
    VkCommandBuffer c;
    ~Free() { vkFreeCommandBuffers(d, p, 1, &c); }
  } guard{device_, oneShotPool_.get(), cmd};
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FOUNDRY_VK(vkBeginCommandBuffer(cmd, &begin));
  record(cmd);
  FOUNDRY_VK(vkEndCommandBuffer(cmd));
  submitAndWait(cmd);
}

void VulkanDevice::submitAndWait(VkCommandBuffer commands) { wait(submit(commands)); }

std::uint64_t VulkanDevice::submit(VkCommandBuffer commands) {
  std::lock_guard lock(*queueMutex_);
  const std::uint64_t value = submitted_ + 1;
  VkTimelineSemaphoreSubmitInfo timeline{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline.signalSemaphoreValueCount = 1;
  timeline.pSignalSemaphoreValues = &value;
  const VkSemaphore semaphore = timeline_.get();
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.pNext = &timeline;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands;
  info.signalSemaphoreCount = 1;
  info.pSignalSemaphores = &semaphore;
  FOUNDRY_VK(vkQueueSubmit(queue_, 1, &info, VK_NULL_HANDLE));
  submitted_ = value;
  return value;
}

std::uint64_t VulkanDevice::nextId() {
  static std::atomic<std::uint64_t> next{0};
  return ++next;
}

void VulkanDevice::requireSubmitted(std::uint64_t value, std::uint64_t device) const {
  if (device != 0 && device != id_) {
    throw UserError("submission", fmt::format("{} was submitted on another Runtime's device, not on device '{}': a "
                                              "Submission is waited for on the Runtime or dispatcher that returned it",
                                              value, info_.name));
  }
  std::lock_guard lock(*queueMutex_);
  if (value > submitted_) {
    throw UserError("submission", fmt::format("{} was never submitted on device '{}', whose last submission is {}; a "
                                              "Submission is waited for on the Runtime or dispatcher that returned it",
                                              value, info_.name, submitted_));
  }
}

void VulkanDevice::wait(std::uint64_t value) {
  if (value == 0) return;
  const VkSemaphore semaphore = timeline_.get();
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &semaphore;
  info.pValues = &value;
  FOUNDRY_VK(vkWaitSemaphores(device_, &info, UINT64_MAX));
}

bool VulkanDevice::reached(std::uint64_t value) const {
  std::uint64_t now = 0;
  FOUNDRY_VK(vkGetSemaphoreCounterValue(device_, timeline_.get(), &now));
  return now >= value;
}

void VulkanDevice::injectFailure(std::string call, VkResult result) {
  std::lock_guard lock(faultMutex_);
  faultCall_ = std::move(call);
  faultResult_ = result;
}

VkResult VulkanDevice::injected(const char* call) {
  std::lock_guard lock(faultMutex_);
  if (faultCall_.empty() || faultCall_ != call) return VK_SUCCESS;
  faultCall_.clear();
  return faultResult_;
}

void VulkanDevice::noteAllocation(std::uint64_t bytes) {
  std::lock_guard lock(statsMutex_);
  stats_.liveBytes += bytes;
  stats_.peakBytes = std::max(stats_.peakBytes, stats_.liveBytes);
  ++stats_.allocations;
}

void VulkanDevice::noteFree(std::uint64_t bytes) {
  std::lock_guard lock(statsMutex_);
  stats_.liveBytes -= bytes;
}

MemoryStats VulkanDevice::memoryStats() const {
  std::lock_guard lock(statsMutex_);
  return stats_;
}

void VulkanDevice::resetPeak() {
  std::lock_guard lock(statsMutex_);
  stats_.peakBytes = stats_.liveBytes;
}

}  // namespace foundry
