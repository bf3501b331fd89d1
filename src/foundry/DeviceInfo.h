#pragma once
// What the planning code may know about a device, as a plain value: filled from Vulkan queries by the
// device, from a preset ("h200", "lavapipe", ...) by tests and `--pretend`, and written out and read
// back as a string so any device, real or not, can be pretended to be.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

enum class Vendor { Nvidia, Amd, Intel, Apple, Arm, Qualcomm, Mesa, Other };
enum class DeviceKind { Discrete, Integrated, Virtual, Cpu, Other };
/// The architecture a device belongs to, as far as tuning cares.
enum class DeviceFamily { Hopper, Ada, Rdna3, Arc, Apple, Lavapipe, Other };

std::string_view vendorName(Vendor vendor);
std::string_view deviceKindName(DeviceKind kind);
std::string_view deviceFamilyName(DeviceFamily family);

/// The family of a device from what its driver reports: the vendor (from the PCI vendor id) and the
/// device name, e.g. "NVIDIA H200" -> Hopper, "NVIDIA GeForce RTX 4090" -> Ada, "AMD Radeon RX 7900 XTX
/// (RADV NAVI31)" -> Rdna3, "Intel(R) Arc(tm) A770 Graphics" -> Arc, "llvmpipe (...)" -> Lavapipe.
DeviceFamily deviceFamilyFor(Vendor vendor, std::string_view deviceName);

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
/// The layout of NVIDIA's 16x8 f32 accumulators (mma.m16n8k16's): rows r and r + 8, columns c and c + 1.
CoopMatLayout nvidiaQuadLayout8();
/// The layout of a 16x16 f16 matrix on NVIDIA's driver (580.159.04, H200): a lane's row r first (columns c,
/// c + 1, c + 8, c + 9), then row r + 8.
CoopMatLayout nvidiaQuadLayoutF16();
/// The shapes NVIDIA drivers offer through GL_NV_cooperative_matrix (f16 inputs, and int8 into int32).
std::vector<CoopMatShape> nvidiaCoopMatShapes();

/// A device's capabilities. The Selector, the KernelBuilder and Steps plan against one of these.
/// llvmpipe's loop limiter (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS): one count per shader invocation,
/// shared by every loop in it; once spent, every loop exits at its next back edge and the rest of its
/// iterations never run.
inline constexpr std::uint32_t kLlvmpipeLoopLimit = 65535;
/// What one run of a loop of `trips` iterations spends of that count: a pass per iteration and two
/// more (measured on Mesa 22.3: a prefill tile's two loops and the tile loop cost head_dim + keys + 5).
constexpr std::uint64_t loopRunPasses(std::uint64_t trips) { return trips + 2; }

struct DeviceInfo {
  std::string name;
  Vendor vendor = Vendor::Other;
  DeviceKind kind = DeviceKind::Other;
  DeviceFamily family = DeviceFamily::Other;
  std::uint32_t subgroupSize = 32;  ///< what a pipeline gets without asking for a size
  std::uint32_t minSubgroupSize = 32;
  std::uint32_t maxSubgroupSize = 32;
  bool subgroupSizeControl = false;
  bool subgroupArithmetic = true;
  bool subgroupShuffle = true;
  bool subgroupVote = true;  ///< subgroupAny/All (a decode kernel skips a rescale by 1 with them)
  std::uint32_t maxSharedMemoryBytes = 32768;
  std::uint64_t maxStorageBufferRange = 134217728;
  std::uint64_t maxAllocationBytes = 1ull << 31;
  std::uint64_t deviceMemoryBytes = 1ull << 32;
  std::uint32_t maxWorkgroupInvocations = 1024;
  /// The most invocations a workgroup may have along x, y and z (maxComputeWorkGroupSize).
  std::array<std::uint32_t, 3> maxWorkgroupSize{1024, 1024, 64};
  std::uint32_t maxPushConstantBytes = 128;
  bool fp16Arithmetic = true;
  bool storage16Bit = true;
  /// VK_KHR_shader_clock's subgroup and device clocks (the prefill probe reads both).
  bool shaderClock = false;
  /// VK_NV_shader_sm_builtins: a shader can read which SM runs it (gl_SMIDNV).
  bool smBuiltins = false;
  /// Integer dot products of four packed 8-bit values (shaderIntegerDotProduct: Vulkan 1.3 or
  /// VK_KHR_shader_integer_dot_product), which the int8 decode can take K's codes through.
  bool int8Dot = false;
  std::vector<CoopMatShape> coopMatShapes;  ///< empty: no cooperative matrix
  /// Workgroup-scope cooperative-matrix kernels build and run here: the device has
  /// VK_NV_cooperative_matrix2 (workgroup scope, flexible dimensions, reductions, conversions, element
  /// operations), and a Runtime found a glslc that compiles them (FOUNDRY_GLSLC; it clears this where not).
  bool coopMat2 = false;
  /// Those kernels take bf16 operands too: VK_KHR_shader_bfloat16 with bf16 cooperative matrices, bf16 x
  /// bf16 into f32 among the flexible dimensions, and a glslc that compiles GL_EXT_bfloat16 (a Runtime
  /// clears this where not).
  bool coopMat2Bf16 = false;
  /// Shared memory the driver keeps for itself in a kernel with workgroup-scope matrices.
  std::uint32_t coopMat2ReservedShared = 0;
  /// The most invocations a workgroup with workgroup-scope matrices may have.
  std::uint32_t coopMat2MaxWorkgroup = 0;
  CoopMatLayout coopMatLayout;
  CoopMatLayout coopMatLayout8;  ///< the same for 16x8 f32 accumulators (columns 0-7)
  /// The same for 16x16 f16 matrices (as a product's A operand): which of a fragment's elements a lane's
  /// values go to, for a kernel that builds fragments from its own loads (DecodeVariant::valueRegisters).
  CoopMatLayout coopMatLayoutF16;
  std::uint32_t computeUnits = 1;
  /// Loop passes one shader invocation may make in all before the driver ends its loops, silently;
  /// 0: no such limit. llvmpipe (lavapipe) has one: kLlvmpipeLoopLimit. The Selector splits keys so that
  /// no kernel's invocation reaches it (loopRunPasses).
  std::uint32_t loopLimit = 0;
  std::array<std::uint8_t, 16> uuid{};
  std::uint32_t driverVersion = 0;
  std::string driverName;

