#include "foundry/DeviceInfo.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"

namespace foundry {

std::string_view vendorName(Vendor vendor) {
  switch (vendor) {
    case Vendor::Nvidia: return "NVIDIA";
    case Vendor::Amd: return "AMD";
    case Vendor::Intel: return "Intel";
    case Vendor::Apple: return "Apple";
    case Vendor::Arm: return "ARM";
    case Vendor::Qualcomm: return "Qualcomm";
    case Vendor::Mesa: return "Mesa";
    case Vendor::Other: return "other";
  }
  return "other";
}

std::string_view deviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Discrete: return "discrete";
    case DeviceKind::Integrated: return "integrated";
    case DeviceKind::Virtual: return "virtual";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Other: return "other";
  }
  return "other";
}

bool DeviceInfo::hasCoopMat(const CoopMatShape& shape) const {
  const auto shapes = coopMatShapes();
  return std::find(shapes.begin(), shapes.end(), shape) != shapes.end();
}

DeviceCaps DeviceInfo::snapshot() const {
  DeviceCaps c;
  c.name = name();
  c.vendor = vendor();
  c.kind = kind();
  c.subgroupSize = c.minSubgroupSize = c.maxSubgroupSize = subgroupSize();
  c.subgroupArithmetic = subgroupArithmetic();
  c.subgroupShuffle = subgroupShuffle();
  c.maxSharedMemoryBytes = maxSharedMemoryBytes();
  c.maxStorageBufferRange = maxStorageBufferRange();
  c.maxAllocationBytes = maxAllocationBytes();
  c.deviceMemoryBytes = deviceMemoryBytes();
  c.maxWorkgroupInvocations = maxWorkgroupInvocations();
  c.maxPushConstantBytes = maxPushConstantBytes();
  c.fp16Arithmetic = fp16Arithmetic();
  c.storage16Bit = storage16Bit();
  c.coopMatShapes = coopMatShapes();
  c.coopMatLayout = coopMatLayout();
  c.computeUnits = computeUnits();
  c.uuid = uuid();
  c.driverVersion = driverVersion();
  return c;
}

namespace {

std::vector<CoopMatShape> nvidiaCoopMatShapes() {
  return {{16, 16, 16, DType::F16, DType::F32}, {16, 16, 16, DType::F16, DType::F16},
          {16, 8, 16, DType::F16, DType::F32},  {16, 8, 16, DType::F16, DType::F16},
          {16, 8, 8, DType::F16, DType::F32},   {16, 8, 8, DType::F16, DType::F16}};
}

}  // namespace

CoopMatLayout nvidiaQuadLayout() {
  // Elements 0-3 cover columns 0-7, 4-7 columns 8-15; pairs of elements alternate rows r and r + 8.
  return {{0, 0, 8, 8, 0, 0, 8, 8}, {0, 1, 0, 1, 8, 9, 8, 9}};
}

