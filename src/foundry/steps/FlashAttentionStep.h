#pragma once
// Fused attention for decode (q_len 1, optionally with RoPE fused in) and prefill (q_len > 1), with
// GQA/MQA, batch >= 1 and the causal offset kv_len - q_len. validate() fails fast, before anything
// is recorded; the step never falls back to the materialised path (SdpaReferenceStep), it says so.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/ModifierKernels.h"
#include "foundry/steps/Selector.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

/// What a recorded call used, for reports.
struct StepRecord {
  AttentionPlan plan;
  std::vector<std::string> kernels;    ///< in the order recorded (modifier passes first)
  std::vector<std::string> modifiers;  ///< each active modifier's description
};

class FlashAttentionStep {
 public:
  FlashAttentionStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets, AttentionOptions options);

  /// Checks the call; throws UserError / UnsupportedError naming the field. Records nothing.
  AttentionProblem validate(const AttentionCall& call) const;
  /// validate() then the Selector's plan.
  AttentionPlan plan(const AttentionCall& call) const;
  /// Validates, plans, builds (once per variant) and records the kernels.
  StepRecord run(StepContext& ctx, const AttentionCall& call);

  /// The kernels this step would build for a call, without recording (foundry kernels --dump).
  std::vector<KernelSource> kernelsFor(const AttentionCall& call);

 private:
  /// A kernel with the modifiers it takes.
  struct Built {
    std::shared_ptr<const KernelSource> source;
    KernelModifiers modifiers;
  };
  std::shared_ptr<const KernelSource> kernel(const std::string& key, const std::function<KernelSource()>& build);
  std::vector<Built> buildKernels(const AttentionProblem& p, const AttentionPlan& plan, bool fusedRope,
                                  const RopeSpec* rope);
  void compareOnline(StepContext& ctx, const AttentionCall& call, const AttentionProblem& p);

  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  AttentionOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const KernelSource>> kernels_;
  std::set<std::string> compared_;
};

}  // namespace foundry
