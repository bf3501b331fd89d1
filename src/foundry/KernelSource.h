#pragma once
// The output of the KernelBuilder: GLSL text plus the layout the host binds against. Pure data; no
// device is needed to make one, so planning code and tests can build and inspect kernels anywhere.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "foundry/GlslWriter.h"
#include "foundry/KernelInterface.h"

namespace foundry {

struct BindingSlot {
  std::string name;
  std::uint32_t binding = 0;
  DType dtype = DType::F32;
  std::string glslElement;
  Access access = Access::ReadOnly;
};

struct PushSlot {
  std::string name;
  PushType type = PushType::U32;
  std::uint32_t offset = 0;
};

struct KernelLayout {
  std::vector<BindingSlot> bindings;  ///< in binding order
  std::vector<PushSlot> push;         ///< in offset order
  std::uint32_t pushBytes = 0;
  std::uint32_t sharedBytes = 0;
  std::array<std::uint32_t, 3> workgroup{1, 1, 1};
  std::uint32_t subgroupSize = 0;     ///< the size the kernel was generated for

  const BindingSlot* findBinding(std::string_view name) const;
  const PushSlot* findPush(std::string_view name) const;
};

struct KernelSource {
  std::string name;                 ///< e.g. "decode__HeadLayout_FlashDecode__D128_sg4"
  std::string glsl;
  /// Hex digest of the GLSL text, which the kernel caches key on: a program that edits `glsl` after
  /// KernelBuilder::build() sets it again (hashHex, foundry/Hash.h), or the caches serve the old kernel.
  std::string hash;
  KernelLayout layout;
  std::vector<std::string> stages;  ///< stage names in order
  std::vector<std::string> stageKeys;
  std::vector<SourceBlock> blocks;  ///< where each line came from, for error messages
  std::vector<std::pair<std::string, std::string>> notes;  ///< decisions that produced the kernel
  bool usesCoopMat = false;
  /// GL_NV_cooperative_matrix2 (workgroup-scope matrices), GL_KHR_cooperative_matrix or GL_EXT_bfloat16:
  /// compiled by the external glslc, run where the device has coopmat2 (DeviceInfo::coopMat2).
  bool usesCoopMat2 = false;
  bool usesBf16 = false;  ///< bf16 cooperative-matrix operands (DeviceInfo::coopMat2Bf16)
};

}  // namespace foundry
