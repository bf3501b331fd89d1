#pragma once
// What the planning code may know about a device. Implemented by the Vulkan device and by presets
// ("h200", "lavapipe", ...) so tests and `--pretend` can plan for a device that is not there.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

enum class Vendor { Nvidia, Amd, Intel, Apple, Arm, Qualcomm, Mesa, Other };
enum class DeviceKind { Discrete, Integrated, Virtual, Cpu, Other };

std::string_view vendorName(Vendor vendor);
std::string_view deviceKindName(DeviceKind kind);

/// One cooperative-matrix shape the device multiplies natively: A is MxK, B is KxN, C is MxN.
struct CoopMatShape {
  std::uint32_t m = 0, n = 0, k = 0;
  DType input = DType::F16;
  DType accumulator = DType::F32;
  bool operator==(const CoopMatShape&) const = default;
};

/// Which (row, column) of a 16x16 f32 cooperative-matrix accumulator each invocation's element e
/// holds, when it follows the "quad" pattern: row = rowOf[e] + lane / 4, column = colOf[e] +
/// 2 * (lane % 4), so the four lanes of a quad share rows. Empty when unknown or different: kernels
/// then take the portable route. Found on a real device by a probe kernel (Runtime).
struct CoopMatLayout {
  std::vector<std::uint8_t> rowOf;
  std::vector<std::uint8_t> colOf;
  bool quad() const { return !rowOf.empty() && rowOf.size() == colOf.size(); }
  bool operator==(const CoopMatLayout&) const = default;
};

/// The layout NVIDIA's mma.m16n8k16 accumulators have (two 16x8 halves side by side).
CoopMatLayout nvidiaQuadLayout();

/// Capabilities as plain data. Presets and the Vulkan device both fill one of these.
struct DeviceCaps {
  std::string name;
  Vendor vendor = Vendor::Other;
  DeviceKind kind = DeviceKind::Other;
  std::uint32_t subgroupSize = 32;
  std::uint32_t minSubgroupSize = 32;
  std::uint32_t maxSubgroupSize = 32;
  bool subgroupSizeControl = false;
  bool subgroupArithmetic = true;
  bool subgroupShuffle = true;
  std::uint32_t maxSharedMemoryBytes = 32768;
  std::uint64_t maxStorageBufferRange = 134217728;
  std::uint64_t maxAllocationBytes = 1ull << 31;
  std::uint64_t deviceMemoryBytes = 1ull << 32;
  std::uint32_t maxWorkgroupInvocations = 1024;
  std::uint32_t maxPushConstantBytes = 128;
  bool fp16Arithmetic = true;
  bool storage16Bit = true;
  std::vector<CoopMatShape> coopMatShapes;  ///< empty: no cooperative matrix
  CoopMatLayout coopMatLayout;
  std::uint32_t computeUnits = 1;
  std::array<std::uint8_t, 16> uuid{};
  std::uint32_t driverVersion = 0;
  std::string driverName;
};

/// The interface the Selector, the KernelBuilder and Steps plan against. Virtual so GMock can fake it.
class DeviceInfo {
 public:
  virtual ~DeviceInfo() = default;
  virtual std::string name() const = 0;
  virtual Vendor vendor() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual std::uint32_t subgroupSize() const = 0;
  virtual bool subgroupArithmetic() const = 0;
  virtual bool subgroupShuffle() const = 0;
  virtual std::uint32_t maxSharedMemoryBytes() const = 0;
  virtual std::uint64_t maxStorageBufferRange() const = 0;
  virtual std::uint64_t maxAllocationBytes() const = 0;
  virtual std::uint64_t deviceMemoryBytes() const = 0;
  virtual std::uint32_t maxWorkgroupInvocations() const = 0;
  virtual std::uint32_t maxPushConstantBytes() const = 0;
  virtual bool fp16Arithmetic() const = 0;
  virtual bool storage16Bit() const = 0;
  virtual std::vector<CoopMatShape> coopMatShapes() const = 0;
  virtual CoopMatLayout coopMatLayout() const = 0;
  virtual std::uint32_t computeUnits() const = 0;
  virtual std::array<std::uint8_t, 16> uuid() const = 0;
  virtual std::uint32_t driverVersion() const = 0;

  /// True when the device multiplies `shape` natively.
  bool hasCoopMat(const CoopMatShape& shape) const;
  /// All of the above as plain data.
  DeviceCaps snapshot() const;
};

/// A DeviceInfo that answers from a DeviceCaps value.
class StaticDeviceInfo : public DeviceInfo {
 public:
  explicit StaticDeviceInfo(DeviceCaps caps) : caps_(std::move(caps)) {}
  const DeviceCaps& caps() const { return caps_; }

  std::string name() const override { return caps_.name; }
  Vendor vendor() const override { return caps_.vendor; }
  DeviceKind kind() const override { return caps_.kind; }
  std::uint32_t subgroupSize() const override { return caps_.subgroupSize; }
  bool subgroupArithmetic() const override { return caps_.subgroupArithmetic; }
  bool subgroupShuffle() const override { return caps_.subgroupShuffle; }
  std::uint32_t maxSharedMemoryBytes() const override { return caps_.maxSharedMemoryBytes; }
  std::uint64_t maxStorageBufferRange() const override { return caps_.maxStorageBufferRange; }
  std::uint64_t maxAllocationBytes() const override { return caps_.maxAllocationBytes; }
  std::uint64_t deviceMemoryBytes() const override { return caps_.deviceMemoryBytes; }
  std::uint32_t maxWorkgroupInvocations() const override { return caps_.maxWorkgroupInvocations; }
  std::uint32_t maxPushConstantBytes() const override { return caps_.maxPushConstantBytes; }
  bool fp16Arithmetic() const override { return caps_.fp16Arithmetic; }
  bool storage16Bit() const override { return caps_.storage16Bit; }
  std::vector<CoopMatShape> coopMatShapes() const override { return caps_.coopMatShapes; }
  CoopMatLayout coopMatLayout() const override { return caps_.coopMatLayout; }
  std::uint32_t computeUnits() const override { return caps_.computeUnits; }
  std::array<std::uint8_t, 16> uuid() const override { return caps_.uuid; }
  std::uint32_t driverVersion() const override { return caps_.driverVersion; }

 protected:
  DeviceCaps caps_;
};

/// Builds capabilities from a descriptive string: a preset name ("h200", "h100", "lavapipe",
/// "small", "amd-rdna3"), optionally followed by overrides, e.g. "h200,subgroup=64,shared=32768,
/// coopmat=0,cus=8". Unknown presets or keys are a UserError naming them and the accepted values.
DeviceCaps parseDevicePreset(const std::string& text);
std::unique_ptr<DeviceInfo> makePresetDevice(const std::string& text);
std::vector<std::string> devicePresetNames();

}  // namespace foundry