namespace {

DeviceCaps hopper(const char* name, std::uint64_t memory) {
  DeviceCaps c;
  c.name = name;
  c.vendor = Vendor::Nvidia;
  c.kind = DeviceKind::Discrete;
  c.subgroupSize = c.minSubgroupSize = c.maxSubgroupSize = 32;
  c.maxSharedMemoryBytes = 49152;
  c.maxStorageBufferRange = 4294967295ull;
  c.maxAllocationBytes = memory;
  c.deviceMemoryBytes = memory;
  c.maxPushConstantBytes = 256;
  c.coopMatShapes = nvidiaCoopMatShapes();
  c.coopMatLayout = nvidiaQuadLayout();
  c.computeUnits = 132;
  c.driverName = "NVIDIA (preset)";
  return c;
}

DeviceCaps preset(const std::string& name) {
  if (name == "h200") return hopper("NVIDIA H200 (preset)", 141ull << 30);
  if (name == "h100") return hopper("NVIDIA H100 (preset)", 80ull << 30);
  if (name == "lavapipe") {
    DeviceCaps c;
    c.name = "llvmpipe (preset)";
    c.vendor = Vendor::Mesa;
    c.kind = DeviceKind::Cpu;
    c.subgroupSize = c.minSubgroupSize = c.maxSubgroupSize = 8;
    c.maxSharedMemoryBytes = 32768;
    c.maxStorageBufferRange = 134217728;
    c.maxAllocationBytes = 1ull << 31;
    c.deviceMemoryBytes = 8ull << 30;
    c.maxPushConstantBytes = 128;
    c.computeUnits = 2;
    c.driverName = "llvmpipe (preset)";
    return c;
  }
  if (name == "small") {  // a small integrated GPU: little shared memory, no fp16 arithmetic
    DeviceCaps c;
    c.name = "small GPU (preset)";
    c.vendor = Vendor::Other;
    c.kind = DeviceKind::Integrated;
    c.subgroupSize = c.minSubgroupSize = c.maxSubgroupSize = 16;
    c.maxSharedMemoryBytes = 16384;
    c.maxStorageBufferRange = 134217728;
    c.maxAllocationBytes = 1ull << 30;
    c.deviceMemoryBytes = 2ull << 30;
    c.maxWorkgroupInvocations = 256;
    c.fp16Arithmetic = false;
    c.computeUnits = 8;
    return c;
  }
  if (name == "amd-rdna3") {
    DeviceCaps c;
    c.name = "AMD RDNA3 (preset)";
    c.vendor = Vendor::Amd;
    c.kind = DeviceKind::Discrete;
    c.subgroupSize = 64;
    c.minSubgroupSize = 32;
    c.maxSubgroupSize = 64;
    c.subgroupSizeControl = true;
    c.maxSharedMemoryBytes = 65536;
    c.maxStorageBufferRange = 4294967295ull;
    c.maxAllocationBytes = 24ull << 30;
    c.deviceMemoryBytes = 24ull << 30;
    c.maxPushConstantBytes = 256;
    c.computeUnits = 96;
    return c;
  }
  throw UserError("device preset", fmt::format("unknown preset '{}'; accepted: {}", name,
                                               fmt::join(devicePresetNames(), ", ")));
}

std::uint64_t parseNumber(const std::string& key, const std::string& value) {
  std::uint64_t out = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || ptr != value.data() + value.size()) {
    throw UserError("device preset",
                    fmt::format("override '{}' needs a non-negative integer, got '{}'", key, value));
  }
  return out;
}

}  // namespace

std::vector<std::string> devicePresetNames() { return {"h200", "h100", "lavapipe", "small", "amd-rdna3"}; }

DeviceCaps parseDevicePreset(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  DeviceCaps caps = preset(parts.front());
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t eq = parts[i].find('=');
    if (eq == std::string::npos) {
      throw UserError("device preset", fmt::format("override '{}' must look like key=value", parts[i]));
    }
    const std::string key = parts[i].substr(0, eq);
    const std::string value = parts[i].substr(eq + 1);
    const std::uint64_t n = parseNumber(key, value);
    if (key == "subgroup") {
      caps.subgroupSize = caps.minSubgroupSize = caps.maxSubgroupSize = static_cast<std::uint32_t>(n);
    } else if (key == "shared") {
      caps.maxSharedMemoryBytes = static_cast<std::uint32_t>(n);
    } else if (key == "coopmat") {
      if (n == 0) {
        caps.coopMatShapes.clear();
        caps.coopMatLayout = {};
      } else if (caps.coopMatShapes.empty()) {
        caps.coopMatShapes = nvidiaCoopMatShapes();
        caps.coopMatLayout = nvidiaQuadLayout();
      }
    } else if (key == "quad") {
      caps.coopMatLayout = n != 0 && !caps.coopMatShapes.empty() ? nvidiaQuadLayout() : CoopMatLayout{};
    } else if (key == "cus") {
      caps.computeUnits = static_cast<std::uint32_t>(n);
    } else if (key == "fp16") {
      caps.fp16Arithmetic = n != 0;
    } else if (key == "storage") {
      caps.maxStorageBufferRange = n;
    } else {
      throw UserError("device preset",
                      fmt::format("unknown override '{}'; accepted: subgroup, shared, coopmat, quad, cus, fp16, storage", key));
    }
  }
  if (caps.subgroupSize == 0 || (caps.subgroupSize & (caps.subgroupSize - 1)) != 0) {
    throw UserError("device preset", fmt::format("subgroup={} must be a power of two", caps.subgroupSize));
  }
  return caps;
}

std::unique_ptr<DeviceInfo> makePresetDevice(const std::string& text) {
  return std::make_unique<StaticDeviceInfo>(parseDevicePreset(text));
}

}  // namespace foundry
