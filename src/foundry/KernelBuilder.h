#pragma once
// Stitches an ordered list of Stages into one compute shader. Owns binding numbers and std430
// push-constant offsets, deduplicates snippets and extensions, and checks the chain's contracts and
// the shared-memory budget before anything is compiled.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/Stage.h"

namespace foundry {

class KernelBuilder {
 public:
  KernelBuilder(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

  /// Names the kernel; the default joins the stage names.
  KernelBuilder& name(std::string kernelName);
  KernelBuilder& workgroup(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  KernelBuilder& add(StagePtr stage);
  template <typename S, typename... Args>
  KernelBuilder& emplace(Args&&... args) {
    return add(std::make_shared<const S>(std::forward<Args>(args)...));
  }
  /// Records a decision (and its reason) in the kernel's dump.
  KernelBuilder& note(std::string key, std::string value);

  /// Builds the kernel. A broken contract is a UserError naming the stages; a shared-memory,
  /// push-constant or workgroup size the device cannot hold is an UnsupportedError.
  KernelSource build() const;

 private:
  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::string name_;
  std::array<std::uint32_t, 3> workgroup_{64, 1, 1};
  std::vector<StagePtr> stages_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

/// The binding name of a parameter-block kernel's push constants.
inline constexpr std::string_view kParameterBinding = "params";

/// The same kernel with its push-constant fields read from a storage buffer bound as "params" (the
/// same std430 offsets) instead of push constants: a recorded command buffer whose push values live
/// in host-visible memory can be replayed with new values (VulkanDispatcher::beginParameterized).
/// A kernel without push constants is returned as it is.
KernelSource parameterBlockVariant(const KernelSource& kernel);

}  // namespace foundry