  /// The loop passes a kernel's own count (loopRunPasses) may reach over its range of keys here: 7/8 of
  /// loopLimit, the eighth left for loops the counts leave out (a modifier's undeclared ones) and for the
  /// last workgroup's merge of the splits (DecodeVariant::mergePasses, which the Selector keeps within
  /// it); 0: no limit.
  std::uint64_t loopPassBudget() const { return loopLimit - loopLimit / 8; }
  /// True when the device multiplies `shape` natively.
  bool hasCoopMat(const CoopMatShape& shape) const;
  bool operator==(const DeviceInfo&) const = default;
  /// Every field as a device string (below) that parseDevicePreset reads back to an equal value.
  std::string toString() const;
};

/// Reads a device string: a base, then key=value overrides applied in order, separated by commas:
///
///   device   := base ("," key "=" value)*
///   base     := a preset name (devicePresetNames()) | "custom" (DeviceInfo's defaults)
///   text     := "..." with \" and \\ escaped | bare text without , or "
///
///   name=text  driver=text  vendor=nvidia|amd|intel|apple|arm|qualcomm|mesa|other
///   kind=discrete|integrated|virtual|cpu|other  family=hopper|ada|rdna3|arc|apple|lavapipe|other
///   subgroup=N (sets the default, min and max size)  subgroup-min=N  subgroup-max=N
///   subgroup-control=0|1  subgroup-arithmetic=0|1  subgroup-shuffle=0|1
///   shared=N (bytes)  storage=N (max storage buffer range)  alloc=N  memory=N  invocations=N  push=N
///   workgroup-size=XxYxZ (the most invocations along each dimension)
///   fp16=0|1  storage16=0|1  cus=N  loop-limit=N (0: none)  driver-version=N  uuid=32 hex digits
///   coopmat=0|none (no shapes, no layout) | 1 (NVIDIA's shapes and quad layout, if there were none) |
///           MxNxK:input:accumulator joined by + (exactly these shapes), e.g. 16x16x16:f16:f32+16x8x16:f16:f16
///   layout=none | nvidia-quad | rowOf/colOf, each a list of numbers joined by . (e.g. 0.0.8/0.1.0)
///   layout8=the same for 16x8 accumulators (nvidia-quad: 0.0.8.8/0.1.0.1)
///   quad=0|1 (the NVIDIA quad layouts where there are shapes, else none)
///
/// e.g. "h200,subgroup=64,shared=32768,coopmat=0,cus=8". toString() writes "custom" and every key but
/// quad. An unknown preset, key or value is a UserError naming it and what is accepted.
DeviceInfo parseDevicePreset(const std::string& text);
/// The presets: h200, h100, ada, lavapipe, small, amd-rdna3, amd-rdna3-wave32, intel-arc, apple-m.
std::vector<std::string> devicePresetNames();
/// One preset by name, without overrides.
DeviceInfo devicePreset(const std::string& name);

}  // namespace foundry
