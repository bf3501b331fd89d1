#include "foundry/vk/PipelineCache.h"

#include <cstring>
#include <span>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/Hash.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/Device.h"

namespace foundry {

Pipeline::Pipeline(VulkanDevice& device, VkPipelineCache cache, const KernelSource& source, const Spirv& spirv)
    : device_(device.shared_from_this()), name_(source.name) {
  const VkDevice d = device.handle();
  const auto& caps = device.info();
  if (source.layout.subgroupSize < caps.minSubgroupSize || source.layout.subgroupSize > caps.maxSubgroupSize) {
    throw UnsupportedError(fmt::format("kernel {} was generated for subgroup size {} but device '{}' runs {}..{}",
                                       source.name, source.layout.subgroupSize, caps.name, caps.minSubgroupSize,
                                       caps.maxSubgroupSize));
  }
  if (source.usesCoopMat && !device.coopMatEnabled()) {
    throw UnsupportedError(fmt::format("kernel {} uses GL_NV_cooperative_matrix, which device '{}' does not offer",
                                       source.name, caps.name));
  }
  if (source.usesCoopMat2 && !caps.coopMat2) {
    throw UnsupportedError(fmt::format("kernel {} uses GL_NV_cooperative_matrix2 (workgroup-scope matrices), which device "
                                       "'{}' or this build's compiler does not offer (FOUNDRY_GLSLC)",
                                       source.name, caps.name));
  }
  if (source.usesBf16 && !caps.coopMat2Bf16) {
    throw UnsupportedError(fmt::format("kernel {} multiplies bf16 cooperative matrices (VK_KHR_shader_bfloat16), which "
                                       "device '{}' or the glslc (FOUNDRY_GLSLC) does not offer", source.name, caps.name));
  }
  // Each handle is owned as soon as it exists: a failure further down destroys what came before.
  VkShaderModuleCreateInfo moduleInfo{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  moduleInfo.codeSize = spirv.size() * 4;
  moduleInfo.pCode = spirv.data();
  module_ = createOwned<VkShaderModule>(d, vkCreateShaderModule, moduleInfo, vkDestroyShaderModule,
                                        "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (const auto& b : source.layout.bindings) {
    bindings.push_back({b.binding, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  }
  VkDescriptorSetLayoutCreateInfo setInfo{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  setInfo.bindingCount = static_cast<std::uint32_t>(bindings.size());
  setInfo.pBindings = bindings.data();
  setLayout_ = createOwned<VkDescriptorSetLayout>(d, vkCreateDescriptorSetLayout, setInfo,
                                                  vkDestroyDescriptorSetLayout, "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, source.layout.pushBytes};
  const VkDescriptorSetLayout setLayout = setLayout_.get();
  VkPipelineLayoutCreateInfo layoutInfo{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layoutInfo.setLayoutCount = 1;
  layoutInfo.pSetLayouts = &setLayout;
  layoutInfo.pushConstantRangeCount = source.layout.pushBytes ? 1 : 0;
  layoutInfo.pPushConstantRanges = &range;
  layout_ = createOwned<VkPipelineLayout>(d, vkCreatePipelineLayout, layoutInfo, vkDestroyPipelineLayout,
                                          "vkCreatePipelineLayout");

  // Kernels are generated for one subgroup size; where the device could pick another, pin it.
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  required.requiredSubgroupSize = source.layout.subgroupSize;
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module_.get();
  info.stage.pName = "main";
  if (caps.subgroupSizeControl && caps.minSubgroupSize != caps.maxSubgroupSize) info.stage.pNext = &required;
  if (device.fullSubgroups()) info.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  info.layout = layout_.get();
  if (device.pipelineStatistics()) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline pipeline = VK_NULL_HANDLE;
  FOUNDRY_VK(vkCreateComputePipelines(d, cache, 1, &info, nullptr, &pipeline));
  pipeline_ = Owned<VkDevice, VkPipeline>(d, pipeline, vkDestroyPipeline);
  if (device.pipelineStatistics()) readStatistics();
}

Pipeline::~Pipeline() = default;

void Pipeline::readStatistics() {
  auto get = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device_->handle(), "vkGetPipelineExecutableStatisticsKHR"));
  if (!get) return;
  VkPipelineExecutableInfoKHR exec{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
  exec.pipeline = pipeline_.get();
  exec.executableIndex = 0;
  std::uint32_t n = 0;
  if (get(device_->handle(), &exec, &n, nullptr) != VK_SUCCESS) return;
  std::vector<VkPipelineExecutableStatisticKHR> stats(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
  if (get(device_->handle(), &exec, &n, stats.data()) != VK_SUCCESS) return;
  for (const auto& s : stats) {
    std::string value;
    switch (s.format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: value = s.value.b32 ? "true" : "false"; break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: value = std::to_string(s.value.i64); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: value = std::to_string(s.value.u64); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: value = fmt::format("{:g}", s.value.f64); break;
      default: continue;
    }
    statistics_.emplace_back(s.name, value);
  }
}

namespace {

// Drivers are entitled to trust a pipeline cache blob, so Foundry only hands over one whose header
// (VkPipelineCacheHeaderVersionOne) names this very device and driver.
bool headerMatches(std::span<const std::byte> data, VkPhysicalDevice physical) {
  VkPipelineCacheHeaderVersionOne header{};
  if (data.size() < sizeof(header)) return false;
  std::memcpy(&header, data.data(), sizeof(header));
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(physical, &p);
  return header.headerSize >= sizeof(header) && header.headerSize <= data.size() &&
         header.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && header.vendorID == p.vendorID &&
         header.deviceID == p.deviceID && std::memcmp(header.pipelineCacheUUID, p.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

}  // namespace

PipelineCache::PipelineCache(VulkanDevice& device, std::shared_ptr<KernelCache> kernels,
                             std::shared_ptr<const DiskCache> disk)
    : device_(device.shared_from_this()), kernels_(std::move(kernels)), disk_(std::move(disk)) {
  std::optional<std::vector<std::byte>> initial;
  if (disk_) initial = disk_->load("pipeline", diskKey());
  if (initial && !headerMatches(*initial, device.physical())) {
    disk_->evict("pipeline", diskKey(), fmt::format("holds a pipeline cache whose header does not match device '{}'",
                                                    device.info().name));
    initial.reset();
  }
  VkPipelineCacheCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  if (initial) {
    info.initialDataSize = initial->size();
    info.pInitialData = initial->data();
  }
  VkPipelineCache cache = VK_NULL_HANDLE;
  const VkResult r = vkCreatePipelineCache(device.handle(), &info, nullptr, &cache);
  if (r != VK_SUCCESS && initial) {
    disk_->evict("pipeline", diskKey(), fmt::format("holds a pipeline cache the driver refuses ({})", vkResultName(r)));
    info.initialDataSize = 0;
    info.pInitialData = nullptr;
    FOUNDRY_VK(vkCreatePipelineCache(device.handle(), &info, nullptr, &cache));
  } else {
    FOUNDRY_VK(r);
  }
  cache_ = Owned<VkDevice, VkPipelineCache>(device.handle(), cache, vkDestroyPipelineCache);
  seeded_ = initial.has_value();
}

PipelineCache::~PipelineCache() {
  try {
    save();
  } catch (const std::exception& e) {
    spdlog::warn("saving the pipeline cache failed: {}", e.what());
  }
}

std::string PipelineCache::diskKey() const {
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(device_->physical(), &p);
  Hasher h;
  h.field(std::string_view(reinterpret_cast<const char*>(p.pipelineCacheUUID), VK_UUID_SIZE));
  h.field(fmt::format("{:x}:{:x}:{:x}", p.vendorID, p.deviceID, p.driverVersion));
  const auto uuid = device_->info().uuid;
  h.field(std::string_view(reinterpret_cast<const char*>(uuid.data()), uuid.size()));
  return h.hex();
}

// A driver may refuse what an earlier run cached even though it verifies: SPIR-V it cannot translate
// (VK_ERROR_UNKNOWN at a source line otherwise, in every later run), or a pipeline cache it cannot
// use. Both are evicted and the kernel is built once more from source, with no pipeline cache; a
// second failure is the kernel's own and is thrown.
std::shared_ptr<const Pipeline> PipelineCache::rebuild(const KernelSource& source, const std::string& failure) {
  const std::string why = fmt::format("was in use when creating kernel {} failed ({})", source.name, failure);
  const bool spirvFromDisk = kernels_->fromDisk(source);
  if (spirvFromDisk) disk_->evict("spirv", kernels_->keyFor(source), why);
  if (seeded_.exchange(false)) {
    stale_ = true;
    if (spirvFromDisk) disk_->erase("pipeline", diskKey());  // one warning is enough
    else disk_->evict("pipeline", diskKey(), why);
  }
  return std::make_shared<const Pipeline>(*device_, VK_NULL_HANDLE, source, *kernels_->rebuild(source));
}

void PipelineCache::save() {
  if (!disk_ || !disk_->enabled() || stale_) return;
  std::lock_guard lock(mutex_);
  std::size_t size = 0;
  FOUNDRY_VK(vkGetPipelineCacheData(device_->handle(), cache_.get(), &size, nullptr));
  std::vector<std::byte> data(size);
  FOUNDRY_VK(vkGetPipelineCacheData(device_->handle(), cache_.get(), &size, data.data()));
  data.resize(size);
  if (headerMatches(data, device_->physical())) disk_->store("pipeline", diskKey(), data);
}

std::vector<std::pair<std::string, std::string>> PipelineCache::statistics(const std::string& kernelName) {
  std::lock_guard lock(mutex_);
  for (const auto& [_, p] : pipelines_) {
    if (p->name() == kernelName) return p->statistics();
  }
  return {};
}

std::shared_ptr<const Pipeline> PipelineCache::get(const KernelSource& source) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto it = pipelines_.find(source.hash); it != pipelines_.end()) return it->second;
    if (!creating_.count(source.hash)) break;
    built_.wait(lock);  // another thread creates it; if that fails, this one tries in turn
  }
  creating_.insert(source.hash);
  lock.unlock();
  std::shared_ptr<const Pipeline> pipeline;
  try {
    pipeline = create(source);
  } catch (...) {
    lock.lock();
    creating_.erase(source.hash);
    built_.notify_all();
    throw;
  }
  lock.lock();
  creating_.erase(source.hash);
  auto& slot = pipelines_.emplace(source.hash, std::move(pipeline)).first->second;
  built_.notify_all();
  return slot;
}

std::shared_ptr<const Pipeline> PipelineCache::create(const KernelSource& source) {
  const auto spirv = kernels_->spirv(source);  // a compile error is the kernel's own: not retried
  std::shared_ptr<const Pipeline> pipeline;
  try {
    pipeline = std::make_shared<const Pipeline>(*device_, cache_.get(), source, *spirv);
  } catch (const DeviceError& e) {
    if (!kernels_->fromDisk(source) && !seeded_) throw;
    pipeline = rebuild(source, e.what());
  }
  ++created_;
  return pipeline;
}

}  // namespace foundry
