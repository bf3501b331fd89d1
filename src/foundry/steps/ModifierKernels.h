#pragma once
// How a step hands a call's modifiers to its kernels: each kernel takes the modifiers that hook a
// point it hosts (with only those hooks), binds their tensors and push constants, and records their
// passes (a mask's block map) first.
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelBuilder.h"
#include "foundry/KernelSource.h"
#include "foundry/stages/AttentionModifier.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

/// The modifiers one kernel takes.
struct KernelModifiers {
  Modifiers modifiers;            ///< the ones that hook a point the kernel hosts
  std::vector<StagePtr> stages;   ///< the same, each with only its hooks on those points

  /// What they add to a kernel's cache key: each one's name and key, and a hash of the GLSL it carries
  /// and emits (so two that differ only in a GlslSource member never share a kernel). Computed when
  /// a kernel is looked up, not for every call.
  std::string key(const DeviceInfo& device) const;

  /// Adds the stages to a kernel being built.
  void addTo(KernelBuilder& builder) const;
  /// Binds each modifier's tensors and push constants for a kernel with `tile`.
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const;
};

/// Every hook of `all` but hints lands on a point in `hosted`, the points of all the kernels a call
/// runs; otherwise a UserError names the stage, the point and `what` (the kernels) before anything is
/// built.
void requireHosted(const Modifiers& all, const std::set<std::string>& hosted, const DeviceInfo& device,
                   const std::string& what);

/// The modifiers of `all` for a kernel that hosts `points`, in chain order.
KernelModifiers modifiersFor(const Modifiers& all, const std::set<std::string>& points, const DeviceInfo& device);

/// Builds (through `kernel`, which caches by key) and records every pass of `modifiers` for a kernel
/// with `tile`; returns the names of the kernels recorded.
std::vector<std::string> recordModifierPasses(
    StepContext& ctx, const KernelModifiers& modifiers, const ModifierCall& call, TileShape tile,
    const std::function<std::shared_ptr<const KernelSource>(const std::string&, const std::function<KernelSource()>&)>& kernel,
    const DeviceInfo& device, const std::shared_ptr<const SnippetLibrary>& snippets);

}  // namespace foundry
