#pragma once
// The materialised baseline: scores = scale * Q K^T (f32, O(q_len * kv_len) scratch), a row softmax,
// then P·V, as three kernels. Accepts the same calls as FlashAttentionStep (any head_dim, no fused
// RoPE) and is only ever used when chosen explicitly.
#include <map>
#include <memory>
#include <string>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/ModifierKernels.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

class SdpaReferenceStep {
 public:
  SdpaReferenceStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

  AttentionProblem validate(const AttentionCall& call) const;
  StepRecord run(StepContext& ctx, const AttentionCall& call);
  std::vector<KernelSource> kernelsFor(const AttentionCall& call);
  /// Bytes of the materialised scores.
  static std::uint64_t scratchBytes(const AttentionProblem& p);

 private:
  struct Kernels {
    std::shared_ptr<const KernelSource> scores, softmax, pv;
    KernelModifiers scoresMods, softmaxMods, pvMods;
  };
  const Kernels& kernels(const AttentionProblem& p);

  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::map<std::string, Kernels> cache_;
};

}  // namespace foundry
