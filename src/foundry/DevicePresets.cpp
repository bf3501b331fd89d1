#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry {

namespace {

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kMaxRange = 4294967295ull;

DeviceInfo nvidia(const char* name, DeviceFamily family, std::uint64_t memory, std::uint32_t computeUnits) {
  return {.name = name, .vendor = Vendor::Nvidia, .kind = DeviceKind::Discrete, .family = family,
          .subgroupSize = 32, .minSubgroupSize = 32, .maxSubgroupSize = 32, .maxSharedMemoryBytes = 49152,
          .maxStorageBufferRange = kMaxRange, .maxAllocationBytes = memory, .deviceMemoryBytes = memory,
          .maxPushConstantBytes = 256, .shaderClock = true, .smBuiltins = true, .int8Dot = true, .coopMatShapes = nvidiaCoopMatShapes(), .coopMatLayout = nvidiaQuadLayout(),
          .coopMatLayout8 = nvidiaQuadLayout8(), .coopMatLayoutF16 = nvidiaQuadLayoutF16(),
          .computeUnits = computeUnits, .driverName = "NVIDIA (preset)"};
}

DeviceInfo lavapipe() {
  return {.name = "llvmpipe (preset)", .vendor = Vendor::Mesa, .kind = DeviceKind::Cpu,
          .family = DeviceFamily::Lavapipe, .subgroupSize = 8, .minSubgroupSize = 8, .maxSubgroupSize = 8,
          .maxSharedMemoryBytes = 32768, .maxStorageBufferRange = 134217728, .maxAllocationBytes = 2 * kGiB,
          .deviceMemoryBytes = 8 * kGiB, .maxWorkgroupSize = {1024, 1024, 1024}, .maxPushConstantBytes = 128,
          .int8Dot = true, .computeUnits = 2,
          .loopLimit = kLlvmpipeLoopLimit, .driverName = "llvmpipe (preset)"};
}

/// A small integrated GPU: little shared memory, no fp16 arithmetic.
DeviceInfo small() {
  return {.name = "small GPU (preset)", .vendor = Vendor::Other, .kind = DeviceKind::Integrated,
          .subgroupSize = 16, .minSubgroupSize = 16, .maxSubgroupSize = 16, .maxSharedMemoryBytes = 16384,
          .maxStorageBufferRange = 134217728, .maxAllocationBytes = kGiB, .deviceMemoryBytes = 2 * kGiB,
          .maxWorkgroupInvocations = 256, .maxWorkgroupSize = {256, 256, 64}, .fp16Arithmetic = false, .computeUnits = 8};
}

/// RDNA3 runs wave64 or wave32; `subgroup` is what a pipeline gets without asking.
DeviceInfo rdna3(const char* name, std::uint32_t subgroup) {
  return {.name = name, .vendor = Vendor::Amd, .kind = DeviceKind::Discrete, .family = DeviceFamily::Rdna3,
          .subgroupSize = subgroup, .minSubgroupSize = 32, .maxSubgroupSize = 64, .subgroupSizeControl = true,
          .maxSharedMemoryBytes = 65536, .maxStorageBufferRange = kMaxRange, .maxAllocationBytes = 24 * kGiB,
          .deviceMemoryBytes = 24 * kGiB, .maxWorkgroupSize = {1024, 1024, 1024}, .maxPushConstantBytes = 256,
          .computeUnits = 96};
}

/// An Arc A770. GL_NV_cooperative_matrix is NVIDIA's only: no shapes.
DeviceInfo intelArc() {
  return {.name = "Intel Arc (preset)", .vendor = Vendor::Intel, .kind = DeviceKind::Discrete,
          .family = DeviceFamily::Arc, .subgroupSize = 32, .minSubgroupSize = 8, .maxSubgroupSize = 32,
          .subgroupSizeControl = true, .maxSharedMemoryBytes = 65536, .maxStorageBufferRange = kMaxRange,
          .maxAllocationBytes = 4 * kGiB, .deviceMemoryBytes = 16 * kGiB, .maxWorkgroupSize = {1024, 1024, 1024},
          .maxPushConstantBytes = 256,
          .computeUnits = 32, .driverName = "Intel (preset)"};
}

/// An Apple GPU through MoltenVK.
DeviceInfo appleM() {
  return {.name = "Apple M (preset)", .vendor = Vendor::Apple, .kind = DeviceKind::Integrated,
          .family = DeviceFamily::Apple, .subgroupSize = 32, .minSubgroupSize = 32, .maxSubgroupSize = 32,
          .maxSharedMemoryBytes = 32768, .maxStorageBufferRange = kMaxRange, .maxAllocationBytes = 16 * kGiB,
          .deviceMemoryBytes = 32 * kGiB, .maxWorkgroupInvocations = 1024, .maxWorkgroupSize = {1024, 1024, 1024},
          .maxPushConstantBytes = 4096,
          .computeUnits = 38, .driverName = "MoltenVK (preset)"};
}

struct Preset {
  const char* name;
  DeviceInfo (*make)();
};

constexpr Preset kPresets[] = {
    {"h200", [] { return nvidia("NVIDIA H200 (preset)", DeviceFamily::Hopper, 141 * kGiB, 132); }},
    {"h100", [] { return nvidia("NVIDIA H100 (preset)", DeviceFamily::Hopper, 80 * kGiB, 132); }},
    {"ada", [] { return nvidia("NVIDIA Ada (preset)", DeviceFamily::Ada, 24 * kGiB, 128); }},  // an RTX 4090
    {"lavapipe", lavapipe},
    {"small", small},
    {"amd-rdna3", [] { return rdna3("AMD RDNA3 (preset)", 64); }},
    {"amd-rdna3-wave32", [] { return rdna3("AMD RDNA3 wave32 (preset)", 32); }},
    {"intel-arc", intelArc},
    {"apple-m", appleM},
};

}  // namespace

std::vector<std::string> devicePresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

DeviceInfo devicePreset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return p.make();
  }
  throw UserError("device preset", fmt::format("unknown preset '{}'; accepted: {}, or custom followed by key=value",
                                               printable(name), fmt::join(devicePresetNames(), ", ")));
}

}  // namespace foundry
